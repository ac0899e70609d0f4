#!/usr/bin/env bash
# The bare Debian 12 of the chroot test, made once and cached:
#   chroot_base.sh TARBALL
# debootstrap's minbase variant of bookworm plus python3, python3-venv and
# python3-pip (and what they depend on; no -dev package, no compiler), packed
# into TARBALL (zstd). Later runs find the tarball and do nothing (about 50 s
# and 130 MiB the first time). DEBIAN_MIRROR picks the mirror.
set -euo pipefail
tarball=$1
[ -f "$tarball" ] && exit 0
command -v debootstrap >/dev/null || { echo "chroot_base: debootstrap is missing (make deps installs it)" >&2; exit 1; }
mkdir -p "$(dirname "$tarball")"
work=$(mktemp -d "$(dirname "$tarball")/debootstrap.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "chroot_base: debootstrap bookworm (minbase, python3, python3-venv, python3-pip) into $work"
debootstrap --variant=minbase --include=python3,python3-venv,python3-pip bookworm "$work/root" \
    "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" > "$work/log" 2>&1 || { tail -20 "$work/log"; exit 1; }
tar -C "$work/root" -cf - . | zstd -q -T0 -o "$work/base.tar.zst"
mv "$work/base.tar.zst" "$tarball"
echo "chroot_base: $tarball ($(du -h "$tarball" | cut -f1))"
