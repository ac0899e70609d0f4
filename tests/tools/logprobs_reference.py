#!/usr/bin/env python3
"""High-precision references of the log-probabilities (tests/check_logprobs.c).

  logprobs_reference.py log OUT
      binary32 inputs x and the correctly rounded binary32 ln x, as pairs of
      little-endian float32 (x, ln x): every 257th float of [1, 2^32) (the
      range of the softmax sum a vocabulary of up to 2^32 tokens gives), the
      first and last 256 floats of each binade in it, the first and last 65536
      floats of [1, 2), and 200000 random positive finite floats of every
      magnitude (subnormal ones included). ln x comes from NumPy's float64
      log rounded to binary32; where that float64 lies within 4 binary64 ulps
      of a binary32 rounding midpoint (so that its own error could decide the
      side), mpmath at 200 bits decides instead.

  logprobs_reference.py softmax IN OUT
      IN: uint32 n_rows, uint32 n_vocab, then n_rows rows of n_vocab float32
      logits; OUT: the float64 log-softmax of each row (NumPy: x - max -
      log(sum(exp(x - max)))), n_rows * n_vocab float64.
"""
import struct
import sys

import numpy as np


def log_inputs():
    rng = np.random.default_rng(20261201)
    one, top = 0x3F800000, 0x4F800000  # bits of 1.0 and 2^32
    parts = [np.arange(one, top, 257, dtype=np.uint64)]
    for e in range(32):
        b = one + (e << 23)
        parts.append(np.arange(b, b + 256, dtype=np.uint64))
        parts.append(np.arange(b + (1 << 23) - 256, b + (1 << 23), dtype=np.uint64))
    parts.append(np.arange(one, one + 65536, dtype=np.uint64))
    parts.append(np.arange(0x40000000 - 65536, 0x40000000, dtype=np.uint64))
    parts.append(rng.integers(1, 0x7F800000, size=200000, dtype=np.uint64))
    bits = np.unique(np.concatenate(parts)).astype(np.uint32)
    return bits.view(np.float32)


def correctly_rounded_log(x32):
    import mpmath as mp
    mp.mp.prec = 200
    r = np.log(x32.astype(np.float64))
    f = r.astype(np.float32)
    # the binary32 neighbour on the other side of r, and the midpoint between them
    other = np.nextafter(f, np.where(r > f.astype(np.float64), np.float32(np.inf), np.float32(-np.inf)))
    mid = (f.astype(np.float64) + other.astype(np.float64)) / 2  # exact in binary64
    ulp64 = np.spacing(np.abs(r))
    close = np.abs(r - mid) <= 4 * ulp64
    out = f.copy()
    for i in np.nonzero(close & (r != 0))[0]:
        exact = mp.log(mp.mpf(float(x32[i])))
        lo, hi = sorted((float(f[i]), float(other[i])))
        m = (mp.mpf(lo) + mp.mpf(hi)) / 2
        if abs(exact - m) < abs(m) * mp.mpf(2) ** -120:
            sys.exit(f"ln {float(x32[i])!r} is too close to a binary32 midpoint to decide")
        out[i] = np.float32(lo if exact < m else hi)
    return out, int(np.count_nonzero(close))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "log":
        x = log_inputs()
        y, n_close = correctly_rounded_log(x)
        pairs = np.empty(2 * len(x), dtype="<f4")
        pairs[0::2], pairs[1::2] = x, y
        pairs.tofile(sys.argv[2])
        print(f"{len(x)} inputs, {n_close} decided by mpmath")
    elif len(sys.argv) == 4 and sys.argv[1] == "softmax":
        with open(sys.argv[2], "rb") as f:
            n_rows, n_vocab = struct.unpack("<II", f.read(8))
            z = np.frombuffer(f.read(), dtype="<f4").astype(np.float64).reshape(n_rows, n_vocab)
        m = z.max(axis=1, keepdims=True)
        lp = (z - m) - np.log(np.exp(z - m).sum(axis=1, keepdims=True))
        lp.astype("<f8").tofile(sys.argv[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
