/*
 * cuda_runtime.h (emulation) — the part of the CUDA runtime the plugin uses,
 * for running the CUDA plugin's .cu files (kernels/cuda, lib/backend/cuda) on the CPU (tests/cuda_emu/README.md). Test
 * code only: it is never part of the library or the plugin.
 */
#ifndef EMU_CUDA_RUNTIME_H
#define EMU_CUDA_RUNTIME_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include <type_traits>

#define __global__
#define __device__
#define __host__
#define __shared__ static

struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};

typedef int cudaError_t;
enum { cudaSuccess = 0, cudaErrorMemoryAllocation = 2, cudaErrorInvalidValue = 1,
       cudaErrorStreamCaptureUnsupported = 900 };
typedef struct emu_stream *cudaStream_t;
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
#define cudaStreamNonBlocking 1u

struct cudaDeviceProp {
    char name[256];
    int major, minor, multiProcessorCount;
};

cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaDriverGetVersion(int *v);
cudaError_t cudaRuntimeGetVersion(int *v);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaGetLastError(void);
cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s);
/* Graphs: while a stream captures, a kernel launch is recorded with its
 * arguments' values and not run; a launch of the instantiated graph runs the
 * recorded launches in order. A copy during a capture is refused (the
 * plugin makes none there). */
typedef struct emu_graph *cudaGraph_t;
typedef struct emu_graph *cudaGraphExec_t;
enum cudaStreamCaptureMode { cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeRelaxed };
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);

/* ---- the kernel side ---------------------------------------------------------- */

struct emu_thread_index {
    uint3 thread, block;
};
const emu_thread_index *emu_current(void);
extern dim3 emu_block_dim, emu_grid_dim;
#define threadIdx (emu_current()->thread)
#define blockIdx (emu_current()->block)
#define blockDim emu_block_dim
#define gridDim emu_grid_dim

void __syncthreads(void);
float emu_shuffle(float value, unsigned src_lane);
static inline float __shfl_down_sync(unsigned mask, float value, unsigned delta)
{
    (void)mask;
    return emu_shuffle(value, (threadIdx.x % 32) + delta);
}
static inline float __shfl_sync(unsigned mask, float value, int src)
{
    (void)mask;
    return emu_shuffle(value, (unsigned)src);
}

/* __dp4a(int, int, int), PTX dp4a.s32.s32 as the PTX ISA states it: d = c,
 * then for i = 0..3 d += sext(a.byte[i]) * sext(b.byte[i]), byte i being
 * bits 8i..8i+7, in 32-bit two's complement arithmetic (wrapping). Written
 * from that description, not from any CPU kernel of this project. */
static inline int __dp4a(int srcA, int srcB, int c)
{
    uint32_t d = (uint32_t)c;
    for (int i = 0; i < 4; i++) {
        const int32_t a = (int8_t)(((uint32_t)srcA >> (8 * i)) & 0xffu);
        const int32_t b = (int8_t)(((uint32_t)srcB >> (8 * i)) & 0xffu);
        d += (uint32_t)(a * b);
    }
    return (int)d;
}

/* __funnelshift_r(lo, hi, shift), PTX shf.r.wrap.b32 as the PTX ISA states
 * it: the 64-bit hi:lo shifted right by shift & 31, its low 32 bits. */
static inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned shift)
{
    return (unsigned)((((uint64_t)hi << 32) | lo) >> (shift & 31u));
}

/* <<<grid, block, shmem, stream>>> is rewritten to emu_launch(emu_config(...), kernel, args). */
struct emu_config_t {
    dim3 grid, block;
};
static inline emu_config_t emu_config(dim3 grid, dim3 block, size_t shmem, cudaStream_t s)
{
    (void)shmem;
    (void)s;
    emu_config_t c = {grid, block};
    return c;
}
void emu_run(emu_config_t c, void (*body)(void *), void *ctx);

/* A launch during a capture: body(ctx) runs it later, drop(ctx) frees ctx. */
int emu_capturing(void);
void emu_record(emu_config_t c, void (*body)(void *), void *ctx, void (*drop)(void *));

template <typename F> static void emu_call(void *ctx)
{
    (*(F *)ctx)();
}
template <typename F> static void emu_drop(void *ctx)
{
    delete (F *)ctx;
}
template <typename... P, typename... A> void emu_launch(emu_config_t c, void (*kernel)(P...), A... args)
{
    if (emu_capturing()) { /* the arguments' values now, as a captured launch keeps them */
        auto *later = new auto([=]() { kernel(args...); });
        typedef typename std::remove_pointer<decltype(later)>::type F;
        emu_record(c, emu_call<F>, later, emu_drop<F>);
        return;
    }
    auto body = [&]() { kernel(args...); };
    emu_run(c, emu_call<decltype(body)>, &body);
}

#endif
