/*
 * host_device.h — DI_HD, the one marker of a function that gcc and nvcc both
 * compile from kernels/common: static inline on the host, and
 * __host__ __device__ as well under nvcc. DI_HD_FOLD is DI_HD always inlined:
 * for a function called with a constant weight type, whose switches then
 * fold away.
 */
#ifndef DI_HOST_DEVICE_H
#define DI_HOST_DEVICE_H

#ifdef __CUDACC__
#define DI_HD __host__ __device__ static inline
#define DI_HD_FOLD __host__ __device__ static __forceinline__
#else
#define DI_HD static inline
#define DI_HD_FOLD static inline __attribute__((always_inline))
#endif

#endif /* DI_HOST_DEVICE_H */
