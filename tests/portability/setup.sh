#!/usr/bin/env bash
# Installs what `make check-portability` needs beyond `make deps` on Debian 12:
# musl (musl-tools), the aarch64 cross compiler, qemu-user, and the arm64
# builds of PCRE2 and xxHash from Debian multiarch. Idempotent.
set -euo pipefail

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    echo "portability setup: adding the arm64 architecture (multiarch)"
    $sudo dpkg --add-architecture arm64
    $sudo apt-get update -qq
fi
debs=(clang musl-tools gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
      libpcre2-dev:arm64 libxxhash-dev:arm64)
missing=()
for p in "${debs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "portability setup: installing ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
echo "portability setup: OK"
