#!/usr/bin/env bash
# End to end: `cadenza bench serve` against a real `cadenza serve` with n-gram speculation (fixed
# k) reports the server's speculation counters per point (stdout and --json spec_decode), and
# against a server without speculation reports none.
# Usage: run_spec.sh CADENZA_BINARY WORK_DIR SOURCE_DIR
# The model is licenses-tiny-f16.gguf from $CADENZA_SHARED_DIR/models (else SOURCE_DIR/../shared);
# exit 77 (ctest: skipped) when it is missing.
set -u
cadenza=$1 work=$2 src=$3
source "$src/tests/e2e_lib.sh"
shared=${CADENZA_SHARED_DIR:-$src/../shared}
model="$shared/models/licenses-tiny-f16.gguf"
if [ ! -f "$model" ]; then
  echo "SKIPPED: $model not found (set CADENZA_SHARED_DIR)"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work"

# A prompt that repeats itself, so n-gram drafts (copies of earlier text) are accepted.
python3 - "$work/prompt.jsonl" <<'PY'
import json, sys
text = ("Permission is hereby granted, free of charge, to any person obtaining a copy of this "
        "software and associated documentation files, to deal in the Software without restriction. ")
json.dump({"prompt": text * 4}, open(sys.argv[1], "w"))
PY

pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; }
trap cleanup EXIT

# run NAME SERVE_FLAGS...: starts a server, runs a 2-point sweep into $work/NAME.json, stops it.
run() {
  local name=$1
  shift
  "$cadenza" serve -m "$model" --port 0 -t 2 --served-model-name lt --kv-cache-memory 64MiB \
    --drain-timeout 10 "$@" >"$work/$name-serve.out" 2>"$work/$name-serve.err" &
  pid=$!
  wait_for_serve "$work/$name-serve.out" "$work/$name-serve.err" "$pid"
  wait_for_ready
  "$cadenza" bench serve --url "http://127.0.0.1:$port" --model lt --endpoint completions \
    --dataset "$work/prompt.jsonl" --output-len 48 --ignore-eos --sweep-concurrency 1,2 \
    --num-requests 4 --warmup 1 --json "$work/$name.json" --report "$work/$name.html" \
    >"$work/$name-bench.out" 2>"$work/$name-bench.err"
  local rc=$?
  cat "$work/$name-bench.out" "$work/$name-bench.err"
  [ $rc -eq 0 ] || { echo "bench serve failed ($rc)"; tail -20 "$work/$name-serve.err"; exit 1; }
  kill "$pid"
  wait "$pid" 2>/dev/null
  pid=""
}

run spec --speculative-method ngram --speculative-adaptive false
run plain

python3 - "$work" <<'PY' || exit 1
import json, sys
work = sys.argv[1]
spec = json.load(open(f"{work}/spec.json"))
for p in spec["points"]:
    s = p["summary"]
    assert s["completed"] == 4 and s["failed"] == 0, (p["label"], s)
    d = p["spec_decode"]
    assert d is not None, p["label"]
    assert d["drafts"] > 0 and d["draft_tokens"] >= d["drafts"], (p["label"], d)
    assert 0 < d["accepted_tokens"] <= d["draft_tokens"], (p["label"], d)
    assert abs(d["acceptance_rate"] - d["accepted_tokens"] / d["draft_tokens"]) < 1e-9, d
    assert abs(d["mean_tokens_per_verification"] - (1 + d["accepted_tokens"] / d["drafts"])) < 1e-9, d
    per = d["accepted_per_position"]
    assert sum(per) == d["accepted_tokens"], (p["label"], d)
    assert all(a >= b for a, b in zip(per, per[1:])), ("acceptance cannot grow with position", d)
    assert len(d["acceptance_by_position"]) == len(per), d
plain = json.load(open(f"{work}/plain.json"))
for p in plain["points"]:
    assert p["summary"]["completed"] == 4, p["label"]
    assert p["spec_decode"] is None, (p["label"], p["spec_decode"])
print("spec_decode:", [p["spec_decode"] for p in spec["points"]])
PY
grep -q "speculative decoding" "$work/spec-bench.out" || { echo "no speculation section printed"; exit 1; }
grep -q "speculative decoding" "$work/plain-bench.out" && { echo "speculation section without speculation"; exit 1; }
grep -q "spec accept" "$work/spec.html" || { echo "report has no speculation column"; exit 1; }
echo "ok"
