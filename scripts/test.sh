#!/usr/bin/env bash
# The test command: installs dependencies, builds, and runs every test.
#   1. Release build: all tests (unit, golden against ../shared when present, corrupt-file sweeps).
#   2. ASan+UBSan build: the same tests under the sanitizers.
# Tests that need ../shared skip with a visible "SKIPPED" message when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
jobs="${JOBS:-$(nproc)}"
if [ -d ../shared ]; then echo "test: using shared test data in $(cd ../shared && pwd)";
else echo "test: ../shared not found: golden-data tests will be SKIPPED"; fi

scripts/build.sh release
echo "== release tests"
ctest --test-dir build --output-on-failure -j "$jobs"

if [ "${CADENZA_SKIP_ASAN:-0}" != "1" ]; then
  scripts/build.sh asan
  echo "== ASan+UBSan tests"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j "$jobs" -E "${CADENZA_ASAN_EXCLUDE:-^$}"
fi
