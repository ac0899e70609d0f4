#!/usr/bin/env python3
"""A generated llama model of about 1.7 GiB for speed comparisons, which no CPU cache holds.

    make_big_model.py --out ~/.cache/detinfer/bench-llama-3b-q4_k_m.gguf [--seed 1]

The shape of a 3B llama (n_embd 3072, 28 layers, 24 heads of 128 with 8 KV
heads, n_ff 8192, vocabulary 32000) with the weight-type mix of llama.cpp's
Q4_K_M files: Q4_K everywhere, Q6_K for attn_v and ffn_down in the layers
llama.cpp's "use_more_bits" rule picks (the first and last eighth, and every
third layer between) and for the output matrix; the token embedding in Q8_0
(as in the real Gemma 3 270M Q4_K_M file). Norm weights are F32.

The weights are random block bytes, valid for every type: each block's
binary16 scales are small finite numbers and its codes are random, so the
speed is that of a real file of this shape (the values are meaningless).
Scales are chosen so that a weight is about N(0, 1/n_in) and activations
stay finite through the layers. The vocabulary is the synthetic
SentencePiece one of tests/tools/make_tokenizer_models.py, padded with
unused tokens to 32000, so that llama.cpp loads the file too.

Streams one tensor at a time (add_tensor_info, then write_tensor_data), so
it needs little memory. Writes to a temporary name and renames at the end.
"""

import argparse
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "tools"))
import make_tokenizer_models  # noqa: E402  (the synthetic SentencePiece vocabulary)

SHAPE = dict(n_vocab=32000, n_embd=3072, n_layer=28, n_head=24, n_head_kv=8, n_ff=8192, ctx=4096)

# (weights per block, bytes per block)
BLOCK = {QT.Q4_K: (256, 144), QT.Q6_K: (256, 210), QT.Q8_0: (32, 34)}


def use_more_bits(i, n):
    """llama.cpp's rule (llama-quant.cpp) for the Q6_K layers of a Q4_K_M file."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def f16_bytes(values):
    """float values as little-endian binary16 byte pairs, shape (..., 2)."""
    return np.asarray(values, dtype="<f2").view(np.uint8).reshape(*np.shape(values), 2)


def random_blocks(rng, qtype, rows, n_in):
    """(rows, row_bytes) uint8: random codes and small finite scales."""
    per, nbytes = BLOCK[qtype]
    nb = rows * (n_in // per)
    b = rng.integers(0, 256, size=(nb, nbytes), dtype=np.uint8)
    sigma = 1.0 / np.sqrt(n_in)  # the target std of one weight
    if qtype == QT.Q8_0:
        # w = d * q, q ~ uniform int8 (std ~74)
        b[:, 0:2] = f16_bytes(np.full(nb, sigma / 74.0, dtype=np.float32))
    elif qtype == QT.Q4_K:
        # w = d * sc * q - dmin * m with 6-bit sc, m and 4-bit q; dmin = 7.5 d
        # centres the codes on average (mean sc = mean m); std(w / d) ~ 257
        d = sigma / 257.0
        b[:, 0:2] = f16_bytes(np.full(nb, d, dtype=np.float32))
        b[:, 2:4] = f16_bytes(np.full(nb, 7.5 * d, dtype=np.float32))
    else:  # Q6_K: w = d * sc * (q - 32), int8 sc, 6-bit q; std(sc * (q - 32)) ~ 1360
        b[:, 208:210] = f16_bytes(np.full(nb, sigma / 1360.0, dtype=np.float32))
    return b.reshape(rows, -1)


def tensor_plan(s):
    """(name, qtype or None for F32, rows, cols) in file order."""
    hd = s["n_embd"] // s["n_head"]
    plan = [("token_embd.weight", QT.Q8_0, s["n_vocab"], s["n_embd"])]
    for i in range(s["n_layer"]):
        p, more = f"blk.{i}.", use_more_bits(i, s["n_layer"])
        plan += [
            (p + "attn_norm.weight", None, 1, s["n_embd"]),
            (p + "attn_q.weight", QT.Q4_K, s["n_head"] * hd, s["n_embd"]),
            (p + "attn_k.weight", QT.Q4_K, s["n_head_kv"] * hd, s["n_embd"]),
            (p + "attn_v.weight", QT.Q6_K if more else QT.Q4_K, s["n_head_kv"] * hd, s["n_embd"]),
            (p + "attn_output.weight", QT.Q4_K, s["n_embd"], s["n_head"] * hd),
            (p + "ffn_norm.weight", None, 1, s["n_embd"]),
            (p + "ffn_gate.weight", QT.Q4_K, s["n_ff"], s["n_embd"]),
            (p + "ffn_up.weight", QT.Q4_K, s["n_ff"], s["n_embd"]),
            (p + "ffn_down.weight", QT.Q6_K if more else QT.Q4_K, s["n_embd"], s["n_ff"]),
        ]
    plan += [("output_norm.weight", None, 1, s["n_embd"]),
             ("output.weight", QT.Q6_K, s["n_vocab"], s["n_embd"])]
    return plan


def write(path, seed, s):
    rng = np.random.default_rng(seed)
    tmp = path + ".part"
    w = gguf.GGUFWriter(tmp, "llama")
    w.add_name("detinfer-bench-llama-3b-q4_k_m (random weights)")
    w.add_context_length(s["ctx"])
    w.add_embedding_length(s["n_embd"])
    w.add_block_count(s["n_layer"])
    w.add_feed_forward_length(s["n_ff"])
    w.add_rope_dimension_count(s["n_embd"] // s["n_head"])
    w.add_head_count(s["n_head"])
    w.add_head_count_kv(s["n_head_kv"])
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(500000.0)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M)
    make_tokenizer_models.add_spm(prefix=True, add_eos=False, pad_to=s["n_vocab"])[1](w)
    plan = tensor_plan(s)
    for name, qt, rows, cols in plan:
        if qt is None:
            w.add_tensor_info(name, (cols,), np.dtype(np.float32), 4 * cols)
        else:
            per, nbytes = BLOCK[qt]
            row_bytes = cols // per * nbytes
            w.add_tensor_info(name, (rows, row_bytes), np.dtype(np.uint8), rows * row_bytes, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    total = 0
    for name, qt, rows, cols in plan:
        if qt is None:
            data = (1.0 + 0.1 * rng.standard_normal(cols)).astype(np.float32)
        else:
            data = random_blocks(rng, qt, rows, cols)
        w.write_tensor_data(data)
        total += data.nbytes
    w.close()
    os.replace(tmp, path)
    return total


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1)
    for key in ("n_layer", "n_embd", "n_ff", "n_head", "n_head_kv"):  # smaller models of the same
        ap.add_argument("--" + key.replace("_", "-"), type=int, default=SHAPE[key])  # kind (instruction counts)
    a = ap.parse_args(argv)
    shape = dict(SHAPE, **{k: getattr(a, k) for k in ("n_layer", "n_embd", "n_ff", "n_head", "n_head_kv")})
    total = write(a.out, a.seed, shape)
    print(f"{a.out}: {total / 2**30:.2f} GiB of weights, {os.path.getsize(a.out) / 2**30:.2f} GiB file")
    return 0


if __name__ == "__main__":
    sys.exit(main())
