#!/usr/bin/env bash
# End-to-end test of `cadenza serve` with the official OpenAI Node client (chat, completions,
# Responses) and Anthropic's (@anthropic-ai/sdk: Messages): e2e.mjs, then apishape.mjs.
# Usage: run_e2e.sh CADENZA_BINARY E2E_SOURCE_DIR WORK_DIR
# CADENZA_E2E_LAUNCH (e.g. "mpirun --oversubscribe -np 2") and CADENZA_E2E_SERVE_ARGS (default
# "-t 2"; e.g. "-t 1 -tp 2") run the same test against a server split across processes
# (tests/dist/CMakeLists.txt).
# Exit 77 (ctest: skipped) only when node or npm is not installed (scripts/setup.sh --test installs
# them, and scripts/test.sh fails on that skip). A failed `npm ci` is a failure, not a skip: the
# test would otherwise pass CI without ever running the client.
set -u
cadenza=$1 src=$2 work=$3
source "$(cd "$(dirname "$0")/../.." && pwd)/e2e_lib.sh"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "SKIPPED: node and npm are needed for the OpenAI Node client test"
  exit 77
fi
mkdir -p "$work"
cp "$src/package.json" "$src/package-lock.json" "$src/e2e.mjs" "$src/apishape.mjs" "$work/"
if [ ! -d "$work/node_modules/openai" ] || [ ! -d "$work/node_modules/@anthropic-ai/sdk" ]; then
  if ! (cd "$work" && npm ci --no-audit --no-fund >npm.log 2>&1); then
    echo "FAILED: npm ci could not install the OpenAI and Anthropic clients (offline? no npm registry?); $work/npm.log:"
    tail -20 "$work/npm.log"
    exit 1
  fi
fi

model="$work/e2e-model.gguf"
"$cadenza" synth --preset demo --type f32 --layers 2 --ctx 1024 --seed 2 -o "$model" >/dev/null || exit 1

# Images: a clip-tiny projector into the demo model's 256-wide embeddings (one process only: a
# model split across processes takes no images).
image_args=()
images=0
if [ -z "${CADENZA_E2E_LAUNCH:-}" ]; then
  "$cadenza" synth --mmproj clip-tiny --mmproj-embd 256 --seed 3 -o "$work/e2e-mmproj.gguf" >/dev/null || exit 1
  image_args=(--mmproj "$work/e2e-mmproj.gguf" --vision-threads 1)
  images=1
fi

key="e2e-key-$$"
read -r -a launch <<<"${CADENZA_E2E_LAUNCH:-}"
read -r -a serve_args <<<"${CADENZA_E2E_SERVE_ARGS:--t 2}"
CADENZA_API_KEY="$key" "${launch[@]}" "$cadenza" serve -m "$model" --port 0 "${serve_args[@]}" --max-model-len 512 \
  --served-model-name tiny-e2e --drain-timeout 10 --responses-store 16 "${image_args[@]}" >"$work/serve.out" 2>"$work/serve.err" &
pid=$!
cleanup() { kill "$pid" 2>/dev/null; }
trap cleanup EXIT

wait_for_serve "$work/serve.out" "$work/serve.err" "$pid"

(cd "$work" && CADENZA_BASE_URL="http://127.0.0.1:$port/v1" CADENZA_API_KEY="$key" \
  CADENZA_ROOT_URL="http://127.0.0.1:$port" CADENZA_E2E_IMAGES=$images node e2e.mjs &&
  CADENZA_ROOT_URL="http://127.0.0.1:$port" CADENZA_API_KEY="$key" CADENZA_STORE=1 node apishape.mjs)
rc=$?

# The same Messages/Responses SDK checks through `cadenza gateway` in front of this server: as
# they are (api: cadenza) and converted to Chat Completions by the gateway (api: chat). The
# gateway holds the server's key; clients use a tenant key of the gateway.
serve_port=$port
if [ "$rc" -eq 0 ]; then
  gw_key="gw-key-$$"
  gw_hash=$("$cadenza" gateway --hash-key "$gw_key")
  cat >"$work/gateway.yaml" <<GWEOF
listeners: [{host: 127.0.0.1, port: 0}]
models:
  - {name: tiny-e2e, upstream_model: tiny-e2e, api_key: "$key", upstreams: ["127.0.0.1:$serve_port"]}
  - {name: tiny-chat, upstream_model: tiny-e2e, api: chat, api_key: "$key", upstreams: ["127.0.0.1:$serve_port"]}
tenants:
  - {name: e2e, key_sha256: "$gw_hash", models: ["*"]}
cache: {backend: "off"}
access_log: false
GWEOF
  "$cadenza" gateway --config "$work/gateway.yaml" >"$work/gateway.out" 2>"$work/gateway.err" &
  gw_pid=$!
  trap 'kill "$pid" "$gw_pid" 2>/dev/null' EXIT
  wait_for_serve "$work/gateway.out" "$work/gateway.err" "$gw_pid"
  for m in tiny-e2e tiny-chat; do
    count=1
    [ "$m" = tiny-chat ] && count=0  # a Chat Completions upstream cannot count tokens
    (cd "$work" && CADENZA_ROOT_URL="http://127.0.0.1:$port" CADENZA_API_KEY="$gw_key" CADENZA_MODEL="$m" \
      CADENZA_STORE=0 CADENZA_COUNT_TOKENS=$count CADENZA_LABEL="gateway $m" node apishape.mjs) || { rc=1; break; }
  done
  kill "$gw_pid" 2>/dev/null
  wait "$gw_pid" 2>/dev/null
  trap cleanup EXIT
  [ "$rc" -ne 0 ] && tail -20 "$work/gateway.err"
fi

# Graceful stop: SIGTERM, exit status 0. Under mpirun the driver (rank 0) gets it: it drains,
# stops the workers and every rank exits 0, so mpirun does (mpirun itself, signalled, would end
# the job with status 1 after forwarding the signal; docs/distributed.md).
stop_pid=$pid
if [ ${#launch[@]} -gt 0 ]; then
  stop_pid=$(sed -n 's/.*driver on .* (pid \([0-9]*\)).*/\1/p' "$work/serve.err" | head -1)
  [ -n "$stop_pid" ] || { echo "no driver pid in the log"; exit 1; }
fi
kill -TERM "$stop_pid"
wait "$pid"
serve_rc=$?
trap - EXIT
if [ "$serve_rc" -ne 0 ]; then
  echo "serve exited with $serve_rc after SIGTERM"
  tail -20 "$work/serve.err"
  exit 1
fi
[ "$rc" -ne 0 ] && tail -20 "$work/serve.err"
exit $rc
