"""A small Python binding of libdetinfer over ctypes (no compiler needed).

    from detinfer import Library
    lib = Library()                       # finds libdetinfer.so.1 (or pass a path)
    model = lib.load("model.gguf")
    session = model.session(threads=2, max_sequences=4)
    ids = model.tokenize("The capital of France is")
    session.step({0: ids})
    logits, digest = session.logits(0)    # numpy float32 row, 32 hex characters
    next_id = session.greedy(0)
    session.set_sampling(0, temperature=0.8, top_p=0.95, seed=42)
    sampled_id = session.sample(0)        # seeded: the same token in any batch

Errors raise DetinferError with the status name and the library's message.
Only the public API of include/detinfer.h is used.
"""

import ctypes as C
import ctypes.util
import os

try:
    import numpy as np
except ImportError:  # numpy is optional: logits then come back as lists
    np = None

# Numbers from include/detinfer.h (never renumbered).
DI_OK = 0
DI_ERR_BUFFER_TOO_SMALL = 16
MODEL_KEYS = {"n_vocab": 1, "n_ctx_train": 2, "n_embd": 3, "n_layer": 4, "n_head": 5,
              "n_head_kv": 6, "n_ff": 7, "n_params": 8, "file_size": 9}
CONFIG_INT = {"threads": 1, "max_sequences": 2, "context_length": 3, "backend": 4,
              "profile": 5, "do_sample": 7, "top_k": 9, "seed": 11}
CONFIG_FLOAT = {"temperature": 6, "top_p": 8, "repetition_penalty": 10}
STEP_ALL_LOGITS = 0x1
TOKENIZE_ADD_BOS = 0x1


class DetinferError(Exception):
    def __init__(self, status, name, message):
        super().__init__(f"{name}: {message}")
        self.status = status
        self.name = name


class Digest(C.Structure):
    _fields_ = [("bytes", C.c_uint8 * 16)]

    def hex(self):
        return bytes(self.bytes).hex()


class SamplingParams(C.Structure):
    """di_sampling_params (DETINFER_1.2), field for field."""
    _fields_ = [("size", C.c_uint32), ("temperature", C.c_float), ("top_k", C.c_int32),
                ("top_p", C.c_float), ("min_p", C.c_float), ("repetition_penalty", C.c_float),
                ("presence_penalty", C.c_float), ("frequency_penalty", C.c_float),
                ("penalty_window", C.c_uint32), ("seed", C.c_uint64)]


_P = C.c_void_p
_SIGNATURES = {
    "di_status_name": (C.c_char_p, [C.c_int]),
    "di_version_string": (C.c_char_p, []),
    "di_build_info": (C.c_char_p, []),
    "di_model_load": (C.c_int, [C.c_char_p, C.POINTER(_P), C.c_char_p, C.c_size_t]),
    "di_model_free": (None, [_P]),
    "di_model_get_int": (C.c_int, [_P, C.c_int, C.POINTER(C.c_int64)]),
    "di_model_architecture": (C.c_char_p, [_P]),
    "di_model_tokenize": (C.c_int, [_P, C.c_char_p, C.c_size_t, C.c_uint32, C.POINTER(C.c_int32),
                                    C.c_size_t, C.POINTER(C.c_size_t), C.c_char_p, C.c_size_t]),
    "di_model_detokenize": (C.c_int, [_P, C.POINTER(C.c_int32), C.c_size_t, C.c_char_p, C.c_size_t,
                                      C.POINTER(C.c_size_t), C.c_char_p, C.c_size_t]),
    "di_config_create": (C.c_int, [C.POINTER(_P)]),
    "di_config_free": (None, [_P]),
    "di_config_set_int": (C.c_int, [_P, C.c_int, C.c_int64]),
    "di_config_set_float": (C.c_int, [_P, C.c_int, C.c_double]),
    "di_config_errmsg": (C.c_char_p, [_P]),
    "di_session_create": (C.c_int, [_P, _P, C.POINTER(_P), C.c_char_p, C.c_size_t]),
    "di_session_free": (None, [_P]),
    "di_session_errmsg": (C.c_char_p, [_P]),
    "di_session_step": (C.c_int, [_P, C.c_uint32, C.POINTER(C.c_uint32), C.POINTER(C.c_uint32),
                                  C.POINTER(C.c_int32), C.c_uint32]),
    "di_session_logits": (C.c_int, [_P, C.c_uint32, C.POINTER(C.POINTER(C.c_float)),
                                    C.POINTER(Digest)]),
    "di_session_logits_at": (C.c_int, [_P, C.c_uint32, C.c_uint32, C.POINTER(C.POINTER(C.c_float)),
                                       C.POINTER(Digest)]),
    "di_session_greedy_token": (C.c_int, [_P, C.c_uint32, C.POINTER(C.c_int32)]),
    "di_session_seq_digest": (C.c_int, [_P, C.c_uint32, C.POINTER(Digest)]),
    "di_session_seq_reset": (C.c_int, [_P, C.c_uint32]),
    "di_sampling_params_init": (C.c_int, [C.POINTER(SamplingParams)]),
    "di_session_seq_set_sampling": (C.c_int, [_P, C.c_uint32, C.POINTER(SamplingParams)]),
    "di_session_sample_token": (C.c_int, [_P, C.c_uint32, C.POINTER(C.c_int32)]),
    "di_session_seq_digest_extra": (C.c_int, [_P, C.c_uint32, C.POINTER(C.c_int32), C.c_size_t,
                                              C.POINTER(Digest)]),
}


class Library:
    """The loaded shared library, with every signature declared."""

    def __init__(self, path=None):
        path = path or os.environ.get("DETINFER_LIB") or ctypes.util.find_library("detinfer") \
            or "libdetinfer.so.1"
        self.c = C.CDLL(path)
        for name, (restype, argtypes) in _SIGNATURES.items():
            fn = getattr(self.c, name)
            fn.restype, fn.argtypes = restype, argtypes

    def check(self, status, message):
        if status != DI_OK:
            name = self.c.di_status_name(status).decode()
            msg = message() if callable(message) else message
            raise DetinferError(status, name, msg.decode(errors="replace") if isinstance(msg, bytes) else msg)

    def version(self):
        return self.c.di_version_string().decode()

    def load(self, path):
        return Model(self, path)


class Model:
    def __init__(self, lib, path):
        self.lib = lib
        self.handle = _P()
        err = C.create_string_buffer(512)
        lib.check(lib.c.di_model_load(os.fsencode(path), C.byref(self.handle), err, 512), err.value)
        self.n_vocab = self.get("n_vocab")

    def __del__(self):
        if getattr(self, "handle", None):
            self.lib.c.di_model_free(self.handle)
            self.handle = None

    def get(self, key):
        out = C.c_int64()
        self.lib.check(self.lib.c.di_model_get_int(self.handle, MODEL_KEYS[key], C.byref(out)), key)
        return out.value

    def architecture(self):
        return self.lib.c.di_model_architecture(self.handle).decode()

    def tokenize(self, text, add_bos=True):
        data = text.encode()
        need = C.c_size_t()
        err = C.create_string_buffer(512)
        flags = TOKENIZE_ADD_BOS if add_bos else 0
        st = self.lib.c.di_model_tokenize(self.handle, data, len(data), flags, None, 0,
                                          C.byref(need), err, 512)
        if st not in (DI_OK, DI_ERR_BUFFER_TOO_SMALL):
            self.lib.check(st, err.value)
        ids = (C.c_int32 * max(need.value, 1))()
        self.lib.check(self.lib.c.di_model_tokenize(self.handle, data, len(data), flags, ids,
                                                    need.value, C.byref(need), err, 512), err.value)
        return list(ids[: need.value])

    def detokenize(self, ids):
        arr = (C.c_int32 * max(len(ids), 1))(*ids)
        need = C.c_size_t()
        err = C.create_string_buffer(512)
        st = self.lib.c.di_model_detokenize(self.handle, arr, len(ids), None, 0, C.byref(need), err, 512)
        if st not in (DI_OK, DI_ERR_BUFFER_TOO_SMALL):
            self.lib.check(st, err.value)
        buf = C.create_string_buffer(need.value + 1)
        self.lib.check(self.lib.c.di_model_detokenize(self.handle, arr, len(ids), buf, need.value + 1,
                                                      C.byref(need), err, 512), err.value)
        return buf.raw[: need.value].decode(errors="replace")

    def session(self, **settings):
        return Session(self, settings)


class Session:
    def __init__(self, model, settings):
        self.model, self.lib = model, model.lib
        c = self.lib.c
        config = _P()
        self.lib.check(c.di_config_create(C.byref(config)), "out of memory")
        try:
            for key, value in settings.items():
                if key in CONFIG_INT:
                    st = c.di_config_set_int(config, CONFIG_INT[key], int(value))
                else:
                    st = c.di_config_set_float(config, CONFIG_FLOAT[key], float(value))
                self.lib.check(st, lambda: c.di_config_errmsg(config))
            self.handle = _P()
            err = C.create_string_buffer(512)
            self.lib.check(c.di_session_create(model.handle, config, C.byref(self.handle), err, 512),
                           err.value)
        finally:
            c.di_config_free(config)

    def __del__(self):
        if getattr(self, "handle", None):
            self.lib.c.di_session_free(self.handle)
            self.handle = None

    def _check(self, status):
        self.lib.check(status, lambda: self.lib.c.di_session_errmsg(self.handle))

    def step(self, entries, all_logits=False):
        """entries: {sequence id: [token ids]}; one batch step over all of them."""
        seqs = list(entries)
        counts = [len(entries[s]) for s in seqs]
        flat = [t for s in seqs for t in entries[s]]
        self._check(self.lib.c.di_session_step(
            self.handle, len(seqs), (C.c_uint32 * len(seqs))(*seqs),
            (C.c_uint32 * len(seqs))(*counts), (C.c_int32 * len(flat))(*flat),
            STEP_ALL_LOGITS if all_logits else 0))

    def _row(self, ptr):
        if np is not None:
            return np.ctypeslib.as_array(ptr, shape=(self.model.n_vocab,)).copy()
        return ptr[: self.model.n_vocab]

    def logits(self, seq, index=None):
        """(row, digest hex) of the last position, or of position `index` of
        the last step when it used all_logits."""
        ptr, digest = C.POINTER(C.c_float)(), Digest()
        if index is None:
            self._check(self.lib.c.di_session_logits(self.handle, seq, C.byref(ptr), C.byref(digest)))
        else:
            self._check(self.lib.c.di_session_logits_at(self.handle, seq, index, C.byref(ptr),
                                                        C.byref(digest)))
        return self._row(ptr), digest.hex()

    def greedy(self, seq):
        out = C.c_int32()
        self._check(self.lib.c.di_session_greedy_token(self.handle, seq, C.byref(out)))
        return out.value

    def set_sampling(self, seq, **params):
        """Sets seq's sampling parameters (temperature, top_k, top_p, min_p,
        repetition_penalty, presence_penalty, frequency_penalty, penalty_window,
        seed); the others keep di_sampling_params_init's defaults. No
        arguments: the parameters the sequence started with."""
        if not params:
            self._check(self.lib.c.di_session_seq_set_sampling(self.handle, seq, None))
            return
        p = SamplingParams()
        self.lib.check(self.lib.c.di_sampling_params_init(C.byref(p)), "di_sampling_params_init")
        for key, value in params.items():
            if key == "size" or key not in dict(SamplingParams._fields_):
                raise TypeError(f"unknown sampling parameter {key!r}")
            setattr(p, key, value)
        self._check(self.lib.c.di_session_seq_set_sampling(self.handle, seq, C.byref(p)))

    def sample(self, seq):
        """The token seq's sampling parameters choose from its last logits
        (with the defaults, the greedy token)."""
        out = C.c_int32()
        self._check(self.lib.c.di_session_sample_token(self.handle, seq, C.byref(out)))
        return out.value

    def sequence_digest(self, seq, extra=()):
        """Digest of seq's tokens followed by `extra` tokens not stepped: with
        the generated tokens' last one, the digest of a generation."""
        digest = Digest()
        if extra:
            arr = (C.c_int32 * len(extra))(*extra)
            self._check(self.lib.c.di_session_seq_digest_extra(self.handle, seq, arr, len(extra),
                                                               C.byref(digest)))
        else:
            self._check(self.lib.c.di_session_seq_digest(self.handle, seq, C.byref(digest)))
        return digest.hex()

    def reset(self, seq):
        self._check(self.lib.c.di_session_seq_reset(self.handle, seq))
