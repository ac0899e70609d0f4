#!/bin/bash
# Inside the bare Debian 12 of chroot.sh (never run on the host):
#   in_chroot.sh WHEEL SDIST       (both in /test, with smoke.py, expect.json, model.gguf)
set -euo pipefail
cd /test
fail() { echo "in_chroot: FAILED: $*"; exit 1; }

# The machine is bare: no compiler, no -dev header, no libdetinfer, none of
# the libraries the wheel carries (but libxxhash0 and libpcre2-8-0: apt and
# grep need them; the ldd check below shows the wheel loads its own copies).
for c in cc gcc make; do ! command -v "$c" >/dev/null || fail "$c is installed"; done
[ ! -e /usr/include/microhttpd.h ] && [ ! -e /usr/include/pcre2.h ] || fail "-dev headers are installed"
! ldconfig -p | grep -E 'libdetinfer|libmicrohttpd|libjansson|libcurl' || fail "a library the wheel carries is installed"
[ -z "$(find / -xdev -name 'libdetinfer*' -not -path '/test/*' 2>/dev/null)" ] || fail "libdetinfer is on the system"
echo "in_chroot: Debian $(cat /etc/debian_version), $(python3 --version), no compiler, no -dev package, no libdetinfer"

# From the sdist, pip says which build prerequisites are missing, before compiling.
python3 -m venv --system-site-packages /opt/build
if /opt/build/bin/pip install --no-index --no-build-isolation "/test/$2" > /tmp/sdist.log 2>&1; then
    fail "pip install of the sdist succeeded on a machine without a compiler"
fi
for pkg in build-essential make libpcre2-dev libxxhash-dev libmicrohttpd-dev libjansson-dev libcurl4-openssl-dev; do
    grep -q "^ *$pkg " /tmp/sdist.log || { cat /tmp/sdist.log; fail "the sdist's error does not name $pkg"; }
done
grep -q "apt-get install build-essential make libpcre2-dev" /tmp/sdist.log || { cat /tmp/sdist.log; fail "no apt-get line"; }
echo "in_chroot: pip install of the sdist names every missing package:"
grep -A9 "cannot be built here" /tmp/sdist.log | sed 's/^/    /'

# The repaired wheel needs nothing from the system.
python3 -m venv /opt/venv
/opt/venv/bin/pip install -q --no-index "/test/$1"
# every library the command and the library load is the wheel's own, but
# those manylinux lets a wheel take from the system (glibc's, libz)
for f in /opt/venv/lib/python3*/site-packages/detinfer/_native/*; do
    outside=$(ldd "$f" | grep '=>' | grep -v -e '/opt/venv/' \
              -e '\blib\(c\|m\|pthread\|dl\|rt\|resolv\|z\|gcc_s\)\.so' || true)
    [ -z "$outside" ] || fail "$f loads from the system: $outside"
done
echo "in_chroot: the wheel's library and command load only the wheel's libraries (and glibc's, libz)"
/opt/venv/bin/python /test/smoke.py /test/model.gguf /test/expect.json
echo "in_chroot: PASS"
