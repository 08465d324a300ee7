# Helpers shared by the end-to-end shell tests (tests/*/e2e/*.sh); source it, do not run it.

# wait_for_serve OUT_FILE ERR_FILE PID
# Sets `port` to the port that `cadenza serve` (process PID, stdout in OUT_FILE) printed in its
# "listening on http(s)://HOST:PORT" line. Ends the test with exit 1, showing ERR_FILE, when the
# server exits first or prints nothing within 60 s.
wait_for_serve() {
  local out=$1 err=$2 pid=$3
  port=""
  for _ in $(seq 1 600); do
    port=$(sed -n 's/.*listening on https\{0,1\}:\/\/[^:]*:\([0-9]*\).*/\1/p' "$out")
    [ -n "$port" ] && return 0
    kill -0 "$pid" 2>/dev/null || { echo "serve exited early"; cat "$err"; exit 1; }
    sleep 0.1
  done
  echo "serve did not start"
  cat "$err"
  exit 1
}

# wait_for_ready: waits up to 60 s for GET /ready on 127.0.0.1:$port (set by wait_for_serve) to
# answer 200 (the model loaded and warmed up). Returns either way; the requests that follow fail
# visibly if the server never got ready.
wait_for_ready() {
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$port/ready" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  return 0
}
