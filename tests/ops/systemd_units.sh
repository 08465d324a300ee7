#!/usr/bin/env bash
# ctest ops_systemd_units: deploy/systemd's units pass `systemd-analyze verify` (syntax, known
# keys, executables) and `systemd-analyze security --offline` at an exposure of at most 3.0 (of
# 10; "OK"), and the serve unit's command line, expanded from serve.env.example as systemd would
# expand it (model and port swapped for a synthesized model and a free port), starts a server
# that answers /health and drains to exit 0 on SIGTERM (the unit's stop).
#   systemd_units.sh CADENZA SOURCE_DIR WORK_DIR
# Exit 77 (skipped: a failure for scripts/test.sh) only when systemd-analyze is missing.
set -euo pipefail
cadenza=$(realpath "$1") src=$2 work=$3
source "$src/tests/e2e_lib.sh"
command -v systemd-analyze >/dev/null || { echo "SKIPPED: systemd-analyze is needed (package systemd)"; exit 77; }
rm -rf "$work" && mkdir -p "$work/units"
for f in "$src"/deploy/systemd/*.service; do
  sed "s|/usr/bin/cadenza|$cadenza|g" "$f" > "$work/units/$(basename "$f")"
done
cp "$work/units/cadenza-serve@.service" "$work/units/cadenza-serve@test.service"
units=("$work/units/cadenza-gateway.service" "$work/units/cadenza-serve@test.service")
systemd-analyze verify --man=no "${units[@]}"
for u in "${units[@]}"; do
  systemd-analyze security --offline=yes --threshold=30 "$u" | tail -1
done

# The serve command line from the example environment file.
set -a; source "$src/deploy/systemd/serve.env.example"; set +a
"$cadenza" synth --preset demo --type f32 --layers 2 --ctx 512 --seed 3 -o "$work/model.gguf" >/dev/null
MODEL=$work/model.gguf HOST=127.0.0.1 PORT=0
exec_start=$(sed -n 's/^ExecStart=//p' "$work/units/cadenza-serve@.service")
# systemd: ${VAR} is one word, $VAR splits on whitespace.
read -r -a cmd <<<"$(eval echo "$exec_start" | sed 's/--kv-cache-memory 8GiB/--kv-cache-memory 64MiB/; s/--threads 16/--threads 2/')"
echo "serve: ${cmd[*]}"
"${cmd[@]}" >"$work/serve.out" 2>"$work/serve.err" &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
wait_for_serve "$work/serve.out" "$work/serve.err" "$pid"
wait_for_ready
curl -fsS "http://127.0.0.1:$port/health" >/dev/null
kill -TERM "$pid"
rc=0; wait "$pid" || rc=$?
trap - EXIT
[ "$rc" -eq 0 ] || { echo "serve exited $rc after SIGTERM"; tail -20 "$work/serve.err"; exit 1; }
echo "deploy/systemd: units verified; the serve unit's command line served and drained"
