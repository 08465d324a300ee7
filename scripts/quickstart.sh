#!/usr/bin/env bash
# The first command for a new machine: installs dependencies, builds the `cadenza` binary (only
# it: the tests and benchmarks are scripts/build.sh's job), and generates text.
#   scripts/quickstart.sh                      online: downloads a small real model (Qwen2.5-0.5B-
#                                              Instruct, Q8_0, under 1 GB) with `cadenza pull`;
#                                              offline (or if that fails): synthesizes a tiny demo
#                                              model with RANDOM weights (gibberish output)
#   scripts/quickstart.sh MODEL.gguf [PROMPT]  runs your own GGUF model
# Environment: CADENZA_QUICKSTART_OFFLINE=1 skips the download (random demo model); HF_ENDPOINT
# and HF_TOKEN are read by `cadenza pull` (docs/pull.md).
set -euo pipefail
cd "$(dirname "$0")/.."
real_model="hf://Qwen/Qwen2.5-0.5B-Instruct-GGUF/qwen2.5-0.5b-instruct-q8_0.gguf"
demo_model=models/demo-random.gguf
model="${1:-}"
prompt="${2:-Once upon a time}"

scripts/setup.sh
# The same configuration as `scripts/build.sh release`, but only the binary's target.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build -j "${JOBS:-$(nproc)}" cadenza
cadenza=build/bin/cadenza

# True when a TCP connection to the hub (HF_ENDPOINT, else huggingface.co) opens within 5 s.
hub_reachable() {
  local endpoint="${HF_ENDPOINT:-https://huggingface.co}"
  local rest="${endpoint#*://}"
  local hostport="${rest%%/*}"
  local host="${hostport%%:*}" port
  if [ "$hostport" != "$host" ]; then
    port="${hostport##*:}"
  elif [ "${endpoint%%://*}" = "http" ]; then
    port=80
  else
    port=443
  fi
  timeout 5 bash -c "exec 3<>/dev/tcp/$host/$port" 2>/dev/null
}

if [ -z "$model" ]; then
  if [ "${CADENZA_QUICKSTART_OFFLINE:-0}" = "1" ]; then
    echo "== No model given and CADENZA_QUICKSTART_OFFLINE=1: not downloading."
  elif ! hub_reachable; then
    echo "== No model given and ${HF_ENDPOINT:-https://huggingface.co} is not reachable: offline."
  else
    echo "== No model given and the hub is reachable: downloading a small real model,"
    echo "== $real_model (under 1 GB; CADENZA_QUICKSTART_OFFLINE=1 uses a random demo instead)."
    # cadenza pull prints the local path on stdout (progress on stderr); a file already in the
    # cache is not downloaded again.
    if model="$("$cadenza" pull "$real_model")"; then
      echo "== Using the real model Qwen2.5-0.5B-Instruct: $model"
    else
      echo "== The download failed (above); falling back to the random demo model." >&2
      model=""
    fi
  fi
  if [ -z "$model" ]; then
    model="$demo_model"
    mkdir -p "$(dirname "$model")"
    if [ ! -f "$model" ]; then
      "$cadenza" synth --preset demo --type q8_0 -o "$model"
    fi
    echo "== Using the synthetic demo model $model: RANDOM weights, so the text is gibberish;"
    echo "== it shows the whole path working. Run with a real GGUF file for real text (README)."
  fi
fi
"$cadenza" run -m "$model" -p "$prompt" -n 32
