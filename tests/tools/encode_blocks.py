#!/usr/bin/env python3
"""Quantize float32 rows to the weight types the gguf package cannot quantize
(Q2_K, Q3_K, IQ4_NL, IQ4_XS), for the generated test models.

A plain round-to-nearest quantizer, not ggml's search for the best scales:
the models only need realistic blocks of the type. What matters is that the
bytes follow the layouts of docs/QUANTS.md, which the float64 reference reads
back through gguf.quants.dequantize (the self-test below checks that the
round trip lands near the input).

Usage (self-test):
  encode_blocks.py
"""

import sys

import numpy as np
from gguf import GGMLQuantizationType as QT
import gguf.quants

# ggml's kvalues_iq4nl: the values of the 4-bit codes of IQ4_NL and IQ4_XS.
IQ4NL_VALUES = np.array([-127, -104, -83, -65, -49, -35, -22, -10,
                         1, 13, 25, 38, 53, 69, 89, 113], dtype=np.float32)


def f16(x):
    """float32 values rounded to binary16 and back (the stored scale)."""
    return np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float32)


def f16_bytes(x):
    return np.asarray(x, dtype=np.float32).astype("<f2").view(np.uint8).reshape(-1, 2)


def divide(a, b):
    """a / b, 0 where b is 0."""
    return np.divide(a, b, out=np.zeros_like(a), where=b != 0)


def pack_2bit(q):
    """(n, 256) codes 0..3 -> (n, 64) bytes: half h, quarter k of the
    super-block in bits 2k of bytes 32h.. (QUANTS.md's lo2)."""
    q = q.astype(np.uint8).reshape(-1, 2, 4, 32)
    return sum(q[:, :, k, :] << np.uint8(2 * k) for k in range(4)).reshape(-1, 64)


def pack_nibbles(q):
    """(n, 32) codes 0..15 -> (n, 16) bytes: j low, j + 16 high."""
    q = q.astype(np.uint8)
    return q[:, :16] | (q[:, 16:] << np.uint8(4))


def nearest_iq4(x, dl):
    """Codes whose table value times dl is nearest x; x (..., 32), dl (..., 1)."""
    err = np.abs(x[..., None] - dl[..., None] * IQ4NL_VALUES)
    return np.argmin(err, axis=-1).astype(np.uint8)


def signed_max(x):
    """The element of largest magnitude along the last axis, keepdims."""
    idx = np.argmax(np.abs(x), axis=-1)[..., None]
    return np.take_along_axis(x, idx, axis=-1)


def q2_k(x):
    g = x.reshape(-1, 16, 16)                             # 16 groups of 16
    mn = np.maximum(0.0, -g.min(axis=-1))
    gs = (g.max(axis=-1) + mn) / 3.0
    d, dmin = f16(gs.max(axis=-1) / 15.0), f16(mn.max(axis=-1) / 15.0)
    sc = np.clip(np.rint(divide(gs, d[:, None])), 0, 15)
    m = np.clip(np.rint(divide(mn, dmin[:, None])), 0, 15)
    dl, ml = (d[:, None] * sc)[..., None], (dmin[:, None] * m)[..., None]
    q = np.clip(np.rint(divide(g + ml, np.broadcast_to(dl, g.shape).copy())), 0, 3)
    scales = (sc.astype(np.uint8) | (m.astype(np.uint8) << np.uint8(4)))
    return np.concatenate([scales, pack_2bit(q.reshape(-1, 256)), f16_bytes(d), f16_bytes(dmin)], axis=1)


def q3_k(x):
    g = x.reshape(-1, 16, 16)
    gs = np.abs(g).max(axis=-1) / 3.5
    d = f16(gs.max(axis=-1) / 31.0)
    sc = np.clip(np.rint(divide(gs, d[:, None])), -32, 31)
    dl = (d[:, None] * sc)[..., None]
    q = np.clip(np.rint(divide(g, np.broadcast_to(dl, g.shape).copy())), -4, 3)
    u = (q + 4).astype(np.uint8).reshape(-1, 256)         # 3 bits: lo2 | third << 2
    third = (u >> np.uint8(2)).reshape(-1, 8, 32)
    hmask = sum(third[:, k, :] << np.uint8(k) for k in range(8))
    us = (sc + 32).astype(np.uint8)                       # 6-bit scales
    low, high = us & np.uint8(0x0F), (us >> np.uint8(4)).reshape(-1, 4, 4)
    scales = np.concatenate([low[:, :8] | (low[:, 8:] << np.uint8(4)),
                             sum(high[:, t, :] << np.uint8(2 * t) for t in range(4))], axis=1)
    return np.concatenate([hmask, pack_2bit(u & np.uint8(3)), scales, f16_bytes(d)], axis=1)


def iq4_nl(x):
    b = x.reshape(-1, 32)
    d = f16(signed_max(b)[:, 0] / -127.0)
    codes = nearest_iq4(b, d[:, None])
    return np.concatenate([f16_bytes(d), pack_nibbles(codes)], axis=1)


def iq4_xs(x):
    s = x.reshape(-1, 8, 32)
    sub = signed_max(s)[..., 0] / -127.0                  # (n, 8)
    d = f16(np.abs(sub).max(axis=-1) / 31.0)
    ls = np.clip(np.rint(divide(sub, d[:, None])), -32, 31)
    codes = nearest_iq4(s, (d[:, None] * ls)[..., None])  # (n, 8, 32)
    u = (ls + 32).astype(np.uint16)
    scales_h = sum(((u[:, i] >> 4) & 3) << (2 * i) for i in range(8)).astype("<u2")
    ul = (u & 0x0F).astype(np.uint8)
    scales_l = ul[:, 0::2] | (ul[:, 1::2] << np.uint8(4))
    qs = pack_nibbles(codes.reshape(-1, 32)).reshape(-1, 128)
    return np.concatenate([f16_bytes(d), scales_h.view(np.uint8).reshape(-1, 2), scales_l, qs], axis=1)


ENCODERS = {QT.Q2_K: q2_k, QT.Q3_K: q3_k, QT.IQ4_NL: iq4_nl, QT.IQ4_XS: iq4_xs}


def quantize(values, qtype):
    """(rows, cols) float32 -> (rows, bytes per row) uint8, as
    gguf.quants.quantize returns for the types it can quantize."""
    rows, cols = values.shape
    blocks = ENCODERS[qtype](np.asarray(values, dtype=np.float32).reshape(-1, cols))
    return np.ascontiguousarray(blocks.astype(np.uint8).reshape(rows, -1))


def self_test():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((8, 512)) * rng.uniform(0.01, 3.0, (8, 1))).astype(np.float32)
    x[3] += 2.0  # all positive rows
    for qtype, tol in ((QT.Q2_K, 0.35), (QT.Q3_K, 0.2), (QT.IQ4_NL, 0.08), (QT.IQ4_XS, 0.08)):
        raw = quantize(x, qtype)
        assert raw.shape[1] == gguf.quants.quant_shape_to_byte_shape((512,), qtype)[0], qtype
        back = gguf.quants.dequantize(raw, qtype)
        err = np.linalg.norm(back - x) / np.linalg.norm(x)
        print(f"{qtype.name}: relative error {err:.4f}")
        assert err < tol, (qtype.name, err)
    return 0


if __name__ == "__main__":
    sys.exit(self_test())
