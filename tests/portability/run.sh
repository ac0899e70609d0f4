#!/usr/bin/env bash
# make check-portability: the library and tests/portability/digests.c built
# several ways (compiler, optimisation, C library, architecture), each run on
# the same cases (the same token ids for every build), each build's digests
# compared with the reference build's (gcc -O3, glibc, x86-64). Prints a table
# build x model x result and fails on any difference or failed build.
#
#   run.sh MODELS_DIR REAL_MODEL OUT_DIR     (REAL_MODEL may be empty)
#   environment: DI_CFLAGS and DI_LIB_SRC (the Makefile's), DI_REF_STATIC (the Makefile's
#   libdetinfer.a: the reference build links it instead of compiling again),
#   PORT_BUILDS (names, to run a subset)
#
# A build whose compiler or runner is not installed is reported "absent"
# and fails the run: tests/portability/setup.sh installs them all.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
models=$1 real=$2 out=$3
mkdir -p "$out"
cd "$root"

# ---- the cases (those of the golden digests): tests/portability/cases.sh
cases=$out/cases.txt
tests/portability/cases.sh "$models" "$real" > "$cases" || exit 1

# ---- the builds: name, compiler, flags, extra sources, libraries, runner, environment
# (the Makefile passes its own; the defaults are for a run by hand)
base_flags="${DI_CFLAGS:--std=c11 -D_GNU_SOURCE -ffp-contract=off -fno-fast-math -DDI_BUILDING_LIBRARY -Iinclude -I.}"
read -r -a lib_srcs <<< "${DI_LIB_SRC:-$(find kernels lib -name '*.c' | sort | tr '\n' ' ')}"
musl_inc=$out/musl-include
mkdir -p "$musl_inc"
ln -sf /usr/include/pcre2.h "$musl_inc/pcre2.h"
ln -sf /usr/include/xxhash.h "$musl_inc/xxhash.h"
qemu="qemu-aarch64 -L /usr/aarch64-linux-gnu"
builds=(
    "ref|gcc|-O3||-lpcre2-8 -lpthread -lm -ldl||"
    "gcc-O0-scalar|gcc|-O0||-lpcre2-8 -lpthread -lm -ldl||DETINFER_CPU_PATH=scalar"
    "clang-O3|clang|-O3||-lpcre2-8 -lpthread -lm -ldl||"
    "clang-O0-scalar|clang|-O0||-lpcre2-8 -lpthread -lm -ldl||DETINFER_CPU_PATH=scalar"
    "musl-O3|musl-gcc|-O3 -I$musl_inc|tests/portability/pcre2_stub.c|-static -lpthread -lm||"
    "aarch64-O3|aarch64-linux-gnu-gcc|-O3||-lpcre2-8 -lpthread -lm -ldl|$qemu|DI_DIGESTS_THREADS=1"
)
declare -A note
# Debian 12's qemu-user hangs in any pthread_create of an aarch64 glibc
# program (a trivial one too), so the aarch64 build runs one thread.
note[aarch64-O3]="1 thread (qemu-user hangs in pthread_create)"
note[musl-O3]="no PCRE2 for musl: token ids given directly; SentencePiece tokenization only"

build_one() { # name cc flags extra libs
    local name=$1 cc=$2 flags=$3 extra=$4 libs=$5 dir=$out/$1
    command -v "$cc" >/dev/null || { echo "absent: $cc" > "$dir.log"; return 1; }
    mkdir -p "$dir"
    if [ "$name" = ref ] && [ -n "${DI_REF_STATIC:-}" ]; then
        $cc $base_flags $flags tests/portability/digests.c "$DI_REF_STATIC" -o "$dir/digests" $libs > "$dir.log" 2>&1
        return
    fi
    local srcs=("${lib_srcs[@]}" tests/portability/digests.c $extra) objs=() s
    for s in "${srcs[@]}"; do objs+=("$dir/$(basename "${s%.c}").o"); done
    printf '%s\n' "${srcs[@]}" | xargs -P 2 -I{} sh -c \
        "$cc $base_flags $flags -c {} -o $dir/\$(basename {} .c).o" > "$dir.log" 2>&1 || return 1
    $cc "${objs[@]}" -o "$dir/digests" $libs >> "$dir.log" 2>&1
}

declare -A status
names=()
for b in "${builds[@]}"; do
    IFS='|' read -r name cc flags extra libs runner env <<< "$b"
    if [ -n "${PORT_BUILDS:-}" ] && [ "$name" != ref ] && ! [[ " $PORT_BUILDS " == *" $name "* ]]; then
        continue
    fi
    names+=("$name")
    start=$SECONDS
    if [ "$name" = aarch64-O3 ] || [ "$name" = aarch64-O0 ]; then
        command -v qemu-aarch64 >/dev/null || { status[$name]=absent; echo "== $name: qemu-aarch64 absent"; continue; }
    fi
    if ! build_one "$name" "$cc" "$flags" "$extra" "$libs"; then
        status[$name]=build-failed
        echo "== $name: build failed ($out/$name.log):"; tail -5 "$out/$name.log"
        continue
    fi
    env $env $runner "$out/$name/digests" "$cases" > "$out/$name.txt" 2> "$out/$name.err"
    status[$name]=ran
    echo "== $name: built and ran in $((SECONDS - start)) s${note[$name]:+ (${note[$name]})}"
done

# ---- the table
[ "${status[ref]:-}" = ran ] || { echo "check-portability: the reference build failed"; exit 1; }
fail=0
cases_names=$(cut -f1 "$cases")
printf '\n%-16s' "build"
for c in $cases_names; do printf ' %-15s' "$c"; done
printf '\n'
for name in "${names[@]}"; do
    printf '%-16s' "$name"
    for c in $cases_names; do
        if [ "${status[$name]}" != ran ]; then cell=${status[$name]}; fail=1
        else
            want=$(grep "^$c " "$out/ref.txt"); got=$(grep "^$c " "$out/$name.txt")
            n=$(printf '%s\n' "$want" | grep -c .)
            if grep -q "^$c error" "$out/$name.txt"; then
                if [ "$c" = real-tokens ] && [ -n "${note[$name]:-}" ] && grep -q "^$c tokens" "$out/$name.txt"; then
                    cell=same; else cell=error; fail=1; fi
            elif [ "$want" = "$got" ] && [ "$n" -gt 0 ]; then
                cell="same($n)"
            else
                cell="DIFF"; fail=1
            fi
        fi
        printf ' %-15s' "$cell"
    done
    printf '\n'
done
printf '\nsame(N): N digests (or the token list) equal to the reference build (gcc -O3, glibc, x86-64)\n'
for name in "${names[@]}"; do
    [ -n "${note[$name]:-}" ] && printf '%s: %s\n' "$name" "${note[$name]}"
done
exit $fail
