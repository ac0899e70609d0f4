#!/usr/bin/env python3
"""Generate the libdetinfer test models and their float64 references.

Usage:
  make_test_models.py OUTDIR [--force]

For every model NAME it writes, into OUTDIR:
  NAME.gguf    the model (make_model.write_model)
  NAME.tokens  a 24-token prompt, one line of space-separated ids
  NAME.ref     float64 logits of every prompt position (reference.py format)
and finally OUTDIR/models.txt with one model name per line. models.txt is
written last, so when it is newer than these tool scripts the directory is
complete and up to date and the script does nothing (unless --force).
"""

import argparse
import os
import sys
import zlib

import numpy as np

# Import the sibling tools without leaving __pycache__ in the source tree.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_model  # noqa: E402
import make_quant_fixtures  # noqa: E402
import reference  # noqa: E402

PROMPT_LENGTH = 24
TYPES = ("f32", "f16", "bf16", "q8_0")

# Same seed for every type of a family, so the f32/f16/bf16/q8_0 variants
# are roundings of the same float32 weights.
MHA_TIED = dict(n_vocab=96, n_embd=64, n_layer=2, n_head=4, n_head_kv=4,
                n_ff=160, tied=True, seed=1)
# n_ff longer than 1024 on purpose.
GQA_UNTIED = dict(n_vocab=128, n_embd=128, n_layer=2, n_head=8, n_head_kv=2,
                  n_ff=1120, tied=False, seed=2)
# Widths that are not multiples of 32 (so f32 only: Q8_0 needs 32-blocks).
ODD = dict(n_vocab=50, n_embd=48, n_layer=1, n_head=4, n_head_kv=2, n_ff=72,
           tied=True, seed=3)
# The legacy block types, on the multi-head family.
LEGACY_TYPES = ("q4_0", "q4_1", "q5_0", "q5_1")
# qwen2: Q/K/V biases and NEOX RoPE.
QWEN2 = dict(arch="qwen2", n_vocab=112, n_embd=64, n_layer=2, n_head=4, n_head_kv=2,
             n_ff=96, tied=True, seed=4)
# gemma3: 7 layers so that layer 5 is global and the others local; a head size
# (48) that is not n_embd / n_head; a window of 5 keys, shorter than the prompt.
GEMMA3 = dict(arch="gemma3", n_vocab=100, n_embd=64, n_layer=7, n_head=2, n_head_kv=1,
              head_dim=48, window=5, n_ff=128, tied=True, seed=5, eps=1e-6,
              rope_base=1e6)
# qwen3: QK-norm without biases, NEOX RoPE; a head size (32) that is not
# n_embd / n_head (Q is 128 wide on a 64-wide residual), an untied output.
QWEN3 = dict(arch="qwen3", n_vocab=104, n_embd=64, n_layer=2, n_head=4, n_head_kv=2,
             head_dim=32, n_ff=96, tied=False, seed=6, eps=1e-6, rope_base=1e6)
# phi3: fused attn_qkv and gate+up, NEOX RoPE on 12 of each head's 16 values;
# a sliding window (5 keys, shorter than the prompt) that llama.cpp ignores.
PHI3 = dict(arch="phi3", n_vocab=108, n_embd=64, n_layer=2, n_head=4, n_head_kv=2,
            n_rot=12, window=5, n_ff=96, tied=False, seed=7)
# Llama 3.1/3.2 RoPE: rope_freqs.weight as llama.cpp's converter computes it
# (factor 8, low/high frequency factors 1 and 4) over an original context of
# 256, so that with head size 16 the pairs 0-2 keep their frequency, pair 3 is
# interpolated and pairs 4-7 are divided by 8; an attention factor (cos and sin
# times 0.75), which llama.cpp applies for any scaling type.
LLAMA3_ROPE = dict(n_vocab=96, n_embd=64, n_layer=2, n_head=4, n_head_kv=2, n_ff=160,
                   tied=False, seed=7, rope_base=10000.0, ctx=1024,
                   rope_freqs=make_model.llama3_rope_freqs(
                       n_rot=16, base=10000.0, factor=8.0, low_freq_factor=1.0,
                       high_freq_factor=4.0, old_context_len=256),
                   rope_scaling=dict(attn_factor=0.75))
# Qwen2.5 with YaRN as its model card configures it (type yarn, factor 4) over
# an original context of 256 inside a context of 1024: with head size 16 the
# correction dimensions are 0 and 4, so pair 0 extrapolates, pairs 1-3 mix and
# pairs 4-7 interpolate; cos and sin times 1 + 0.1 ln 4.
QWEN2_YARN = dict(arch="qwen2", n_vocab=112, n_embd=64, n_layer=2, n_head=4, n_head_kv=2,
                  n_ff=96, tied=True, seed=8, ctx=1024,
                  rope_scaling=dict(type="yarn", factor=4.0, orig_ctx=256))

# gemma2: soft caps small enough that tanh bends the scores (std ~1 against a
# cap of 2) and the logits (std ~1 against 3); 3 layers, so that layers 0
# and 2 attend to a window of 6 keys (shorter than the prompt) and layer 1 to
# every key; a head size (32) that is not n_embd / n_head, GQA.
GEMMA2 = dict(arch="gemma2", n_vocab=120, n_embd=64, n_layer=3, n_head=4, n_head_kv=2,
              head_dim=32, window=6, n_ff=128, tied=True, seed=7, eps=1e-6,
              attn_softcap=2.0, final_softcap=3.0)

# The K and IQ4 types added after the others: widths that are whole 256-weight
# super-blocks (n_embd, n_head * head_dim and n_ff all multiples of 256).
KQUANT = dict(n_vocab=72, n_embd=256, n_layer=2, n_head=4, n_head_kv=2,
              n_ff=512, tied=True, seed=7)
KQUANT_TYPES = ("q3_k", "q2_k", "iq4_nl", "iq4_xs")

# Phi-3 128k's LongRoPE as llama.cpp's converter writes it: the PHI3 model in a
# context of 256 over an original context of 16, long and short divisors of its
# 6 rotated pairs (shaped like Phi-3's: long ones growing with the wavelength,
# short ones near 1), the attention factor sqrt(1 + ln 16 / ln 16). llama.cpp
# uses the long factors when the context per sequence exceeds 16: in every
# suite's sessions (and examples/generate's, prompt + new tokens) but
# CONTEXT_REFS's.
PHI3_LONGROPE = dict(PHI3, seed=9,
                     longrope=dict(long=[1.0, 1.25, 2.5, 5.75, 11.5, 23.0],
                                   short=[1.0, 1.0, 1.0625, 1.125, 1.25, 1.5]),
                     rope_scaling=dict(orig_ctx=16, attn_factor=make_model.longrope_attn_factor(
                         ctx=256, orig_ctx=16)))


# Outside models.txt (check_fpenv.c): every weight scaled by 1e-19, so the
# squares of RMSNorm's sums and many products of the matrix products are
# subnormal, and flushing them to zero (FTZ|DAZ) changes the logits.
SUBNORMAL = ("subnormal_f32", "f32", dict(MHA_TIED, scale=1e-19))


# Extra references of a model for another session context (check_rope.c):
# (model, context per sequence): the first <context> tokens of its prompt, as
# <model>_ctx<context>.ref.
CONTEXT_REFS = (("phi3_longrope_f32", 16),)


def model_specs():
    """(name, wtype, hyperparameters) of every test model, in a fixed order."""
    specs = []
    for t in TYPES:
        specs.append((f"mha_tied_{t}", t, MHA_TIED))
        specs.append((f"gqa_untied_{t}", t, GQA_UNTIED))
    specs.append(("odd_f32", "f32", ODD))
    for t in LEGACY_TYPES:
        specs.append((f"mha_tied_{t}", t, MHA_TIED))
    specs.append(("qwen2_f32", "f32", QWEN2))
    specs.append(("qwen2_q8_0", "q8_0", QWEN2))
    specs.append(("gemma3_f32", "f32", GEMMA3))
    specs.append(("gemma3_q8_0", "q8_0", GEMMA3))
    specs.append(("qwen3_f32", "f32", QWEN3))
    specs.append(("qwen3_q8_0", "q8_0", QWEN3))
    specs.append(("phi3_f32", "f32", PHI3))
    specs.append(("phi3_q8_0", "q8_0", PHI3))
    specs.append(("llama3_rope_f32", "f32", LLAMA3_ROPE))
    specs.append(("qwen2_yarn_f32", "f32", QWEN2_YARN))
    specs.append(("gemma2_f32", "f32", GEMMA2))
    specs.append(("gemma2_q8_0", "q8_0", GEMMA2))
    for t in KQUANT_TYPES:
        specs.append((f"kq_{t}", t, KQUANT))
    specs.append(("phi3_longrope_f32", "f32", PHI3_LONGROPE))
    return specs


def prompt_for(name, n_vocab):
    # crc32, not hash(): Python salts string hashes per process.
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    return [int(t) for t in rng.integers(0, n_vocab, size=PROMPT_LENGTH)]


def up_to_date(outdir):
    stamp = os.path.join(outdir, "models.txt")
    if not os.path.exists(stamp):
        return False
    here = os.path.dirname(os.path.abspath(__file__))
    scripts = [os.path.join(here, f) for f in
               ("make_model.py", "reference.py", "make_test_models.py",
                "make_quant_fixtures.py", "encode_blocks.py")]
    newest = max(os.path.getmtime(s) for s in scripts)
    return os.path.getmtime(stamp) > newest


def make_one(outdir, name, wtype, hp):
    base = os.path.join(outdir, name)
    make_model.write_model(base + ".gguf", wtype=wtype, name=name, **hp)
    tokens = prompt_for(name, hp["n_vocab"])
    with open(base + ".tokens", "w") as f:
        f.write(" ".join(str(t) for t in tokens) + "\n")
    reference.make_reference(base + ".gguf", tokens, base + ".ref")


def main(argv=None):
    ap = argparse.ArgumentParser(description="generate the test models")
    ap.add_argument("outdir")
    ap.add_argument("--force", action="store_true", help="regenerate even if up to date")
    a = ap.parse_args(argv)
    os.makedirs(a.outdir, exist_ok=True)
    if not a.force and up_to_date(a.outdir):
        return 0
    specs = model_specs()
    for name, wtype, hp in specs:
        make_one(a.outdir, name, wtype, hp)
    name, wtype, hp = SUBNORMAL
    make_model.write_model(os.path.join(a.outdir, name + ".gguf"), wtype=wtype, name=name, **hp)
    with open(os.path.join(a.outdir, name + ".tokens"), "w") as f:
        f.write(" ".join(str(t) for t in prompt_for(name, hp["n_vocab"])) + "\n")
    for name, ctx in CONTEXT_REFS:
        base = os.path.join(a.outdir, name)
        with open(base + ".tokens") as f:
            tokens = [int(t) for t in f.read().split()][:ctx]
        reference.make_reference(base + ".gguf", tokens, f"{base}_ctx{ctx}.ref", ctx)
    make_quant_fixtures.write_all(a.outdir)
    with open(os.path.join(a.outdir, "models.txt"), "w") as f:
        f.write("".join(name + "\n" for name, _, _ in specs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
