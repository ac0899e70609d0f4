#!/usr/bin/env python3
"""Known-answer vectors of the integer profile (docs/DETERMINISM.md "The integer
profile"), computed with Python integers and exact rationals, independently of
kernels/common/int_dot.h:

- every float32 operation of the definition (the quantization's scalings,
  the division, the products, each fmaf of the canonical reduction) is the
  exact rational result rounded to float32 by hand (round_f32);
- the weights' integer codes, group scales and mins are decoded here from
  ggml's block layouts, and each decoded weight D * k * v + N, rounded once,
  is checked against gguf.quants.dequantize of the same bytes (the gguf
  package's reference), so the decoding is the format's.

Usage: int_dot_vectors.py OUT.txt   (writes tests/data/int_dot/vectors.txt)

Format, one case a line, floats as the hex of their float32 bits:
  quant X0..X31 SCALE C0..C31 S0 S1
  dot TYPE N X0..X{N-1} ROWHEX P0..P{N/32-1} RESULT
TYPE is the ggml type id; ROWHEX the row's blocks as one hex string; P_b the
exact integer block sums.
"""

import sys
from fractions import Fraction

import numpy as np
import gguf.quants
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES

BLOCK, LANES, CHUNK = 32, 32, 1024
IQ4NL = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113]


def f32_bits(v):
    return int(np.array(v, dtype=np.float32).view(np.uint32))


def round_f32(v):
    """The float32 nearest the rational v, ties to even, as a Fraction (v = 0 gives 0)."""
    if v == 0:
        return Fraction(0)
    sign = -1 if v < 0 else 1
    a = abs(v)
    k = a.numerator.bit_length() - a.denominator.bit_length()
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
    assert value < Fraction(2) ** 128, "overflow: no case here reaches it"
    return sign * value


def as_f32(fr):
    return np.float32(float(fr))


def rint_even(v):
    """Nearest integer to the rational v, ties to even."""
    n = v.numerator // v.denominator
    rem = v - n
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2 == 1):
        n += 1
    return n


def quantize_block(x):
    """(scale, codes[32], sums[2]) of a block of float32 values, by the definition."""
    vals = [Fraction(float(v)) if np.isfinite(v) else None for v in x]
    if any(v is None for v in vals):
        return np.float32(np.nan), [0] * BLOCK, [0, 0]
    m = max(abs(v) for v in vals)
    if m == 0:
        return np.float32(0.0), [0] * BLOCK, [0, 0]
    e = int(np.frexp(float(m))[1]) - 1  # floor(log2 m), exact for every float32
    h1 = (-e) // 2
    h2 = -e - h1
    p1, p2 = Fraction(2) ** h1, Fraction(2) ** h2
    r = round_f32(Fraction(127) / round_f32(round_f32(m * p1) * p2))
    codes = [rint_even(round_f32(round_f32(round_f32(v * p1) * p2) * r)) for v in vals]
    assert all(abs(c) <= 127 for c in codes)
    return as_f32(round_f32(m / 127)), codes, [sum(codes[:16]), sum(codes[16:])]


def f16(raw):
    return Fraction(float(np.frombuffer(raw, dtype=np.float16)[0]))


def nibble(qs, i):
    return qs[i] & 0xF if i < 16 else qs[i - 16] >> 4


def k_scale_min(s, j):
    if j < 4:
        return s[j] & 63, s[j + 4] & 63
    return (s[j + 4] & 0xF) | (s[j - 4] >> 6) << 4, (s[j + 4] >> 4) | (s[j] >> 6) << 4


def decode(qtype, blk):
    """The block as (D, [(v[32], k per group, N per min group) per 32-block])."""
    out = []
    if qtype in (T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.IQ4_NL):
        D = f16(blk[0:2])
        if qtype == T.Q4_0:
            v = [nibble(blk[2:18], i) - 8 for i in range(32)]
        elif qtype == T.Q4_1:
            v = [nibble(blk[4:20], i) for i in range(32)]
        elif qtype == T.Q5_0:
            qh = int.from_bytes(blk[2:6], "little")
            v = [(nibble(blk[6:22], i) | ((qh >> i) & 1) << 4) - 16 for i in range(32)]
        elif qtype == T.Q5_1:
            qh = int.from_bytes(blk[4:8], "little")
            v = [nibble(blk[8:24], i) | ((qh >> i) & 1) << 4 for i in range(32)]
        elif qtype == T.Q8_0:
            v = list(np.frombuffer(blk[2:34], dtype=np.int8).astype(int))
        else:
            v = [IQ4NL[nibble(blk[2:18], i)] for i in range(32)]
        mins = [f16(blk[2:4])] if qtype in (T.Q4_1, T.Q5_1) else []
        return D, [(v, [1], mins)]
    if qtype in (T.Q4_K, T.Q5_K):
        D, dmin = f16(blk[0:2]), f16(blk[2:4])
        for j in range(8):
            sc, m = k_scale_min(blk[4:16], j)
            qs = blk[16:144] if qtype == T.Q4_K else blk[48:176]
            v = [(qs[32 * (j // 2) + i] >> (4 * (j % 2))) & 0xF for i in range(32)]
            if qtype == T.Q5_K:
                v = [v[i] | ((blk[16 + i] >> j) & 1) << 4 for i in range(32)]
            out.append((v, [sc], [-(dmin * m)]))
        return D, out
    if qtype == T.Q6_K:
        D = f16(blk[208:210])
        for j in range(8):
            h, k = j // 4, j % 4
            v = [(((blk[64 * h + 32 * (k % 2) + i] >> (4 * (k // 2))) & 0xF)
                  | ((blk[128 + 32 * h + i] >> (2 * k)) & 3) << 4) - 32 for i in range(32)]
            sc = [blk[192 + 2 * j + g] - 256 * (blk[192 + 2 * j + g] >= 128) for g in range(2)]
            out.append((v, sc, []))
        return D, out
    if qtype == T.Q3_K:
        D = f16(blk[108:110])
        s = blk[96:108]
        for j in range(8):
            h, k = j // 4, j % 4
            v = [((((blk[32 + 32 * h + i] >> (2 * k)) & 3) | ((blk[i] >> j) & 1) << 2) - 4) for i in range(32)]
            sc = []
            for g in (2 * j, 2 * j + 1):
                sc.append((((s[g % 8] >> (4 * (g // 8))) & 0xF) | ((s[8 + g % 4] >> (2 * (g // 4))) & 3) << 4) - 32)
            out.append((v, sc, []))
        return D, out
    if qtype == T.Q2_K:
        D, dmin = f16(blk[80:82]), f16(blk[82:84])
        for j in range(8):
            h, k = j // 4, j % 4
            v = [(blk[16 + 32 * h + i] >> (2 * k)) & 3 for i in range(32)]
            sc = [blk[2 * j + g] & 0xF for g in range(2)]
            mins = [-(dmin * (blk[2 * j + g] >> 4)) for g in range(2)]
            out.append((v, sc, mins))
        return D, out
    if qtype == T.IQ4_XS:
        D = f16(blk[0:2])
        sh = int.from_bytes(blk[2:4], "little")
        for j in range(8):
            ls = ((blk[4 + j // 2] >> (4 * (j % 2))) & 0xF) | ((sh >> (2 * j)) & 3) << 4
            v = [IQ4NL[nibble(blk[8 + 16 * j:24 + 16 * j], i)] for i in range(32)]
            out.append((v, [ls - 32], []))
        return D, out
    raise ValueError(qtype)


def check_decoding(qtype, row):
    """Each weight D * k * v + N is gguf's dequantized value, up to gguf's own
    float32 roundings (it rounds D * k, D * k * v and the sum separately): a
    wrong code, scale or min moves a weight by far more than that."""
    want = gguf.quants.dequantize(np.frombuffer(row, dtype=np.uint8), qtype).astype(np.float64)
    elems, size = GGML_QUANT_SIZES[qtype]
    at_w = 0
    for at in range(0, len(row), size):
        D, subs = decode(qtype, row[at:at + size])
        for v, k, mins in subs:
            per = 32 // len(k)
            for i in range(32):
                prod = D * k[i // per] * v[i]
                N = mins[i // (32 // len(mins))] if mins else 0
                exact = prod + N
                err = abs(Fraction(float(want[at_w])) - exact)
                assert err <= Fraction(1, 2 ** 21) * (abs(prod) + abs(N) + abs(D * k[i // per])), (qtype, at_w)
                at_w += 1


def dot(qtype, row, x):
    """(block sums, float32 result) of the profile's dot of a row with x."""
    elems, size = GGML_QUANT_SIZES[qtype]
    subs = []
    for at in range(0, len(row), size):
        D, blocks = decode(qtype, row[at:at + size])
        subs += [(D, b) for b in blocks]
    nb = len(x) // BLOCK
    P, steps = [], []
    for b in range(nb):
        scale, codes, sums = quantize_block(x[b * BLOCK:(b + 1) * BLOCK])
        D, (v, k, mins) = subs[b]
        per = 32 // len(k)
        p = sum(k[g] * sum(v[i] * codes[i] for i in range(g * per, (g + 1) * per)) for g in range(len(k)))
        assert abs(p) < 2 ** 24
        P.append(p)
        steps.append((p, D, scale, sums, mins))
    lanes = []
    for lane in range(LANES):
        total = Fraction(0)
        for c0 in range(0, nb, CHUNK):
            end = min(nb, c0 + CHUNK)
            acc = Fraction(0)
            for b in range(c0 + lane, end, LANES):
                p, D, scale, sums, mins = steps[b]
                if np.isnan(scale):
                    return P, np.float32(np.nan)
                a = Fraction(float(scale))
                acc = round_f32(p * round_f32(D * a) + acc)
                for g, N in enumerate(mins):
                    S = sums[g] if len(mins) == 2 else sums[0] + sums[1]
                    acc = round_f32(N * round_f32(a * S) + acc)
            total = acc if c0 == 0 else round_f32(total + acc)
        lanes.append(total)
    step = LANES // 2
    while step >= 1:
        for l in range(step):
            lanes[l] = round_f32(lanes[l] + lanes[l + step])
        step //= 2
    return P, as_f32(lanes[0])


def special_blocks(rng):
    """Blocks that reach the edges of the quantization."""
    out = []
    z = np.zeros(BLOCK, dtype=np.float32)
    out.append(z.copy())                                         # all zero: scale 0
    b = z.copy(); b[3] = -0.0; out.append(b)                      # -0 only
    b = rng.standard_normal(BLOCK).astype(np.float32); b[5] = np.inf; out.append(b)
    b = rng.standard_normal(BLOCK).astype(np.float32); b[0] = np.nan; out.append(b)
    b = np.full(BLOCK, np.float32(1.0)); b[1] = np.float32(2 - 2 ** -23); out.append(b)  # m just below 2
    b = np.array([(2 * k + 1) / 254 for k in range(-16, 16)], dtype=np.float32); b[31] = 1.0; out.append(b)  # near ties
    b = np.array([k / 127 for k in range(-16, 16)], dtype=np.float32); b[0] = -1.0; out.append(b)  # exact codes
    b = (rng.standard_normal(BLOCK) * 1e-41).astype(np.float32); out.append(b)    # subnormal max
    b = (rng.standard_normal(BLOCK) * 1e-43).astype(np.float32); out.append(b)    # tiny subnormal max
    b = (rng.standard_normal(BLOCK) * 1e-36).astype(np.float32); out.append(b)
    b = (rng.standard_normal(BLOCK) * 1e30).astype(np.float32); b[2] = 1e-30; out.append(b)
    b = (np.clip(rng.standard_normal(BLOCK), -3, 3) * 1.0e38).astype(np.float32); out.append(b)  # huge
    b = np.full(BLOCK, np.float32(3.0e38)); b[4] = -3.0e38; out.append(b)
    for scale in (1e-3, 1.0, 50.0, 3000.0):
        out.append((rng.standard_normal(BLOCK) * scale).astype(np.float32))
    b = rng.standard_normal(BLOCK).astype(np.float32); b[9] = 400.0; out.append(b)  # an outlier
    return out


def f16_bytes(rng, lo=-4, hi=0):
    d = np.float16(rng.uniform(0.5, 2.0) * 10.0 ** rng.integers(lo, hi))
    if rng.random() < 0.2:
        d = -d
    return d.tobytes()


def random_row(rng, qtype, n, extreme):
    """n weights of qtype: random codes with small finite scales; `extreme`:
    the codes and scales that give the largest block sums."""
    elems, size = GGML_QUANT_SIZES[qtype]
    out = bytearray()
    for _ in range(n // elems):
        blk = bytearray(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
        fields = {T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0], T.IQ4_NL: [0],
                  T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208], T.IQ4_XS: [0]}[qtype]
        for at in fields:
            blk[at:at + 2] = f16_bytes(rng)
        if extreme:
            if qtype == T.Q8_0:
                blk[2:34] = np.full(32, -128, dtype=np.int8).tobytes()
            elif qtype in (T.Q4_0, T.Q5_0, T.IQ4_NL):
                blk[2:size] = bytes(size - 2)           # v = -8, -16, -127
            elif qtype in (T.Q4_1, T.Q5_1):
                blk[4:size] = bytes([0xFF] * (size - 4))  # v = 15, 31
            elif qtype in (T.Q4_K, T.Q5_K):
                blk[4:16] = bytes([0xFF] * 12)          # every scale and min 63
                blk[16:] = bytes([0xFF] * (size - 16))  # every code at its top
            elif qtype == T.Q6_K:
                blk[0:192] = bytes(192)                 # every code 0: v = -32
                blk[192:208] = np.full(16, -128, dtype=np.int8).tobytes()
            elif qtype == T.IQ4_XS:
                blk[2:8] = bytes(6)                     # every scale 0: k = -32
                blk[8:136] = bytes(128)                 # every code 0: value -127
            elif qtype == T.Q3_K:
                blk[0:96] = bytes(96)                   # v = -4
                blk[96:108] = bytes(12)                 # k = -32
            elif qtype == T.Q2_K:
                blk[0:16] = bytes([0xFF] * 16)
                blk[16:80] = bytes([0xFF] * 64)
        out += blk
    row = bytes(out)
    check_decoding(qtype, row)
    return row


def activations(rng, n, extreme):
    if extreme:  # every code 127: against random_row's extreme weights, the largest block sums
        return np.full(n, np.float32(1.0))
    x = rng.standard_normal(n).astype(np.float64)
    x[rng.integers(0, n, max(1, n // 200))] *= 60.0  # a few large features, as in LLM activations
    x[rng.integers(0, n, max(1, n // 100))] = 0.0
    return x.astype(np.float32)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    rng = np.random.default_rng(20261202)
    lines = ["# integer-profile known answers: tests/tools/int_dot_vectors.py (do not edit)"]
    for blk in special_blocks(rng):
        scale, codes, sums = quantize_block(blk)
        lines.append("quant " + " ".join(f"{f32_bits(v):08x}" for v in blk) + f" {f32_bits(scale):08x} "
                     + " ".join(str(c) for c in codes) + f" {sums[0]} {sums[1]}")
    small = [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.IQ4_NL]
    big = [T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K, T.IQ4_XS]
    cases = [(t, n, False) for t in small for n in (32, 96, 640)] + [(t, 256, True) for t in small]
    cases += [(t, n, False) for t in big for n in (256, 768, 2304)] + [(t, 256, True) for t in big]
    cases += [(T.Q4_0, 32 * 1090, False)]  # past one chunk of 1024 block terms
    for qtype, n, extreme in cases:
        x = activations(rng, n, extreme)
        row = random_row(rng, qtype, n, extreme)
        P, res = dot(qtype, row, x)
        lines.append(f"dot {int(qtype)} {n} " + " ".join(f"{f32_bits(v):08x}" for v in x) + " " + row.hex() + " "
                     + " ".join(str(p) for p in P) + f" {f32_bits(res):08x}")
    with open(sys.argv[1], "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
