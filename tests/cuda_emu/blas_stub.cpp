/* The device profile is not emulated: cuBLASLt has no CPU twin here. */
#include "lib/backend/cuda/cuda_blas.cuh"

di_status dc_blas_create(dc_state *s, char *err, size_t err_size)
{
    (void)s;
    return di_error(err, err_size, DI_ERR_UNSUPPORTED, "the CUDA emulation has no device profile");
}
void dc_blas_destroy(dc_state *s) { (void)s; }
void dc_blas_matmul(dc_state *s, const dc_weight *w, const float *x, uint32_t n, const float *b, float *y)
{
    (void)s, (void)w, (void)x, (void)n, (void)b, (void)y;
}
di_status dc_blas_check(dc_state *s, char *err, size_t err_size)
{
    (void)s, (void)err, (void)err_size;
    return DI_OK;
}
size_t dc_blas_version(void) { return 0; }
