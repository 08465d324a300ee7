#!/usr/bin/env bash
# Quantization quality on a model whose rows fit the 256-element blocks (issue 18), ours against
# the reference quantizer, in one run:
#   bench/quality_256.sh REF_BIN_DIR [OUT_DIR]
# ../shared's small-llama-spm-Q8_0 (embd 256, ffn 512; RANDOM weights, so there is no meaningful
# perplexity): decoded to F16 once (`cadenza quantize ... f16`), which is the base every file is
# quantized from and compared with. Each side makes its imatrix of the F16 base from the held-out
# licence text after its first 200 chunks of 128 tokens; each file is scored by `cadenza
# perplexity --kl-divergence` against the F16 base's predictions over the first 100 chunks: mean
# KL divergence (with its standard error) and how often the top token is the same. No quantiles:
# with random weights the distributions are flat, most of the KL is in the sampled tail beyond
# the exact top 128, and the quantiles cover only the top-128 part (docs/perplexity.md). Rows: ours and the
# reference without imatrix, with its own imatrix, and ours with imatrix and --awq.
# Prints a markdown table on stdout; logs go to OUT_DIR (default /tmp/quality-256).
set -euo pipefail
cd "$(dirname "$0")/.."
ref="${1:?usage: $0 REF_BIN_DIR [OUT_DIR]}"
out="${2:-/tmp/quality-256}"
threads="${THREADS:-2}"
chunks="${CHUNKS:-100}"
types="${TYPES:-q6_k q4_k_m iq4_xs q3_k_m q2_k}"
shared="${CADENZA_SHARED_DIR:-../shared}"
text="$shared/text/heldout-licenses.txt"
cadenza=build/bin/cadenza
mkdir -p "$out"
base="$out/base-f16.gguf"

"$cadenza" quantize "$shared/models/small-llama-spm-Q8_0.gguf" "$base" f16 -t "$threads" >"$out/base.log" 2>&1
"$cadenza" imatrix -m "$base" -f "$text" -c 128 --from-chunk 200 -t "$threads" \
  -o "$out/ours.imatrix.gguf" >"$out/ours.imatrix.log" 2>&1
"$ref/llama-imatrix" -m "$base" -f "$text" -c 128 --chunk 200 -t "$threads" --no-ppl \
  -o "$out/ref.imatrix.gguf" >"$out/ref.imatrix.log" 2>&1
"$cadenza" perplexity -m "$base" -f "$text" --chunks "$chunks" -t "$threads" \
  --kl-divergence-base "$out/base.kld" >"$out/base.ppl" 2>"$out/base.ppl.log"

score() {
  "$cadenza" perplexity -m "$2" --kl-divergence --kl-divergence-base "$out/base.kld" -t "$threads" \
    --json >"$out/$1.json" 2>"$out/$1.ppl.log"
  python3 - "$1" "$2" "$out/$1.json" <<'PY'
import json, os, sys
name, path, result = sys.argv[1], sys.argv[2], json.load(open(sys.argv[3]))
kl = result["kl_divergence"]
print(f"| {name} | {os.path.getsize(path)} | {kl['mean']:.5f} ± {kl['mean_error']:.5f} | "
      f"{100 * kl['same_top']:.2f}% |")
PY
}

echo "| file | bytes | mean KL | same top token |"
echo "|---|---:|---:|---:|"
for type in $types; do
  "$cadenza" quantize "$base" "$out/ours-plain-$type.gguf" "$type" -t "$threads" >"$out/ours-plain-$type.log" 2>&1
  "$ref/llama-quantize" "$base" "$out/ref-plain-$type.gguf" "$type" "$threads" >"$out/ref-plain-$type.log" 2>&1
  "$cadenza" quantize "$base" "$out/ours-$type.gguf" "$type" --imatrix "$out/ours.imatrix.gguf" \
    -t "$threads" >"$out/ours-$type.log" 2>&1
  "$cadenza" quantize "$base" "$out/ours-awq-$type.gguf" "$type" --imatrix "$out/ours.imatrix.gguf" \
    --awq -t "$threads" >"$out/ours-awq-$type.log" 2>&1
  "$ref/llama-quantize" --imatrix "$out/ref.imatrix.gguf" "$base" "$out/ref-$type.gguf" "$type" \
    "$threads" >"$out/ref-$type.log" 2>&1
  for name in ours-plain ref-plain ours ours-awq ref; do
    score "$name-$type" "$out/$name-$type.gguf"
  done
done
