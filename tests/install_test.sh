#!/usr/bin/env bash
# Installs the library into a staging directory (make install DESTDIR=...),
# checks the layout (libdetinfer.so.1.MINOR.PATCH, the static archive, the
# pkg-config and CMake packages, man pages, run paths), builds
# examples/generate.c against the installed copy with pkg-config alone (shared
# and static) and with CMake's find_package, runs them, runs the Python ctypes
# smoke test on the installed .so, and checks that make uninstall removes every
# file. Called by check_install.c.
#   install_test.sh ROOT MODEL.gguf [SANITIZE]
set -euo pipefail
root=$1 model=$2 sanitize=${3:-}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
prefix=/opt/detinfer-test

mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$root" SANITIZE="$sanitize" "$@" >/dev/null; }
mk install DESTDIR="$stage" PREFIX="$prefix"
hdr() { sed -n "s/^#define $1 \(.*\)/\1/p" "$root/include/detinfer.h"; }
abi=$(hdr DI_ABI_VERSION) real=libdetinfer.so.$(hdr DI_ABI_VERSION).$(hdr DI_VERSION_MINOR).$(hdr DI_VERSION_PATCH)
lib=$stage$prefix/lib
for f in lib/$real lib/libdetinfer.so lib/libdetinfer.so.$abi lib/libdetinfer.a include/detinfer.h \
         lib/pkgconfig/detinfer.pc lib/pkgconfig/detinfer-static.pc lib/cmake/detinfer/detinfer-config.cmake \
         lib/cmake/detinfer/detinfer-config-version.cmake share/man/man1/detinfer.1 \
         share/man/man3/libdetinfer.3 bin/detinfer; do
    test -e "$stage$prefix/$f" || { echo "install: missing $f"; exit 1; }
done
# the real file is named after the SONAME major; the links lead to it
test -f "$lib/$real" -a ! -L "$lib/$real" && test "$(readlink "$lib/libdetinfer.so.$abi")" = "$real" &&
    test "$(readlink "$lib/libdetinfer.so")" = "libdetinfer.so.$abi" || { ls -l "$lib"; exit 1; }
test "$(readelf -d "$lib/libdetinfer.so.1" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')" = libdetinfer.so.1
ar t "$lib/libdetinfer.a" | grep -q '^session\.o$' || { echo "install: libdetinfer.a lacks session.o"; exit 1; }
for f in detinfer.1 libdetinfer.3; do
    grep -q "\"libdetinfer $(hdr DI_VERSION_STRING | tr -d '"')\"" "$stage$prefix/share/man/man${f##*.}/$f" ||
        { echo "install: $f does not name the release"; exit 1; }
    command -v man >/dev/null || break
    ! man --warnings -l "$stage$prefix/share/man/man${f##*.}/$f" 2>&1 >/dev/null | grep . ||
        { echo "install: $f has roff warnings"; exit 1; }
done

# Run paths: the library has none; the command has the installed libdir, except
# on a /usr install, where the loader finds the library without one.
runpath() { readelf -d "$1" | sed -n 's/.*\(RUNPATH\|RPATH\).*\[\(.*\)\]/\2/p'; }
test -z "$(runpath "$lib/$real")" || { echo "install: the library has a run path"; exit 1; }
test "$(runpath "$stage$prefix/bin/detinfer")" = "$prefix/lib" || { echo "install: detinfer's run path is '$(runpath "$stage$prefix/bin/detinfer")'"; exit 1; }
mk install DESTDIR="$stage/usr-install" PREFIX=/usr
test -z "$(runpath "$stage/usr-install/usr/bin/detinfer")" ||
    { echo "install: a /usr install's detinfer has the run path $(runpath "$stage/usr-install/usr/bin/detinfer")"; exit 1; }
mk uninstall DESTDIR="$stage/usr-install" PREFIX=/usr
test -z "$(find "$stage/usr-install" -type f -o -type l)" || { echo "uninstall (/usr) left files"; exit 1; }

# The exported functions are exactly the header's DI_API functions: nothing
# internal (such as a target_clones resolver) leaks into the ABI.
exported=$(nm -D --defined-only "$stage$prefix/lib/libdetinfer.so.1" | awk '$2 != "A" {sub(/@.*/, "", $3); print $3}' | sort -u)
declared=$(tr '\n' ' ' < "$root/include/detinfer.h" | grep -o 'DI_API[^;(]*(' | grep -o 'di_[a-z0-9_]*[[:space:]]*($' | tr -d '( ' | sort -u)
test "$exported" = "$declared" || { echo "install: exported symbols differ from the header's DI_API functions:"; diff <(echo "$declared") <(echo "$exported"); exit 1; }
# Each function's "(since 1.N)" note in the header (no note: 1.0) is the
# version node lib/detinfer.map gives it, which its symbol carries.
versioned=$(nm -D --defined-only "$lib/libdetinfer.so.1" | awk '$2 != "A" {split($3, s, "@+"); print s[1], s[2]}' | sort -u)
noted=$(awk '/^\/\*/ {v = "DETINFER_1.0"; if (match($0, /^\/\* \(since 1\.[0-9]+\)/)) v = "DETINFER_" substr($0, RSTART + 10, RLENGTH - 11)}
             /^DI_API/ {n = split(substr($0, 1, index($0, "(") - 1), w, /[ *]+/); print w[n], v}' "$root/include/detinfer.h" | sort -u)
test "$versioned" = "$noted" || { echo "install: the header's (since 1.N) notes differ from the symbol versions:"; diff <(echo "$noted") <(echo "$versioned"); exit 1; }

# pkg-config with the staged tree standing in for /
export PKG_CONFIG_PATH="$stage$prefix/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$stage"
flags=$(pkg-config --cflags --libs detinfer)
test "$(pkg-config --modversion detinfer)" = "$(sed -n 's/^#define DI_VERSION_STRING "\(.*\)"/\1/p' "$root/include/detinfer.h")"
# the installed pkg-config and CMake packages and the file name say the release the sources say
python3 "$root/tests/tools/check_versions.py" "$root" --installed "$stage$prefix"
cc -std=c11 -Wall -Werror "$root/examples/generate.c" $flags -o "$stage/generate"

if [ -n "$sanitize" ]; then
    # an instrumented library needs the ASan runtime first in the process
    export LD_PRELOAD=$(cc -print-file-name=libasan.so) ASAN_OPTIONS=detect_leaks=0
fi
LD_LIBRARY_PATH="$lib" "$stage/generate" --model "$model" --tokens 1,2,3 --max-new 3 > "$stage/out"
grep -q '^sequence 6 tokens digest [0-9a-f]\{32\}$' "$stage/out" || { cat "$stage/out"; exit 1; }
grep -E '^(step|sequence) ' "$stage/out" > "$stage/want"

# Static: the documented command, exactly (README, docs/API.md): the program
# needs no libdetinfer.so and prints the same digests.
if [ -z "$sanitize" ]; then
    cc -std=c11 -Wall -Werror "$root/examples/generate.c" $(pkg-config --cflags --libs detinfer-static) -o "$stage/generate-static"
    ! readelf -d "$stage/generate-static" | grep -q 'NEEDED.*libdetinfer' || { echo "install: the static build needs libdetinfer.so"; exit 1; }
    "$stage/generate-static" --model "$model" --tokens 1,2,3 --max-new 3 | grep -E '^(step|sequence) ' | cmp - "$stage/want" ||
        { echo "install: the static build's digests differ"; exit 1; }
fi

# CMake: find_package(detinfer) and the detinfer::detinfer(_static) targets
if command -v cmake >/dev/null && [ -z "$sanitize" ]; then
    env -u LD_PRELOAD cmake -S "$root/tests/bindings/cmake" -B "$stage/cmake" -DCMAKE_PREFIX_PATH="$stage$prefix" \
        -DEXAMPLE="$root/examples/generate.c" >"$stage/cmake.log" 2>&1 &&
        env -u LD_PRELOAD cmake --build "$stage/cmake" >>"$stage/cmake.log" 2>&1 || { cat "$stage/cmake.log"; exit 1; }
    for exe in generate_shared generate_static; do
        LD_LIBRARY_PATH="$lib" "$stage/cmake/$exe" --model "$model" --tokens 1,2,3 --max-new 3 |
            grep -E '^(step|sequence) ' | cmp - "$stage/want" || { echo "install: CMake's $exe differs"; exit 1; }
    done
    ! readelf -d "$stage/cmake/generate_static" | grep -q 'NEEDED.*libdetinfer' || { echo "install: CMake static build needs the .so"; exit 1; }
elif [ -z "$sanitize" ]; then
    echo "install: cmake not found: the CMake package is not tested"
fi

python3 "$root/tests/test_ffi.py" "$stage$prefix/lib/libdetinfer.so.1" "$model"

# The Rust binding's example (bindings/rust: no crates, the library found by
# pkg-config) prints the same step and sequence lines as the C example.
if command -v cargo >/dev/null; then
    # cargo itself runs without the ASan preload a sanitized build sets above
    env -u LD_PRELOAD CARGO_TARGET_DIR="$stage/rust" cargo build --offline -q \
        --manifest-path "$root/bindings/rust/Cargo.toml" --example generate
    LD_LIBRARY_PATH="$lib" "$stage/rust/debug/examples/generate" --model "$model" --tokens 1,2,3 --max-new 3 |
        grep -E '^(step|sequence) ' > "$stage/rust.out"
    test "$(wc -l < "$stage/rust.out")" -eq 4 && cmp "$stage/want" "$stage/rust.out" ||
        { echo "install: the Rust example's digests differ from the C example's"; exit 1; }
else
    echo "install: cargo not found: Rust example not built"
fi

mk uninstall DESTDIR="$stage" PREFIX="$prefix"
left=$(find "$stage$prefix" -type f -o -type l)
test -z "$left" || { echo "uninstall left: $left"; exit 1; }
echo "install: OK"
