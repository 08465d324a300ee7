#!/usr/bin/env bash
# Builds the GGUF reader fuzz target with clang in build-fuzz, seeds a corpus with small valid
# files and runs libFuzzer for SECONDS (default 60).
#
#   scripts/fuzz.sh [SECONDS] [extra libFuzzer flags...]
#
# Environment: JOBS (parallel fuzzing jobs, default 1), CORPUS (default fuzz-corpus/gguf),
# BUILD_DIR (default build-fuzz). Crashes are written to $CORPUS/../crashes/ and make the script
# exit non-zero.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
seconds="${1:-60}"
shift || true
build="${BUILD_DIR:-$root/build-fuzz}"
corpus="${CORPUS:-$root/fuzz-corpus/gguf}"
crashes="$(dirname "$corpus")/crashes"
jobs="${JOBS:-1}"

CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCADENZA_FUZZ=ON \
  -DCADENZA_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
# Only the fuzz targets: the rest of the tree need not build with clang.
ninja -C "$build" gguf_reader_fuzz gguf_fuzz_seed

mkdir -p "$corpus" "$crashes"
"$build/fuzz/gguf_fuzz_seed" "$corpus"

# With -jobs, libFuzzer runs workers that log to fuzz-N.log in the working directory; keep those
# out of the checkout. One job runs in-process and logs to stdout.
cd "$(dirname "$corpus")"
parallel=()
if [ "$jobs" -gt 1 ]; then parallel=(-jobs="$jobs" -workers="$jobs"); fi

# rss_limit: the reader must never need much memory for small inputs.
exec "$build/fuzz/gguf_reader_fuzz" "$corpus" \
  -dict="$root/fuzz/gguf.dict" \
  -max_total_time="$seconds" \
  -max_len=4096 \
  -rss_limit_mb=1024 \
  -timeout=10 \
  "${parallel[@]}" \
  -artifact_prefix="$crashes/" \
  -print_final_stats=1 \
  "$@"
