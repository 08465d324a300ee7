#!/usr/bin/env bash
# CI check: the committed webui/dist is what webui/src and package-lock.json build to.
# Copies webui/ (without node_modules and dist) to WORK_DIR, runs npm ci and the build there,
# and diffs the result against webui/dist. Usage: check_dist.sh WEBUI_DIR WORK_DIR
# Exit 77 (ctest: skipped) only when node or npm is not installed; a failed npm ci fails.
set -u
webui=$1 work=$2
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 ||
  { echo "SKIPPED: node and npm are needed to rebuild the web console"; exit 77; }
mkdir -p "$work"
rm -rf "$work/src" "$work/scripts" "$work/out"
cp -r "$webui/src" "$webui/scripts" "$webui/package.json" "$webui/package-lock.json" "$work/"
if ! cmp -s "$webui/package-lock.json" "$work/installed-lock.json" || [ ! -d "$work/node_modules/esbuild" ]; then
  if ! (cd "$work" && npm ci --no-audit --no-fund >npm.log 2>&1); then
    echo "FAILED: npm ci; $work/npm.log:"; tail -20 "$work/npm.log"; exit 1
  fi
  cp "$webui/package-lock.json" "$work/installed-lock.json"
fi
(cd "$work" && node scripts/build.mjs "$work/out") || exit 1
if ! diff -r "$webui/dist" "$work/out" >"$work/diff.txt"; then
  echo "FAILED: webui/dist does not match its sources: run webui/build.sh and commit webui/dist"
  head -c 2000 "$work/diff.txt"
  exit 1
fi
echo "webui/dist matches webui/src and package-lock.json"
