#!/usr/bin/env python3
"""Write the quantized-weight fixtures of tests/check_quants.c.

Usage:
  make_quant_fixtures.py OUTDIR

For every weight type T it writes OUTDIR/quant_<t>.bin (t in lower case:
quant_q4_k.bin), all fields little-endian:

  offset  size                   field
  0       4                      magic b"DIQF"
  4       4   u32                format version, 1
  8       4   u32                ggml type id
  12      4   u32                n_rows
  16      4   u32                n_cols (weights per row, whole blocks)
  20      4   u32                row_bytes (bytes of one stored row)
  24      n_rows * row_bytes     the rows as stored in a GGUF file
  ...     n_rows * n_cols * 4    float32: gguf.quants.dequantize of the rows

The rows are, per type:
  - random float rows quantized by gguf.quants.quantize, where the package
    can quantize the type (not the K and IQ4 types);
  - blocks of random bytes with every binary16 scale field forced finite
    (random sign and exponent, so scales and mins of very different
    magnitudes meet and the one rounding of Q4_1/Q5_1/Q4_K/Q5_K happens);
  - edge blocks: every pair of edge scales (zero, -0, negative, 1, binary16
    max and -max, the smallest and largest subnormals) with payload bytes
    that run through every byte value, so every nibble, fifth/sixth bit and
    packed 6-bit scale appears;
  - F16 and BF16: all 65536 bit patterns (NaN payloads included), F32:
    random bit patterns.
The expected values are whatever gguf's numpy code computes; check_quants.c
compares libdetinfer to them bitwise.
"""

import argparse
import os
import struct
import sys
import zlib

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES
import gguf.quants

MAGIC = b"DIQF"
VERSION = 1
N_COLS = 1024  # 4 super-blocks of the K types, 32 blocks of the others

# Byte offsets of the binary16 scale fields in one block of each type.
SCALE_FIELDS = {
    T.Q4_0: (0,), T.Q4_1: (0, 2), T.Q5_0: (0,), T.Q5_1: (0, 2), T.Q8_0: (0,),
    T.IQ4_NL: (0,), T.Q2_K: (80, 82), T.Q3_K: (108,),
    T.Q4_K: (0, 2), T.Q5_K: (0, 2), T.Q6_K: (208,), T.IQ4_XS: (0,),
}
QUANT_TYPES = tuple(SCALE_FIELDS)
QUANTIZABLE = (T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0)

# 0, -0, 1, -1, -2.5, f16 max, -max, smallest and largest subnormal, -smallest.
EDGE_SCALES = (0x0000, 0x8000, 0x3C00, 0xBC00, 0xC100, 0x7BFF, 0xFBFF,
               0x0001, 0x03FF, 0x8001)


def finite_f16(bits):
    """Random u16 -> finite binary16 bits (an all-ones exponent loses its top bit)."""
    bits = bits.astype(np.uint16)
    inf_nan = (bits & 0x7C00) == 0x7C00
    return np.where(inf_nan, bits ^ 0x4000, bits).astype(np.uint16)


def set_u16(blocks, offset, values):
    blocks[:, offset] = values & 0xFF
    blocks[:, offset + 1] = values >> 8


def random_blocks(rng, qtype, n_blocks):
    """Random bytes with finite binary16 scale fields."""
    _, type_size = GGML_QUANT_SIZES[qtype]
    blocks = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint8)
    for off in SCALE_FIELDS[qtype]:
        set_u16(blocks, off, finite_f16(rng.integers(0, 1 << 16, size=n_blocks)))
    return blocks


def edge_blocks(qtype):
    """Every combination of edge scales, payload bytes running through 0..255."""
    _, type_size = GGML_QUANT_SIZES[qtype]
    fields = SCALE_FIELDS[qtype]
    combos = [(a, b) for a in EDGE_SCALES for b in EDGE_SCALES] if len(fields) == 2 \
        else [(a,) for a in EDGE_SCALES]
    blocks = np.zeros((len(combos), type_size), dtype=np.uint8)
    counter = 0
    for i, combo in enumerate(combos):
        blocks[i] = (np.arange(type_size) * 7 + counter) & 0xFF
        counter += type_size
        for off, h in zip(fields, combo):
            blocks[i, off] = h & 0xFF
            blocks[i, off + 1] = h >> 8
    return blocks


def blocks_to_rows(qtype, blocks, rng):
    """Pads with random blocks to whole rows of N_COLS and reshapes."""
    block_size, type_size = GGML_QUANT_SIZES[qtype]
    per_row = N_COLS // block_size
    short = -len(blocks) % per_row
    if short:
        blocks = np.concatenate([blocks, random_blocks(rng, qtype, short)])
    return blocks.reshape((-1, per_row * type_size))


def float_rows(rng, n_rows):
    """Realistic and awkward float rows to quantize."""
    rows = [rng.standard_normal(N_COLS) * s for s in (1.0, 0.02, 1e-3, 30.0)]
    rows.append(rng.standard_normal(N_COLS) + 5.0)          # all positive: min != 0
    rows.append(-rng.random(N_COLS) * 3.0)                   # all negative
    rows.append(np.zeros(N_COLS))                            # d = 0
    rows.append(np.full(N_COLS, -0.75))                      # constant
    spike = rng.standard_normal(N_COLS) * 1e-2
    spike[::37] = 100.0
    rows.append(spike)
    rows.append(rng.standard_normal(N_COLS) * 1e-6)          # subnormal scales
    while len(rows) < n_rows:
        rows.append(rng.standard_normal(N_COLS) * rng.uniform(1e-3, 10.0))
    return np.stack(rows).astype(np.float32)


def quant_rows(qtype, rng):
    parts = []
    if qtype in QUANTIZABLE:
        parts.append(gguf.quants.quantize(float_rows(rng, 24), qtype))
    block_size, _ = GGML_QUANT_SIZES[qtype]
    n_random = 24 * (N_COLS // block_size)
    parts.append(blocks_to_rows(qtype, random_blocks(rng, qtype, n_random), rng))
    parts.append(blocks_to_rows(qtype, edge_blocks(qtype), rng))
    return np.concatenate(parts).astype(np.uint8)


def half_rows(qtype, rng):
    """All 65536 patterns, then rows gguf converts from random floats."""
    every = np.arange(1 << 16, dtype=np.uint16).view(np.uint8).reshape((-1, 2 * N_COLS))
    x = float_rows(rng, 8)
    quantized = x.astype(np.float16).view(np.uint8) if qtype == T.F16 \
        else gguf.quants.quantize(x, qtype)
    return np.concatenate([every, quantized.reshape((len(x), -1))]).astype(np.uint8)


def f32_rows(rng):
    bits = rng.integers(0, 1 << 32, size=(16, N_COLS), dtype=np.uint32)
    bits[0, :8] = [0, 0x80000000, 1, 0x7F7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00001, 0xFFBFFFFF]
    return bits.astype("<u4").view(np.uint8)


def fixture_rows(qtype, rng):
    if qtype == T.F32:
        return f32_rows(rng)
    if qtype in (T.F16, T.BF16):
        return half_rows(qtype, rng)
    return quant_rows(qtype, rng)


def write_fixture(outdir, qtype):
    rng = np.random.default_rng(zlib.crc32(qtype.name.encode()))
    raw = np.ascontiguousarray(fixture_rows(qtype, rng))
    expected = gguf.quants.dequantize(raw, qtype).astype("<f4", copy=False)
    n_rows, row_bytes = raw.shape
    assert expected.shape == (n_rows, N_COLS), (qtype.name, expected.shape)
    path = os.path.join(outdir, f"quant_{qtype.name.lower()}.bin")
    with open(path, "wb") as f:
        f.write(MAGIC + struct.pack("<5I", VERSION, int(qtype), n_rows, N_COLS, row_bytes))
        f.write(raw.tobytes())
        f.write(expected.tobytes())
    return path


FIXTURE_TYPES = (T.F32, T.F16, T.BF16) + QUANT_TYPES


def write_all(outdir):
    os.makedirs(outdir, exist_ok=True)
    return [write_fixture(outdir, t) for t in FIXTURE_TYPES]


def main(argv=None):
    ap = argparse.ArgumentParser(description="write the quantized-weight fixtures")
    ap.add_argument("outdir")
    a = ap.parse_args(argv)
    write_all(a.outdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
