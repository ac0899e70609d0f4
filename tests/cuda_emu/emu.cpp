/*
 * emu.cpp — runs the CUDA plugin's kernels on the CPU, for tests only
 * (tests/cuda_emu/README.md). Every GPU thread of a block is a fiber
 * (ucontext); fibers run one at a time and switch only where a GPU thread
 * may wait for others: __syncthreads and warp shuffles. That is enough to
 * execute the kernels' real index math, launch geometry, shuffles and
 * barriers, and to catch a missing barrier only partly (fibers run in a
 * fixed order). Device memory is host memory filled with NaN bytes, so a
 * read of anything never written shows up in the results.
 */
#include <cuda_runtime.h>

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <memory>
#include <unordered_map>
#include <vector>

#define MAX_THREADS 1024u
#define STACK_BYTES (64u * 1024u)

dim3 emu_block_dim, emu_grid_dim;

/* A fiber starts once through ucontext (its own stack) and then switches
 * with _setjmp/_longjmp, which do not save the signal mask: no system call
 * per switch. */
typedef struct fiber {
    ucontext_t ctx;
    jmp_buf resume;
    emu_thread_index idx;
    unsigned shuffles; /* how many this thread made: picks the slot buffer */
    int started, done;
} fiber;

static jmp_buf scheduler;
static fiber fibers[MAX_THREADS];
static char *stacks;
static fiber *current;
static void (*run_body)(void *);
static void *run_ctx;

/* barrier state of the running block */
static unsigned n_threads, live_in_block, block_arrived, block_generation;
static unsigned live_in_warp[MAX_THREADS / 32], warp_arrived[MAX_THREADS / 32], warp_generation[MAX_THREADS / 32];
static float warp_slots[MAX_THREADS / 32][2][32];

const emu_thread_index *emu_current(void)
{
    return &current->idx;
}

static void yield(void)
{
    if (!_setjmp(current->resume))
        _longjmp(scheduler, 1);
}

void __syncthreads(void)
{
    const unsigned generation = block_generation;
    if (++block_arrived == live_in_block) {
        block_arrived = 0;
        block_generation++;
        return;
    }
    while (block_generation == generation)
        yield();
}

static void warp_barrier(unsigned w)
{
    const unsigned generation = warp_generation[w];
    if (++warp_arrived[w] == live_in_warp[w]) {
        warp_arrived[w] = 0;
        warp_generation[w]++;
        return;
    }
    while (warp_generation[w] == generation)
        yield();
}

/* Every lane writes its value, waits for the warp, reads its source lane's;
 * a source past the warp gives the lane's own value (as __shfl_down_sync).
 * Two slot buffers used in turn, so a fast lane cannot overwrite a value a
 * slow lane has still to read. */
float emu_shuffle(float value, unsigned src_lane)
{
    const unsigned tid = current->idx.thread.x, w = tid / 32, lane = tid % 32;
    const unsigned buffer = current->shuffles++ & 1u;
    warp_slots[w][buffer][lane] = value;
    warp_barrier(w);
    if (src_lane >= 32 || w * 32 + src_lane >= n_threads)
        return value;
    return warp_slots[w][buffer][src_lane];
}

static void trampoline(void)
{
    run_body(run_ctx);
    current->done = 1;
    _longjmp(scheduler, 2); /* never returns through uc_link */
}

/* A thread ended: barriers now wait for one thread fewer. */
static void thread_ended(const fiber *f)
{
    const unsigned w = f->idx.thread.x / 32;
    live_in_block--;
    live_in_warp[w]--;
    if (block_arrived && block_arrived == live_in_block) {
        block_arrived = 0;
        block_generation++;
    }
    if (warp_arrived[w] && warp_arrived[w] == live_in_warp[w]) {
        warp_arrived[w] = 0;
        warp_generation[w]++;
    }
}

static void run_block(unsigned bx, unsigned by, unsigned bz)
{
    n_threads = emu_block_dim.x;
    live_in_block = n_threads;
    block_arrived = 0;
    for (unsigned w = 0; w < (n_threads + 31) / 32; w++) {
        live_in_warp[w] = n_threads - w * 32 < 32 ? n_threads - w * 32 : 32;
        warp_arrived[w] = 0;
    }
    for (unsigned t = 0; t < n_threads; t++) {
        fiber *f = &fibers[t];
        f->idx.thread = uint3{t, 0, 0};
        f->idx.block = uint3{bx, by, bz};
        f->shuffles = 0;
        f->started = f->done = 0;
        getcontext(&f->ctx);
        f->ctx.uc_stack.ss_sp = stacks + (size_t)t * STACK_BYTES;
        f->ctx.uc_stack.ss_size = STACK_BYTES;
        f->ctx.uc_link = NULL;
        makecontext(&f->ctx, trampoline, 0);
    }
    static volatile unsigned live, next; /* volatile: live across _longjmp */
    live = n_threads;
    static volatile unsigned long rounds;
    for (rounds = 0; live > 0; rounds = rounds + 1) {
        for (next = 0; next < n_threads; next++) {
            current = &fibers[next];
            if (current->done)
                continue;
            if (!_setjmp(scheduler)) {
                if (!current->started) {
                    current->started = 1;
                    setcontext(&current->ctx);
                }
                _longjmp(current->resume, 1);
            }
            if (current->done) { /* it ran to its end */
                thread_ended(current);
                live = live - 1;
            }
        }
        if (rounds > 100000000ul) {
            fprintf(stderr, "emu: block (%u,%u,%u) does not finish (a barrier no thread can pass?)\n", bx, by, bz);
            abort();
        }
    }
}

void emu_run(emu_config_t c, void (*body)(void *), void *ctx)
{
    if (c.block.y != 1 || c.block.z != 1 || c.block.x == 0 || c.block.x > MAX_THREADS) {
        fprintf(stderr, "emu: only 1-D blocks of 1..%u threads (got %u x %u x %u)\n", MAX_THREADS, c.block.x,
                c.block.y, c.block.z);
        abort();
    }
    if (!stacks && !(stacks = (char *)malloc((size_t)MAX_THREADS * STACK_BYTES)))
        abort();
    emu_block_dim = c.block;
    emu_grid_dim = c.grid;
    run_body = body;
    run_ctx = ctx;
    for (unsigned z = 0; z < c.grid.z; z++)
        for (unsigned y = 0; y < c.grid.y; y++)
            for (unsigned x = 0; x < c.grid.x; x++)
                run_block(x, y, z);
}

/* ---- the runtime --------------------------------------------------------------------- */

cudaError_t cudaGetDeviceCount(int *count)
{
    *count = 1;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device)
{
    (void)device;
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "CPU emulation (tests/cuda_emu)");
    prop->major = 9;
    prop->minor = 0;
    prop->multiProcessorCount = 1;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorInvalidValue; }
cudaError_t cudaDriverGetVersion(int *v) { *v = 0; return cudaSuccess; }
cudaError_t cudaRuntimeGetVersion(int *v) { *v = 0; return cudaSuccess; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) { (void)flags; *s = (cudaStream_t)&fibers[0]; return cudaSuccess; }
cudaError_t cudaStreamDestroy(cudaStream_t s) { (void)s; return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t s) { (void)s; return cudaSuccess; }
cudaError_t cudaGetLastError(void) { return cudaSuccess; }

/* Device memory in use, for the tests (emu_allocated_bytes). */
static std::unordered_map<void *, size_t> allocated;

extern "C" size_t emu_allocated_bytes(void)
{
    size_t n = 0;
    for (const auto &a : allocated)
        n += a.second;
    return n;
}

cudaError_t cudaMalloc(void **p, size_t bytes)
{
    *p = malloc(bytes ? bytes : 1);
    if (!*p)
        return cudaErrorMemoryAllocation;
    memset(*p, 0xff, bytes); /* NaN floats: reading unwritten memory shows */
    allocated[*p] = bytes;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
    allocated.erase(p);
    free(p);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind)
{
    (void)kind;
    memmove(dst, src, bytes);
    return cudaSuccess;
}

/* ---- graphs -------------------------------------------------------------------------- */

/* A recorded launch; its closure is freed with the last graph holding it. */
struct emu_node {
    emu_config_t c;
    void (*body)(void *);
    void *ctx;
    void (*drop)(void *);
    ~emu_node() { drop(ctx); }
};

/* A graph and an instantiated graph alike: the launches, in order. */
struct emu_graph {
    std::shared_ptr<std::vector<std::unique_ptr<emu_node>>> nodes;
};

static emu_graph *capture; /* the graph being captured, or NULL */

int emu_capturing(void)
{
    return capture != NULL;
}

void emu_record(emu_config_t c, void (*body)(void *), void *ctx, void (*drop)(void *))
{
    capture->nodes->push_back(std::unique_ptr<emu_node>(new emu_node{c, body, ctx, drop}));
}

cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode)
{
    (void)s, (void)mode;
    if (capture)
        return cudaErrorInvalidValue;
    capture = new emu_graph{std::make_shared<std::vector<std::unique_ptr<emu_node>>>()};
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph)
{
    (void)s;
    if (!capture)
        return cudaErrorInvalidValue;
    *graph = capture;
    capture = NULL;
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags)
{
    (void)flags;
    *exec = new emu_graph{graph->nodes};
    return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s)
{
    (void)s;
    if (capture)
        return cudaErrorStreamCaptureUnsupported;
    for (const std::unique_ptr<emu_node> &n : *exec->nodes)
        emu_run(n->c, n->body, n->ctx);
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
    delete graph;
    return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec)
{
    delete exec;
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s)
{
    (void)s;
    if (capture)
        return cudaErrorStreamCaptureUnsupported;
    return cudaMemcpy(dst, src, bytes, kind);
}

const char *cudaGetErrorString(cudaError_t e) { return e ? "emulated error" : "no error"; }
const char *cudaGetErrorName(cudaError_t e) { return e ? "cudaErrorEmulated" : "cudaSuccess"; }
