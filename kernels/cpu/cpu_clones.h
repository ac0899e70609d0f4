/*
 * cpu_clones.h — DI_CLONES compiles a hot CPU function for baseline x86-64,
 * x86-64-v3 (AVX2, FMA, F16C) and x86-64-v4 (AVX-512), chosen once at load
 * time (GCC target_clones). Every clone performs the same correctly rounded
 * operations: only independent lanes are vectorised, never a reduction
 * reordered (fast-math is never on), and an explicit fmaf is a fused multiply-add
 * in every clone (libm's correctly rounded fmaf in the baseline one).
 */
#ifndef DI_CPU_CLONES_H
#define DI_CPU_CLONES_H

#include <stdlib.h> /* __GLIBC__ */

/* Only one (baseline) copy where the clones' IFUNC resolvers cannot run:
 * musl's loader has no IFUNC (a static musl program jumps to nowhere), and
 * ThreadSanitizer's runtime is not initialised yet while ld.so relocates the
 * library. The SIMD paths (cpu_ops.c) are chosen at run time and stay. */
#if !defined(__GLIBC__)
#define DI_NO_CLONES 1
#endif
#if defined(__SANITIZE_THREAD__)
#define DI_NO_CLONES 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define DI_NO_CLONES 1
#endif
#endif

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(DI_NO_CLONES)
#define DI_CLONES __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define DI_CLONES
#endif

/* For helpers of a cloned function: inlined into each clone, so they are
 * compiled for that clone's instruction set too. */
#define DI_INLINE inline __attribute__((always_inline))

#endif /* DI_CPU_CLONES_H */
