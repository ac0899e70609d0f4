#!/usr/bin/env python3
"""ctypes smoke test of an installed libdetinfer.

Usage:
  python3 tests/test_ffi.py LIBPATH MODEL.gguf

Loads the shared library with ctypes (no C compiler, no header parsing),
runs one step of a few tokens through the public API of include/detinfer.h
and checks the results independently of the library: the logits digest
against the `xxhash` package, the greedy token against numpy, the sequence
digest against the token bytes. If MODEL's directory has NAME.tokens and
NAME.ref (tests/tools/make_test_models.py), the prompt is taken from there
and the distance to the float64 reference is printed (for information).
Prints "ffi: OK ..." and exits 0, or prints "ffi: FAIL: ..." and exits 1.
"""

import ctypes as C
import os
import struct
import sys

import numpy as np
import xxhash

# Numbers from include/detinfer.h (never renumbered).
DI_OK = 0
DI_ERR_SAMPLING_REFUSED = 7
DI_MODEL_N_VOCAB = 1
DI_CONFIG_THREADS = 1
DI_CONFIG_TEMPERATURE = 6
DI_DIGEST_HEX_SIZE = 33
N_PROMPT = 5


class Digest(C.Structure):
    _fields_ = [("bytes", C.c_uint8 * 16)]


class Failure(Exception):
    pass


def declare(lib):
    """argtypes/restype of every function this test calls. Handles are void*."""
    P = C.c_void_p
    sigs = {
        "di_status_name": (C.c_char_p, [C.c_int]),
        "di_version_string": (C.c_char_p, []),
        "di_model_load": (C.c_int, [C.c_char_p, C.POINTER(P), C.c_char_p, C.c_size_t]),
        "di_model_free": (None, [P]),
        "di_model_get_int": (C.c_int, [P, C.c_int, C.POINTER(C.c_int64)]),
        "di_config_create": (C.c_int, [C.POINTER(P)]),
        "di_config_free": (None, [P]),
        "di_config_set_int": (C.c_int, [P, C.c_int, C.c_int64]),
        "di_config_set_float": (C.c_int, [P, C.c_int, C.c_double]),
        "di_config_errmsg": (C.c_char_p, [P]),
        "di_session_create": (C.c_int, [P, P, C.POINTER(P), C.c_char_p, C.c_size_t]),
        "di_session_free": (None, [P]),
        "di_session_errmsg": (C.c_char_p, [P]),
        "di_session_step": (C.c_int, [P, C.c_uint32, C.POINTER(C.c_uint32),
                                      C.POINTER(C.c_uint32), C.POINTER(C.c_int32),
                                      C.c_uint32]),
        "di_session_logits": (C.c_int, [P, C.c_uint32, C.POINTER(C.POINTER(C.c_float)),
                                        C.POINTER(Digest)]),
        "di_session_greedy_token": (C.c_int, [P, C.c_uint32, C.POINTER(C.c_int32)]),
        "di_session_seq_digest": (C.c_int, [P, C.c_uint32, C.POINTER(Digest)]),
        "di_digest_format": (C.c_int, [C.POINTER(Digest), C.c_char_p]),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes


def check(lib, what, status, detail=""):
    if status != DI_OK:
        name = lib.di_status_name(status).decode()
        raise Failure(f"{what} returned {status} ({name}) {detail}".rstrip())


def text(ptr):
    return ptr.decode("utf-8", "replace") if ptr else ""


def digest_hex(lib, d):
    buf = C.create_string_buffer(DI_DIGEST_HEX_SIZE)
    check(lib, "di_digest_format", lib.di_digest_format(C.byref(d), buf))
    return buf.value.decode()


def first_argmax(row):
    """Lowest index of the largest non-NaN value; 0 for an all-NaN row."""
    if np.all(np.isnan(row)):
        return 0
    clean = np.where(np.isnan(row), -np.inf, row)
    return int(np.argmax(clean))  # numpy returns the first maximum


def prompt_and_ref(model_path, n_vocab):
    """Tokens to feed and, when available, the float64 reference row."""
    base = os.path.splitext(model_path)[0]
    try:
        with open(base + ".tokens") as f:
            tokens = [int(t) for t in f.read().split()][:N_PROMPT]
    except OSError:
        return [(7 * i + 1) % n_vocab for i in range(N_PROMPT)], None
    try:
        with open(base + ".ref", "rb") as f:
            data = f.read()
        n_tok, nv = struct.unpack_from("<II", data, 8)
        logits = np.frombuffer(data, "<f8", n_tok * nv, 16 + 4 * n_tok).reshape(n_tok, nv)
        ref_row = logits[len(tokens) - 1]
    except (OSError, struct.error, ValueError):
        ref_row = None
    return tokens, ref_row


def check_temperature_needs_do_sample(lib, model, config):
    """The sampling keys start a session's sequences sampling; temperature > 0
    without do_sample is refused when the session is created."""
    check(lib, "di_config_set_float(TEMPERATURE)", lib.di_config_set_float(config, DI_CONFIG_TEMPERATURE, 0.7))
    session = C.c_void_p()
    err = C.create_string_buffer(512)
    st = lib.di_session_create(model, config, C.byref(session), err, len(err))
    if st != DI_ERR_SAMPLING_REFUSED:
        lib.di_session_free(session)
        raise Failure(f"temperature 0.7 without do_sample gave status {st}, expected {DI_ERR_SAMPLING_REFUSED}")
    msg = err.value.decode("utf-8", "replace").lower()
    if "temperature" not in msg or "do_sample" not in msg:
        raise Failure(f"refusal message does not name temperature and do_sample: {msg!r}")
    check(lib, "di_config_set_float(TEMPERATURE)", lib.di_config_set_float(config, DI_CONFIG_TEMPERATURE, 0.0))


def run_step(lib, session, tokens):
    seq_ids = (C.c_uint32 * 1)(0)
    n_tokens = (C.c_uint32 * 1)(len(tokens))
    toks = (C.c_int32 * len(tokens))(*tokens)
    st = lib.di_session_step(session, 1, seq_ids, n_tokens, toks, 0)
    check(lib, "di_session_step", st, text(lib.di_session_errmsg(session)))


def check_logits(lib, session, n_vocab):
    """Returns (row, hex digest, greedy token) after checking them."""
    ptr = C.POINTER(C.c_float)()
    d = Digest()
    check(lib, "di_session_logits", lib.di_session_logits(session, 0, C.byref(ptr), C.byref(d)))
    if not ptr:
        raise Failure("di_session_logits gave a NULL row")
    row = np.ctypeslib.as_array(ptr, shape=(n_vocab,)).copy()
    if not np.all(np.isfinite(row)):
        raise Failure("logits row has non-finite values")

    row_bytes = row.astype("<f4").tobytes()
    want = xxhash.xxh3_128_hexdigest(row_bytes)
    got = digest_hex(lib, d)
    if got != want:
        raise Failure(f"logits digest {got} != xxh3_128 {want}")
    if bytes(d.bytes) != xxhash.xxh3_128_digest(row_bytes):
        raise Failure("digest bytes are not canonical (big-endian) XXH3-128")

    tok = C.c_int32()
    check(lib, "di_session_greedy_token", lib.di_session_greedy_token(session, 0, C.byref(tok)))
    if tok.value != first_argmax(row):
        raise Failure(f"greedy token {tok.value} != numpy argmax {first_argmax(row)}")
    return row, got, tok.value


def check_seq_digest(lib, session, tokens):
    d = Digest()
    check(lib, "di_session_seq_digest", lib.di_session_seq_digest(session, 0, C.byref(d)))
    want = xxhash.xxh3_128_hexdigest(np.asarray(tokens, dtype="<i4").tobytes())
    got = digest_hex(lib, d)
    if got != want:
        raise Failure(f"sequence digest {got} != xxh3_128 of tokens {want}")


def smoke(lib_path, model_path):
    lib = C.CDLL(lib_path)
    declare(lib)
    version = text(lib.di_version_string())
    if not version:
        raise Failure("empty di_version_string")

    model, config, session = C.c_void_p(), C.c_void_p(), C.c_void_p()
    err = C.create_string_buffer(512)
    try:
        st = lib.di_model_load(model_path.encode(), C.byref(model), err, len(err))
        check(lib, "di_model_load", st, err.value.decode("utf-8", "replace"))
        n_vocab = C.c_int64()
        check(lib, "di_model_get_int", lib.di_model_get_int(model, DI_MODEL_N_VOCAB, C.byref(n_vocab)))
        n_vocab = n_vocab.value

        check(lib, "di_config_create", lib.di_config_create(C.byref(config)))
        check(lib, "di_config_set_int(THREADS)", lib.di_config_set_int(config, DI_CONFIG_THREADS, 2))
        check_temperature_needs_do_sample(lib, model, config)

        st = lib.di_session_create(model, config, C.byref(session), err, len(err))
        check(lib, "di_session_create", st, err.value.decode("utf-8", "replace"))

        tokens, ref_row = prompt_and_ref(model_path, n_vocab)
        run_step(lib, session, tokens)
        row, row_hex, greedy = check_logits(lib, session, n_vocab)
        check_seq_digest(lib, session, tokens)
    finally:
        lib.di_session_free(session)
        lib.di_config_free(config)
        lib.di_model_free(model)

    summary = f"version {version} n_vocab {n_vocab} tokens {tokens} greedy {greedy} digest {row_hex}"
    if ref_row is not None and ref_row.shape == row.shape:
        summary += f" max|logit-ref| {np.max(np.abs(row - ref_row)):.3g}"
    return summary


def main(argv):
    if len(argv) != 3:
        print("usage: test_ffi.py LIBPATH MODEL.gguf", file=sys.stderr)
        return 2
    try:
        summary = smoke(argv[1], argv[2])
    except (Failure, OSError, AttributeError) as e:
        # OSError: library not loadable; AttributeError: a symbol is missing.
        print(f"ffi: FAIL: {e}", file=sys.stderr)
        return 1
    print(f"ffi: OK {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
