/*
 * cli_cuda.h — what the tool learns about CUDA on this machine (the
 * fingerprint's facts, doctor's checks), by dlopen of the driver, runtime,
 * cuBLAS and cuDNN libraries where they are present (no CUDA header or
 * library is needed to build the tool, and none is needed to run it).
 */
#ifndef CLI_CUDA_H
#define CLI_CUDA_H

#include <stddef.h>

#define CLI_CUDA_MAX_DEVICES 16

typedef struct cli_cuda_device {
    char name[128];
    char uuid[48]; /* GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx */
    int cc_major, cc_minor, sm_count, ecc, compute_mode;
    size_t memory; /* bytes */
} cli_cuda_device;

typedef struct cli_cuda_lib {
    int found;
    char path[512];  /* the file that was loaded, or the dlerror() text */
} cli_cuda_lib;

typedef struct cli_cuda_info {
    cli_cuda_lib driver, runtime, cublas, cudnn;
    int driver_version;      /* 12040 for 12.4; 0 when unknown */
    int init_status;         /* cuInit's result: 0 success, 100 no device */
    char init_error[64];     /* its name, e.g. CUDA_ERROR_NO_DEVICE */
    int n_devices;
    cli_cuda_device devices[CLI_CUDA_MAX_DEVICES];
    int runtime_version;     /* cudaRuntimeGetVersion */
    int cublas_version[3];   /* major, minor, patch */
    size_t cudnn_version;    /* cudnnGetVersion: 90100 for 9.1.0 */
    size_t cudnn_cudart;     /* cudnnGetCudartVersion: the CUDA it was built for */
} cli_cuda_info;

/* Fills info; never fails (what is absent is reported as not found). */
void cli_cuda_probe(cli_cuda_info *info);

/* "12.4" from 12040. */
void cli_cuda_version_text(int version, char *out, size_t n);
/* "9.1.0" from cuDNN's number. */
void cli_cudnn_version_text(size_t version, char *out, size_t n);

#endif /* CLI_CUDA_H */
