#!/usr/bin/env bash
# Installs the library into a staging directory (make install DESTDIR=...),
# builds examples/generate.c against the installed copy with pkg-config alone,
# runs it, runs the Python ctypes smoke test on the installed .so, and checks
# that make uninstall removes every file. Called by check_install.c.
#   install_test.sh ROOT MODEL.gguf [SANITIZE]
set -euo pipefail
root=$1 model=$2 sanitize=${3:-}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
prefix=/opt/detinfer-test

env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$root" install DESTDIR="$stage" PREFIX="$prefix" SANITIZE="$sanitize" >/dev/null
for f in lib/libdetinfer.so lib/libdetinfer.so.1 include/detinfer.h lib/pkgconfig/detinfer.pc; do
    test -e "$stage$prefix/$f" || { echo "install: missing $f"; exit 1; }
done
test "$(readelf -d "$stage$prefix/lib/libdetinfer.so.1" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')" = libdetinfer.so.1

# The exported functions are exactly the header's DI_API functions: nothing
# internal (such as a target_clones resolver) leaks into the ABI.
exported=$(nm -D --defined-only "$stage$prefix/lib/libdetinfer.so.1" | awk '$2 != "A" {sub(/@.*/, "", $3); print $3}' | sort -u)
declared=$(tr '\n' ' ' < "$root/include/detinfer.h" | grep -o 'DI_API[^;(]*(' | grep -o 'di_[a-z0-9_]*[[:space:]]*($' | tr -d '( ' | sort -u)
test "$exported" = "$declared" || { echo "install: exported symbols differ from the header's DI_API functions:"; diff <(echo "$declared") <(echo "$exported"); exit 1; }

# pkg-config with the staged tree standing in for /
export PKG_CONFIG_PATH="$stage$prefix/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$stage"
flags=$(pkg-config --cflags --libs detinfer)
test "$(pkg-config --modversion detinfer)" = "$(sed -n 's/^#define DI_VERSION_STRING "\(.*\)"/\1/p' "$root/include/detinfer.h")"
cc -std=c11 -Wall -Werror "$root/examples/generate.c" $flags -o "$stage/generate"

if [ -n "$sanitize" ]; then
    # an instrumented library needs the ASan runtime first in the process
    export LD_PRELOAD=$(cc -print-file-name=libasan.so) ASAN_OPTIONS=detect_leaks=0
fi
LD_LIBRARY_PATH="$stage$prefix/lib" "$stage/generate" --model "$model" --tokens 1,2,3 --max-new 3 > "$stage/out"
grep -q '^sequence 6 tokens digest [0-9a-f]\{32\}$' "$stage/out" || { cat "$stage/out"; exit 1; }
python3 "$root/tests/test_ffi.py" "$stage$prefix/lib/libdetinfer.so.1" "$model"

# The Rust example (no crates: the C API declared by hand, found by pkg-config)
# prints the same step lines, digests included, as the C example.
if command -v cargo >/dev/null; then
    # cargo itself runs without the ASan preload a sanitized build sets above
    env -u LD_PRELOAD CARGO_TARGET_DIR="$stage/rust" cargo build --offline -q --manifest-path "$root/examples/rust/Cargo.toml"
    "$stage/rust/debug/detinfer-example" "$model" tokens:1,2,3 3 | grep '^step' > "$stage/rust.out"
    test "$(wc -l < "$stage/rust.out")" -eq 3 && grep '^step' "$stage/out" | cmp - "$stage/rust.out" ||
        { echo "install: the Rust example's digests differ from the C example's"; exit 1; }
else
    echo "install: cargo not found: Rust example not built"
fi

env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$root" uninstall DESTDIR="$stage" PREFIX="$prefix" SANITIZE="$sanitize" >/dev/null
left=$(find "$stage$prefix" -type f -o -type l)
test -z "$left" || { echo "uninstall left: $left"; exit 1; }
echo "install: OK"
