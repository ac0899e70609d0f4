#!/usr/bin/env python3
"""An independent reference of the sampling order (docs/DETERMINISM.md,
"Sampling"), in float64 with NumPy and a pure-Python Philox4x32-10, checked
against the library's di_session_sample_token through ctypes.

    tests/sampling_reference.py LIBDETINFER.so MODEL.gguf [MODEL.gguf ...]

For each model, several parameter sets and seeds: the prompt (MODEL.tokens),
then 12 sampled tokens; at every step the reference chooses from the same
logits row and the same history. float64 and the library's float32 round
differently, so a step whose reference draw lies within 1e-5 of a cut (a
top-p prefix sum, a min-p threshold, a CDF boundary) is counted undecided
instead of compared; every decided step must agree, and at least 90% must be
decided. Prints one summary line per model; exit status 1 on a mismatch.
"""

import ctypes as C
import os
import sys

import numpy as np

M32 = 0xFFFFFFFF
MARGIN = 1e-5


def philox4x32_10(ctr, key):
    c, k = list(ctr), list(key)
    for r in range(10):
        if r:
            k = [(k[0] + 0x9E3779B9) & M32, (k[1] + 0xBB67AE85) & M32]
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k[0], p1 & M32, (p0 >> 32) ^ c[3] ^ k[1], p0 & M32]
    return c


# Random123's tests/kat_vectors, the "philox4x32 10" line with the digits of pi
assert philox4x32_10([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344], [0xA4093822, 0x299F31D0]) == [
    0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]


def uniform(seed, position):
    return (philox4x32_10([position, 0, 0, 0], [seed & M32, seed >> 32])[0] >> 8) / 2.0**24


def near(a, b):
    return abs(a - b) <= MARGIN * max(1.0, abs(b))


def reference(row, history, p, position):
    """(token, decided) for one logits row."""
    l = row.astype(np.float64)
    window = history if p["penalty_window"] == 0 else history[-p["penalty_window"]:]
    ids, counts = np.unique(np.asarray(window, dtype=np.int64), return_counts=True)
    for v, c in zip(ids, counts):
        x = l[v]
        x = x / p["repetition_penalty"] if x > 0 else x * p["repetition_penalty"]
        l[v] = x - (c * p["frequency_penalty"] + p["presence_penalty"])
    if p["temperature"] == 0:
        top2 = np.sort(l)[-2:]
        return int(np.argmax(l)), not near(top2[1], top2[0])
    z = l / p["temperature"]
    order = sorted(np.flatnonzero(~np.isnan(z)), key=lambda i: (-z[i], i))
    if p["top_k"]:
        order = order[: p["top_k"]]
    w = np.exp(z[order] - z[order[0]])
    prob = w / w.sum()
    decided = True
    n = len(order)
    if p["top_p"] < 1:
        cum = np.cumsum(prob)
        n = int(np.searchsorted(cum, p["top_p"])) + 1
        n = min(n, len(order))
        decided &= not any(near(c, p["top_p"]) for c in cum[max(0, n - 2):n + 1])
    thr = p["min_p"] * prob[0]
    kept = [j for j in range(n) if prob[j] >= thr]
    decided &= not any(near(prob[j], thr) for j in range(n)) or p["min_p"] == 0
    target = uniform(p["seed"], position) * sum(prob[j] for j in kept)
    acc = 0.0
    for j in kept:
        acc += prob[j]
        if acc > target:
            decided &= not near(acc, target) and not near(acc - prob[j], target)
            return int(order[j]), decided
    return int(order[kept[-1]]), False


PARAMS = [
    dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repetition_penalty=1.0, presence_penalty=0.0,
         frequency_penalty=0.0, penalty_window=64),
    dict(temperature=0.7, top_k=20, top_p=0.9, min_p=0.05, repetition_penalty=1.3, presence_penalty=0.0,
         frequency_penalty=0.0, penalty_window=16),
    dict(temperature=1.6, top_k=0, top_p=0.97, min_p=0.0, repetition_penalty=1.0, presence_penalty=0.4,
         frequency_penalty=0.15, penalty_window=0),
    dict(temperature=0.0, top_k=0, top_p=1.0, min_p=0.0, repetition_penalty=1.5, presence_penalty=0.3,
         frequency_penalty=0.0, penalty_window=8),
]


class Params(C.Structure):
    _fields_ = [("size", C.c_uint32), ("temperature", C.c_float), ("top_k", C.c_int32), ("top_p", C.c_float),
                ("min_p", C.c_float), ("repetition_penalty", C.c_float), ("presence_penalty", C.c_float),
                ("frequency_penalty", C.c_float), ("penalty_window", C.c_uint32), ("seed", C.c_uint64)]


def check_model(lib, path):
    P = C.c_void_p
    model, session = P(), P()
    err = C.create_string_buffer(512)
    assert lib.di_model_load(path.encode(), C.byref(model), err, 512) == 0, err.value
    n_vocab = C.c_int64()
    lib.di_model_get_int(model, 1, C.byref(n_vocab))
    assert lib.di_session_create(model, None, C.byref(session), err, 512) == 0, err.value
    with open(os.path.splitext(path)[0] + ".tokens") as f:
        prompt = [int(t) for t in f.read().split()]
    ptr = C.POINTER(C.c_float)()
    compared = decided = 0
    bad = []
    for k, base in enumerate(PARAMS):
        for seed in (1, 2**40 + 3, 987654321):
            p = Params()
            lib.di_sampling_params_init(C.byref(p))
            for key, value in base.items():
                setattr(p, key, value)
            p.seed = seed
            lib.di_session_seq_reset(session, 0)
            assert lib.di_session_seq_set_sampling(session, 0, C.byref(p)) == 0
            # the parameters as the library holds them (float32), for the reference
            ref = {key: getattr(p, key) for key, _ in Params._fields_}
            history = list(prompt)
            feed = list(prompt)
            for step in range(12):
                seq = (C.c_uint32 * 1)(0)
                cnt = (C.c_uint32 * 1)(len(feed))
                assert lib.di_session_step(session, 1, seq, cnt, (C.c_int32 * len(feed))(*feed), 0) == 0
                assert lib.di_session_logits(session, 0, C.byref(ptr), None) == 0
                row = np.ctypeslib.as_array(ptr, shape=(n_vocab.value,)).copy()
                token = C.c_int32()
                assert lib.di_session_sample_token(session, 0, C.byref(token)) == 0
                want, ok = reference(row, history, ref, len(history))
                compared += 1
                if ok:
                    decided += 1
                    if want != token.value:
                        bad.append((k, seed, step, token.value, want))
                history.append(token.value)
                feed = [token.value]
    lib.di_session_free(session)
    lib.di_model_free(model)
    name = os.path.basename(path)
    print(f"sampling reference {name}: {compared} draws, {decided} decided, {len(bad)} differ")
    for k, seed, step, got, want in bad[:5]:
        print(f"  parameters {k} seed {seed} step {step}: library {got}, reference {want}")
    return not bad and decided >= 0.9 * compared


def main():
    lib = C.CDLL(sys.argv[1])
    lib.di_model_load.argtypes = [C.c_char_p, C.POINTER(C.c_void_p), C.c_char_p, C.c_size_t]
    lib.di_model_free.argtypes = [C.c_void_p]
    lib.di_model_get_int.argtypes = [C.c_void_p, C.c_int, C.POINTER(C.c_int64)]
    lib.di_session_create.argtypes = [C.c_void_p, C.c_void_p, C.POINTER(C.c_void_p), C.c_char_p, C.c_size_t]
    lib.di_session_free.argtypes = [C.c_void_p]
    lib.di_session_seq_reset.argtypes = [C.c_void_p, C.c_uint32]
    lib.di_sampling_params_init.argtypes = [C.POINTER(Params)]
    lib.di_session_seq_set_sampling.argtypes = [C.c_void_p, C.c_uint32, C.POINTER(Params)]
    lib.di_session_step.argtypes = [C.c_void_p, C.c_uint32, C.POINTER(C.c_uint32), C.POINTER(C.c_uint32),
                                    C.POINTER(C.c_int32), C.c_uint32]
    lib.di_session_logits.argtypes = [C.c_void_p, C.c_uint32, C.POINTER(C.POINTER(C.c_float)), C.c_void_p]
    lib.di_session_sample_token.argtypes = [C.c_void_p, C.c_uint32, C.POINTER(C.c_int32)]
    ok = all([check_model(lib, path) for path in sys.argv[2:]])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
