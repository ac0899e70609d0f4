#!/usr/bin/env python3
"""High-precision reference values for the RoPE functions of kernels/common/numerics.h.

Usage: rope_reference.py OUT

mpmath at 256 bits computes, for every freq_base in use and head sizes 64,
128 and 256, the inverse frequencies base^(-2i/n_rot) (the exponent is the
binary64 quotient (-2.0*i)/n_rot, as the library forms it) and, for sampled
positions up to 2^20 (and a few angles near multiples of pi/2), sin and cos
of the binary64 angle (pos * scale) * inv_freq. Each line gives the
correctly rounded binary64 and binary32 results, in hex (float.hex):

  F base i n_rot inv_freq
  S theta sin64 cos64 sin32 cos32

Correctly rounded means: the nearest value, from a 256-bit evaluation. A
value that lies within 2^-30 ulp of a rounding midpoint (none does in this
set; the script fails if one did) would need more care.
"""

import struct
import sys

import mpmath as mp

mp.mp.prec = 256

BASES = (10000.0, 500000.0, 1000000.0, 10000000.0)
N_ROTS = (64, 128, 256)
POSITIONS = sorted(set(list(range(0, 64)) + [4095, 4096, 32767, 32768, 131071, 524287, 1000000,
                                              1048575] + [int(1.618 ** k) for k in range(10, 29)]))


def round_binary32(x):
    """Nearest binary32 of an mpf (round to nearest even), as a Python float."""
    f = float(x)  # nearest binary64 first: double rounding is checked below
    f32 = struct.unpack("<f", struct.pack("<f", f))[0]
    # check the binary32 neighbour that is truly nearest
    lo, hi = sorted((f32, nextafter32(f32, f)))
    if lo == hi:
        return f32
    mid = (mp.mpf(lo) + mp.mpf(hi)) / 2
    if abs(x - mid) < abs(mp.mpf(hi) - mp.mpf(lo)) * mp.mpf(2) ** -30:
        sys.exit(f"value {x} is too close to a binary32 midpoint")
    return lo if x < mid else hi


def nextafter32(f, toward):
    b = struct.unpack("<I", struct.pack("<f", f))[0]
    if toward > f:
        b = b + 1 if f >= 0 else b - 1
    elif toward < f:
        b = b - 1 if f > 0 else b + 1
    else:
        return f
    return struct.unpack("<f", struct.pack("<I", b & 0xffffffff))[0]


def round_binary64(x):
    f = float(x)
    ulp = mp.mpf(abs(f)) * mp.mpf(2) ** -52 if f else mp.mpf(2) ** -1074
    err = abs(x - mp.mpf(f)) / ulp
    if abs(err - mp.mpf("0.5")) < mp.mpf(2) ** -30:
        sys.exit(f"value {x} is too close to a binary64 midpoint")
    return f


def main(out):
    lines = []
    thetas = set()
    for base in BASES:
        for n_rot in N_ROTS:
            for i in range(n_rot // 2):
                e = -2.0 * i / n_rot  # binary64, as the library forms it
                inv = round_binary64(mp.power(mp.mpf(base), mp.mpf(e)))
                lines.append(f"F {base.hex()} {i} {n_rot} {inv.hex()}")
                if i % 7 == 0 or i == n_rot // 2 - 1:
                    for p in POSITIONS:
                        thetas.add(float(p) * 1.0 * inv)
    # angles a hair from multiples of pi/2 (the argument reduction's hard case)
    for k in range(1, 2000, 37):
        thetas.add(float(mp.pi / 2 * k))
    for t in sorted(thetas):
        s, c = mp.sin(mp.mpf(t)), mp.cos(mp.mpf(t))
        lines.append(f"S {t.hex()} {round_binary64(s).hex()} {round_binary64(c).hex()} "
                     f"{round_binary32(s).hex()} {round_binary32(c).hex()}")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
