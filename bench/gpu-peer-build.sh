#!/usr/bin/env bash
# Builds llama.cpp's CUDA llama-bench and llama-batched-bench for sm_90 (H100, H200)
# from the llama.cpp vendored in the sdist of the pinned llama-cpp-python (the version
# `make peer-venv` uses on the CPU), strips them and packs them, compressed, as
#   $DIR/llama-bench-sm90.tar.zst        (DIR defaults to ~/.cache/detinfer/gpu-peer)
# for the device machine (docs/CUDA.md, "Measuring against llama.cpp on a GPU").
# Everything it downloads or builds stays under $DIR, never in this repository.
#
# llama.cpp and ggml are linked statically into each program; the CUDA runtime and
# cuBLAS stay shared (this toolkit has no libcublas_static.a): the device machine has
# the same CUDA 13.0 toolkit, and bench/gpu-peer.sh points LD_LIBRARY_PATH at it.
#
# Usage: bench/gpu-peer-build.sh [--jobs N] [--dir DIR]
# Environment: LLAMA_CPP_PYTHON_VERSION (0.3.36), GPU_PEER_DIR, CUDA_HOME (/usr/local/cuda),
# NICE (19).
set -euo pipefail

VERSION=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
DIR=${GPU_PEER_DIR:-$HOME/.cache/detinfer/gpu-peer}
JOBS=${JOBS:-2}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NICE=${NICE:-19}
while [ $# -gt 0 ]; do
    case $1 in
        --jobs) JOBS=$2; shift 2 ;;
        --dir) DIR=$2; shift 2 ;;
        -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "gpu-peer-build: unknown argument $1" >&2; exit 2 ;;
    esac
done

mkdir -p "$DIR"
SDIST=$DIR/llama_cpp_python-$VERSION.tar.gz
SRC=$DIR/src/llama_cpp_python-$VERSION/vendor/llama.cpp
BUILD=$DIR/build-sm90
PKG=$DIR/llama-bench-sm90
PACK=$DIR/llama-bench-sm90.tar.zst
run() { nice -n "$NICE" "$@"; }

start=$(date +%s)
echo "gpu-peer-build: $(date -u '+%F %T') UTC, llama-cpp-python $VERSION, -j$JOBS, in $DIR"

if [ ! -f "$SDIST" ]; then
    run python3 -m pip download -q --no-binary :all: --no-deps --no-build-isolation \
        "llama-cpp-python==$VERSION" -d "$DIR" ||
    run python3 -m pip download -q --no-binary :all: --no-deps "llama-cpp-python==$VERSION" -d "$DIR"
fi
if [ ! -f "$SRC/CMakeLists.txt" ]; then
    mkdir -p "$DIR/src"
    run tar -xzf "$SDIST" -C "$DIR/src"
fi

export PATH=$CUDA_HOME/bin:$PATH
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    run cmake -S "$SRC" -B "$BUILD" \
        -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_CUDA_COMPILER="$CUDA_HOME/bin/nvcc" \
        -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DGGML_NATIVE=OFF -DGGML_CUDA_NCCL=OFF -DGGML_CUDA_FA_ALL_QUANTS=OFF \
        -DBUILD_SHARED_LIBS=OFF -DGGML_STATIC=OFF \
        -DCMAKE_EXE_LINKER_FLAGS="-static-libgcc -static-libstdc++" \
        -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
        -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_UI=OFF
fi
run cmake --build "$BUILD" --target llama-bench llama-batched-bench -j "$JOBS"

# One program for both tools (llama-peer, dispatching on its name), so that ggml's CUDA
# kernels travel once: linked as CMake links llama-bench (its link.txt), with the
# batched-bench library added, the CUDA runtime and OpenMP static. Where that fails,
# the two programs CMake built travel instead.
rm -rf "$PKG"; mkdir -p "$PKG/lib"
multi=0
cat > "$BUILD/llama-peer.cpp" <<'EOF_CPP'
// llama-peer: llama-bench and llama-batched-bench in one program (bench/gpu-peer-build.sh)
#include <cstdio>
#include <cstring>
int llama_bench(int argc, char ** argv);
int llama_batched_bench(int argc, char ** argv);
int main(int argc, char ** argv) {
    const char * name = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    if (!strcmp(name, "llama-bench")) return llama_bench(argc, argv);
    if (!strcmp(name, "llama-batched-bench")) return llama_batched_bench(argc, argv);
    if (argc > 1 && !strcmp(argv[1], "bench")) return llama_bench(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "batched-bench")) return llama_batched_bench(argc - 1, argv + 1);
    fprintf(stderr, "usage: llama-peer bench|batched-bench ARGS (or call it as llama-bench, llama-batched-bench)\n");
    return 2;
}
EOF_CPP
link=$BUILD/tools/llama-bench/CMakeFiles/llama-bench.dir/link.txt
gomp_a=$(gcc -print-file-name=libgomp.a)
if [ -f "$link" ] && c++ -O2 -c "$BUILD/llama-peer.cpp" -o "$BUILD/llama-peer.o"; then
    cmd=$(sed -e 's|"CMakeFiles/llama-bench.dir/main.cpp.o"|../../llama-peer.o|' \
        -e 's|-o ../../bin/llama-bench |-o ../../bin/llama-peer |' \
        -e 's| libllama-bench-impl.a | libllama-bench-impl.a ../batched-bench/libllama-batched-bench-impl.a |' \
        -e 's|-Wl,-rpath,[^ ]* ||' \
        -e "s|[^ ]*/libgomp.so |${gomp_a} |" \
        -e 's|\([^ ]*\)/libcudart.so |\1/libcudart_static.a -lrt |' "$link")
    # no driver here: the toolkit's stub libcuda lets --help run
    mkdir -p "$BUILD/stub" && ln -sf "$CUDA_HOME/lib64/stubs/libcuda.so" "$BUILD/stub/libcuda.so.1"
    if (cd "$BUILD/tools/llama-bench" && run bash -c "$cmd") &&
        help=$(LD_LIBRARY_PATH=$BUILD/stub "$BUILD/bin/llama-peer" bench --help 2>&1) &&
        grep -qi usage <<< "$help"; then
        cp "$BUILD/bin/llama-peer" "$PKG/"
        strip "$PKG/llama-peer"
        ln -s llama-peer "$PKG/llama-bench"
        ln -s llama-peer "$PKG/llama-batched-bench"
        multi=1
    fi
fi
if [ $multi = 0 ]; then
    echo "gpu-peer-build: no llama-peer; packing the two programs" >&2
    for b in llama-bench llama-batched-bench; do
        cp "$BUILD/bin/$b" "$PKG/"
        strip "$PKG/$b"
    done
fi
# Shared libraries that travel with the programs: all but glibc's and gcc's, the driver's
# (libcuda) and the CUDA toolkit's (libcudart, libcublas, libcublasLt: too large to
# travel, and the device machine has the same toolkit). bench/gpu-peer.sh puts lib/
# on LD_LIBRARY_PATH.
for b in "$PKG"/llama-*; do
    ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
    case $name in
        linux-vdso*|ld-linux*|libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*) ;;
        libgcc_s.so*|libstdc++.so*) ;;  # the system's, newer than ours
        libcuda.so*|libcudart.so*|libcublas.so*|libcublasLt.so*) ;;
        *) cp -L "$path" "$PKG/lib/$name" ;;
    esac
done
{
    echo "llama.cpp from llama-cpp-python $VERSION (sdist), commit $(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "built $(date -u '+%F %T') UTC with $(nvcc --version | tail -1), CMAKE_CUDA_ARCHITECTURES=90"
    echo "shared libraries (ldd llama-bench):"
    ldd "$PKG/llama-bench" | sed 's/^/  /'
    echo "carried in lib/: $(find "$PKG/lib" -type f -printf "%f ")"
} > "$PKG/BUILD-INFO"
run tar -C "$DIR" -cf - "$(basename "$PKG")" | run zstd -q -19 -T"$JOBS" -f -o "$PACK"
size=$(stat -c %s "$PACK")
echo "gpu-peer-build: $PACK: $((size / 1024 / 1024)) MiB ($size bytes), $(( $(date +%s) - start )) s"
cat "$PKG/BUILD-INFO"
if [ "$size" -ge $((60 * 1024 * 1024)) ]; then
    echo "gpu-peer-build: $PACK is over 60 MiB: it will not travel in one call" >&2
    exit 1
fi
