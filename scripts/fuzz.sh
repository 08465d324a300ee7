#!/usr/bin/env bash
# Builds libFuzzer targets with clang in build-fuzz, seeds their corpora and runs them for SECONDS
# (default 60).
#
#   scripts/fuzz.sh [TARGET] [SECONDS] [extra libFuzzer flags...]
#
# TARGET:
#   gguf       the GGUF reader (default)
#   openai     the OpenAI request parser and chat message handling (the chat templates of
#              ../shared/chat_templates are fuzzed too when that folder exists)
#   template   the Jinja2 chat-template parser and interpreter (seeds: fuzz/corpus/template and
#              ../shared/chat_templates/*.jinja)
#   tokenizer  the SentencePiece and byte-level BPE tokenizers on synthesized vocabularies (and
#              ../shared/tokenizer/*.gguf when present; seeds: fuzz/corpus/tokenizer)
#   all        every target above for SECONDS each, FUZZ_PARALLEL at a time (default: nproc),
#              each logging to $BUILD_DIR/fuzz-logs/TARGET.log; prints one summary line per
#              target (runs, coverage) and the log of each that found something. What CI runs.
# `scripts/fuzz.sh 600` (a number first) still means the gguf target.
# Environment: JOBS (parallel libFuzzer jobs of one target, default 1), CORPUS (default
# fuzz-corpus/TARGET; single target only), BUILD_DIR (default build-fuzz). Findings (crash, leak,
# timeout, out-of-memory) are written to fuzz-corpus/crashes-TARGET/ and make the script exit
# non-zero.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1  # share ccache results between checkouts
all_targets=(gguf openai template tokenizer image)
target=gguf
if [ $# -gt 0 ] && ! [[ "$1" =~ ^[0-9]+$ ]]; then
  target="$1"
  shift
fi
seconds="${1:-60}"
shift || true
build="${BUILD_DIR:-$root/build-fuzz}"
jobs="${JOBS:-1}"

# binary, build targets and flags of one fuzz target.
describe() {
  case "$1" in
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
    template)
      binary=template_fuzz
      build_targets=(template_fuzz)
      # Real chat templates reach 10 KiB; longer sources only slow each run down.
      flags=(-dict="$root/fuzz/jinja.dict" -max_len=16384)
      ;;
    tokenizer)
      binary=tokenizer_fuzz
      build_targets=(tokenizer_fuzz)
      flags=(-max_len=2048)
      ;;
    image)
      binary=image_decode_fuzz
      build_targets=(image_decode_fuzz image_fuzz_seed)
      flags=(-max_len=16384)
      ;;
    *)
      echo "scripts/fuzz.sh: unknown target '$1' (${all_targets[*]} or all)" >&2
      exit 2
      ;;
  esac
}

configure() {
  local configured
  configured="$(CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCADENZA_FUZZ=ON \
    -DCADENZA_CUDA=OFF -DCADENZA_BUILD_TESTS=OFF -DCADENZA_BUILD_BENCH=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo)"
  grep "cadenza:" <<<"$configured" || true  # e.g. "assertions ON"
}

# Seeds the corpus of target $1 in folder $2 (idempotent: existing inputs are kept).
seed() {
  mkdir -p "$2"
  case "$1" in
    gguf) "$build/fuzz/gguf_fuzz_seed" "$2" ;;
    openai) cp -n "$root"/fuzz/openai_seeds/*.json "$2"/ ;;
    template)
      cp -n "$root"/fuzz/corpus/template/* "$2"/
      if [ -d "$root/../shared/chat_templates" ]; then cp -n "$root"/../shared/chat_templates/*.jinja "$2"/; fi
      ;;
    tokenizer) cp -n "$root"/fuzz/corpus/tokenizer/* "$2"/ ;;
    image) "$build/fuzz/image_fuzz_seed" "$2" ;;
  esac
}

# Runs target $1 for $seconds on corpus $2 in the foreground (extra libFuzzer flags after).
run_one() {
  local name="$1" corpus="$2"
  shift 2
  describe "$name"
  local crashes
  crashes="$(dirname "$corpus")/crashes-$name"
  mkdir -p "$crashes"
  seed "$name" "$corpus"
  if [ -d "$root/../shared/chat_templates" ]; then
    export CADENZA_FUZZ_TEMPLATES="$root/../shared/chat_templates"
  fi
  if [ -d "$root/../shared/tokenizer" ]; then
    export CADENZA_FUZZ_VOCABS="$root/../shared/tokenizer"
  fi
  local parallel=()
  if [ "$jobs" -gt 1 ]; then parallel=(-jobs="$jobs" -workers="$jobs"); fi
  # With -jobs, libFuzzer runs workers that log to fuzz-N.log in the working directory; keep those
  # out of the checkout. rss_limit: the parsers must never need much memory for small inputs.
  (cd "$(dirname "$corpus")" && "$build/fuzz/$binary" "$corpus" \
    "${flags[@]}" \
    -max_total_time="$seconds" \
    -rss_limit_mb=1024 \
    -timeout=10 \
    "${parallel[@]}" \
    -artifact_prefix="$crashes/" \
    -print_final_stats=1 \
    "$@")
}

configure
if [ "$target" != all ]; then
  describe "$target"
  # Only the fuzz targets: the rest of the tree need not build with clang.
  ninja -C "$build" "${build_targets[@]}"
  run_one "$target" "${CORPUS:-$root/fuzz-corpus/$target}" "$@"
  exit
fi

every=()
for t in "${all_targets[@]}"; do
  describe "$t"
  every+=("${build_targets[@]}")
done
ninja -C "$build" "${every[@]}"
logs="$build/fuzz-logs"
mkdir -p "$logs"
parallel_runs="${FUZZ_PARALLEL:-$(nproc)}"
failed=()
# Batches of parallel_runs targets; each batch waits for all of its runs (by pid).
for ((i = 0; i < ${#all_targets[@]}; i += parallel_runs)); do
  batch=("${all_targets[@]:i:parallel_runs}")
  pids=()
  for t in "${batch[@]}"; do
    echo "fuzz: $t for ${seconds} s (log: $logs/$t.log)"
    run_one "$t" "$root/fuzz-corpus/$t" "$@" >"$logs/$t.log" 2>&1 &
    pids+=($!)
  done
  for j in "${!batch[@]}"; do
    if ! wait "${pids[$j]}"; then failed+=("${batch[$j]}"); fi
  done
done
for t in "${all_targets[@]}"; do
  # libFuzzer's final stats: stat::number_of_executed_units and the last coverage line.
  runs="$(grep -o 'stat::number_of_executed_units: [0-9]*' "$logs/$t.log" | grep -o '[0-9]*$' || true)"
  cov="$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9]+[a-zA-Z]*' "$logs/$t.log" | tail -1 || true)"
  echo "fuzz: $t: ${runs:-?} runs in ${seconds} s, ${cov:-no coverage line}"
done
if [ ${#failed[@]} -gt 0 ]; then
  for t in "${failed[@]}"; do
    echo "== fuzz: $t FOUND SOMETHING (or failed to run); the end of $logs/$t.log:"
    tail -n 60 "$logs/$t.log"
  done
  echo "fuzz: findings in: ${failed[*]} (inputs in fuzz-corpus/crashes-*/)" >&2
  exit 1
fi
echo "fuzz: no findings in ${all_targets[*]}"
