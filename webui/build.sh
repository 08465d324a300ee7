#!/usr/bin/env bash
# Rebuilds webui/dist (committed) from webui/src and package-lock.json: npm ci, then the esbuild
# script. Usage: webui/build.sh [OUT_DIR]   (default webui/dist). Needs node and npm.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
npm ci --no-audit --no-fund >/dev/null
node scripts/build.mjs "${1:-$here/dist}"
