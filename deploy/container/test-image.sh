#!/usr/bin/env bash
# Checks a built image: `cadenza --help` starts in it, it serves a synthesized model as its
# non-root user and answers a chat completion, and its HEALTHCHECK command passes; prints the
# image's size.
#   sudo deploy/container/test-image.sh [IMAGE]        (default localhost/cadenza:cpu)
#
# Runs the image with `podman run` (ENGINE=docker: docker). Where the container runtime cannot
# start containers (some sandboxes: crun refuses hybrid cgroup setups), it says so and runs the
# same checks in the image's own root file system instead (`podman image mount` + chroot as uid
# 1000, host network): same binary, same libraries, same user; only the runtime's isolation and
# its handling of HEALTHCHECK are not exercised, so the HEALTHCHECK's command is run directly.
set -euo pipefail
image="${1:-localhost/cadenza:cpu}"
engine="${ENGINE:-podman}"
port="${PORT:-18080}"
work=$(mktemp -d /var/tmp/cadenza-image-test.XXXXXX)
chmod 755 "$work"
cleanup() {
  [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null || true
  [ -n "${mounted:-}" ] && { umount "$root$models" 2>/dev/null || true; podman image unmount "$image" >/dev/null 2>&1 || true; }
  rm -rf "$work"
}
trap cleanup EXIT

size=$("$engine" image inspect "$image" --format '{{.Size}}')
echo "image $image: $((size / 1000000)) MB ($size bytes)"

mode=run
models=/models
if ! "$engine" run --rm "$image" --version >/dev/null 2>"$work/run.err"; then
  echo "note: '$engine run' cannot start containers here: $(tail -1 "$work/run.err")"
  [ "$engine" = podman ] || exit 1
  mode=chroot
  root=$(podman image mount "$image")
  mounted=1
  # The image's root is read-only and /models is a VOLUME the runtime creates, so the model
  # directory is bound onto /mnt, which the base image has (empty).
  models=/mnt
fi

# in_image CMD...: run CMD in the image as its user (uid 1000), with $models = $work.
# In a subshell (`in_image ... &`, a pipe) it execs, so $! is the process itself and a signal
# to it reaches cadenza rather than an intermediate shell.
in_image() {
  local exec_=
  [ "$BASH_SUBSHELL" -gt 0 ] && exec_=exec
  if [ "$mode" = run ]; then
    $exec_ "$engine" run --rm --network host -v "$work:/models" --entrypoint "$1" "$image" "${@:2}"
  else
    $exec_ chroot --userspec=1000:1000 "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/var/lib/cadenza "$@"
  fi
}
if [ "$mode" = chroot ]; then
  mount --bind "$work" "$root$models"
fi

in_image /usr/bin/cadenza --help | head -3
in_image id
chmod 777 "$work"
in_image /usr/bin/cadenza synth --preset qwen2.5-0.5b --type q8_0 --layers 2 --seed 1 -o "$models/model.gguf" 2>&1 | tail -1

in_image /usr/bin/cadenza serve -m "$models/model.gguf" --host 127.0.0.1 --port "$port" -t 2 \
  --served-model-name model --max-model-len 512 >"$work/serve.out" 2>"$work/serve.err" &
pid=$!
for _ in $(seq 1 300); do
  curl -sf "http://127.0.0.1:$port/ready" >/dev/null 2>&1 && break
  kill -0 "$pid" 2>/dev/null || { echo "serve exited"; cat "$work/serve.err"; exit 1; }
  sleep 0.2
done
# The HEALTHCHECK's own command, inside the image (its curl, its libraries).
hc=$("$engine" image inspect "$image" --format '{{json .Config.Healthcheck.Test}}' 2>/dev/null || true)
echo "HEALTHCHECK: $hc"
in_image /bin/sh -c "curl -fsS http://127.0.0.1:$port/health >/dev/null" && echo "health check: pass"
body='{"model":"model","messages":[{"role":"user","content":"Hello"}],"max_tokens":8,"temperature":0}'
reply=$(in_image /usr/bin/curl -fsS "http://127.0.0.1:$port/v1/chat/completions" -H 'Content-Type: application/json' -d "$body")
echo "completion: $reply" | cut -c1-300
echo "$reply" | grep -q '"finish_reason"' || { echo "no completion"; exit 1; }
kill -TERM "$pid"
if wait "$pid"; then echo "serve drained and exited 0"; else echo "serve exited $? after SIGTERM"; exit 1; fi
pid=
echo "image OK ($mode mode)"
