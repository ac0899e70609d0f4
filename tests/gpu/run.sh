#!/usr/bin/env bash
# tests/gpu/run.sh RESULTS_DIR — the checks of the CUDA backend that need a GPU,
# as one script sized for one H200 and 16 CPU cores: under 8 minutes (BUDGET=450
# seconds for all steps; each step also has its own limit, and the steps run in
# order of importance). Run from anywhere; writes a log per step and
# RESULTS_DIR/summary.md, and exits 1 when any check failed or was not reached.
#
#   build        the library, the tests and the plugin for sm_90 only
#   models       the generated test models (make rule, unless build/models was carried)
#   doctor       a CUDA session in each profile, its di_session_backend_info; the gate:
#                without a CUDA session nothing else runs
#   cpu-vs-gpu   the cuda suite's gpu case: CPU and GPU logits digests of all 30
#                generated models, every position of 1100 tokens fed in mixed chunks, then
#                decoding after a copied prefix, greedy tokens (portable: equal)
#   determinism-portable  the determinism suite on CUDA (repeat, batch size and
#                composition, chunking, prefix copy and truncate, long context, and
#                the cross-process test against a CPU process)
#   real-model-cuda  the real model (~/.cache/detinfer, tools/scripts/fetch-model.sh) on
#                CUDA against float64 and its generation invariance, when present
#   determinism-device    the determinism suite in the device profile
#   cpu-vs-gpu-integer, determinism-integer  the same two in the integer profile
#                (the GPU's dp4a product must give the CPU's digests)
#   bench-*      prefill and decode tokens/s on CUDA in both profiles and on the CPU
#                (16 threads); decode as a fraction of 4800 GB/s (H200 HBM3e) on the GPU
#   real-verify  detinfer verify on the real model, the CPU as reference, CUDA compared
set -uo pipefail
results=${1:?usage: tests/gpu/run.sh RESULTS_DIR}
mkdir -p "$results" && results=$(cd "$results" && pwd)
cd "$(dirname "$0")/../.." || exit 1
root=$PWD
jobs=${JOBS:-16}
summary=$results/summary.md
tool=$root/build/tools/detinfer
failed=0

echo "# CUDA backend: GPU run of $(date -u '+%Y-%m-%d %H:%M UTC')" > "$summary"
{
    echo
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
    echo
    echo "| step | result | seconds | log |"
    echo "| --- | --- | --- | --- |"
} >> "$summary"

# The whole run stays under 8 minutes: each step gets its own limit or what is
# left of BUDGET seconds, whichever is less, in order of importance.
deadline=$((SECONDS + ${BUDGET:-450}))

# step NAME SECONDS COMMAND...: runs it with a time limit, logs, one summary row.
step() {
    local name=$1 limit=$2; shift 2
    local start=$SECONDS left=$((deadline - SECONDS))
    if [ $left -lt 10 ]; then
        skip "$name" "no time left in the 8-minute budget"
        failed=1
        return 1
    fi
    [ "$limit" -gt $left ] && limit=$left
    timeout "$limit" "$@" > "$results/$name.log" 2>&1
    local rc=$?
    local result=pass
    [ $rc = 124 ] && result="TIMEOUT after ${limit}s"
    [ $rc != 0 ] && [ $rc != 124 ] && result="FAIL (exit $rc)"
    [ $rc != 0 ] && failed=1
    echo "| $name | $result | $((SECONDS - start)) | $name.log |" >> "$summary"
    echo "gpu/run.sh: $name: $result ($((SECONDS - start)) s)"
    return $rc
}

skip() {
    echo "| $1 | skipped: $2 | 0 | |" >> "$summary"
    echo "gpu/run.sh: $1: skipped: $2"
}

real=${DETINFER_CACHE:-$HOME/.cache/detinfer}/gemma-3-270m-q4_k_m.gguf
[ -f "$real" ] || real=

# The variables `make check` gives the Check suite (timeout runs programs, not functions).
suite_env=(env DI_TEST_MODELS="$root/build/models" DI_TEST_EXAMPLE="$root/build/examples/generate"
    DI_TEST_ROOT="$root" DI_TEST_SHARED="$root/build/libdetinfer.so.1"
    DI_TEST_CUDA_PLUGIN="$root/build/libdetinfer-cuda.so.1"
    DI_TEST_NUMERICS_NVCC="$root/build/kernels/libnumerics-nvcc.so"
    DI_TEST_REAL_MODEL="$real" DI_TEST_REAL_REF="$root/build/models/real.ref"
    DETINFER_CUDA_PLUGIN="$root/build/libdetinfer-cuda.so.1")

step build 180 bash -c "make -j$jobs all build/tests/check_detinfer && make -j$jobs cuda CUDA_ARCHS=sm_90 CUDA_PTX=" ||
    { echo "gpu/run.sh: the build failed; see $results/build.log"; exit 1; }

if [ -f build/models/models.txt ]; then
    skip models "build/models is already there"
else
    step models 90 make build/models/models.txt || exit 1
fi

# The gate: without a CUDA session there is nothing to measure (the suites would skip).
step doctor 30 bash -c "'$tool' doctor --model build/models/gqa_untied_q8_0.gguf --backend cuda &&
    '$tool' doctor --profile device --model build/models/gqa_untied_q8_0.gguf --backend cuda"
grep -h ' session ' "$results/doctor.log" | sed 's/^ */    /' > "$results/fingerprints.txt"
if ! grep -q 'OK  *session  *backend=cuda' "$results/doctor.log"; then
    echo "| gate | FAIL: no CUDA session could be created (doctor.log) | 0 | doctor.log |" >> "$summary"
    echo "gpu/run.sh: no CUDA session could be created; see $results/doctor.log"
    failed=1
fi

if [ $failed = 0 ]; then
    # the gpu case only: the suite's CPU-only cases (about 60 s on one core) run in CI
    step cpu-vs-gpu 90 "${suite_env[@]}" CK_RUN_SUITE=cuda CK_RUN_CASE=gpu CK_VERBOSITY=verbose \
        build/tests/check_detinfer
    if grep -q 'CPU-versus-GPU digests not compared' "$results/cpu-vs-gpu.log"; then
        echo "| cpu-vs-gpu | FAIL: the GPU comparison was skipped | 0 | cpu-vs-gpu.log |" >> "$summary"
        failed=1
    fi
    step determinism-portable 90 "${suite_env[@]}" DI_TEST_BACKEND=cuda CK_RUN_SUITE=determinism \
        build/tests/check_detinfer
    if [ -n "$real" ]; then
        if [ ! -f build/models/real.ref ]; then
            python3 tests/tools/reference.py "$real" --tokens 2,818,5279,529,7001,563 \
                --out build/models/real.ref > "$results/real-reference.log" 2>&1 || true
        fi
        step real-model-cuda 60 "${suite_env[@]}" DI_TEST_BACKEND=cuda CK_RUN_SUITE=real-model \
            build/tests/check_detinfer
    else
        skip real-model "no real model in ~/.cache/detinfer (tools/scripts/fetch-model.sh)"
    fi
    step determinism-device 90 "${suite_env[@]}" DI_TEST_BACKEND=cuda DI_TEST_PROFILE=device \
        CK_RUN_SUITE=determinism build/tests/check_detinfer
    # the integer profile: CPU-versus-GPU digests (dp4a against the CPU's VNNI), then its axes
    step cpu-vs-gpu-integer 90 "${suite_env[@]}" DI_TEST_PROFILE=integer CK_RUN_SUITE=cuda CK_RUN_CASE=gpu \
        build/tests/check_detinfer
    step determinism-integer 60 "${suite_env[@]}" DI_TEST_BACKEND=cuda DI_TEST_PROFILE=integer \
        CK_RUN_SUITE=determinism build/tests/check_detinfer

    # The benchmark: the real model, else a generated 268M llama (Q8_0) when Python can write one.
    bench_model=$real
    if [ -z "$bench_model" ]; then
        bench_model=$root/build/models/bench-llama-270m-q8_0.gguf
        [ -f "$bench_model" ] || timeout 60 python3 tests/tools/make_model.py --out "$bench_model" --type q8_0 \
            --n-vocab 32000 --n-embd 1024 --n-layer 18 --n-head 16 --n-head-kv 4 --n-ff 2816 --ctx 2048 \
            --untied --seed 11 > "$results/bench-model.log" 2>&1 || bench_model=
    fi
    if [ -n "$bench_model" ]; then
        step bench-cuda-portable 60 "$tool" bench --model "$bench_model" --backend cuda --pp 512 --tg 128 \
            --reps 3 --bandwidth 4800
        step bench-cuda-device 60 "$tool" bench --model "$bench_model" --backend cuda --profile device \
            --pp 512 --tg 128 --reps 3 --bandwidth 4800
        step bench-cpu 45 "$tool" bench --model "$bench_model" --threads 16 --pp 128 --tg 32 --reps 2
    else
        skip bench "no model to benchmark (no real model, and Python could not write one)"
    fi
    if [ -n "$real" ]; then
        step real-verify 60 "$tool" verify --model "$real" --quick --backend cpu --backends cuda --threads 16 \
            --max-new 8 --near-ties 4 --no-progress
    fi
fi

{
    echo
    echo "## Environment fingerprints (di_session_backend_info)"
    echo
    cat "$results/fingerprints.txt" 2>/dev/null || echo "    (none: see doctor.log)"
    echo
    echo "## Check summaries"
    echo
    for f in cpu-vs-gpu determinism-portable determinism-device real-model-cuda; do
        [ -f "$results/$f.log" ] && echo "- $f: $(grep -E '^[0-9]+%: Checks' "$results/$f.log" | tail -1)"
    done
    echo
    echo "## Benchmark (decode as a fraction of 4800 GB/s on the GPU, of measured host bandwidth on the CPU)"
    for f in bench-cpu bench-cuda-portable bench-cuda-device; do
        [ -f "$results/$f.log" ] || continue
        echo
        echo "### $f"
        echo
        grep -E '^\|' "$results/$f.log"
    done
    echo
    echo "Overall: $([ $failed = 0 ] && echo PASS || echo FAIL)"
} >> "$summary"
echo "gpu/run.sh: summary in $summary"
exit $failed
