#!/usr/bin/env bash
# The long-context goldens too slow for ctest (tests/model/golden/long/*.json with "ci": false,
# e.g. 16k tokens): runs the DISABLED test that checks them, printing the measured agreement per
# position ("[ long golden ] ... max |log-prob diff|"). Needs ../shared (or CADENZA_SHARED_DIR)
# and a built build/tests/model/test_model. Minutes per file on 2 cores.
#   scripts/longctx_check.sh [BUILD_DIR=build]
# CADENZA_LONG_GOLDEN=TEXT checks only the files whose name contains TEXT (e.g. llama-3.2-1b-2l-64k).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
exec "$build/tests/model/test_model" --gtest_also_run_disabled_tests \
  --gtest_filter='LongContextGoldenFull.*'
