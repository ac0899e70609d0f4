/* cuda_bf16.h (emulation): round to nearest even, as __float2bfloat16_rn. */
#ifndef EMU_CUDA_BF16_H
#define EMU_CUDA_BF16_H
#include <stdint.h>
#include <string.h>
typedef struct {
    uint16_t bits;
} __nv_bfloat16;
static inline __nv_bfloat16 __float2bfloat16_rn(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    __nv_bfloat16 b;
    if ((u & 0x7fffffffu) > 0x7f800000u)
        b.bits = (uint16_t)((u >> 16) | 0x40u);
    else
        b.bits = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    return b;
}
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b)
{
    return b.bits;
}
#endif
