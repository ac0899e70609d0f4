#!/usr/bin/env python3
"""The gap in ulp between two float32 values, counted independently of the
tool's C code (which maps float bits onto a line of integers): here by exact
rational arithmetic over the float32 binades.

    ulp_gap.py A B                      prints the gap between A and B
    ulp_gap.py --check-verify FILE N    checks the near ties of a
                                        `detinfer verify --json` report

gap(a, b) = the number of float32 values x with min(a, b) < x <= max(a, b),
+0 and -0 counted as one value: 0 when a == b, 1 for neighbours.
"""
import json
import sys
from fractions import Fraction

import numpy as np

SUBNORMAL_STEP = Fraction(1, 2**149)  # the smallest positive float32
MIN_NORMAL = Fraction(1, 2**126)


def floats_up_to(x):
    """How many float32 values lie in [0, x], for a finite x >= 0."""
    x = Fraction(x)
    if x < MIN_NORMAL:  # 0 and the subnormals: k * 2^-149, k < 2^23
        return int(x / SUBNORMAL_STEP) + 1
    count = 2**23  # 0 and every subnormal
    e = -126
    while Fraction(2) ** (e + 1) <= x:  # each whole binade [2^e, 2^(e+1)) holds 2^23 values
        count += 2**23
        e += 1
    step = Fraction(2) ** (e - 23)
    return count + int((x - Fraction(2) ** e) / step) + 1


def ulp_gap(a, b):
    a, b = float(np.float32(a)), float(np.float32(b))
    hi, lo = max(a, b), min(a, b)
    if lo >= 0:
        return floats_up_to(hi) - floats_up_to(lo)
    if hi <= 0:
        return floats_up_to(-lo) - floats_up_to(-hi)
    # (lo, 0) holds floats_up_to(-lo) - 2 values (neither 0 nor -lo), [0, hi] the rest
    return floats_up_to(-lo) - 2 + floats_up_to(hi)


def self_test():
    one = np.float32(1.0)
    tiny = float(np.float32(2.0**-149))
    cases = [
        (1.0, 1.0, 0),
        (float(np.nextafter(one, np.float32(2))), 1.0, 1),
        (1.0, 0.5, 2**23),
        (2.0, 1.0, 2**23),
        (tiny, -tiny, 2),
        (tiny, 0.0, 1),
        (-0.0, 0.0, 0),
        (-1.0, -2.0, 2**23),
        (1.0, -1.0, 2 * (floats_up_to(1.0) - 1)),
        # one binade, [16, 32): a step of 2^-19
        (20.9890499, 20.9881172, int((float(np.float32(20.9890499)) - float(np.float32(20.9881172))) * 2**19)),
    ]
    for a, b, want in cases:
        got = ulp_gap(a, b)
        assert got == want, f"ulp_gap({a!r}, {b!r}) = {got}, want {want}"


def check_verify(path, n_wanted):
    d = json.load(open(path))
    search, ties = d["near_tie_search"], d["near_ties"]
    sources = search["sources"]
    lengths = [len(s["tokens"]) + len(s["continuation"]) for s in sources if "continuation" in s]
    assert search["positions_searched"] == sum(lengths), (search["positions_searched"], sum(lengths))
    assert all(len(s["continuation"]) == search["continuation_tokens"] for s in sources if "continuation" in s)
    assert len(ties) == min(n_wanted, search["positions_searched"]), len(ties)
    keys = [(t["gap_ulps"], t["source"], t["position"]) for t in ties]
    assert keys == sorted(keys) and len(set(keys)) == len(keys), keys
    for rank, t in enumerate(ties, 1):
        assert t["rank"] == rank
        s = sources[t["source"]]
        assert t["position"] < len(s["tokens"]) + len(s["continuation"])
        assert t["top1"] != t["top2"] and t["top1_logit"] >= t["top2_logit"]
        want = ulp_gap(t["top1_logit"], t["top2_logit"])
        assert t["gap_ulps"] == want, f"near tie {rank}: gap_ulps {t['gap_ulps']}, recounted {want}"
        assert t["held"], f"near tie {rank} did not hold"
        axes = {(a["axis"], a["value"]) for a in d["axes"]}
        assert {(a["axis"], a["value"]) for a in t["axes"]} == axes
        for a in t["axes"]:
            assert a["result"] in ("held", "skipped"), a
            if a["result"] == "held":
                assert a["token"] == t["top1"] and a["digest"] == t["digest"], a
    print(f"{len(ties)} near ties, gaps {[t['gap_ulps'] for t in ties]} ulp, recounted exactly")


if __name__ == "__main__":
    self_test()
    if len(sys.argv) == 4 and sys.argv[1] == "--check-verify":
        check_verify(sys.argv[2], int(sys.argv[3]))
    elif len(sys.argv) == 3:
        print(ulp_gap(float(sys.argv[1]), float(sys.argv[2])))
    else:
        sys.exit(__doc__)
