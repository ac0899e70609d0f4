#!/usr/bin/env bash
# The repaired wheel in a bare Debian 12, no path of the host visible:
#   chroot.sh BASE_TARBALL WHEEL SDIST MODEL EXPECT.json WORKDIR
# Unpacks the cached debootstrap base (chroot_base.sh) into WORKDIR/root,
# copies in the wheel, the sdist, the model, tests/wheel/smoke.py and the
# expected digests, and runs tests/wheel/in_chroot.sh there: chroot in new
# mount and PID namespaces, with a /proc of its own (only the test's
# processes), an empty environment, the host's loopback for serve.
set -euo pipefail
base=$1 wheel=$2 sdist=$3 model=$4 expect=$5 work=$6
here=$(cd "$(dirname "$0")" && pwd)
root=$work/root
rm -rf "$root" && mkdir -p "$root"
trap 'rm -rf "$root"' EXIT
zstd -q -dc "$base" | tar -C "$root" -xf -
mkdir -p "$root/test"
cp "$wheel" "$sdist" "$here/smoke.py" "$here/in_chroot.sh" "$root/test/"
cp "$expect" "$root/test/expect.json"
cp "$model" "$root/test/model.gguf"
unshare --mount --pid --fork --kill-child --mount-proc="$root/proc" \
    chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    /bin/bash /test/in_chroot.sh "$(basename "$wheel")" "$(basename "$sdist")"
