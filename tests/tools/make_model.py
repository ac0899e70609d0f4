#!/usr/bin/env python3
"""Write small random llama, qwen2, qwen3, gemma3, gemma2 or phi3 GGUF v3 models for libdetinfer tests.

Usage:
  make_model.py --out PATH --type {f32,f16,bf16,q8_0,...} --n-vocab N --n-embd N
                --n-layer N --n-head N --n-head-kv N --n-ff N
                [--ctx N] [--untied] [--seed S] [--scale X] [--name S]
                [--omit NAME ...] [--arch {llama,qwen2,qwen3,gemma3,gemma2,phi3}]
                [--head-dim N] [--window N] [--n-rot N] [--separate-qkv]
                [--attn-softcap X] [--final-softcap X]

Layout convention (checked with gguf.GGUFReader): a numpy array of shape
(rows, cols) given to GGUFWriter.add_tensor is stored with GGUF dims
ne0 = cols (innermost, contiguous), ne1 = rows. A weight matrix has one row
per output, so W @ x works row by row.
"""

import argparse
import sys

import os
import math

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import encode_blocks  # noqa: E402

WTYPES = {
    "f32": QT.F32,
    "f16": QT.F16,
    "bf16": QT.BF16,
    "q8_0": QT.Q8_0,
    "q4_0": QT.Q4_0,
    "q4_1": QT.Q4_1,
    "q5_0": QT.Q5_0,
    "q5_1": QT.Q5_1,
    "q2_k": QT.Q2_K,
    "q3_k": QT.Q3_K,
    "iq4_nl": QT.IQ4_NL,
    "iq4_xs": QT.IQ4_XS,
}
ARCHS = ("llama", "qwen2", "qwen3", "gemma3", "gemma2", "phi3")
# Gemma's post-attention and post-FFN norms
POST_NORM_ARCHS = ("gemma3", "gemma2")


def tensor_shapes(*, n_vocab, n_embd, n_layer, n_head, n_head_kv, n_ff, tied,
                  arch="llama", head_dim=None, separate_qkv=False):
    """Name -> numpy shape, in file order. 2-D shapes are (rows, cols).

    qwen2 adds Q/K/V biases; qwen3 per-head QK-norm weights; gemma3 the
    QK-norm weights and the post-attention and post-FFN norms; gemma2 the
    post-norms only. phi3 (as
    llama.cpp's converter writes it) has one attn_qkv of the Q, K then V rows
    (unless separate_qkv) and one ffn_up of the gate rows then the up rows."""
    hd = head_dim or n_embd // n_head
    shapes = {"token_embd.weight": (n_vocab, n_embd)}
    for i in range(n_layer):
        p = f"blk.{i}."
        shapes[p + "attn_norm.weight"] = (n_embd,)
        if arch == "phi3" and not separate_qkv:
            shapes[p + "attn_qkv.weight"] = ((n_head + 2 * n_head_kv) * hd, n_embd)
        else:
            shapes[p + "attn_q.weight"] = (n_head * hd, n_embd)
            shapes[p + "attn_k.weight"] = (n_head_kv * hd, n_embd)
            shapes[p + "attn_v.weight"] = (n_head_kv * hd, n_embd)
        if arch == "qwen2":
            shapes[p + "attn_q.bias"] = (n_head * hd,)
            shapes[p + "attn_k.bias"] = (n_head_kv * hd,)
            shapes[p + "attn_v.bias"] = (n_head_kv * hd,)
        if arch in ("qwen3", "gemma3"):
            shapes[p + "attn_q_norm.weight"] = (hd,)
            shapes[p + "attn_k_norm.weight"] = (hd,)
        shapes[p + "attn_output.weight"] = (n_embd, n_head * hd)
        if arch in POST_NORM_ARCHS:
            shapes[p + "post_attention_norm.weight"] = (n_embd,)
        shapes[p + "ffn_norm.weight"] = (n_embd,)
        if arch == "phi3":
            shapes[p + "ffn_up.weight"] = (2 * n_ff, n_embd)
        else:
            shapes[p + "ffn_gate.weight"] = (n_ff, n_embd)
            shapes[p + "ffn_up.weight"] = (n_ff, n_embd)
        shapes[p + "ffn_down.weight"] = (n_embd, n_ff)
        if arch in POST_NORM_ARCHS:
            shapes[p + "post_ffw_norm.weight"] = (n_embd,)
    shapes["output_norm.weight"] = (n_embd,)
    if not tied:
        shapes["output.weight"] = (n_vocab, n_embd)
    return shapes


def random_values(rng, shape, scale):
    """float32 values whose scale keeps activations O(1) through the layers.

    Every matrix, embeddings included, is N(0, scale/sqrt(cols)): W @ h keeps
    the rms of h, and logits (tied or not) come out with std ~scale. Unit
    variance embeddings would make a tied model's logits std sqrt(n_embd) and
    dominated by the input token (greedy just echoes it); small embeddings
    are harmless because every block reads the residual through an rmsnorm.
    Norm weights are 1 + N(0, 0.1) so they are not a plain identity.
    """
    w = rng.standard_normal(shape, dtype=np.float32)
    if len(shape) == 1:
        w *= np.float32(0.1)
        w += np.float32(1.0)
    else:
        w *= np.float32(scale / np.sqrt(shape[1]))
    return w


def encode(values, qtype):
    """Convert float32 values to what GGUFWriter.add_tensor stores for qtype.

    F32/F16 are plain numpy dtypes (the writer infers the type). BF16 and
    Q8_0 come back from gguf.quants.quantize as uint8 rows of bytes; the
    writer turns the byte shape back into the element shape when raw_dtype
    is given, so no raw_shape is needed.
    """
    if qtype == QT.F32:
        return values, None
    if qtype == QT.F16:
        return values.astype(np.float16), None
    if qtype in encode_blocks.ENCODERS:  # types the gguf package cannot quantize
        return encode_blocks.quantize(values, qtype), qtype
    return gguf.quants.quantize(values, qtype), qtype


def write_model(path, *, wtype, n_vocab, n_embd, n_layer, n_head, n_head_kv,
                n_ff, ctx=256, tied=True, seed=0, rope_base=10000.0,
                eps=1e-5, omit=(), scale=1.0, name=None, arch="llama",
                head_dim=None, window=0, n_rot=None, separate_qkv=False,
                attn_softcap=None, final_softcap=None,
                tokenizer=None, rope_scaling=None, rope_freqs=None, longrope=None):
    """Write one random llama model to path. Returns the tensor names written.

    n_rot: rope.dimension_count (default the head size).
    attn_softcap, final_softcap: <arch>.attn_logit_softcapping and
    <arch>.final_logit_softcapping (gemma2), written when not None.
    tokenizer: optional callable(writer) that adds tokenizer.ggml.* keys.
    rope_scaling: optional dict of <arch>.rope.scaling.* keys as llama.cpp's
      converter writes them: type ("none", "linear", "yarn"), factor,
      orig_ctx (original_context_length), attn_factor.
    rope_freqs: optional sequence of n_rot/2 per-frequency divisors, written
      as the F32 tensor rope_freqs.weight (Llama 3.1's, llama3_rope_freqs).
    longrope: optional dict(long=..., short=...) of n_rot/2 divisors each,
      written as rope_factors_long.weight and rope_factors_short.weight (F32),
      as llama.cpp's converter writes Phi-3 128k's long_factor and short_factor."""
    if wtype not in WTYPES:
        raise ValueError(f"wtype must be one of {sorted(WTYPES)}, not {wtype!r}")
    if arch not in ARCHS:
        raise ValueError(f"arch must be one of {ARCHS}, not {arch!r}")
    if (head_dim is None and n_embd % n_head != 0) or n_head % n_head_kv != 0:
        raise ValueError("n_embd must divide by n_head and n_head by n_head_kv")
    qtype = WTYPES[wtype]
    hd = head_dim or n_embd // n_head
    rng = np.random.default_rng(seed)

    writer = gguf.GGUFWriter(path, arch)  # also writes general.architecture
    writer.add_name(name or f"detinfer-test-{wtype}")
    writer.add_context_length(ctx)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(n_ff)
    writer.add_rope_dimension_count(n_rot or hd)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    writer.add_layer_norm_rms_eps(eps)      # float32
    writer.add_rope_freq_base(rope_base)    # float32
    if head_dim is not None:
        writer.add_uint32(f"{arch}.attention.key_length", hd)
        writer.add_uint32(f"{arch}.attention.value_length", hd)
    if window:
        writer.add_uint32(f"{arch}.attention.sliding_window", window)
    rs = rope_scaling or {}
    if arch == "phi3" and "orig_ctx" not in rs:
        writer.add_rope_scaling_orig_ctx_len(ctx)   # as llama.cpp's converter writes
    if attn_softcap is not None:
        writer.add_attn_logit_softcapping(attn_softcap)    # float32
    if final_softcap is not None:
        writer.add_final_logit_softcapping(final_softcap)  # float32
    if tokenizer is not None:
        tokenizer(writer)
    if "type" in rs:
        writer.add_rope_scaling_type(gguf.RopeScalingType(rs["type"]))
    if "factor" in rs:
        writer.add_rope_scaling_factor(rs["factor"])                # float32
    if "orig_ctx" in rs:
        writer.add_rope_scaling_orig_ctx_len(rs["orig_ctx"])        # uint32
    if "attn_factor" in rs:
        writer.add_rope_scaling_attn_factors(rs["attn_factor"])     # float32
    if rope_freqs is not None:
        if len(rope_freqs) != (n_rot or hd) // 2:
            raise ValueError(f"rope_freqs needs {(n_rot or hd) // 2} values, not {len(rope_freqs)}")
        writer.add_tensor("rope_freqs.weight", np.asarray(rope_freqs, dtype=np.float32))
    if longrope is not None:
        for kind in ("long", "short"):              # the converter's order
            if len(longrope[kind]) != (n_rot or hd) // 2:
                raise ValueError(f"longrope {kind} needs {(n_rot or hd) // 2} values")
            writer.add_tensor(f"rope_factors_{kind}.weight", np.asarray(longrope[kind], dtype=np.float32))

    shapes = tensor_shapes(n_vocab=n_vocab, n_embd=n_embd, n_layer=n_layer,
                           n_head=n_head, n_head_kv=n_head_kv, n_ff=n_ff,
                           tied=tied, arch=arch, head_dim=head_dim,
                           separate_qkv=separate_qkv)
    unknown = set(omit) - set(shapes)
    if unknown:
        raise ValueError(f"--omit names no tensor of this model: {sorted(unknown)}")
    written = []
    for tname, shape in shapes.items():
        # Draw values even for omitted tensors so that omitting one tensor
        # leaves every other tensor identical to the full model.
        values = random_values(rng, shape, scale)
        if tname.endswith(".bias"):
            values -= np.float32(1.0)           # biases: N(0, 0.1), not 1 + ...
        if tname in omit:
            continue
        if len(shape) == 1:
            data, raw = values, None            # norm weights: always F32
        else:
            data, raw = encode(values, qtype)
        writer.add_tensor(tname, data, raw_dtype=raw)
        written.append(tname)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return written


def longrope_attn_factor(*, ctx, orig_ctx):
    """The attention factor llama.cpp's converter writes for Phi-3's LongRoPE
    (Phi3MiniModel): sqrt(1 + ln(s) / ln(orig_ctx)), s = ctx / orig_ctx, or 1."""
    scale = ctx / orig_ctx
    return math.sqrt(1.0 + math.log(scale) / math.log(orig_ctx)) if scale > 1.0 else 1.0


def llama3_rope_freqs(*, n_rot, base, factor, low_freq_factor, high_freq_factor,
                      old_context_len):
    """The divisors llama.cpp's converter writes for rope_type "llama3"
    (Llama 3.1/3.2): 1 for wavelengths below old_context_len /
    high_freq_factor, factor above old_context_len / low_freq_factor, and a
    smooth interpolation between."""
    out = []
    for i in range(n_rot // 2):
        wavelen = 2 * np.pi / base ** (-2.0 * i / n_rot)
        if wavelen < old_context_len / high_freq_factor:
            out.append(1.0)
        elif wavelen > old_context_len / low_freq_factor:
            out.append(factor)
        else:
            smooth = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
            out.append(1.0 / ((1.0 - smooth) / factor + smooth))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--type", dest="wtype", required=True, choices=sorted(WTYPES))
    ap.add_argument("--n-vocab", type=int, required=True)
    ap.add_argument("--n-embd", type=int, required=True)
    ap.add_argument("--n-layer", type=int, required=True)
    ap.add_argument("--n-head", type=int, required=True)
    ap.add_argument("--n-head-kv", type=int, required=True)
    ap.add_argument("--n-ff", type=int, required=True)
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--untied", action="store_true",
                    help="write a separate output.weight")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scale", type=float, default=1.0,
                    help="multiplier on the std of every matrix")
    ap.add_argument("--rope-base", type=float, default=10000.0)
    ap.add_argument("--eps", type=float, default=1e-5)
    ap.add_argument("--name", default=None, help="general.name")
    ap.add_argument("--omit", nargs="*", default=[],
                    help="tensor names to leave out")
    ap.add_argument("--arch", default="llama", choices=ARCHS)
    ap.add_argument("--head-dim", type=int, default=None,
                    help="attention.key_length (default n_embd / n_head)")
    ap.add_argument("--window", type=int, default=0,
                    help="attention.sliding_window (gemma3, gemma2 read it; phi3 has it, ignored)")
    ap.add_argument("--n-rot", type=int, default=None,
                    help="rope.dimension_count (default the head size)")
    ap.add_argument("--separate-qkv", action="store_true",
                    help="phi3: attn_q/k/v instead of the fused attn_qkv")
    ap.add_argument("--attn-softcap", type=float, default=None,
                    help="attn_logit_softcapping (gemma2)")
    ap.add_argument("--final-softcap", type=float, default=None,
                    help="final_logit_softcapping (gemma2)")
    a = ap.parse_args(argv)
    write_model(a.out, wtype=a.wtype, n_vocab=a.n_vocab, n_embd=a.n_embd,
                n_layer=a.n_layer, n_head=a.n_head, n_head_kv=a.n_head_kv,
                n_ff=a.n_ff, ctx=a.ctx, tied=not a.untied, seed=a.seed,
                rope_base=a.rope_base, eps=a.eps, omit=tuple(a.omit),
                scale=a.scale, name=a.name, arch=a.arch, head_dim=a.head_dim,
                window=a.window, n_rot=a.n_rot, separate_qkv=a.separate_qkv,
                attn_softcap=a.attn_softcap, final_softcap=a.final_softcap)
    return 0


if __name__ == "__main__":
    sys.exit(main())
