#!/usr/bin/env bash
# End to end: a short `cadenza bench serve` sweep against a real `cadenza serve`, then the report
# page rendered in headless Chromium (no console errors); the screenshot stays in WORK_DIR for CI.
# Usage: run_sweep.sh CADENZA_BINARY WORK_DIR
# Exit 77 (ctest: skipped) only for the browser part when chromium is missing.
set -u
cadenza=$1 work=$2
source "$(cd "$(dirname "$0")/../.." && pwd)/e2e_lib.sh"
rm -rf "$work" && mkdir -p "$work"

model="$work/sweep-model.gguf"
"$cadenza" synth --preset demo --type q8_0 --layers 2 --ctx 1024 --seed 3 -o "$model" 2>/dev/null || exit 1

"$cadenza" serve -m "$model" --port 0 -t 2 --max-model-len 512 --served-model-name sweep \
  --drain-timeout 10 >"$work/serve.out" 2>"$work/serve.err" &
pid=$!
cleanup() { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }
trap cleanup EXIT

wait_for_serve "$work/serve.out" "$work/serve.err" "$pid"
wait_for_ready

"$cadenza" bench serve --url "http://127.0.0.1:$port" --model sweep --endpoint completions \
  --sweep-concurrency 1,2,4 --num-requests 6 --input-len 32 --output-len 16 --ignore-eos \
  --tokenizer "$model" --json "$work/sweep.json" --report "$work/report.html" >"$work/bench.out" 2>&1
rc=$?
cat "$work/bench.out"
[ $rc -eq 0 ] || { echo "bench serve failed ($rc)"; tail -20 "$work/serve.err"; exit 1; }
# Every request of every point must have succeeded.
python3 - "$work/sweep.json" <<'PY' || exit 1
import json, sys
d = json.load(open(sys.argv[1]))
points = d["points"]
assert [p["concurrency"] for p in points] == [1, 2, 4], [p["concurrency"] for p in points]
for p in points:
    s = p["summary"]
    assert s["completed"] == 6 and s["failed"] == 0, (p["label"], s["completed"], s["failed"], s["errors"])
    assert s["ttft_ms"]["count"] == 6 and s["ttft_ms"]["median"] > 0, p["label"]
    # ignore_eos: exactly max_tokens each, from the server's usage; and one streamed chunk per
    # token even though this random-weight model's bytes are often partial UTF-8 (held back).
    assert s["output_source"] == "usage" and s["output_tokens"] == 6 * 16, (p["label"], s["output_source"], s["output_tokens"])
    assert s["output_chunks"] == s["output_tokens"], (p["label"], s["output_chunks"], s["output_tokens"])
    assert s["itl_ms"]["count"] == 6 * 15, (p["label"], s["itl_ms"]["count"])
PY

chromium=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chromium" ]; then
  echo "SKIPPED: chromium not installed: the report page was written but NOT rendered"
  exit 77
fi
flags=(--headless --disable-gpu --no-sandbox --no-first-run --disable-extensions
       "--user-data-dir=$work/chromium-profile" --enable-logging=stderr --v=0 --window-size=1280,1800)
timeout 120 "$chromium" "${flags[@]}" "--screenshot=$work/report.png" "file://$work/report.html" \
  >"$work/chromium.log" 2>&1 || { cat "$work/chromium.log"; exit 1; }
timeout 120 "$chromium" "${flags[@]}" --dump-dom "file://$work/report.html" \
  >"$work/report.dom.html" 2>>"$work/chromium.log" || { cat "$work/chromium.log"; exit 1; }
rm -rf "$work/chromium-profile"
[ -s "$work/report.png" ] || { echo "no screenshot"; exit 1; }
grep -q "<svg" "$work/report.dom.html" || { echo "report has no charts"; exit 1; }
if grep -E "CONSOLE\(|Uncaught" "$work/chromium.log"; then
  echo "the report page logged console errors"
  exit 1
fi
echo "report screenshot: $work/report.png"
