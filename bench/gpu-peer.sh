#!/usr/bin/env bash
# bench/gpu-peer.sh: libdetinfer on CUDA against llama.cpp's CUDA llama-bench on the same
# GPU, same GGUF files, in one device call (issue 38, part 1; docs/CUDA.md, "Measuring
# against llama.cpp on a GPU"). Sized for one H100/H200 and 16 cores: all steps share a
# budget (BUDGET, 450 s: under 8 minutes), each step also has its own time limit, and a
# failed step is reported and the rest go on.
#
#   bench/gpu-peer.sh [--out DIR] [--budget S] [--models 3b,8b,gemma] [--profiles LIST]
#       [--reps N] [--batch-tokens N] [--stage DIR] [--work DIR] [--no-build] [--dry-run]
#
#   --out DIR        where the results go (default $OUT on the device machine, else
#                    /tmp/gpu-peer/results): gpu-peer.md (the table), gpu-peer.json,
#                    gpu-peer.log (this script's output) and gpu-peer-logs.tar.gz (every
#                    step's and every run's log): four files, within what $OUT brings back
#   --budget S       seconds for the whole run (default 450)
#   --models LIST    in order of importance (default 3b,8b,gemma):
#                      3b     bench/make_big_model.py's 1.75 GiB 3B-shape Q4_K_M
#                      8b     the same generator at Llama 3 8B's dimensions (n_embd 4096,
#                             32 layers, 32 heads, 8 KV heads, n_ff 14336; its vocabulary
#                             stays 32000, so about 4.0 GiB, not 4.6)
#                      gemma  Gemma 3 270M Q4_K_M, joined from the parts carried into
#                             --stage (bench/gpu-peer-stage.sh), else taken from
#                             ~/.cache/detinfer; skipped when absent
#   --profiles LIST  detinfer's profiles to time (default integer,portable; device too)
#   --reps N         alternating rounds (default 3; fewer run when the budget is spent)
#   --batch-tokens N steps of the 16-sequence batched decode (default 16)
#   --stage DIR      the carried folder (default .gpu-peer): llama-bench-sm90.tar.zst,
#                    the gguf wheel, Gemma's parts, in any subfolder
#   --work DIR       unpacked peer, wheels and generated models (default /tmp/gpu-peer;
#                    models already there are reused)
#   --no-build       use build/ as it is (else: make all, make cuda CUDA_ARCHS=sm_90)
#   --dry-run        check the arguments and the carried files, print the plan and the
#                    commands, run nothing on a GPU and generate no model
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
root=$PWD

out=${OUT:-/tmp/gpu-peer/results}
budget=${BUDGET:-450}
models=3b,8b,gemma
profiles=integer,portable
reps=3
batch_tokens=16
stage=$root/.gpu-peer
work=/tmp/gpu-peer
build=1
dry=0
jobs=${JOBS:-$(nproc 2>/dev/null || echo 4)}

usage() { sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'; }
need_arg() { if [ $# -lt 2 ] || [ -z "$2" ]; then echo "gpu-peer: $1 needs a value" >&2; exit 2; fi; }
posint() { [[ $2 =~ ^[1-9][0-9]*$ ]] || { echo "gpu-peer: $1 must be a positive integer, not '$2'" >&2; exit 2; }; }
while [ $# -gt 0 ]; do
    case $1 in
        --out) need_arg "$@"; out=$2; shift 2 ;;
        --budget) need_arg "$@"; posint "$1" "$2"; budget=$2; shift 2 ;;
        --models) need_arg "$@"; models=$2; shift 2 ;;
        --profiles) need_arg "$@"; profiles=$2; shift 2 ;;
        --reps) need_arg "$@"; posint "$1" "$2"; reps=$2; shift 2 ;;
        --batch-tokens) need_arg "$@"; posint "$1" "$2"; batch_tokens=$2; shift 2 ;;
        --stage) need_arg "$@"; stage=$2; shift 2 ;;
        --work) need_arg "$@"; work=$2; shift 2 ;;
        --no-build) build=0; shift ;;
        --dry-run) dry=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "gpu-peer: unknown argument '$1' (--help lists them)" >&2; exit 2 ;;
    esac
done
IFS=, read -r -a model_list <<< "$models"
for m in "${model_list[@]}"; do
    case $m in 3b|8b|gemma) ;; *) echo "gpu-peer: unknown model '$m' (3b, 8b, gemma)" >&2; exit 2 ;; esac
done
IFS=, read -r -a profile_list <<< "$profiles"
for p in "${profile_list[@]}"; do
    case $p in integer|portable|device) ;; *) echo "gpu-peer: unknown profile '$p'" >&2; exit 2 ;; esac
done
if [ ${#model_list[@]} = 0 ] || [ ${#profile_list[@]} = 0 ]; then echo "gpu-peer: no models or profiles" >&2; exit 2; fi

start=$SECONDS
deadline=$((start + budget))
mkdir -p "$out" "$work/models" "$work/logs" || exit 1
out=$(cd "$out" && pwd)
logs=$work/logs
exec > >(tee "$out/gpu-peer.log") 2>&1

say() { echo "gpu-peer [$((SECONDS - start)) s]: $*"; }
# step NAME LIMIT COMMAND...: runs it with its own limit, capped by what is left of the budget.
step() {
    local name=$1 limit=$2; shift 2
    local left=$((deadline - SECONDS - 5)) t0=$SECONDS rc
    if [ $left -lt 5 ]; then say "$name: skipped, no time left"; return 1; fi
    [ "$limit" -gt $left ] && limit=$left
    timeout "$limit" "$@" > "$logs/$name.log" 2>&1
    rc=$?
    case $rc in
        0) say "$name: ok ($((SECONDS - t0)) s)" ;;
        124) say "$name: TIMEOUT after ${limit} s (logs/$name.log)" ;;
        *) say "$name: FAIL, exit $rc ($((SECONDS - t0)) s, logs/$name.log)"; tail -5 "$logs/$name.log" | sed 's/^/    /' ;;
    esac
    return $rc
}

# ---- the carried files ---------------------------------------------------------------
peer_tar=$(find "$stage" -name 'llama-bench-sm90.tar.zst' 2>/dev/null | head -1)
[ -n "$peer_tar" ] || { [ -f "$HOME/.cache/detinfer/gpu-peer/llama-bench-sm90.tar.zst" ] &&
    peer_tar=$HOME/.cache/detinfer/gpu-peer/llama-bench-sm90.tar.zst; }
wheel=$(find "$stage" "$HOME/.cache/detinfer/gpu-peer/wheels" -name 'gguf-*.whl' 2>/dev/null | head -1)
gemma_name=gemma-3-270m-q4_k_m.gguf
mapfile -t part_dirs < <(find "$stage" -name "$gemma_name.sha256" -printf '%h\n' 2>/dev/null | sort)

say "$(date -u '+%F %T') UTC, budget ${budget} s, models ${models}, profiles ${profiles}, ${reps} rounds"
say "peer: ${peer_tar:-MISSING (make gpu-peer, then carry it: docs/CUDA.md)}"
say "gguf wheel: ${wheel:-none carried (the models can be generated only if python3 has gguf)}"
if [ ${#part_dirs[@]} -gt 0 ]; then
    say "gemma parts: $(bench/gpu-peer-parts.sh status "$gemma_name" "${part_dirs[@]}" 2>&1)"
fi

declare -A model_file
model_file[3b]=$work/models/bench-llama-3b-q4_k_m.gguf
model_file[8b]=$work/models/bench-llama-8b-q4_k_m.gguf
model_file[gemma]=$work/models/$gemma_name
# files already in the cache (a run here, not on the device machine) are used as they are
[ -f "${model_file[3b]}" ] || [ ! -f "$HOME/.cache/detinfer/bench-llama-3b-q4_k_m.gguf" ] ||
    model_file[3b]=$HOME/.cache/detinfer/bench-llama-3b-q4_k_m.gguf
if [ ${#part_dirs[@]} = 0 ] && [ ! -f "${model_file[gemma]}" ] && [ -f "$HOME/.cache/detinfer/$gemma_name" ]; then
    model_file[gemma]=$HOME/.cache/detinfer/$gemma_name
fi
gen_8b=(--n-embd 4096 --n-layer 32 --n-head 32 --n-head-kv 8 --n-ff 14336)

peer_dir=$work/llama-bench-sm90
bench_args=()
for m in "${model_list[@]}"; do bench_args+=(--model "$m=${model_file[$m]}"); done
gpu_peer=(python3 bench/gpu_peer.py --detinfer "$root/build/tools/detinfer"
    --llama-bench "$peer_dir/llama-bench" --batched-bench "$peer_dir/llama-batched-bench"
    --profiles "$profiles" --reps "$reps" --pp 512 --tg 128 --batch 16 --batch-tokens "$batch_tokens"
    --out "$logs/runs" "${bench_args[@]}")

if [ $dry = 1 ]; then
    say "dry run: the plan"
    echo "  build:     $([ $build = 1 ] && echo "make -j$jobs all && make -j$jobs cuda CUDA_ARCHS=sm_90 CUDA_PTX=" || echo 'none (--no-build)')"
    echo "  peer:      zstd -dc $peer_tar | tar -x -C $work"
    echo "  bandwidth: nvcc -O3 -arch=sm_90 bench/gpu_bandwidth.cu, else PyTorch's device-to-device copy"
    for m in "${model_list[@]}"; do
        case $m in
            3b) echo "  model 3b:  python3 bench/make_big_model.py --out ${model_file[3b]}" ;;
            8b) echo "  model 8b:  python3 bench/make_big_model.py --out ${model_file[8b]} ${gen_8b[*]}" ;;
            gemma) echo "  gemma:     bench/gpu-peer-parts.sh join ${model_file[gemma]} ${part_dirs[*]:-(no parts carried)}" ;;
        esac
    done
    "${gpu_peer[@]}" --bandwidth 3000 --dry-run
    exit $?
fi

# ---- the machine ---------------------------------------------------------------------
echo
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit \
    --format=csv 2>&1 | sed 's/^/    /'
nvidia-smi 2>&1 | sed -n '3p' | sed 's/^/    /'
echo "    $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
echo

# ---- in the background: our build, the models ----------------------------------------
export PYTHONUNBUFFERED=1
pids=()
if [ $build = 1 ]; then
    step build 210 bash -c "make -j$jobs all && make -j$jobs cuda CUDA_ARCHS=sm_90 CUDA_PTX=" &
    pids+=($!)
fi
if [ -n "$wheel" ]; then
    step gguf-wheel 60 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --upgrade --target "$work/site" "$wheel" && export PYTHONPATH=$work/site${PYTHONPATH:+:$PYTHONPATH}
fi
for m in "${model_list[@]}"; do
    f=${model_file[$m]}
    if [ -f "$f" ]; then say "model $m: $f is already there"; continue; fi
    case $m in
        3b) step gen-3b 150 python3 bench/make_big_model.py --out "$f" & pids+=($!) ;;
        8b) step gen-8b 240 python3 bench/make_big_model.py --out "$f" "${gen_8b[@]}" & pids+=($!) ;;
        gemma)
            if [ ${#part_dirs[@]} -gt 0 ]; then
                step gemma-join 60 bench/gpu-peer-parts.sh join "$f" "${part_dirs[@]}" & pids+=($!)
            else
                say "model gemma: no parts carried and none in ~/.cache/detinfer: skipped"
            fi ;;
    esac
done

# ---- in the foreground: the peer, the bandwidth ---------------------------------------
peer_ok=0
if [ -n "$peer_tar" ] && step peer-unpack 60 bash -c "zstd -dc '$peer_tar' | tar -x -C '$work'"; then
    # the CUDA runtime and cuBLAS (13.x) of the machine's toolkit, else of its Python's
    # nvidia wheels (PyTorch's); the few other libraries the build carried in lib/
    libdirs=$(find /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-13*/lib64 \
        /usr/lib/x86_64-linux-gnu -maxdepth 1 -name 'libcublasLt.so.13*' -printf '%h\n' 2>/dev/null | sort -u | paste -sd:)
    if [ -z "$libdirs" ]; then
        mapfile -t site < <(python3 -c 'import site; print("\n".join(site.getsitepackages()))' 2>/dev/null)
        libdirs=$(timeout 20 find "${site[@]}" /opt -maxdepth 8 -name 'libcublasLt.so.13*' -printf '%h\n' 2>/dev/null |
            sort -u | head -2 | paste -sd:)
        cudart=$(timeout 20 find "${site[@]}" /opt -maxdepth 8 -name 'libcudart.so.13*' -printf '%h\n' 2>/dev/null | head -1)
        libdirs=$libdirs${cudart:+:$cudart}
    fi
    export LD_LIBRARY_PATH=$peer_dir/lib${libdirs:+:$libdirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    say "peer: LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    sed -n '1,2p' "$peer_dir/BUILD-INFO" | sed 's/^/    /'
    if ldd "$peer_dir/llama-bench" | grep 'not found'; then
        say "peer: shared libraries not found (above): llama.cpp's runs will fail"
    else
        peer_ok=1
    fi
    step peer-devices 30 "$peer_dir/llama-bench" --list-devices && sed 's/^/    /' "$logs/peer-devices.log"
fi
[ $peer_ok = 1 ] || say "peer: not usable; detinfer's figures only"

bandwidth=0
bw_label="device-to-device copy, bytes read + written"
if command -v nvcc > /dev/null && step bw-build 90 nvcc -O3 -arch=sm_90 -o "$work/gpu_bandwidth" bench/gpu_bandwidth.cu &&
    step bandwidth 60 "$work/gpu_bandwidth" 4096; then
    sed 's/^/    /' "$logs/bandwidth.log"
    bandwidth=$(sed -n 's/^copy_gbs //p' "$logs/bandwidth.log")
elif step bandwidth-torch 90 python3 -c '
import torch
a = torch.empty(1 << 32, dtype=torch.uint8, device="cuda").random_(); b = torch.empty_like(a)
e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
best = 1e30
for i in range(23):
    e0.record(); b.copy_(a); e1.record(); e1.synchronize()
    if i >= 3: best = min(best, e0.elapsed_time(e1))
print("copy_gbs %.1f" % (2 * a.numel() / (best * 1e-3) / 1e9))'; then
    sed 's/^/    /' "$logs/bandwidth-torch.log"
    bandwidth=$(sed -n 's/^copy_gbs //p' "$logs/bandwidth-torch.log")
    bw_label="device-to-device copy through PyTorch, bytes read + written"
fi
say "bandwidth: ${bandwidth:-0} GB/s (${bw_label})"

say "waiting for the build and the models"
for p in "${pids[@]}"; do wait "$p"; done
for m in "${model_list[@]}"; do
    [ -f "${model_file[$m]}" ] && say "model $m: ${model_file[$m]} ($(($(stat -L -c %s "${model_file[$m]}") >> 20)) MiB)"
done
if [ ! -x build/tools/detinfer ] || [ ! -f build/libdetinfer-cuda.so.1 ]; then
    say "no build/tools/detinfer or build/libdetinfer-cuda.so.1: detinfer's runs will fail"
fi
export DETINFER_CUDA_PLUGIN=$root/build/libdetinfer-cuda.so.1

# ---- the runs, alternating ----------------------------------------------------------
echo
left=$((deadline - SECONDS - 15))
if [ $left -gt 20 ]; then
    # the table's engine runs get what is left, less 15 s for packing the logs
    "${gpu_peer[@]}" --bandwidth "${bandwidth:-0}" --bandwidth-label "$bw_label" \
        --deadline "$(($(date +%s) + left))" --timeout 150
    rc=$?
else
    say "no time left for the runs"
    rc=1
fi
[ -f "$logs/runs/gpu-peer.md" ] && cp "$logs/runs/gpu-peer.md" "$logs/runs/gpu-peer.json" "$out/" 2>/dev/null
tar -czf "$out/gpu-peer-logs.tar.gz" -C "$work" logs 2>/dev/null
say "done in $((SECONDS - start)) s; results in $out"
exit $rc
