#!/usr/bin/env bash
# Puts what bench/gpu-peer.sh needs on the device machine into .gpu-peer/ in this
# checkout (ignored through .git/info/exclude, so that the device tool's `carry` can
# name it), and prints the calls to make: which folders each call carries, and its
# command. Every call carries at most 64 MiB together with the working tree, so the
# files are grouped by that limit; what does not fit in one call travels in parts
# over consecutive calls to the same warm machine (bench/gpu-peer-parts.sh).
#
#   bench/gpu-peer-stage.sh [--gemma] [--budget-mib N]
#
#   .gpu-peer/run/      llama-bench-sm90.tar.zst (make gpu-peer) and the gguf wheel
#   .gpu-peer/gemma-K/  with --gemma: part K of Gemma 3 270M Q4_K_M
#                       (~/.cache/detinfer/gemma-3-270m-q4_k_m.gguf, 241 MiB) and its
#                       checksum
#   --budget-mib N      MiB a call may carry besides the working tree (default: 64,
#                       less the working tree's size, less 4)
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${CACHE:-$HOME/.cache/detinfer}
PEER=$CACHE/gpu-peer/llama-bench-sm90.tar.zst
GEMMA=$CACHE/gemma-3-270m-q4_k_m.gguf
gemma=0
budget=
while [ $# -gt 0 ]; do
    case $1 in
        --gemma) gemma=1; shift ;;
        --budget-mib) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "gpu-peer-stage: --budget-mib N" >&2; exit 2; }
            budget=$2; shift 2 ;;
        -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "gpu-peer-stage: unknown argument '$1'" >&2; exit 2 ;;
    esac
done

exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qx '/.gpu-peer/' "$exclude" 2>/dev/null || echo '/.gpu-peer/' >> "$exclude"

# what travels anyway: tracked files and untracked ones that git does not ignore
tree=$( (git ls-files -z; git ls-files -z --others --exclude-standard) |
    xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
tree_mib=$(((tree + 1048575) / 1048576))
[ -n "$budget" ] || budget=$((64 - tree_mib - 4))
[ "$budget" -ge 8 ] || { echo "gpu-peer-stage: the working tree (${tree_mib} MiB) leaves too little room" >&2; exit 1; }
echo "working tree: ${tree_mib} MiB; each call may carry ${budget} MiB more"

[ -f "$PEER" ] || { echo "gpu-peer-stage: no $PEER: run make gpu-peer first" >&2; exit 1; }
wheel=$(find "$CACHE/gpu-peer/wheels" -name 'gguf-*.whl' 2>/dev/null | head -1)
[ -n "$wheel" ] || { echo "gpu-peer-stage: no gguf wheel in $CACHE/gpu-peer/wheels: run make gpu-peer" >&2; exit 1; }

rm -rf .gpu-peer
mkdir -p .gpu-peer/run
# hard links where the cache shares the file system, else copies (links do not travel)
ln "$PEER" .gpu-peer/run/ 2>/dev/null || cp "$PEER" .gpu-peer/run/
ln "$wheel" .gpu-peer/run/ 2>/dev/null || cp "$wheel" .gpu-peer/run/
run_mib=$(( ($(du -cb .gpu-peer/run | tail -1 | cut -f1) + 1048575) / 1048576 ))
[ "$run_mib" -le "$budget" ] || { echo "gpu-peer-stage: .gpu-peer/run is ${run_mib} MiB, over ${budget}" >&2; exit 1; }

parts=()
if [ $gemma = 1 ]; then
    [ -f "$GEMMA" ] || { echo "gpu-peer-stage: no $GEMMA (tools/scripts/fetch-model.sh)" >&2; exit 1; }
    mapfile -t parts < <(bench/gpu-peer-parts.sh split "$GEMMA" .gpu-peer/gemma "$budget")
fi

# the last part rides with the run's call when both fit
run_carry="\".gpu-peer/run\""
if [ ${#parts[@]} -gt 0 ]; then
    last=${parts[${#parts[@]} - 1]}
    last_mib=$(( ($(du -cb "$last" | tail -1 | cut -f1) + 1048575) / 1048576 ))
    if [ $((last_mib + run_mib)) -le "$budget" ]; then
        run_carry="\"$last\", $run_carry"
        unset 'parts[${#parts[@]}-1]'
    fi
fi

echo
echo "The calls, one after another to the same warm machine (it waits 30 s after each):"
n=0
run_cmd='bench/gpu-peer.sh'
for p in "${parts[@]}"; do
    n=$((n + 1))
    echo "  call $n: carry [\"${p}\"]"
    echo "          command: bench/gpu-peer-parts.sh status gemma-3-270m-q4_k_m.gguf .gpu-peer/gemma-*"
    echo "          timeout_s: 60"
done
n=$((n + 1))
echo "  call $n: carry [$run_carry]"
echo "          command: $run_cmd"
echo "          timeout_s: 540"
echo
du -sh .gpu-peer/* | sed 's/^/  /'
if [ ${#parts[@]} -gt 0 ]; then
    echo "If the machine went back between calls, the parts carried before are gone: the run"
    echo "then says so and measures the generated models only."
fi
