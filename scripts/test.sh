#!/usr/bin/env bash
# The test command: installs dependencies, builds, and runs every test.
#   1. Release build: all tests (unit, golden against ../shared when present, corrupt-file sweeps).
#   2. ASan+UBSan build, with assertions on: the same tests under the sanitizers.
#   3. The libFuzzer targets (scripts/fuzz.sh all): each for CADENZA_FUZZ_SECONDS (default 60);
#      a finding fails the run.
# Tests that need ../shared skip with a visible "SKIPPED" message when it is absent. After each
# suite the skipped tests are listed with their reasons; a skip for any reason other than missing
# hardware (CUDA device, ISA level) or a missing ../shared fails the run (scripts/skipped_tests.py).
# Under the sanitizers the model tests run once, at the detected ISA level (test_model); their
# reruns at every forced level (test_model_isa_*) run in the release suite only. Under ASan they
# cost ~40 min of CPU (the scalar one alone passed its 900 s timeout on a slow CI machine), and
# what they add there is already covered: test_simd checks every SIMD kernel against its scalar
# reference under the sanitizers. Likewise the structured-output validity run (ValidityTest: 2,000
# generations on two real vocabularies, 2 min in release) runs in the release suite only; its
# code paths run under the sanitizers in test_engine's ConstrainedTest, test_grammar and
# test_server. The Llama-3.2-1B 4k long-context golden also runs in the release suite only (2.2
# min under ASan, most of it synthesizing its 128k x 2048 embedding; its code paths are the
# Qwen one's, which runs under the sanitizers). CADENZA_ASAN_EXCLUDE='^$' runs them too.
# Environment: JOBS (default nproc), CADENZA_SKIP_ASAN=1, CADENZA_ASAN_EXCLUDE (ctest -E regex),
# CADENZA_SKIP_FUZZ=1, CADENZA_FUZZ_SECONDS.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${JOBS:-$(nproc)}"
if [ -d ../shared ]; then echo "test: using shared test data in $(cd ../shared && pwd)";
else echo "test: ../shared not found: golden-data tests will be SKIPPED"; fi

# run_suite BUILD_DIR [ctest args...]: the suite, then its skipped tests and their reasons.
run_suite() {
  local dir="$1"
  shift
  local junit="$PWD/$dir/ctest-junit.xml" rc=0
  rm -f "$junit"
  ctest --test-dir "$dir" --output-on-failure -j "$jobs" --output-junit "$junit" "$@" || rc=$?
  scripts/skipped_tests.py "$junit" --strict || rc=1
  return "$rc"
}

# timed LABEL COMMAND...: runs it and prints how long it took, so that a CI log shows where the
# run's time went (a cold ccache costs most of it in the builds).
timed() {
  local label="$1" start=$SECONDS rc=0
  shift
  "$@" || rc=$?
  echo "== time: $label $((SECONDS - start)) s (exit $rc)"
  return "$rc"
}

timed "setup" scripts/setup.sh --test
timed "release build" scripts/build.sh release
echo "== release tests"
timed "release tests" run_suite build

if [ "${CADENZA_SKIP_ASAN:-0}" != "1" ]; then
  timed "ASan build" scripts/build.sh asan
  echo "== ASan+UBSan tests"
  # The configure step prints "cadenza: assertions ON"; Build.AssertionsAsConfigured fails here
  # if NDEBUG is defined.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    timed "ASan tests" run_suite build-asan -E "${CADENZA_ASAN_EXCLUDE:-^test_model_isa_|ValidityTest|LongContextGolden.*llama_3_2}"
fi

if [ "${CADENZA_SKIP_FUZZ:-0}" != "1" ]; then
  echo "== fuzzers (libFuzzer + ASan/UBSan, ${CADENZA_FUZZ_SECONDS:-60} s each)"
  timed "fuzzers" scripts/fuzz.sh all "${CADENZA_FUZZ_SECONDS:-60}"
fi
