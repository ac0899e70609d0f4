#!/usr/bin/env python3
"""Known-answer vectors of the integer profile (docs/DETERMINISM.md "The integer
profile"), computed with NumPy and exact rationals, independently of
kernels/common/int_dot.h: the block exponent from np.frexp, the codes from
np.rint in float64 (where x * 2^-e is exact), the block sums in int64, and
every float32 rounding of the canonical reduction (fmaf, adds, the int-to-float
conversion) as the exact rational result rounded to float32 by hand.

Usage: int_dot_vectors.py OUT.txt   (writes tests/data/int_dot/vectors.txt)

Format, one case a line, floats as the hex of their float32 bits:
  quant X0..X31 SCALE C0..C31
  dot TYPE N X0..X{N-1} ROWHEX P0..P{N/32-1} RESULT
TYPE is the ggml type id (8 Q8_0, 6 Q5_0); ROWHEX the row (N/32 blocks of 34 or
22 bytes) as one hex string.
"""

import sys
from fractions import Fraction

import numpy as np

BLOCK, CODE_BITS, LANES, CHUNK = 32, 17, 32, 1024


def f32_bits(v):
    return int(np.array(v, dtype=np.float32).view(np.uint32))


def round_f32(v):
    """The float32 nearest the rational v, ties to even (v = 0 gives +0)."""
    if v == 0:
        return np.float32(0.0)
    sign = -1 if v < 0 else 1
    a = abs(v)
    k = a.numerator.bit_length() - a.denominator.bit_length()  # 2^k <= a < 2^(k+2)
    while Fraction(2) ** k > a:
        k -= 1
    while Fraction(2) ** (k + 1) <= a:
        k += 1
    quantum = Fraction(2) ** (max(k, -126) - 23)
    r = a / quantum
    n = r.numerator // r.denominator
    rem = r - n
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2 == 1):
        n += 1
    value = n * quantum
    if value >= Fraction(2) ** 128:
        return np.float32(sign * np.inf)
    return np.float32(sign * float(value))


def quantize_block(x):
    """(scale as float32, codes as int64[32]) of one block of float32 values."""
    x64 = x.astype(np.float64)
    m = np.max(np.abs(x64))
    if not np.isfinite(m):
        return np.float32(np.nan), np.zeros(BLOCK, dtype=np.int64)
    if m == 0:
        return np.float32(0.0), np.zeros(BLOCK, dtype=np.int64)
    e = max(int(np.frexp(m)[1]) - 1 - CODE_BITS, -126)
    codes = np.rint(np.ldexp(x64, -e)).astype(np.int64)
    assert np.all(np.abs(codes) <= 2 ** (CODE_BITS + 1))
    return np.float32(np.ldexp(1.0, e)), codes


def fr(v):
    """A float32 (or float16) value as an exact rational."""
    return Fraction(float(v))


def f16_value(raw):
    return fr(np.frombuffer(raw, dtype=np.float16)[0])


Q8_0, Q5_0 = 8, 6
BLOCK_BYTES = {Q8_0: 34, Q5_0: 22}


def weight_codes(qtype, blk):
    """The 32 integer weights of a block (ggml's layouts, docs/QUANTS.md)."""
    if qtype == Q8_0:
        return np.frombuffer(blk[2:], dtype=np.int8).astype(np.int64)
    qh = int.from_bytes(blk[2:6], "little")
    qs = np.frombuffer(blk[6:22], dtype=np.uint8).astype(np.int64)
    lo4 = np.concatenate([qs & 0x0F, qs >> 4])
    fifth = np.array([(qh >> j) & 1 for j in range(BLOCK)], dtype=np.int64)
    return (lo4 | (fifth << 4)) - 16


def dot(qtype, row, x):
    """(block sums, float32 result) of the integer-profile dot of a row with x."""
    nb = len(x) // BLOCK
    q, s, P = [], [], []
    for b in range(nb):
        scale, codes = quantize_block(x[b * BLOCK:(b + 1) * BLOCK])
        size = BLOCK_BYTES[qtype]
        blk = row[b * size:(b + 1) * size]
        w = weight_codes(qtype, blk)
        p = int(np.sum(w * codes))
        P.append(p)
        q.append(fr(round_f32(Fraction(p))))
        s.append(fr(round_f32(f16_value(blk[:2]) * fr(scale))))
    lanes = []
    for lane in range(LANES):
        total = np.float32(0.0)
        for c0 in range(0, nb, CHUNK):
            end = min(nb, c0 + CHUNK)
            acc = np.float32(0.0)
            for b in range(c0 + lane, end, LANES):
                acc = round_f32(q[b] * s[b] + fr(acc))
            total = acc if c0 == 0 else round_f32(fr(total) + fr(acc))
        lanes.append(total)
    step = LANES // 2
    while step >= 1:
        for l in range(step):
            lanes[l] = round_f32(fr(lanes[l]) + fr(lanes[l + step]))
        step //= 2
    return P, lanes[0]


def special_blocks(rng):
    """Blocks that reach the edges of the definition."""
    out = []
    z = np.zeros(BLOCK, dtype=np.float32)
    out.append(z.copy())                                        # all zero: scale 0
    b = z.copy(); b[3] = -0.0; out.append(b)                     # -0 only
    b = rng.standard_normal(BLOCK).astype(np.float32); b[5] = np.inf; out.append(b)
    b = rng.standard_normal(BLOCK).astype(np.float32); b[0] = np.nan; out.append(b)
    b = (rng.standard_normal(BLOCK) * 0.3).astype(np.float32); b[7] = np.float32(2 - 2 ** -19); out.append(b)  # max -> 2^18
    b[7] = -b[7]; out.append(b.copy())                           # max rounds to -2^18
    b = np.full(BLOCK, np.float32(1.0)); b[1] = np.float32(2 - 2 ** -23); out.append(b)
    b = np.array([(k - 16) * 0.5 ** 18 for k in range(BLOCK)], dtype=np.float32); b[31] = 1.0; out.append(b)  # ties
    b = (rng.standard_normal(BLOCK) * 1e-41).astype(np.float32); out.append(b)   # subnormal max
    b = (rng.standard_normal(BLOCK) * 1e-36).astype(np.float32); out.append(b)   # e clamped at -126
    b = (rng.standard_normal(BLOCK) * 1e30).astype(np.float32); b[2] = 1e-30; out.append(b)
    b = (np.clip(rng.standard_normal(BLOCK), -3, 3) * 1.0e38).astype(np.float32); out.append(b)  # huge
    for scale in (1e-3, 1.0, 50.0, 3000.0):
        out.append((rng.standard_normal(BLOCK) * scale).astype(np.float32))
    b = rng.standard_normal(BLOCK).astype(np.float32); b[9] = 400.0; out.append(b)  # an outlier
    return out


def weight_row(rng, qtype, nb, extreme=False):
    out = bytearray()
    for _ in range(nb):
        d = np.float16(rng.uniform(0.5, 2.0) * 10.0 ** rng.integers(-4, 0))
        if rng.random() < 0.2:
            d = -d
        out += d.tobytes()
        if qtype == Q5_0:
            out += rng.integers(0, 256, 20).astype(np.uint8).tobytes()  # any qh and nibbles
        elif extreme:
            out += rng.choice(np.array([-128, 127], dtype=np.int8), BLOCK).tobytes()
        else:
            out += rng.integers(-128, 128, BLOCK).astype(np.int8).tobytes()
    return bytes(out)


def activations(rng, n):
    x = rng.standard_normal(n).astype(np.float64)
    x[rng.integers(0, n, max(1, n // 200))] *= 60.0  # a few large features, as in LLM activations
    return x.astype(np.float32)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    rng = np.random.default_rng(20261201)
    lines = ["# integer-profile known answers: tests/tools/int_dot_vectors.py (do not edit)"]
    for blk in special_blocks(rng):
        scale, codes = quantize_block(blk)
        lines.append("quant " + " ".join(f"{f32_bits(v):08x}" for v in blk) + f" {f32_bits(scale):08x} "
                     + " ".join(str(int(c)) for c in codes))
    cases = [(Q8_0, 32, False), (Q8_0, 64, False), (Q8_0, 640, False), (Q8_0, 640, True), (Q8_0, 1024, False),
             (Q8_0, 2048, False), (Q8_0, 4096, False), (Q5_0, 32, False), (Q5_0, 96, False), (Q5_0, 640, False),
             (Q5_0, 640, True), (Q5_0, 2048, False)]
    for qtype, n, extreme in cases:
        x = activations(rng, n)
        if extreme:  # every block's max rounds to +-2^18 and meets +-128 weights: the largest sums
            x = np.full(n, np.float32(-(2 - 2 ** -23)))
            x[::2] = np.float32(2 - 2 ** -23)
        row = weight_row(rng, qtype, n // BLOCK, extreme)
        P, res = dot(qtype, row, x)
        lines.append(f"dot {qtype} {n} " + " ".join(f"{f32_bits(v):08x}" for v in x) + " " + row.hex() + " "
                     + " ".join(str(p) for p in P) + f" {f32_bits(res):08x}")
    with open(sys.argv[1], "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
