#!/usr/bin/env bash
# A real Prometheus server scrapes `cadenza serve` and can query its request metrics.
# Usage: run_prometheus.sh CADENZA_BINARY WORK_DIR
# Exit 77 (ctest: skipped) when prometheus or curl is missing.
set -u
cadenza=$1 work=$2
source "$(cd "$(dirname "$0")/../.." && pwd)/e2e_lib.sh"
for tool in prometheus curl; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "SKIPPED: $tool is needed for the Prometheus scrape test (scripts/setup.sh --test)"
    exit 77
  fi
done
rm -rf "$work" && mkdir -p "$work"

model="$work/model.gguf"
"$cadenza" synth --preset demo --type f32 --layers 2 --ctx 1024 --seed 3 -o "$model" >/dev/null || exit 1
"$cadenza" serve -m "$model" --port 0 -t 1 --max-model-len 256 --served-model-name tiny \
  --no-warmup >"$work/serve.out" 2>"$work/serve.err" &
serve_pid=$!
prom_pid=""
cleanup() {
  kill "$serve_pid" 2>/dev/null
  [ -n "$prom_pid" ] && kill "$prom_pid" 2>/dev/null
  wait 2>/dev/null
}
trap cleanup EXIT

wait_for_serve "$work/serve.out" "$work/serve.err" "$serve_pid"

# Two requests, so the latency histograms have observations before the first scrape.
for i in 1 2; do
  curl -sf -X POST "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
    -d '{"model": "tiny", "prompt": "hello", "max_tokens": 4, "temperature": 0}' >/dev/null ||
    { echo "completion request $i failed"; tail -5 "$work/serve.err"; exit 1; }
done

cat >"$work/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: cadenza
    static_configs:
      - targets: ['127.0.0.1:$port']
YAML

# Prometheus cannot listen on port 0: try a few random ports until one binds.
prom_port=""
for _ in $(seq 1 10); do
  p=$((20000 + RANDOM % 40000))
  prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
    --web.listen-address="127.0.0.1:$p" >"$work/prometheus.log" 2>&1 &
  prom_pid=$!
  # Up to 60 s while it runs (a loaded machine starts it slowly); it exits at once when the port
  # was taken, and the next port is tried.
  for _ in $(seq 1 600); do
    if curl -sf "http://127.0.0.1:$p/-/ready" >/dev/null 2>&1; then prom_port=$p; break; fi
    kill -0 "$prom_pid" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$prom_port" ] && break
  kill "$prom_pid" 2>/dev/null; wait "$prom_pid" 2>/dev/null; prom_pid=""
done
[ -n "$prom_port" ] || { echo "prometheus did not start"; tail -20 "$work/prometheus.log"; exit 1; }

query() {
  curl -sf --get "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1"
}
# The TTFT histogram's count, as scraped: 2 once a scrape after the requests has landed.
for _ in $(seq 1 300); do
  answer=$(query 'cadenza_time_to_first_token_seconds_count{job="cadenza"}')
  value=$(printf '%s' "$answer" | sed -n 's/.*"value":\[[^,]*,"\([0-9.e+]*\)"\].*/\1/p')
  if [ -n "$value" ] && [ "${value%%.*}" -ge 2 ] 2>/dev/null; then
    up=$(query 'up{job="cadenza"}' | sed -n 's/.*"value":\[[^,]*,"\([0-9]*\)"\].*/\1/p')
    echo "prometheus scraped cadenza: cadenza_time_to_first_token_seconds_count = $value, up = $up"
    [ "$up" = "1" ] || { echo "up is '$up', expected 1"; exit 1; }
    exit 0
  fi
  sleep 0.1
done
echo "prometheus never returned cadenza_time_to_first_token_seconds_count >= 2; last answer:"
echo "$answer"
tail -20 "$work/prometheus.log"
exit 1
