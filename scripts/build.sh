#!/usr/bin/env bash
# Configures and builds Cadenza. Usage: scripts/build.sh [release|asan] (default release).
#   release -> build/       (optimised; the binary is build/bin/cadenza)
#   asan    -> build-asan/  (AddressSanitizer + UndefinedBehaviorSanitizer, for the unit tests)
set -euo pipefail
cd "$(dirname "$0")/.."
kind="${1:-release}"
jobs="${JOBS:-$(nproc)}"
# Let ccache share results between checkouts in different folders (CI builds a fresh clone).
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
case "$kind" in
  release) dir=build; flags=(-DCMAKE_BUILD_TYPE=Release) ;;
  # The release build compiles the CUDA backend when CMake finds nvcc (CADENZA_CUDA=AUTO); the
  # sanitizer build never does (nvcc and ASan do not mix; the CUDA tests need a GPU anyway).
  asan) dir=build-asan; flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCADENZA_SANITIZE=ON -DCADENZA_CUDA=OFF) ;;
  *) echo "usage: $0 [release|asan]" >&2; exit 2 ;;
esac
# Only cadenza's own configure messages (CUDA on/off, assertions on/off) reach the log.
configured="$(cmake -S . -B "$dir" -G Ninja "${flags[@]}")"
grep "cadenza:" <<<"$configured" || true
ninja -C "$dir" -j "$jobs"
