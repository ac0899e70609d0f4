/*
 * host_device.h — DI_HD, the one marker of a function that gcc and nvcc both
 * compile from kernels/common: static inline on the host, and
 * __host__ __device__ as well under nvcc.
 */
#ifndef DI_HOST_DEVICE_H
#define DI_HOST_DEVICE_H

#ifdef __CUDACC__
#define DI_HD __host__ __device__ static inline
#else
#define DI_HD static inline
#endif

#endif /* DI_HOST_DEVICE_H */
