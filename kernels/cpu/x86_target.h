/*
 * x86_target.h — the instructions a part of a file is compiled for:
 * DI_X86_BEGIN("avx2,fma,f16c") ... DI_X86_END. GCC takes a target pragma;
 * clang needs the attribute on each function, intrinsics included, which its
 * attribute push applies. cpu_ops.c offers a path only where the CPU and OS
 * have every instruction its region names.
 */
#ifndef DI_X86_TARGET_H
#define DI_X86_TARGET_H

#define DI_X86_PRAGMA(x) _Pragma(#x)
#ifdef __clang__
#define DI_X86_BEGIN(targets) DI_X86_PRAGMA(clang attribute push(__attribute__((target(targets))), apply_to = function))
#define DI_X86_END DI_X86_PRAGMA(clang attribute pop)
#else
#define DI_X86_BEGIN(targets) DI_X86_PRAGMA(GCC push_options) DI_X86_PRAGMA(GCC target(targets))
#define DI_X86_END DI_X86_PRAGMA(GCC pop_options)
#endif

#endif /* DI_X86_TARGET_H */
