#!/usr/bin/env bash
# The first command for a new machine: installs dependencies, builds, and generates text.
#   scripts/quickstart.sh                      synthesizes a tiny demo model (RANDOM weights) and runs it
#   scripts/quickstart.sh MODEL.gguf [PROMPT]  runs your own GGUF model
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release
model="${1:-}"
prompt="${2:-Once upon a time}"
if [ -z "$model" ]; then
  model=models/demo-random.gguf
  mkdir -p models
  if [ ! -f "$model" ]; then
    echo "== No model given: synthesizing a tiny demo model with RANDOM weights ($model)."
    echo "== Its output is gibberish; it shows the whole path working. See README for real models."
    build/bin/cadenza synth --preset demo --type q8_0 -o "$model"
  fi
fi
build/bin/cadenza run -m "$model" -p "$prompt" -n 32
