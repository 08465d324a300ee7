#!/usr/bin/env bash
# TTFT of a long cached prompt: recomputed, from the host-memory KV tier, and from the disk tier
# after a restart (docs/performance.md "KV tiers"). Needs a built build/bin/cadenza, curl, python3.
#   scripts/bench_kv_tiers.sh [MODEL.gguf] [PROMPT_TOKENS]
# Default model: a Qwen2.5-0.5B shape cut to 6 layers with a 16k context, synthesized (Q8_0).
# Each request asks for one token (max_tokens 1), so its time is its TTFT plus one HTTP round trip.
# The server warms up before /ready (weights repacked), so no number includes that.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/build/bin/cadenza"
work=$(mktemp -d /tmp/bench-kv-tiers-XXXXXX)
trap 'kill $pid 2>/dev/null || true; rm -rf "$work"' EXIT
model=${1:-}
n=${2:-8192}
if [[ -z "$model" ]]; then
  model="$work/model.gguf"
  "$bin" synth --preset qwen2.5-0.5b --layers 6 --ctx 16384 --type q8_0 -o "$model" >&2
fi
port=$((20000 + RANDOM % 20000))
prompt() { python3 -c "import json,random; r=random.Random($1); print(json.dumps({'prompt':[r.randrange(1000,100000) for _ in range($n)],'max_tokens':1,'temperature':0}))"; }
prompt 1 > "$work/p1.json"
prompt 2 > "$work/p2.json"
start() {
  "$bin" serve -m "$model" --port "$port" --max-model-len $((n + 512)) \
    --kv-cache-memory "$3" --max-num-batched-tokens 2048 "${@:4}" \
    --kv-disk-dir "$work/kv" --kv-disk-size 8GiB ${1:+--kv-offload-memory "$1"} 2> "$work/serve-$2.log" &
  pid=$!
  for _ in $(seq 600); do curl -sf "localhost:$port/ready" >/dev/null && return; sleep 0.2; done
  echo "server did not start" >&2; cat "$work/serve-$2.log" >&2; exit 1
}
ask() {  # label file
  local t
  t=$(curl -s -o "$work/out.json" -w '%{time_total}' -H 'Content-Type: application/json' \
        --data @"$2" "localhost:$port/v1/completions")
  printf '%-28s %8.3f s  cached_tokens %s\n' "$1" "$t" \
    "$(python3 -c "import json; print(json.load(open('$work/out.json'))['usage']['prompt_tokens_details']['cached_tokens'])")"
}
# A pool for one prompt and a half: the second prompt pushes the first one down to the tiers.
kv_mem=$(python3 -c "print(int($n * 1.5))")
bytes_per_token=$("$bin" info "$model" 2>/dev/null | python3 -c "
import sys,re
t=sys.stdin.read()
def g(k): return int(re.search(r'\.'+k+r'\s+u32\s+(\d+)', t).group(1))
L=g('block_count'); kv=g('attention.head_count_kv'); h=g('embedding_length')//g('attention.head_count')
print(L*kv*h*2*2)")
pool="$((kv_mem * bytes_per_token))"
echo "model $model, prompt $n tokens, pool $pool bytes ($kv_mem tokens of f16 KV)"
start 4GiB a "$pool"
ask "recomputed (cold)" "$work/p1.json"
ask "other prompt (evicts it)" "$work/p2.json"
ask "from host-memory tier" "$work/p1.json"
kill -TERM $pid; wait $pid || true   # shutdown persists the pool and memory tier to disk
start "" b "$pool"
ask "from disk after restart" "$work/p1.json"
kill -TERM $pid; wait $pid || true
rm -rf "$work/kv"
start "" c "$pool"
ask "recomputed (restart, no cache)" "$work/p1.json"
grep -h "kv disk tier\|KV tiers\|persisted" "$work"/serve-*.log >&2 || true
