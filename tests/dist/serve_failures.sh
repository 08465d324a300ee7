#!/usr/bin/env bash
# `cadenza` under mpirun, as a user launches it: bad launches are clear errors on every rank, and
# a worker rank that dies or hangs ends the server with an error, never a hang.
# Usage: serve_failures.sh CADENZA_BINARY WORK_DIR
#  1. -tp 2 without mpirun; -tp 2 under mpirun -np 3: an error naming the fix, exit non-zero.
#  2. serve -tp 2: a completion, the cadenza_dist_* metrics of both ranks; then kill -9 the
#     worker rank: mpirun exits non-zero within 10 s.
#  3. serve -tp 2 --dist-timeout 3: SIGSTOP the worker while idle: the heartbeat notices, the
#     job ends non-zero within 10 s; the log names the rank.
#  4. the same with a request arriving after the SIGSTOP: the request gets an error (not a hang),
#     /ready answers 503, the job ends non-zero within 10 s.
set -u
cadenza=$1 work=$2
source "$(cd "$(dirname "$0")/.." && pwd)/e2e_lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun=(mpirun --oversubscribe --bind-to none)
mkdir -p "$work"
model="$work/dist-model.gguf"
"$cadenza" synth --preset demo --type f16 --layers 2 --ctx 1024 --seed 3 -o "$model" >/dev/null || exit 1
failures=0
fail() { echo "FAILED: $*"; failures=$((failures + 1)); }

# 1. Bad launches.
if "$cadenza" run -m "$model" -p hi -n 2 -tp 2 >/dev/null 2>"$work/nompi.err"; then
  fail "-tp 2 without mpirun succeeded"
elif ! grep -q "needs 2 processes: start it with mpirun -np 2" "$work/nompi.err"; then
  fail "-tp 2 without mpirun: unclear error: $(cat "$work/nompi.err")"
fi
timeout 60 "${mpirun[@]}" -np 3 "$cadenza" run -m "$model" -p hi -n 2 -t 1 -tp 2 >/dev/null 2>"$work/np3.err"
rc=$?
lines=$(grep -c "needs 2 processes, but this job has 3: start it with mpirun -np 2" "$work/np3.err")
if [ "$rc" -eq 0 ] || [ "$lines" -lt 3 ]; then
  fail "mpirun -np 3 -tp 2: rc $rc, $lines of 3 ranks printed the error"; tail -5 "$work/np3.err"
fi

# start_serve NAME EXTRA_ARGS...: mpirun -np 2 serve -tp 2 in the background; sets pid, port,
# worker (the worker rank's pid, from its log line).
start_serve() {
  local name=$1; shift
  "${mpirun[@]}" -np 2 "$cadenza" serve -m "$model" --port 0 -t 1 -tp 2 --max-model-len 512 "$@" \
    >"$work/$name.out" 2>"$work/$name.err" &
  pid=$!
  wait_for_serve "$work/$name.out" "$work/$name.err" "$pid"
  worker=$(sed -n 's/.*worker rank 1 .*(pid \([0-9]*\)).*/\1/p' "$work/$name.err" | head -1)
  [ -n "$worker" ] || { echo "no worker pid in the log"; cat "$work/$name.err"; exit 1; }
  # Ready: the warm-up step is done (a worker stopped during it fails that step instead).
  for _ in $(seq 1 300); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$port/ready")" = 200 ] && return 0
    sleep 0.1
  done
  echo "serve never became ready"; cat "$work/$name.err"; exit 1
}
# wait_exit SECONDS: waits for $pid; sets rc (124 when it did not end in time) and took (s).
wait_exit() {
  local limit=$1 start end
  start=$(date +%s.%N)
  rc=124
  for _ in $(seq 1 $((limit * 10))); do
    if ! kill -0 "$pid" 2>/dev/null; then wait "$pid"; rc=$?; break; fi
    sleep 0.1
  done
  end=$(date +%s.%N)
  took=$(awk "BEGIN { printf \"%.1f\", $end - $start }")
  if [ "$rc" -eq 124 ]; then kill -9 "$pid" 2>/dev/null; kill -9 "$worker" 2>/dev/null; wait "$pid" 2>/dev/null; fi
}
completion() {
  curl -s -o "$work/$1.body" -w '%{http_code}' --max-time 30 "http://127.0.0.1:$port/v1/completions" \
    -H 'content-type: application/json' -d '{"prompt":"Hello","max_tokens":16,"temperature":0}'
}

# 2. A worker that dies.
start_serve killed
code=$(completion ok)
[ "$code" = 200 ] || fail "completion before the kill: HTTP $code $(cat "$work/ok.body")"
sleep 2.5  # one heartbeat: the worker's totals reach the driver's metrics
curl -s --max-time 5 "http://127.0.0.1:$port/metrics" >"$work/metrics.txt"
for series in 'cadenza_dist_world_size 2' 'cadenza_dist_seconds_total{rank="1",op="all_reduce"}' \
              'cadenza_dist_bytes_total{rank="0",op="gather"}' 'cadenza_dist_heartbeat_seconds'; do
  grep -qF "$series" "$work/metrics.txt" || fail "metrics: no $series"
done
kill -9 "$worker"
wait_exit 10
echo "killed worker: mpirun exited with $rc after ${took} s"
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "killed worker: rc $rc (124: still running after 10 s)"

# 3. A worker that hangs while the server is idle.
start_serve idle --dist-timeout 3
kill -STOP "$worker"
wait_exit 10
echo "hung worker, idle: mpirun exited with $rc after ${took} s"
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "hung idle worker: rc $rc"
grep -q "rank 1 (stage 0, tp 1) did not answer the heartbeat" "$work/idle.err" ||
  fail "hung idle worker: the log does not name rank 1: $(grep -i error "$work/idle.err" | head -3)"
kill -9 "$worker" 2>/dev/null

# 4. A worker that hangs under a request.
start_serve busy --dist-timeout 3 --no-warmup
kill -STOP "$worker"
code=$(completion hung)
ready=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$port/ready")
wait_exit 10
echo "hung worker, busy: request HTTP $code ($(head -c 200 "$work/hung.body")), /ready $ready, mpirun exited with $rc after ${took} s"
[ "$code" -ge 500 ] 2>/dev/null || fail "hung busy worker: the request got HTTP $code"
[ "$ready" = 503 ] || [ "$ready" = 000 ] || fail "hung busy worker: /ready answered $ready"
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "hung busy worker: rc $rc"
kill -9 "$worker" 2>/dev/null

if [ "$failures" -ne 0 ]; then echo "$failures failure(s)"; exit 1; fi
echo "serve_failures: all checks passed"
