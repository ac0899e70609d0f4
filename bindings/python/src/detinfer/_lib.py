"""Finding and loading libdetinfer.so.1, and the ctypes signature of every
function of include/detinfer.h (the only place the C API is declared here)."""

from __future__ import annotations

import ctypes as C
import ctypes.util
import os
import subprocess
import threading
from typing import Any, Dict, List, Optional, Tuple

SONAME = "libdetinfer.so.1"
# What pip install bundles (bindings/python/setup.py: make wheel-native):
# the library and the detinfer command, side by side in the package.
NATIVE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native")


def bundled(name: str) -> Optional[str]:
    """The bundled file `name` (SONAME or "detinfer"), or None when this copy
    of the package has none (imported from a source tree)."""
    path = os.path.join(NATIVE_DIR, name)
    return path if os.path.isfile(path) else None


class Digest(C.Structure):
    """di_digest: 16 bytes of XXH3-128 in canonical (big-endian) order."""

    _fields_ = [("bytes", C.c_uint8 * 16)]

    def hex(self) -> str:
        return bytes(self.bytes).hex()


class SamplingParamsC(C.Structure):
    """di_sampling_params (size-first: later releases add fields at the end)."""

    _fields_ = [
        ("size", C.c_uint32),
        ("temperature", C.c_float),
        ("top_k", C.c_int32),
        ("top_p", C.c_float),
        ("min_p", C.c_float),
        ("repetition_penalty", C.c_float),
        ("presence_penalty", C.c_float),
        ("frequency_penalty", C.c_float),
        ("penalty_window", C.c_uint32),
        ("seed", C.c_uint64),
    ]


_P = C.c_void_p
_I = C.c_int  # di_status and the enum keys
_SZ = C.c_size_t
_STR = C.c_char_p
_PSZ = C.POINTER(C.c_size_t)
_PI32 = C.POINTER(C.c_int32)
_PU32 = C.POINTER(C.c_uint32)
_PF = C.POINTER(C.POINTER(C.c_float))
_PD = C.POINTER(Digest)

# name: (restype, argtypes), in the header's order.
SIGNATURES: Dict[str, Tuple[Any, List[Any]]] = {
    "di_status_name": (_STR, [_I]),
    "di_version_number": (C.c_uint32, []),
    "di_version_string": (_STR, []),
    "di_build_info": (_STR, []),
    "di_digest_format": (_I, [_PD, _STR]),
    "di_digest_equal": (_I, [_PD, _PD]),
    "di_digest_floats": (_I, [C.POINTER(C.c_float), _SZ, _PD]),
    "di_digest_tokens": (_I, [_PI32, _SZ, _PD]),
    "di_model_load": (_I, [_STR, C.POINTER(_P), _STR, _SZ]),
    "di_model_free": (None, [_P]),
    "di_model_get_int": (_I, [_P, _I, C.POINTER(C.c_int64)]),
    "di_model_architecture": (_STR, [_P]),
    "di_model_tokenize": (_I, [_P, _STR, _SZ, C.c_uint32, _PI32, _SZ, _PSZ, _STR, _SZ]),
    "di_model_detokenize": (_I, [_P, _PI32, _SZ, _STR, _SZ, _PSZ, _STR, _SZ]),
    "di_model_token_piece": (_I, [_P, C.c_int32, _STR, _SZ, _PSZ]),
    "di_model_special_token": (_I, [_P, _I, _PI32]),
    "di_config_create": (_I, [C.POINTER(_P)]),
    "di_config_free": (None, [_P]),
    "di_config_set_int": (_I, [_P, _I, C.c_int64]),
    "di_config_set_float": (_I, [_P, _I, C.c_double]),
    "di_config_get_int": (_I, [_P, _I, C.POINTER(C.c_int64)]),
    "di_config_get_float": (_I, [_P, _I, C.POINTER(C.c_double)]),
    "di_config_errmsg": (_STR, [_P]),
    "di_session_create": (_I, [_P, _P, C.POINTER(_P), _STR, _SZ]),
    "di_session_free": (None, [_P]),
    "di_session_errmsg": (_STR, [_P]),
    "di_session_backend_info": (_STR, [_P]),
    "di_session_step": (_I, [_P, C.c_uint32, _PU32, _PU32, _PI32, C.c_uint32]),
    "di_session_logits": (_I, [_P, C.c_uint32, _PF, _PD]),
    "di_session_logits_at": (_I, [_P, C.c_uint32, C.c_uint32, _PF, _PD]),
    "di_session_greedy_token": (_I, [_P, C.c_uint32, _PI32]),
    "di_session_seq_length": (_I, [_P, C.c_uint32, _PU32]),
    "di_session_seq_digest": (_I, [_P, C.c_uint32, _PD]),
    "di_session_seq_reset": (_I, [_P, C.c_uint32]),
    "di_session_seq_truncate": (_I, [_P, C.c_uint32, C.c_uint32]),
    "di_session_seq_copy": (_I, [_P, C.c_uint32, C.c_uint32, C.c_uint32]),
    # DETINFER_1.2
    "di_session_seq_digest_extra": (_I, [_P, C.c_uint32, _PI32, _SZ, _PD]),
    "di_sampling_params_init": (_I, [C.POINTER(SamplingParamsC)]),
    "di_session_seq_set_sampling": (_I, [_P, C.c_uint32, C.POINTER(SamplingParamsC)]),
    "di_session_sample_token": (_I, [_P, C.c_uint32, _PI32]),
    "di_model_token_lookup": (_I, [_P, _STR, _SZ, _PI32]),
    "di_model_meta_string": (_I, [_P, _STR, _STR, _SZ, _PSZ]),
    "di_model_chat_template": (_STR, [_P]),
    "di_chat_format": (_I, [_STR, C.POINTER(_STR), C.POINTER(_STR), _SZ, _I, _STR, _SZ, _PSZ, _STR,
                            _SZ]),
    # DETINFER_1.3
    "di_cpu_path_resolve": (_I, [_I, C.POINTER(C.c_int), _STR, _SZ]),
    "di_cpu_path_name": (_STR, [_I]),
    "di_session_kv_bytes": (_I, [_P, C.POINTER(C.c_uint64)]),
    "di_session_logprobs": (_I, [_P, C.c_uint32, C.c_int32, C.POINTER(C.c_float), C.c_uint32, _PI32,
                                 C.POINTER(C.c_float)]),
    # DETINFER_1.4
    "di_chat_tokenize": (_I, [_P, _STR, C.POINTER(_STR), C.POINTER(_STR), _SZ, _I, C.c_uint32, _PI32, _SZ,
                              _PSZ, _STR, _SZ]),
    "di_chat_turn_end": (_STR, [_STR]),
    # DETINFER_1.5
    "di_grammar_from_gbnf": (_I, [_STR, _SZ, C.c_uint32, C.POINTER(_P), _STR, _SZ]),
    "di_grammar_from_json_schema": (_I, [_STR, _SZ, C.c_uint32, C.POINTER(_P), _STR, _SZ]),
    "di_grammar_free": (None, [_P]),
    "di_grammar_gbnf": (_I, [_P, _STR, _SZ, _PSZ]),
    "di_grammar_digest": (_I, [_P, _PD]),
    "di_session_seq_set_grammar": (_I, [_P, C.c_uint32, _P, _PI32, _SZ]),
    "di_session_seq_grammar_state": (_I, [_P, C.c_uint32, _PU32]),
    "di_session_seq_grammar_allowed": (_I, [_P, C.c_uint32, _PU32, _SZ]),
    # DETINFER_1.6
    "di_session_logprobs_at": (_I, [_P, C.c_uint32, C.c_uint32, C.c_int32, C.POINTER(C.c_float), C.c_uint32,
                                    _PI32, C.POINTER(C.c_float)]),
    "di_session_seq_accept_draft": (_I, [_P, C.c_uint32, C.c_uint32, _PU32, _PI32]),
    "di_session_seq_draft_lookup": (_I, [_P, C.c_uint32, C.c_int32, C.c_uint32, C.c_uint32, _PI32, _PU32]),
    "di_drafter_create": (_I, [_P, _P, _P, C.POINTER(_P), _STR, _SZ]),
    "di_drafter_free": (None, [_P]),
    "di_drafter_errmsg": (_STR, [_P]),
    "di_drafter_propose": (_I, [_P, _P, C.c_uint32, C.c_int32, C.c_uint32, _PI32, _PU32]),
}


class LibraryNotFoundError(OSError):
    """libdetinfer.so.1 could not be loaded; the message says how to fix it."""


class Library:
    """The loaded shared library: `c.di_*` with every signature declared.
    A function an older library lacks is left out; calling it through
    `fn()` raises an error naming it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.c = C.CDLL(path)
        self.missing: List[str] = []
        for name, (restype, argtypes) in SIGNATURES.items():
            try:
                fn = getattr(self.c, name)
            except AttributeError:
                self.missing.append(name)
                continue
            fn.restype, fn.argtypes = restype, argtypes

    def fn(self, name: str) -> Any:
        if name in self.missing:
            raise LibraryNotFoundError(
                f"{self.path} has no {name}: it is older than this binding (ABI 1.6); "
                "install a newer libdetinfer")
        return getattr(self.c, name)


def _pkg_config_libdir() -> Optional[str]:
    try:
        out = subprocess.run(["pkg-config", "--variable=libdir", "detinfer"], capture_output=True,
                             text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    libdir = out.stdout.strip()
    return libdir if out.returncode == 0 and libdir else None


def candidates() -> List[str]:
    """Where the library is looked for, in order: $DETINFER_LIB, the library
    bundled in the package, pkg-config's libdir, then the dynamic loader's
    search path."""
    found = []
    env = os.environ.get("DETINFER_LIB")
    if env:
        return [env]  # an explicit choice is never second-guessed
    own = bundled(SONAME)
    if own:
        return [own]  # pip built it with this package: the pair belongs together
    libdir = _pkg_config_libdir()
    if libdir:
        found.append(os.path.join(libdir, SONAME))
    found.append(SONAME)
    util = ctypes.util.find_library("detinfer")
    if util and util not in found:
        found.append(util)
    return found


_lock = threading.Lock()
_loaded: Optional[Library] = None


def library() -> Library:
    """The library, loaded on first use."""
    global _loaded
    with _lock:
        if _loaded is None:
            errors = []
            for path in candidates():
                try:
                    _loaded = Library(path)
                    break
                except OSError as e:
                    errors.append(f"  {path}: {e}")
            else:
                raise LibraryNotFoundError(
                    "libdetinfer.so.1 was not found. Install this package with pip (pip install "
                    "./bindings/python builds and bundles the library), or install the C library "
                    "(in the source tree: make && sudo make install, then sudo ldconfig), or point to it with "
                    "DETINFER_LIB=/path/to/libdetinfer.so.1, or make pkg-config find it "
                    "(PKG_CONFIG_PATH=PREFIX/lib/pkgconfig). Tried:\n" + "\n".join(errors))
        return _loaded
