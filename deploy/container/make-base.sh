#!/usr/bin/env bash
# Makes the base image the Containerfiles build FROM, out of nothing but a Debian package mirror:
# debootstrap a minimal bookworm root file system and import it as a podman (or docker) image.
# For clusters that reach a Debian mirror and no container registry.
#
#   sudo deploy/container/make-base.sh [IMAGE] [MIRROR]
#     IMAGE   default localhost/cadenza-base:bookworm
#     MIRROR  default the first URI of /etc/apt/sources.list.d/debian.sources, else deb.debian.org
#   ENGINE=docker to use docker instead of podman.
#
# Needs root (debootstrap chroots), debootstrap and podman or docker. About 2 minutes and 70 MB.
set -euo pipefail
image="${1:-localhost/cadenza-base:bookworm}"
mirror="${2:-}"
engine="${ENGINE:-podman}"
if [ -z "$mirror" ]; then
  mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n1)
  mirror="${mirror:-http://deb.debian.org/debian}"
fi
command -v debootstrap >/dev/null || { echo "make-base: debootstrap is not installed (apt-get install debootstrap)" >&2; exit 1; }
command -v "$engine" >/dev/null || { echo "make-base: $engine is not installed" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "make-base: run as root (debootstrap needs it)" >&2; exit 1; }

root=$(mktemp -d /var/tmp/cadenza-rootfs.XXXXXX)
trap 'rm -rf "$root"' EXIT
echo "make-base: debootstrap bookworm from $mirror" >&2
debootstrap --variant=minbase --include=ca-certificates bookworm "$root" "$mirror" >&2
# The image's own apt points at the same mirror; no caches, lists, docs or man pages inside.
echo "deb $mirror bookworm main" > "$root/etc/apt/sources.list"
cat > "$root/etc/dpkg/dpkg.cfg.d/01-slim" <<'CFG'
path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
CFG
cat > "$root/etc/apt/apt.conf.d/01-slim" <<'CFG'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
CFG
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* \
  "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/* "$root"/var/log/*
tar -C "$root" -c . | "$engine" import --change 'CMD ["/bin/bash"]' - "$image" >&2
echo "$image"
