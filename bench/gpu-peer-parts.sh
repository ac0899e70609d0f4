#!/usr/bin/env bash
# Splits a file into parts small enough to travel to the device machine one call at a
# time, and puts it back together there, checked against its SHA-256.
#
#   bench/gpu-peer-parts.sh split FILE DEST_PREFIX [PART_MIB]
#       writes DEST_PREFIX-1/, DEST_PREFIX-2/, ... each holding one part
#       (NAME.part-NNN, at most PART_MIB MiB, default 52) and NAME.sha256
#       (the whole file's checksum and its part count), and prints the folders.
#   bench/gpu-peer-parts.sh join OUT_FILE DIR...
#       finds NAME.part-NNN and NAME.sha256 in the DIRs (NAME is OUT_FILE's base
#       name), concatenates the parts in order into OUT_FILE and checks the
#       checksum; exits 1 (and leaves no OUT_FILE) when a part is missing or the
#       checksum differs. An OUT_FILE already there with the right checksum is kept.
#   bench/gpu-peer-parts.sh status NAME DIR...
#       says which parts of NAME are present (exit 0 when all are).
set -euo pipefail

die() { echo "gpu-peer-parts: $*" >&2; exit 1; }

# The checksum file of NAME among the DIRs, and its fields.
find_sum() {
    local name=$1; shift
    local d
    for d in "$@"; do
        [ -f "$d/$name.sha256" ] && { echo "$d/$name.sha256"; return 0; }
    done
    return 1
}

find_part() {
    local part=$1; shift
    local d
    for d in "$@"; do
        [ -f "$d/$part" ] && { echo "$d/$part"; return 0; }
    done
    return 1
}

cmd=${1:-}
case $cmd in
split)
    [ $# -ge 3 ] || die "usage: split FILE DEST_PREFIX [PART_MIB]"
    file=$2 prefix=$3 mib=${4:-52}
    [ -f "$file" ] || die "no file $file"
    [[ $mib =~ ^[1-9][0-9]*$ ]] || die "PART_MIB must be a positive integer"
    name=$(basename "$file")
    size=$(stat -L -c %s "$file")
    bytes=$((mib * 1024 * 1024))
    n=$(((size + bytes - 1) / bytes))
    [ "$n" -ge 1 ] || n=1
    [ "$n" -le 999 ] || die "$n parts: too many"
    sum=$(sha256sum "$file" | cut -d' ' -f1)
    for i in $(seq 1 "$n"); do
        dir=$prefix-$i
        rm -rf "$dir"; mkdir -p "$dir"
        part=$(printf '%s.part-%03d' "$name" "$i")
        dd if="$file" of="$dir/$part" bs=1M skip=$(((i - 1) * mib)) count="$mib" status=none
        printf '%s  %s\nparts %d\nsize %d\n' "$sum" "$name" "$n" "$size" > "$dir/$name.sha256"
        echo "$dir"
    done
    ;;
join)
    [ $# -ge 3 ] || die "usage: join OUT_FILE DIR..."
    out=$2; shift 2
    name=$(basename "$out")
    sumfile=$(find_sum "$name" "$@") || die "no $name.sha256 in $*"
    sum=$(head -1 "$sumfile" | cut -d' ' -f1)
    n=$(sed -n 's/^parts //p' "$sumfile")
    if [ -f "$out" ] && [ "$(sha256sum "$out" | cut -d' ' -f1)" = "$sum" ]; then
        echo "gpu-peer-parts: $out is already there, checksum ok"
        exit 0
    fi
    parts=()
    for i in $(seq 1 "$n"); do
        part=$(printf '%s.part-%03d' "$name" "$i")
        p=$(find_part "$part" "$@") || die "part $i of $n of $name is missing ($part)"
        parts+=("$p")
    done
    mkdir -p "$(dirname "$out")"
    cat "${parts[@]}" > "$out.tmp"
    got=$(sha256sum "$out.tmp" | cut -d' ' -f1)
    if [ "$got" != "$sum" ]; then
        rm -f "$out.tmp"
        die "$name: checksum $got, expected $sum"
    fi
    mv "$out.tmp" "$out"
    echo "gpu-peer-parts: $out: $n parts joined, checksum ok"
    ;;
status)
    [ $# -ge 3 ] || die "usage: status NAME DIR..."
    name=$2; shift 2
    sumfile=$(find_sum "$name" "$@") || { echo "gpu-peer-parts: $name: no parts here"; exit 1; }
    n=$(sed -n 's/^parts //p' "$sumfile")
    missing=()
    for i in $(seq 1 "$n"); do
        find_part "$(printf '%s.part-%03d' "$name" "$i")" "$@" > /dev/null || missing+=("$i")
    done
    if [ ${#missing[@]} = 0 ]; then
        echo "gpu-peer-parts: $name: all $n parts present"
    else
        echo "gpu-peer-parts: $name: parts missing: ${missing[*]} (of $n)"
        exit 1
    fi
    ;;
*)
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
    [ "$cmd" = -h ] || [ "$cmd" = --help ] || exit 2
    ;;
esac
