#!/usr/bin/env bash
# Installs what building and testing libdetinfer needs on a fresh Debian 12
# machine: compilers and libraries from Debian's packages, test tooling from
# PyPI. Idempotent: packages already present are not reinstalled.
set -euo pipefail

# debootstrap, zstd: make check-wheel's bare Debian 12; podman, runc, systemd: make check-deploy
debs=(build-essential pkg-config check libsubunit-dev libxxhash-dev xxhash libpcre2-dev abigail-tools clang libclang-rt-14-dev
      cmake golang-go libmicrohttpd-dev libjansson-dev libcurl4-openssl-dev curl python3-venv iproute2
      debootstrap zstd podman runc systemd)
missing=()
for p in "${debs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "setup: installing ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

py=${PYTHON:-python3}
if ! "$py" -c 'import numpy, gguf, xxhash, openai, pytest' 2>/dev/null; then
    echo "setup: installing Python test tooling (tests/requirements.txt)"
    "$py" -m pip install -q -r "$(dirname "$0")/../../tests/requirements.txt" ||
        "$py" -m pip install -q --break-system-packages -r "$(dirname "$0")/../../tests/requirements.txt"
fi
echo "setup: OK"
