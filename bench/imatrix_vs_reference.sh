#!/usr/bin/env bash
# Importance-matrix quantization, ours against the reference engine's, in one run (issue 18):
#   bench/imatrix_vs_reference.sh REF_BIN_DIR [OUT_DIR]
# REF_BIN_DIR holds llama-imatrix and llama-quantize (../shared/tools/reference-engine.sh builds
# them). On ../shared's licenses-tiny-f16 model: each side makes its imatrix from the held-out
# text after its first 200 chunks of 128 tokens, quantizes to Q4_K_M, Q3_K_M and IQ4_XS, and the
# files are scored by `cadenza perplexity` over the first 200 chunks, with KL divergence against
# the F16 model. The cross rows use the other side's imatrix file (both read the GGUF layout);
# the ours-awq rows add `--awq` (activation-aware scales, alpha searched per fold point) to ours.
# Prints a markdown table on stdout; logs go to OUT_DIR (default /tmp/imatrix-compare).
set -euo pipefail
cd "$(dirname "$0")/.."
ref="${1:?usage: $0 REF_BIN_DIR [OUT_DIR]}"
out="${2:-/tmp/imatrix-compare}"
threads="${THREADS:-2}"
shared="${CADENZA_SHARED_DIR:-../shared}"
model="$shared/models/licenses-tiny-f16.gguf"
text="$shared/text/heldout-licenses.txt"
cadenza=build/bin/cadenza
mkdir -p "$out"

"$cadenza" imatrix -m "$model" -f "$text" -c 128 --from-chunk 200 -t "$threads" \
  -o "$out/ours.imatrix.gguf" >"$out/ours.imatrix.log" 2>&1
"$ref/llama-imatrix" -m "$model" -f "$text" -c 128 --chunk 200 -t "$threads" --no-ppl \
  -o "$out/ref.imatrix.gguf" >"$out/ref.imatrix.log" 2>&1
"$cadenza" perplexity -m "$model" -f "$text" --chunks 200 -t "$threads" \
  --kl-divergence-base "$out/f16.kld" >"$out/f16.ppl" 2>"$out/f16.ppl.log"

# score NAME FILE: one table row from `cadenza perplexity --kl-divergence`.
score() {
  "$cadenza" perplexity -m "$2" --kl-divergence --kl-divergence-base "$out/f16.kld" -t "$threads" \
    --json >"$out/$1.json" 2>"$out/$1.ppl.log"
  python3 - "$1" "$2" "$out/$1.json" <<'PY'
import json, os, sys
name, path, result = sys.argv[1], sys.argv[2], json.load(open(sys.argv[3]))
kl = result["kl_divergence"]
print(f"| {name} | {os.path.getsize(path)} | {result['ppl']:.4f} | {kl['mean']:.5f} | "
      f"{kl['p99']:.5f} | {100 * kl['same_top']:.2f}% |")
PY
}

echo "| file | bytes | PPL | mean KL | KL p99 | same top token |"
echo "|---|---:|---:|---:|---:|---:|"
for type in q4_k_m q3_k_m iq4_xs; do
  "$cadenza" quantize "$model" "$out/ours-$type.gguf" "$type" --imatrix "$out/ours.imatrix.gguf" \
    -t "$threads" >"$out/ours-$type.log" 2>&1
  "$ref/llama-quantize" --imatrix "$out/ref.imatrix.gguf" "$model" "$out/ref-$type.gguf" "$type" \
    "$threads" >"$out/ref-$type.log" 2>&1
  "$cadenza" quantize "$model" "$out/ours-refimatrix-$type.gguf" "$type" \
    --imatrix "$out/ref.imatrix.gguf" -t "$threads" >"$out/ours-refimatrix-$type.log" 2>&1
  "$ref/llama-quantize" --imatrix "$out/ours.imatrix.gguf" "$model" \
    "$out/ref-oursimatrix-$type.gguf" "$type" "$threads" >"$out/ref-oursimatrix-$type.log" 2>&1
  "$cadenza" quantize "$model" "$out/ours-plain-$type.gguf" "$type" -t "$threads" \
    >"$out/ours-plain-$type.log" 2>&1
  "$cadenza" quantize "$model" "$out/ours-awq-$type.gguf" "$type" --imatrix "$out/ours.imatrix.gguf" \
    --awq -t "$threads" >"$out/ours-awq-$type.log" 2>&1
  for name in ours ours-awq ref ours-refimatrix ref-oursimatrix ours-plain; do
    score "$name-$type" "$out/$name-$type.gguf"
  done
done
