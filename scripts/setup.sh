#!/usr/bin/env bash
# Installs the Debian packages Cadenza builds with. Safe to run again; skips apt when all are there.
#   scripts/setup.sh          what building and running needs
#   scripts/setup.sh --test   also the tools the test suite uses (promtool, chromium, node)
set -euo pipefail
packages=(
  build-essential cmake ninja-build g++ pkg-config ccache git
  libcli11-dev nlohmann-json3-dev libpcre2-dev libfmt-dev libspdlog-dev libssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libboost-dev libcurl4-openssl-dev libyaml-cpp-dev libhiredis-dev
  libopenmpi-dev openmpi-bin
  libjpeg62-turbo-dev libpng-dev libwebp-dev libgif-dev  # src/vision: image decoding
)
if [ "${1:-}" = "--test" ]; then
  # clang + compiler-rt: the libFuzzer target; python3: the skipped-test report (scripts/skipped_tests.py); promtool: the metrics format; chromium: the bench
  # report page and the dashboard preview; python3-yaml: the live monitoring test (tests/ops); curl: the Prometheus scrape test; redis-server: the gateway's Redis cache test; wrk: gateway load checks; openssl: the gateway TLS test makes its certificates with it; systemd: systemd-analyze for the unit files (tests/ops). Node.js runs the OpenAI-SDK end-to-end test and the Kubernetes schema check; the image may ship its own build. kubectl (for `kubectl kustomize`) comes with the machine image, not from Debian (bookworm's kubernetes-client 1.20 predates the kustomize features used).
  packages+=(clang libclang-rt-dev prometheus curl chromium redis-server wrk openssl python3 python3-yaml iproute2 systemd)
  command -v node >/dev/null 2>&1 || packages+=(nodejs npm)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
