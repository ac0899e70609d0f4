/*
 * fpenv.h — the floating-point environment every computation runs under.
 *
 * A library is loaded into processes it does not control: the host may have
 * called fesetround(), or been linked with -ffast-math (crtfastmath.o sets
 * FTZ and DAZ at start-up). Rounding direction and flush-to-zero change the
 * bits of + - * / sqrt fma and of every conversion, so each public call that
 * computes runs under the contract's environment, restored afterwards so the
 * host sees its own state unchanged:
 *
 *   x86-64   MXCSR = 0x1f80: round to nearest even, FTZ and DAZ off, every
 *            exception masked. The x87 unit is not pinned: the library
 *            contains no x87 instruction (make check verifies it).
 *   aarch64  FPCR = 0: round to nearest even, FZ, FZ16, DN, AH and FIZ off,
 *            no trap enabled.
 *   others   <fenv.h>: the default environment (FE_DFL_ENV).
 *
 * Pool workers pin the same environment once when they start and keep it
 * (threadpool.c): they run nothing but library code.
 */
#ifndef DI_FPENV_H
#define DI_FPENV_H

#include <stdint.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DI_FPENV_CANONICAL 0x1f80u
typedef struct di_fpenv { uint32_t mxcsr; } di_fpenv;
static inline void di_fpenv_save(di_fpenv *e) { e->mxcsr = _mm_getcsr(); }
static inline void di_fpenv_restore(const di_fpenv *e) { _mm_setcsr(e->mxcsr); }
static inline void di_fpenv_set_canonical(void) { _mm_setcsr(DI_FPENV_CANONICAL); }
#elif defined(__aarch64__)
#define DI_FPENV_CANONICAL 0u
typedef struct di_fpenv { uint64_t fpcr; } di_fpenv;
static inline void di_fpenv_save(di_fpenv *e)
{
    uint64_t v;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(v));
    e->fpcr = v;
}
static inline void di_fpenv_restore(const di_fpenv *e)
{
    __asm__ __volatile__("msr fpcr, %0" : : "r"(e->fpcr) : "memory");
}
static inline void di_fpenv_set_canonical(void)
{
    __asm__ __volatile__("msr fpcr, %0" : : "r"((uint64_t)DI_FPENV_CANONICAL) : "memory");
}
#else
#include <fenv.h>
typedef struct di_fpenv { fenv_t env; } di_fpenv;
static inline void di_fpenv_save(di_fpenv *e) { fegetenv(&e->env); }
static inline void di_fpenv_restore(const di_fpenv *e) { fesetenv(&e->env); }
static inline void di_fpenv_set_canonical(void) { fesetenv(FE_DFL_ENV); }
#endif

/* Test hook (check_fpenv.c): when set, entry points and new workers leave
 * the host's environment alone (neither pinned nor restored), to show that
 * the host's state would change results. */
extern int di_fpenv_test_unpinned;

/* Saves the caller's environment into *saved and pins the canonical one. */
static inline void di_fpenv_enter(di_fpenv *saved)
{
    di_fpenv_save(saved);
    if (!di_fpenv_test_unpinned)
        di_fpenv_set_canonical();
}

/* Puts back what di_fpenv_enter saved (status flags included: flags raised
 * by the library's own work are not reported to the host). */
static inline void di_fpenv_leave(const di_fpenv *saved)
{
    if (!di_fpenv_test_unpinned)
        di_fpenv_restore(saved);
}

#endif /* DI_FPENV_H */
