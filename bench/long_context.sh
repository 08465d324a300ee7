#!/usr/bin/env bash
# Decode tokens/s at context depths and long-prompt prefill, Cadenza against the reference engine
# (llama-bench -d, a black box), run back to back in one session on one model file:
#   bench/long_context.sh MODEL.gguf [THREADS=2] [DEPTHS="1024 8192 32768"] [PREFILL=32768]
# Per depth d: `cadenza bench -d d -p 0 -n N_GEN -r REPS` then `llama-bench -d d -p 0 -n N_GEN
# -r REPS` (N_GEN 32, REPS 3 by default; the depth is filled untimed by both); then the prefill of
# PREFILL tokens from an empty cache (`-p PREFILL -n 0 -r 1`; prefill time = PREFILL / tokens per
# second; 0 skips it). Medians (cadenza) and means (llama-bench), as the tools print them.
# LLAMA_BENCH names the reference's llama-bench (default: ~/.cache/cadenza-reference/build/bin).
# (This build of llama-bench crashes in prompt processing on `cadenza synth`'s Q8_0 files; F16
# files work.)
set -uo pipefail
model=${1:?usage: bench/long_context.sh MODEL.gguf [THREADS] [DEPTHS] [PREFILL]}
threads=${2:-2}
depths=${3:-"1024 8192 32768"}
prefill=${4:-32768}
here=$(cd "$(dirname "$0")/.." && pwd)
cadenza=${CADENZA:-$here/build/bin/cadenza}
llama_bench=${LLAMA_BENCH:-$HOME/.cache/cadenza-reference/build/bin/llama-bench}
n_gen=${N_GEN:-32}
reps=${REPS:-3}
for d in $depths; do
  echo "== depth $d: cadenza"
  "$cadenza" bench -m "$model" -t "$threads" -p 0 -n "$n_gen" -r "$reps" -d "$d" --no-probe --no-peak 2>/dev/null | grep -E '^\| tg'
  echo "== depth $d: reference"
  "$llama_bench" -m "$model" -t "$threads" -p 0 -n "$n_gen" -r "$reps" -d "$d" 2>/dev/null | grep -E " tg$n_gen"
done
if [ "$prefill" -gt 0 ]; then
  echo "== prefill $prefill: cadenza"
  "$cadenza" bench -m "$model" -t "$threads" -p "$prefill" -n 0 -r 1 --no-probe --no-peak 2>/dev/null | grep -E '^\| pp'
  echo "== prefill $prefill: reference"
  "$llama_bench" -m "$model" -t "$threads" -p "$prefill" -n 0 -r 1 -b 2048 -ub 512 2>/dev/null | grep -E "pp$prefill"
fi
