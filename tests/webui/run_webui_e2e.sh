#!/usr/bin/env bash
# The web console's end-to-end test (webui_e2e.mjs, headless Chromium through puppeteer-core):
# `cadenza serve` with the trained licenses-tiny model from ../shared and an API key, and a
# `cadenza gateway` in front of it and a second server. Screenshots go to WORK_DIR/artifacts.
# Usage: run_webui_e2e.sh CADENZA_BINARY SOURCE_DIR(tests/webui) WORK_DIR SHARED_DIR
# Exit 77 (ctest: skipped) when ../shared's model, node/npm or chromium is absent (setup.sh --test
# installs the tools). A failed `npm ci` is a failure, not a skip.
set -u
cadenza=$1 src=$2 work=$3 shared=$4
source "$(cd "$(dirname "$0")/.." && pwd)/e2e_lib.sh"

model="$shared/models/licenses-tiny-f16.gguf"
[ -f "$model" ] || { echo "SKIPPED: ../shared test data not found ($model)"; exit 77; }
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 ||
  { echo "SKIPPED: node and npm are needed for the browser test"; exit 77; }
chromium=$(command -v chromium || command -v chromium-browser || true)
[ -n "$chromium" ] || { echo "SKIPPED: chromium not installed"; exit 77; }

mkdir -p "$work/artifacts"
cp "$src/package.json" "$src/package-lock.json" "$src/webui_e2e.mjs" "$work/"
if [ ! -d "$work/node_modules/puppeteer-core" ]; then
  # No browser download: puppeteer-core drives the system's chromium.
  if ! (cd "$work" && npm ci --no-audit --no-fund >npm.log 2>&1); then
    echo "FAILED: npm ci could not install puppeteer-core; $work/npm.log:"
    tail -20 "$work/npm.log"
    exit 1
  fi
fi

key="webui-key-$$"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; }
trap cleanup EXIT

# A host-memory KV tier, so that the server view shows its tier table.
CADENZA_API_KEY="$key" "$cadenza" serve -m "$model" --port 0 -t 1 --served-model-name licenses-tiny \
  --kv-offload-memory 16MiB >"$work/serve.out" 2>"$work/serve.err" &
pids+=($!)
wait_for_serve "$work/serve.out" "$work/serve.err" "${pids[-1]}"
wait_for_ready
serve_port=$port

"$cadenza" serve -m "$model" --port 0 -t 1 --served-model-name licenses-tiny \
  >"$work/serve2.out" 2>"$work/serve2.err" &
pids+=($!)
wait_for_serve "$work/serve2.out" "$work/serve2.err" "${pids[-1]}"
serve2_port=$port

cat >"$work/gateway.yaml" <<GWEOF
listeners: [{host: 127.0.0.1, port: 0}]
models:
  - {name: licenses-tiny, upstream_model: licenses-tiny, api_key: "$key", upstreams: ["127.0.0.1:$serve_port", "127.0.0.1:$serve2_port"]}
cache: {backend: "off"}
access_log: false
GWEOF
"$cadenza" gateway --config "$work/gateway.yaml" >"$work/gateway.out" 2>"$work/gateway.err" &
pids+=($!)
wait_for_serve "$work/gateway.out" "$work/gateway.err" "${pids[-1]}"
gateway_port=$port

(cd "$work" && CADENZA_SERVE_URL="http://127.0.0.1:$serve_port" CADENZA_GATEWAY_URL="http://127.0.0.1:$gateway_port" \
  CADENZA_API_KEY="$key" CHROMIUM="$chromium" ARTIFACTS="$work/artifacts" timeout 240 node webui_e2e.mjs)
rc=$?
if [ "$rc" -ne 0 ]; then
  echo "--- serve.err"; tail -20 "$work/serve.err"
  echo "--- gateway.err"; tail -10 "$work/gateway.err"
fi
echo "screenshots: $work/artifacts"
exit $rc
