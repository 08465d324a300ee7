#!/usr/bin/env bash
# Builds a libFuzzer target with clang in build-fuzz, seeds its corpus and runs it for SECONDS
# (default 60).
#
#   scripts/fuzz.sh [TARGET] [SECONDS] [extra libFuzzer flags...]
#
# TARGET: gguf (the GGUF reader, default) or openai (the OpenAI request parser and chat message
# handling; the chat templates of ../shared/chat_templates are fuzzed too when that folder exists).
# `scripts/fuzz.sh 600` (a number first) still means the gguf target.
# Environment: JOBS (parallel fuzzing jobs, default 1), CORPUS (default fuzz-corpus/TARGET),
# BUILD_DIR (default build-fuzz). Crashes are written to $CORPUS/../crashes-TARGET/ and make the
# script exit non-zero.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
target=gguf
if [ $# -gt 0 ] && ! [[ "$1" =~ ^[0-9]+$ ]]; then
  target="$1"
  shift
fi
seconds="${1:-60}"
shift || true
build="${BUILD_DIR:-$root/build-fuzz}"
corpus="${CORPUS:-$root/fuzz-corpus/$target}"
crashes="$(dirname "$corpus")/crashes-$target"
jobs="${JOBS:-1}"

case "$target" in
  gguf)
    binary=gguf_reader_fuzz
    build_targets=(gguf_reader_fuzz gguf_fuzz_seed)
    flags=(-dict="$root/fuzz/gguf.dict" -max_len=4096)
    ;;
  openai)
    binary=openai_request_fuzz
    build_targets=(openai_request_fuzz)
    flags=(-dict="$root/fuzz/openai.dict" -max_len=8192)
    ;;
  *)
    echo "scripts/fuzz.sh: unknown target '$target' (gguf or openai)" >&2
    exit 2
    ;;
esac

CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCADENZA_FUZZ=ON -DCADENZA_CUDA=OFF \
  -DCADENZA_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
# Only the fuzz targets: the rest of the tree need not build with clang.
ninja -C "$build" "${build_targets[@]}"

mkdir -p "$corpus" "$crashes"
case "$target" in
  gguf) "$build/fuzz/gguf_fuzz_seed" "$corpus" ;;
  openai)
    cp -n "$root"/fuzz/openai_seeds/*.json "$corpus"/
    if [ -d "$root/../shared/chat_templates" ]; then
      export CADENZA_FUZZ_TEMPLATES="$root/../shared/chat_templates"
    fi
    ;;
esac

# With -jobs, libFuzzer runs workers that log to fuzz-N.log in the working directory; keep those
# out of the checkout. One job runs in-process and logs to stdout.
cd "$(dirname "$corpus")"
parallel=()
if [ "$jobs" -gt 1 ]; then parallel=(-jobs="$jobs" -workers="$jobs"); fi

# rss_limit: the parsers must never need much memory for small inputs.
exec "$build/fuzz/$binary" "$corpus" \
  "${flags[@]}" \
  -max_total_time="$seconds" \
  -rss_limit_mb=1024 \
  -timeout=10 \
  "${parallel[@]}" \
  -artifact_prefix="$crashes/" \
  -print_final_stats=1 \
  "$@"
