/*
 * arch.c — the architecture table (arch.h): one row per architecture.
 */
#include <string.h>

#include "lib/model/arch.h"

static const di_arch architectures[] = {
    /* Llama 2/3, TinyLlama, SmolLM, the Mistral layout */
    {.name = "llama", .features = DI_FEAT_ROPE_FREQS, .glu = DI_GLU_SILU, .rope_pairing = DI_ROPE_NORMAL,
     .rope_base = 10000.0f},
    /* llama with Q/K/V biases and NEOX RoPE */
    {.name = "qwen2", .features = DI_FEAT_QKV_BIAS, .glu = DI_GLU_SILU, .rope_pairing = DI_ROPE_NEOX,
     .rope_base = 10000.0f},
    /* qwen2 without the biases, with QK-norm; its head size (attention.key_length)
     * is often not n_embd / n_head */
    {.name = "qwen3", .features = DI_FEAT_QK_NORM, .glu = DI_GLU_SILU, .rope_pairing = DI_ROPE_NEOX,
     .rope_base = 10000.0f},
    /* Every sixth layer (5, 11, 17, ...) attends globally with the file's RoPE
     * base; the others attend to a sliding window with base 10000. The file's
     * norm weights already include Gemma's "+1". */
    {.name = "gemma3", .features = DI_FEAT_QK_NORM | DI_FEAT_POST_NORMS | DI_FEAT_EMBD_SCALE,
     .glu = DI_GLU_GELU, .rope_pairing = DI_ROPE_NEOX, .rope_base = 1000000.0f, .swa_period = 6,
     .swa_local = 5, .swa_rope_base = 10000.0f, .attn_scale_embd_layers = 62},
    /* Phi-3 and Phi-3.5 mini: llama's layer with NEOX RoPE, often on part of each
     * head (rope.dimension_count), Q, K and V in one tensor and the gate and up
     * rows in one. llama.cpp ignores phi3.attention.sliding_window (full
     * attention on every layer) and so does this row. */
    {.name = "phi3", .features = DI_FEAT_FUSED_QKV | DI_FEAT_FUSED_GATE_UP | DI_FEAT_LONGROPE, .glu = DI_GLU_SILU,
     .rope_pairing = DI_ROPE_NEOX, .rope_base = 10000.0f},
    /* gemma3 without QK-norm, with soft-capped attention scores and logits;
     * even layers attend to a window (4096 keys when the file gives none),
     * every layer with the file's RoPE base. The caps default to 50 and 30,
     * as llama.cpp reads Gemma 2 files. */
    {.name = "gemma2", .features = DI_FEAT_POST_NORMS | DI_FEAT_EMBD_SCALE, .glu = DI_GLU_GELU,
     .rope_pairing = DI_ROPE_NEOX, .rope_base = 10000.0f, .swa_period = 2, .swa_local = 1,
     .attn_scale_embd_layers = 46, .swa_default = 4096, .attn_softcap = 50.0f, .final_softcap = 30.0f},
};

#define N_ARCHITECTURES (sizeof architectures / sizeof architectures[0])

const di_arch *di_arch_find(const char *name)
{
    for (size_t i = 0; i < N_ARCHITECTURES; i++)
        if (strcmp(name, architectures[i].name) == 0)
            return &architectures[i];
    return NULL;
}

void di_arch_names(char *out, size_t size)
{
    if (size == 0)
        return;
    out[0] = '\0';
    for (size_t i = 0; i < N_ARCHITECTURES; i++) {
        if (i)
            strncat(out, ", ", size - strlen(out) - 1);
        strncat(out, architectures[i].name, size - strlen(out) - 1);
    }
}
