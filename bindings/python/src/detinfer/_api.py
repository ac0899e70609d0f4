"""Model, Config, Session and Sequence over the C API (include/detinfer.h)."""

from __future__ import annotations

import ctypes as C
import enum
import importlib
import json
import os
import weakref
from dataclasses import dataclass, fields
from typing import (Any, Callable, Dict, Iterable, Iterator, List, Mapping, NamedTuple, Optional,
                    Sequence as Seq, Tuple, Union)

from ._lib import Digest, SamplingParamsC, library

_np: Any
try:
    _np = importlib.import_module("numpy")
except ImportError:  # numpy is optional: logits then come back as lists of floats
    _np = None

_ERRBUF = 512


# ---- Numbers of include/detinfer.h (never renumbered) -----------------------

class Status(enum.IntEnum):
    OK = 0
    ERR_INVALID_ARGUMENT = 1
    ERR_OUT_OF_MEMORY = 2
    ERR_IO = 3
    ERR_FORMAT = 4
    ERR_UNSUPPORTED = 5
    ERR_MODEL = 6
    ERR_SAMPLING_REFUSED = 7
    ERR_TOKEN_RANGE = 8
    ERR_CONTEXT_FULL = 9
    ERR_SEQUENCE = 10
    ERR_STATE = 11
    ERR_BACKEND_UNAVAILABLE = 12
    ERR_THREAD = 13
    ERR_UNKNOWN_KEY = 14
    ERR_INTERNAL = 15
    ERR_BUFFER_TOO_SMALL = 16
    ERR_TEXT = 17
    ERR_GRAMMAR = 18
    ERR_GRAMMAR_REJECTED = 19


class ModelKey(enum.IntEnum):
    N_VOCAB = 1
    N_CTX_TRAIN = 2
    N_EMBD = 3
    N_LAYER = 4
    N_HEAD = 5
    N_HEAD_KV = 6
    N_FF = 7
    N_PARAMS = 8
    FILE_SIZE = 9
    BYTES_PER_TOKEN = 10


class ConfigKey(enum.IntEnum):
    THREADS = 1
    MAX_SEQUENCES = 2
    CONTEXT_LENGTH = 3
    BACKEND = 4
    PROFILE = 5
    TEMPERATURE = 6
    DO_SAMPLE = 7
    TOP_P = 8
    TOP_K = 9
    REPETITION_PENALTY = 10
    SEED = 11
    CPU_PATH = 12
    DEVICE = 13
    ALLOW_LONG_CONTEXT = 14


class Backend(enum.IntEnum):
    CPU = 1
    CUDA = 2


class Profile(enum.IntEnum):
    PORTABLE = 1
    DEVICE = 2
    INTEGER = 3


class CpuPath(enum.IntEnum):
    AUTO = 0
    SCALAR = 1
    AVX2 = 2
    AVX512 = 3


class SpecialToken(enum.IntEnum):
    BOS = 1
    EOS = 2


TOKENIZE_ADD_BOS = 0x1
TOKENIZE_PARSE_SPECIAL = 0x2
STEP_ALL_LOGITS = 0x1
DRAFT_MAX = 32       # DI_DRAFT_MAX: draft tokens a lookup or a drafter gives at most
DRAFT_MAX_NGRAM = 8  # DI_DRAFT_MAX_NGRAM: the longest key a lookup matches
DRAFT_DEFAULT = 3    # DI_DRAFT_DEFAULT: the draft length used unless told (measured)
DRAFT_NGRAM_DEFAULT = 3  # DI_DRAFT_NGRAM_DEFAULT: the key length used unless told


class GrammarState(enum.IntFlag):
    """di_session_seq_grammar_state's flags."""
    NONE = 0
    ACTIVE = 0x1     # the sequence has a grammar
    CAN_END = 0x2    # its text is complete: an end token is allowed
    MUST_END = 0x4   # complete, and nothing but an end token may follow
    ENDED = 0x8      # an end token was stepped: no token is allowed

# The type of each configuration key: set with di_config_set_int or _float.
_FLOAT_KEYS = {ConfigKey.TEMPERATURE, ConfigKey.TOP_P, ConfigKey.REPETITION_PENALTY}


# ---- Errors -------------------------------------------------------------------

class DetinferError(Exception):
    """A call into libdetinfer failed: `status` (a Status), `name` (the C
    name, "DI_ERR_FORMAT") and `message` (the library's detail)."""

    def __init__(self, status: int, message: str = "") -> None:
        self.status: Union[Status, int]
        try:
            self.status = Status(status)
        except ValueError:
            self.status = status
        self.name: str = status_name(status)
        self.message: str = message
        super().__init__(f"{self.name}: {message}" if message else self.name)


def _text(value: Optional[bytes]) -> str:
    return value.decode("utf-8", errors="replace") if value else ""


def _check(status: int, message: Union[str, bytes, Callable[[], Any]] = "") -> None:
    if status != Status.OK:
        msg = message() if callable(message) else message
        raise DetinferError(status, _text(msg) if isinstance(msg, (bytes, type(None))) else msg)


def _sized(call: Callable[[Any, int, Any], int], first: int = 256) -> bytes:
    """Runs a call with di_model_detokenize's buffer rules: call(buf, capacity,
    byref(length)); retries once with the length it asks for."""
    need = C.c_size_t()
    buf = C.create_string_buffer(first)
    st = call(buf, first, C.byref(need))
    if st == Status.ERR_BUFFER_TOO_SMALL:
        buf = C.create_string_buffer(need.value + 1)
        st = call(buf, need.value + 1, C.byref(need))
    _check(st)
    return buf.raw[: need.value]


# ---- Functions without a handle (thread-safe) ---------------------------------

def status_name(status: int) -> str:
    """The C name of a status code ("DI_ERR_FORMAT")."""
    return _text(library().c.di_status_name(int(status)))


def version() -> str:
    """The loaded library's version string ("0.4.0")."""
    return _text(library().c.di_version_string())


def version_number() -> int:
    """The loaded library's version as MAJOR*10000 + MINOR*100 + PATCH."""
    return int(library().c.di_version_number())


def build_info() -> str:
    """Compiler, flags and numerics contract the library was built with."""
    return _text(library().c.di_build_info())


def numerics_version(profile: Union["Profile", str]) -> int:
    """The numerics version of a profile's definition, as the library names it
    (di_build_info: "numerics N" for portable and device, "integer numerics
    N" for integer): a digest compares only with digests of the same profile
    and numerics version."""
    name = profile if isinstance(profile, str) else Profile(profile).name
    key = "integer numerics " if name.lower() == "integer" else "numerics "
    for part in build_info().split("; "):
        if part.startswith(key):
            return int(part[len(key):])
    return 1  # a library from before the integer profile's own version: both were 1


def cpu_path_resolve(requested: Union[CpuPath, int] = CpuPath.AUTO) -> CpuPath:
    """The CPU path a session created with cpu_path=`requested` would run on
    this machine: for CpuPath.AUTO, the one a default session takes
    ($DETINFER_CPU_PATH included). Raises DetinferError: ERR_UNSUPPORTED when
    this CPU or build cannot run the path, ERR_INVALID_ARGUMENT for an unknown
    value (of `requested` or of $DETINFER_CPU_PATH)."""
    out = C.c_int()
    err = C.create_string_buffer(_ERRBUF)
    _check(library().fn("di_cpu_path_resolve")(int(requested), C.byref(out), err, _ERRBUF), err.value)
    return CpuPath(out.value)


def cpu_path_name(path: Union[CpuPath, int]) -> str:
    """The DETINFER_CPU_PATH spelling of a path ("auto", "scalar", "avx2",
    "avx512"); "unknown" for any other value."""
    return _text(library().fn("di_cpu_path_name")(int(path)))


def _tokens_array(tokens: Seq[int]) -> Any:
    return (C.c_int32 * max(len(tokens), 1))(*tokens)


def digest_tokens(tokens: Seq[int]) -> str:
    """The digest (32 hex characters) of token ids as little-endian int32:
    what the library reports for a sequence."""
    out = Digest()
    _check(library().c.di_digest_tokens(_tokens_array(tokens), len(tokens), C.byref(out)))
    return out.hex()


def digest_floats(values: Any) -> str:
    """The digest of float32 values as little-endian bytes: what the library
    reports for a logits row. Takes a sequence of floats or a numpy array."""
    if _np is not None and isinstance(values, _np.ndarray):
        arr = _np.ascontiguousarray(values, dtype=_np.float32)
        ptr = arr.ctypes.data_as(C.POINTER(C.c_float))
        n = arr.size
    else:
        n = len(values)
        ptr = (C.c_float * max(n, 1))(*values)
    out = Digest()
    _check(library().c.di_digest_floats(ptr, n, C.byref(out)))
    return out.hex()


def _messages(messages: Iterable[Union[Tuple[str, str], Mapping[str, str]]]) -> Tuple[int, Any, Any]:
    """The count and the C arrays of roles and contents."""
    roles: List[bytes] = []
    contents: List[bytes] = []
    for m in messages:
        role, content = (m["role"], m["content"]) if isinstance(m, Mapping) else m
        roles.append(role.encode())
        contents.append(content.encode())
    n = len(roles)
    return n, (C.c_char_p * max(n, 1))(*roles), (C.c_char_p * max(n, 1))(*contents)


def chat_turn_end(template: str) -> Optional[str]:
    """The text of the token that ends a turn in the built-in template
    `template` ("<end_of_turn>" for gemma), or None for an unknown name."""
    text = library().fn("di_chat_turn_end")(template.encode())
    return _text(text) if text is not None else None


def chat_format(template: str, messages: Iterable[Union[Tuple[str, str], Mapping[str, str]]],
                add_assistant: bool = True) -> str:
    """Prompt text of `messages` ((role, content) pairs or {"role", "content"}
    dicts) in the built-in chat template `template` ("gemma", "chatml", ...),
    for display and comparison. To run a chat, use Model.chat_tokenize: this
    text must not be tokenized with parse_special=True, which would turn
    marker text inside a message ("<end_of_turn>") into control tokens and
    let a user forge turns."""
    n, r, c = _messages(messages)
    err = C.create_string_buffer(_ERRBUF)
    fn = library().fn("di_chat_format")
    need = C.c_size_t()
    st = fn(template.encode(), r, c, n, int(add_assistant), None, 0, C.byref(need), err, _ERRBUF)
    if st not in (Status.OK, Status.ERR_BUFFER_TOO_SMALL):
        _check(st, err.value)
    buf = C.create_string_buffer(need.value + 1)
    _check(fn(template.encode(), r, c, n, int(add_assistant), buf, need.value + 1, C.byref(need), err,
              _ERRBUF), err.value)
    return buf.raw[: need.value].decode("utf-8")


# ---- Sampling -----------------------------------------------------------------

@dataclass
class SamplingParams:
    """di_sampling_params with the header's defaults (greedy). docs/DETERMINISM.md
    states the canonical sampling order; the token depends only on the model,
    the sequence's tokens, these parameters and the seed."""

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    penalty_window: int = 64
    seed: int = 0

    def _to_c(self) -> SamplingParamsC:
        c = SamplingParamsC()
        c.size = C.sizeof(SamplingParamsC)
        for f in fields(self):
            setattr(c, f.name, getattr(self, f.name))
        return c

    @classmethod
    def library_defaults(cls) -> "SamplingParams":
        """The defaults as the loaded library's di_sampling_params_init sets them."""
        c = SamplingParamsC()
        _check(library().fn("di_sampling_params_init")(C.byref(c)), "di_sampling_params_init")
        return cls(**{f.name: getattr(c, f.name) for f in fields(cls)})


# ---- Results ------------------------------------------------------------------

class Logits(NamedTuple):
    """One logits row (a numpy float32 array, or a list without numpy) and its
    digest (32 hex characters)."""

    values: Any
    digest: str


class Logprobs(NamedTuple):
    """Log-probabilities of the model's own distribution (the log-softmax of
    a logits row at temperature 1, whatever the sampling parameters):
    `token_logprob`, the asked-for token's (None when none was asked), and
    `top`, the most likely tokens as (id, logprob) pairs, by log-probability
    descending, then id ascending."""

    token_logprob: Optional[float]
    top: List[Tuple[int, float]]


class GeneratedToken(NamedTuple):
    """One generated token: its id, its text piece and the digest of the
    logits row it was chosen from."""

    token: int
    piece: str
    digest: str


# ---- Handles ------------------------------------------------------------------

class _Handle:
    _handle: Optional[int] = None
    _free_name = ""

    def _h(self) -> int:
        if not self._handle:
            raise ValueError(f"{type(self).__name__} is closed")
        return self._handle

    @property
    def closed(self) -> bool:
        return not self._handle

    def close(self) -> None:
        """Frees the C handle; further calls raise ValueError. Idempotent."""
        if self._handle:
            handle, self._handle = self._handle, None
            getattr(library().c, self._free_name)(handle)

    def __del__(self) -> None:  # a safety net: close() or `with` is the way
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Model(_Handle):
    """The immutable weights of one GGUF file. Thread-safe: any number of
    threads and sessions may use one model. close() closes its sessions first."""

    _free_name = "di_model_free"

    def __init__(self, path: Union[str, "os.PathLike[str]"]) -> None:
        lib = library()
        handle = C.c_void_p()
        err = C.create_string_buffer(_ERRBUF)
        _check(lib.c.di_model_load(os.fsencode(path), C.byref(handle), err, _ERRBUF), err.value)
        self._handle = handle.value
        self.path = os.fspath(path)
        self._sessions: "weakref.WeakSet[Session]" = weakref.WeakSet()
        self.n_vocab = self.get_int(ModelKey.N_VOCAB)

    def close(self) -> None:
        for s in list(getattr(self, "_sessions", ())):
            s.close()
        super().close()

    def get_int(self, key: ModelKey) -> int:
        out = C.c_int64()
        _check(library().c.di_model_get_int(self._h(), int(key), C.byref(out)),
               f"model key {key!r}")
        return out.value

    @property
    def architecture(self) -> str:
        return _text(library().c.di_model_architecture(self._h()))

    def tokenize(self, text: str, add_bos: bool = True, parse_special: bool = False) -> List[int]:
        """Token ids of text (llama.cpp's tokenizer; add_bos adds the special
        tokens the file asks for; parse_special turns "<start_of_turn>" and
        the like into their tokens: only for text you wrote whole, never for
        text holding a user's words; a chat goes through chat_tokenize)."""
        data = text.encode("utf-8")
        flags = (TOKENIZE_ADD_BOS if add_bos else 0) | (TOKENIZE_PARSE_SPECIAL if parse_special else 0)
        fn = library().c.di_model_tokenize
        need = C.c_size_t()
        err = C.create_string_buffer(_ERRBUF)
        st = fn(self._h(), data, len(data), flags, None, 0, C.byref(need), err, _ERRBUF)
        if st not in (Status.OK, Status.ERR_BUFFER_TOO_SMALL):
            _check(st, err.value)
        ids = (C.c_int32 * max(need.value, 1))()
        _check(fn(self._h(), data, len(data), flags, ids, need.value, C.byref(need), err, _ERRBUF),
               err.value)
        return list(ids[: need.value])

    def detokenize_bytes(self, tokens: Seq[int]) -> bytes:
        arr = _tokens_array(tokens)
        err = C.create_string_buffer(_ERRBUF)
        fn = library().c.di_model_detokenize
        try:
            return _sized(lambda buf, cap, n: fn(self._h(), arr, len(tokens), buf, cap, n, err, _ERRBUF))
        except DetinferError as e:
            raise DetinferError(e.status, _text(err.value)) from None

    def detokenize(self, tokens: Seq[int]) -> str:
        return self.detokenize_bytes(tokens).decode("utf-8", errors="replace")

    def token_piece_bytes(self, token: int) -> bytes:
        """The bytes of one token inside decoded text (a byte token may be part
        of a UTF-8 character)."""
        fn = library().c.di_model_token_piece
        try:
            return _sized(lambda buf, cap, n: fn(self._h(), token, buf, cap, n), 64)
        except DetinferError as e:
            raise DetinferError(e.status, f"token {token}") from None

    def token_piece(self, token: int) -> str:
        return self.token_piece_bytes(token).decode("utf-8", errors="replace")

    def special_token(self, which: SpecialToken) -> int:
        out = C.c_int32()
        _check(library().c.di_model_special_token(self._h(), int(which), C.byref(out)),
               f"the model has no {SpecialToken(which).name} token")
        return out.value

    @property
    def bos(self) -> Optional[int]:
        try:
            return self.special_token(SpecialToken.BOS)
        except DetinferError:
            return None

    @property
    def eos(self) -> Optional[int]:
        try:
            return self.special_token(SpecialToken.EOS)
        except DetinferError:
            return None

    def token_lookup(self, text: str) -> int:
        """The id of the token whose text is exactly `text`."""
        data = text.encode("utf-8")
        out = C.c_int32()
        _check(library().fn("di_model_token_lookup")(self._h(), data, len(data), C.byref(out)),
               f"no token has the text {text!r}")
        return out.value

    def meta_string(self, key: str) -> str:
        """A string value of the file's metadata ("general.name")."""
        fn = library().fn("di_model_meta_string")
        try:
            return _sized(lambda buf, cap, n: fn(self._h(), key.encode(), buf, cap, n)).decode(
                "utf-8", errors="replace")
        except DetinferError as e:
            raise DetinferError(e.status, f"metadata key {key!r}") from None

    @property
    def chat_template(self) -> Optional[str]:
        """The built-in template name the file's chat template is recognised
        as ("gemma", "chatml", ...), or None."""
        name = library().fn("di_model_chat_template")(self._h())
        return _text(name) if name is not None else None

    def chat_tokenize(self, messages: Iterable[Union[Tuple[str, str], Mapping[str, str]]],
                      template: Optional[str] = None, add_assistant: bool = True,
                      add_bos: bool = True) -> List[int]:
        """Token ids of a chat in the built-in template `template` (default:
        the file's): the template's markers are control tokens, and every
        message is plain text, whatever it says ("<end_of_turn>" in a message
        gives the tokens of those characters)."""
        template = template or self.chat_template
        if template is None:
            raise DetinferError(Status.ERR_UNSUPPORTED, "the model has no recognised chat template: "
                                "name one (template=\"gemma\", ...)")
        n, r, c = _messages(messages)
        fn = library().fn("di_chat_tokenize")
        flags = TOKENIZE_ADD_BOS if add_bos else 0
        need = C.c_size_t()
        err = C.create_string_buffer(_ERRBUF)
        st = fn(self._h(), template.encode(), r, c, n, int(add_assistant), flags, None, 0, C.byref(need), err,
                _ERRBUF)
        if st not in (Status.OK, Status.ERR_BUFFER_TOO_SMALL):
            _check(st, err.value)
        ids = (C.c_int32 * max(need.value, 1))()
        _check(fn(self._h(), template.encode(), r, c, n, int(add_assistant), flags, ids, need.value, C.byref(need),
                  err, _ERRBUF), err.value)
        return list(ids[: need.value])

    def format_chat(self, messages: Iterable[Union[Tuple[str, str], Mapping[str, str]]],
                    add_assistant: bool = True) -> str:
        """chat_format with this model's template (text to show; to run a
        chat, chat_tokenize)."""
        template = self.chat_template
        if template is None:
            raise DetinferError(Status.ERR_UNSUPPORTED, "the model has no recognised chat template")
        return chat_format(template, messages, add_assistant)

    def session(self, config: Optional["Config"] = None, **settings: Any) -> "Session":
        return Session(self, config, **settings)


class Grammar(_Handle):
    """A compiled grammar (docs/STRUCTURED.md): from GBNF text or a JSON
    Schema. Immutable and thread-safe; a session keeps its own reference, so
    closing it after Sequence.set_grammar is fine."""

    _free_name = "di_grammar_free"

    def __init__(self, handle: Optional[int]) -> None:
        self._handle = handle

    @classmethod
    def _compile(cls, name: str, text: str) -> "Grammar":
        data = text.encode("utf-8")
        handle = C.c_void_p()
        err = C.create_string_buffer(_ERRBUF)
        _check(library().fn(name)(data, len(data), 0, C.byref(handle), err, _ERRBUF), err.value)
        return cls(handle.value)

    @classmethod
    def from_gbnf(cls, text: str) -> "Grammar":
        """GBNF (llama.cpp's grammar format; rule root starts). Raises
        DetinferError ERR_GRAMMAR with the line and column of a mistake."""
        return cls._compile("di_grammar_from_gbnf", text)

    @classmethod
    def from_json_schema(cls, schema: Union[str, Mapping[str, Any], bool]) -> "Grammar":
        """A JSON Schema (a dict, or its JSON text): the grammar of the JSON
        texts it allows, with no whitespace. Raises DetinferError
        ERR_UNSUPPORTED ("unsupported keyword X at /path") or ERR_GRAMMAR."""
        text = schema if isinstance(schema, str) else json.dumps(schema, ensure_ascii=False)
        return cls._compile("di_grammar_from_json_schema", text)

    @property
    def gbnf(self) -> str:
        """Its GBNF text (a schema's: the text it was converted to)."""
        h = self._h()
        return _sized(lambda buf, cap, n: library().fn("di_grammar_gbnf")(h, buf, cap, n)).decode("utf-8")

    @property
    def digest(self) -> str:
        """XXH3-128 of its GBNF text."""
        out = Digest()
        _check(library().fn("di_grammar_digest")(self._h(), C.byref(out)))
        return out.hex()


class Config(_Handle):
    """Session settings. Keyword names are ConfigKey names in lower case
    (threads=2, max_sequences=4, backend=Backend.CUDA, ...). One thread at a time."""

    _free_name = "di_config_free"

    def __init__(self, **settings: Any) -> None:
        handle = C.c_void_p()
        _check(library().c.di_config_create(C.byref(handle)), "out of memory")
        self._handle = handle.value
        for name, value in settings.items():
            self.set(name, value)

    @staticmethod
    def _key(key: Union[str, ConfigKey]) -> ConfigKey:
        if isinstance(key, str):
            try:
                return ConfigKey[key.upper()]
            except KeyError:
                raise DetinferError(Status.ERR_UNKNOWN_KEY, f"unknown configuration key {key!r}") from None
        return ConfigKey(key)

    def _msg(self) -> bytes:
        msg = library().c.di_config_errmsg(self._h())
        return msg if isinstance(msg, bytes) else b""

    def set(self, key: Union[str, ConfigKey], value: Union[int, float]) -> None:
        k = self._key(key)
        c = library().c
        if k in _FLOAT_KEYS:
            _check(c.di_config_set_float(self._h(), int(k), float(value)), self._msg)
        else:
            _check(c.di_config_set_int(self._h(), int(k), int(value)), self._msg)

    def get(self, key: Union[str, ConfigKey]) -> Union[int, float]:
        k = self._key(key)
        c = library().c
        if k in _FLOAT_KEYS:
            f = C.c_double()
            _check(c.di_config_get_float(self._h(), int(k), C.byref(f)), self._msg)
            return f.value
        i = C.c_int64()
        _check(c.di_config_get_int(self._h(), int(k), C.byref(i)), self._msg)
        return i.value


class Session(_Handle):
    """Up to max_sequences sequences with their KV caches. One thread at a
    time; the model must stay open (closing the model closes the session)."""

    _free_name = "di_session_free"

    def __init__(self, model: Model, config: Optional[Config] = None, **settings: Any) -> None:
        own = None
        if settings:
            if config is not None:
                raise TypeError("give either a Config or keyword settings, not both")
            config = own = Config(**settings)
        try:
            handle = C.c_void_p()
            err = C.create_string_buffer(_ERRBUF)
            _check(library().c.di_session_create(model._h(), config._h() if config else None,
                                                 C.byref(handle), err, _ERRBUF), err.value)
        finally:
            if own is not None:
                own.close()
        self._handle = handle.value
        self.model = model  # keeps the model alive as long as the session
        model._sessions.add(self)
        # Per sequence: the last token a generation chose and did not step
        # (the next generate() steps it first), and which generation owns it.
        self._pending: Dict[int, int] = {}
        self._owner: Dict[int, int] = {}

    def _msg(self) -> bytes:
        msg = library().c.di_session_errmsg(self._handle) if self._handle else None
        return msg if isinstance(msg, bytes) else b""

    def _call(self, name: str, *args: Any) -> None:
        _check(library().fn(name)(self._h(), *args), self._msg)

    @property
    def backend_info(self) -> str:
        """"backend=cpu path=avx512 threads=2" and the like."""
        return _text(library().c.di_session_backend_info(self._h()))

    def sequence(self, seq: int = 0) -> "Sequence":
        return Sequence(self, seq)

    def kv_bytes(self) -> int:
        """Bytes of KV cache the session holds now: on the CPU backend the sum
        over its sequences, growing as they grow and falling when they are
        reset; on the CUDA backend the device caches reserved at creation."""
        out = C.c_uint64()
        self._call("di_session_kv_bytes", C.byref(out))
        return out.value

    def step(self, entries: Union[Mapping[int, Seq[int]], Iterable[Tuple[int, Seq[int]]]],
             all_logits: bool = False) -> None:
        """One batch step: entries maps sequence ids to the tokens each
        appends. All or nothing: on an error no sequence changes. A sequence
        whose generation chose a token it has not stepped is refused
        (ERR_STATE): stepping other tokens would leave that one out."""
        items = list(entries.items() if isinstance(entries, Mapping) else entries)
        for seq, _ in items:
            if int(seq) in self._pending:
                raise DetinferError(Status.ERR_STATE, (
                    f"sequence {seq} ends with token {self._pending[int(seq)]}, chosen by generate() and "
                    "not stepped: continue with generate() (it steps that token first), or reset() or "
                    "truncate() the sequence before step()"))
        self._step(items, all_logits)

    def _step(self, items: List[Tuple[int, Seq[int]]], all_logits: bool = False) -> None:
        seqs = [int(s) for s, _ in items]
        counts = [len(t) for _, t in items]
        flat = [int(x) for _, t in items for x in t]
        n = len(items)
        self._call("di_session_step", n, (C.c_uint32 * max(n, 1))(*seqs),
                   (C.c_uint32 * max(n, 1))(*counts), _tokens_array(flat),
                   STEP_ALL_LOGITS if all_logits else 0)

    def _row(self, ptr: Any) -> Any:
        if _np is not None:
            return _np.ctypeslib.as_array(ptr, shape=(self.model.n_vocab,)).copy()
        return ptr[: self.model.n_vocab]

    def logits(self, seq: int, index: Optional[int] = None) -> Logits:
        """The logits (a copy) of seq's last position, or of position `index`
        of its last step (which must have used all_logits), with their digest."""
        ptr, digest = C.POINTER(C.c_float)(), Digest()
        if index is None:
            self._call("di_session_logits", seq, C.byref(ptr), C.byref(digest))
        else:
            self._call("di_session_logits_at", seq, index, C.byref(ptr), C.byref(digest))
        return Logits(self._row(ptr), digest.hex())

    def logits_digest(self, seq: int, index: Optional[int] = None) -> str:
        """The digest of seq's last logits row (or of position `index` of its
        last step, which must have used all_logits), without copying the row."""
        ptr, digest = C.POINTER(C.c_float)(), Digest()
        if index is None:
            self._call("di_session_logits", seq, C.byref(ptr), C.byref(digest))
        else:
            self._call("di_session_logits_at", seq, index, C.byref(ptr), C.byref(digest))
        return digest.hex()

    def draft_lookup(self, seq: int, next_token: int, ngram: int = DRAFT_NGRAM_DEFAULT,
                     max_draft: int = DRAFT_DEFAULT) -> List[int]:
        """A prompt-lookup draft (di_session_seq_draft_lookup, DETINFER_1.6):
        after seq's tokens and next_token, the tokens that followed the longest
        key of at most `ngram` (1..DRAFT_MAX_NGRAM) tokens ending that history
        at its latest earlier place; at most max_draft (0..DRAFT_MAX). Changes
        nothing."""
        fn = library().fn("di_session_seq_draft_lookup")
        if not 0 <= max_draft <= DRAFT_MAX:
            raise DetinferError(Status.ERR_INVALID_ARGUMENT, f"max_draft is {max_draft}: 0..{DRAFT_MAX}")
        out = (C.c_int32 * max(max_draft, 1))()
        n = C.c_uint32()
        _check(fn(self._h(), seq, next_token, ngram, max_draft, out, C.byref(n)), self._msg)
        return list(out[: n.value])

    def accept_draft(self, seq: int, n_draft: int) -> Tuple[int, Optional[int]]:
        """Resolves a draft (di_session_seq_accept_draft, DETINFER_1.6): seq's
        entry in the last step (all_logits) was the chosen token and n_draft
        draft tokens. Returns (accepted, next): how many draft tokens decoding
        would have chosen, in order, and the token it chooses after them
        (None where a grammar allows nothing there: it ended). seq is left
        ending after the accepted ones, and sample_token gives next again;
        logits_digest(seq, i) gives rows 0..accepted (the last is next's)."""
        fn = library().fn("di_session_seq_accept_draft")
        accepted, nxt = C.c_uint32(), C.c_int32()
        status = fn(self._h(), seq, n_draft, C.byref(accepted), C.byref(nxt))
        if status == Status.ERR_GRAMMAR_REJECTED:
            return accepted.value, None
        _check(status, self._msg)
        return accepted.value, nxt.value

    def logprobs(self, seq: int, token: Optional[int] = None, top: int = 0) -> Logprobs:
        """Log-probabilities at the last position of seq's last step: the
        log-softmax (temperature 1, no penalty, no filter) of its logits, with
        the library's own exp and log, so equal logits give equal bits
        everywhere. `token`: the id whose log-probability to give (None: no
        token); `top`: how many of the most likely tokens to list (at most the
        vocabulary). Raises DetinferError: ERR_STATE when seq has no logits,
        ERR_TOKEN_RANGE for a token outside the vocabulary,
        ERR_INVALID_ARGUMENT for a negative `top` or one above the vocabulary."""
        return self._logprobs("di_session_logprobs", (seq,), token, top)

    def logprobs_at(self, seq: int, index: int, token: Optional[int] = None, top: int = 0) -> Logprobs:
        """logprobs() of position `index` (0-based within what seq appended in
        the session's last step, which must have used all_logits): the same
        bits as logprobs() after stepping seq up to that position alone. A
        prompt's token i + 1 given tokens 0..i is position i's logprob of
        token i + 1. Raises as logprobs(), and ERR_STATE when the last step
        was not an all-logits step of seq, ERR_INVALID_ARGUMENT for an index
        outside it. Needs di_session_logprobs_at (DETINFER_1.6)."""
        if index < 0:
            raise DetinferError(Status.ERR_INVALID_ARGUMENT, f"index is {index}: it must be >= 0")
        return self._logprobs("di_session_logprobs_at", (seq, index), token, top)

    def _logprobs(self, name: str, where: Tuple[int, ...], token: Optional[int], top: int) -> Logprobs:
        fn = library().fn(name)  # first: a library without it is named before anything else
        if top < 0:
            raise DetinferError(Status.ERR_INVALID_ARGUMENT, f"top is {top}: it must be >= 0")
        if token is not None and token < 0:
            raise DetinferError(Status.ERR_TOKEN_RANGE, f"token {token} is outside the vocabulary")
        lp = C.c_float()
        ids = (C.c_int32 * max(top, 1))()
        values = (C.c_float * max(top, 1))()
        _check(fn(self._h(), *where, -1 if token is None else token,
                  C.byref(lp) if token is not None else None, top, ids if top else None,
                  values if top else None), self._msg)
        return Logprobs(lp.value if token is not None else None,
                        [(ids[i], values[i]) for i in range(top)])

    def greedy_token(self, seq: int) -> int:
        out = C.c_int32()
        self._call("di_session_greedy_token", seq, C.byref(out))
        return out.value

    def sample_token(self, seq: int) -> int:
        """The token chosen with seq's sampling parameters (greedy by default)."""
        out = C.c_int32()
        self._call("di_session_sample_token", seq, C.byref(out))
        return out.value

    def set_sampling(self, seq: int, params: Optional[SamplingParams]) -> None:
        """seq's sampling parameters; None restores the ones it started with."""
        c = params._to_c() if params is not None else None
        self._call("di_session_seq_set_sampling", seq, C.byref(c) if c is not None else None)

    def set_grammar(self, seq: int, grammar: Optional[Grammar], end_tokens: Seq[int] = ()) -> None:
        """seq's grammar from its length on (None: none). end_tokens: besides
        the model's EOS, the tokens that end it (a chat's end of turn)."""
        ends = list(end_tokens)
        self._call("di_session_seq_set_grammar", seq, grammar._h() if grammar is not None else None,
                   _tokens_array(ends) if ends else None, len(ends))

    def grammar_state(self, seq: int) -> GrammarState:
        out = C.c_uint32()
        self._call("di_session_seq_grammar_state", seq, C.byref(out))
        return GrammarState(out.value)

    def allowed_tokens(self, seq: int) -> List[int]:
        """The tokens seq's grammar allows next (every token without one)."""
        n_words = (self.model.n_vocab + 31) // 32
        words = (C.c_uint32 * n_words)()
        self._call("di_session_seq_grammar_allowed", seq, words, n_words)
        return [w * 32 + b for w in range(n_words) if words[w] for b in range(32) if (words[w] >> b) & 1]

    def length(self, seq: int) -> int:
        out = C.c_uint32()
        self._call("di_session_seq_length", seq, C.byref(out))
        return out.value

    def digest(self, seq: int, extra: Seq[int] = ()) -> str:
        """The digest of seq's stepped tokens followed by `extra` (not stepped):
        with extra the generation's last chosen token, the sequence digest
        of the generation (the one the command, server and docs report)."""
        out = Digest()
        if extra:
            self._call("di_session_seq_digest_extra", seq, _tokens_array(extra), len(extra),
                       C.byref(out))
        else:
            self._call("di_session_seq_digest", seq, C.byref(out))
        return out.hex()

    def reset(self, seq: int) -> None:
        """Empties seq (a generation's unstepped token included)."""
        self._call("di_session_seq_reset", seq)
        self._release(seq)

    def truncate(self, seq: int, length: int) -> None:
        """Keeps seq's first `length` stepped tokens (a generation's unstepped
        token is dropped)."""
        self._call("di_session_seq_truncate", seq, length)
        self._release(seq)

    def copy(self, src: int, dst: int, length: Optional[int] = None) -> None:
        """dst holds the first `length` (default: all) stepped tokens of src,
        KV cache included."""
        self._call("di_session_seq_copy", src, dst, self.length(src) if length is None else length)
        self._release(dst)

    def _release(self, seq: int) -> None:
        """seq no longer continues a generation: its unstepped token is gone
        and an earlier Generation of it stops."""
        self._pending.pop(int(seq), None)
        self._owner[int(seq)] = self._owner.get(int(seq), 0) + 1

    def _claim(self, seq: int) -> int:
        """A new generation of seq: the earlier one stops; returns its ticket."""
        self._owner[seq] = self._owner.get(seq, 0) + 1
        return self._owner[seq]


class Drafter(_Handle):
    """A draft model for speculative decoding (di_drafter_create, DETINFER_1.6):
    `draft`, a smaller model with the same vocabulary as `model` (else
    DetinferError ERR_MODEL naming the first token that differs), run in a
    session of its own with the keyword settings (threads, context_length,
    max_sequences: at least the sequence ids it drafts for, ...). Both models
    must stay open while it is used."""

    _free_name = "di_drafter_free"

    def __init__(self, model: Model, draft: Model, **settings: Any) -> None:
        fn = library().fn("di_drafter_create")
        config = Config(**settings) if settings else None
        try:
            handle = C.c_void_p()
            err = C.create_string_buffer(_ERRBUF)
            _check(fn(model._h(), draft._h(), config._h() if config else None, C.byref(handle), err, _ERRBUF),
                   err.value)
        finally:
            if config is not None:
                config.close()
        self._handle = handle.value
        self.model, self.draft = model, draft  # kept alive as long as the drafter

    def propose(self, session: Session, seq: int, next_token: int, max_draft: int = DRAFT_DEFAULT) -> List[int]:
        """Up to max_draft (0..DRAFT_MAX) tokens the draft model chooses
        greedily after seq's tokens and next_token (di_drafter_propose).
        Changes nothing in session."""
        if not 0 <= max_draft <= DRAFT_MAX:
            raise DetinferError(Status.ERR_INVALID_ARGUMENT, f"max_draft is {max_draft}: 0..{DRAFT_MAX}")
        out = (C.c_int32 * max(max_draft, 1))()
        n = C.c_uint32()
        lib = library()
        _check(lib.fn("di_drafter_propose")(self._h(), session._h(), seq, next_token, max_draft, out,
                                            C.byref(n)),
               lambda: lib.c.di_drafter_errmsg(self._handle) or b"")
        return list(out[: n.value])


class Sequence:
    """One sequence of a session (a view: the session owns it). As a context
    manager, or on close(), the sequence is reset."""

    def __init__(self, session: Session, seq: int) -> None:
        self.session = session
        self.id = seq

    def __enter__(self) -> "Sequence":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        if not self.session.closed:
            self.reset()

    def step(self, tokens: Seq[int], all_logits: bool = False) -> None:
        self.session.step([(self.id, tokens)], all_logits)

    def logits(self, index: Optional[int] = None) -> Logits:
        return self.session.logits(self.id, index)

    def greedy_token(self) -> int:
        return self.session.greedy_token(self.id)

    def logprobs(self, token: Optional[int] = None, top: int = 0) -> Logprobs:
        """Session.logprobs for this sequence."""
        return self.session.logprobs(self.id, token, top)

    def logprobs_at(self, index: int, token: Optional[int] = None, top: int = 0) -> Logprobs:
        """Session.logprobs_at for this sequence."""
        return self.session.logprobs_at(self.id, index, token, top)

    def sample_token(self) -> int:
        return self.session.sample_token(self.id)

    def set_sampling(self, params: Optional[SamplingParams]) -> None:
        """This sequence's sampling parameters; None restores the ones it
        started with (the session config's sampling keys, else greedy)."""
        self.session.set_sampling(self.id, params)

    def set_grammar(self, grammar: Optional[Grammar], end_tokens: Seq[int] = ()) -> None:
        """This sequence's grammar, from its length on: greedy_token and
        sample_token then choose only tokens it allows (None removes it)."""
        self.session.set_grammar(self.id, grammar, end_tokens)

    @property
    def grammar_state(self) -> GrammarState:
        return self.session.grammar_state(self.id)

    def allowed_tokens(self) -> List[int]:
        return self.session.allowed_tokens(self.id)

    def __len__(self) -> int:
        return self.session.length(self.id)

    def digest(self, extra: Seq[int] = ()) -> str:
        return self.session.digest(self.id, extra)

    def reset(self) -> None:
        self.session.reset(self.id)

    def truncate(self, length: int) -> None:
        self.session.truncate(self.id, length)

    def copy_to(self, dst: int, length: Optional[int] = None) -> "Sequence":
        self.session.copy(self.id, dst, length)
        return Sequence(self.session, dst)

    def generate(self, prompt: Seq[int], max_new: int = 32, stop_at_eos: bool = True,
                 sampling: Optional[SamplingParams] = None, grammar: Optional[Grammar] = None) -> "Generation":
        """Steps the prompt, then one token per step: an iterator of
        GeneratedToken(token, piece, digest). Tokens are chosen with the
        sequence's sampling parameters (greedy unless set: `sampling` sets
        them first) and, with `grammar`, among the tokens it allows from the
        first generated one on (it ends at the EOS it then allows). Afterwards
        `.digest` is the sequence digest of the generation.

        A second generate() on the same sequence continues the first: it
        steps the first one's last chosen token, then `prompt` (which may be
        empty), so two calls give the tokens and digest of one long
        generation. reset() first to start afresh. The earlier Generation
        object stops (ERR_STATE if iterated again)."""
        if sampling is not None:
            self.set_sampling(sampling)
        if grammar is not None and not stop_at_eos:
            raise ValueError("a grammar ends at the end-of-sequence token: stop_at_eos must be True")
        return Generation(self, prompt, max_new, stop_at_eos, grammar)


class Generation(Iterator[GeneratedToken]):
    """Generation from a Sequence: iterate for GeneratedToken(token, piece,
    logits digest). `tokens` holds the generated ids so far, `digest` the
    sequence digest of the generation (prompt and every generated token:
    the sequence's stepped tokens and the last chosen one, not stepped)."""

    def __init__(self, sequence: Sequence, prompt: Seq[int], max_new: int, stop_at_eos: bool,
                 grammar: Optional[Grammar] = None) -> None:
        session = sequence.session
        pending = session._pending.get(sequence.id)
        self._feed: List[int] = ([pending] if pending is not None else []) + list(prompt)
        if not self._feed:
            raise ValueError("the prompt has no tokens")
        self.sequence = sequence
        self.max_new = max_new
        self.tokens: List[int] = []
        self.stopped_at_eos = False
        self._eos = session.model.eos if stop_at_eos else None
        self._grammar = grammar
        self._done = max_new <= 0
        self._ticket = session._claim(sequence.id)

    def __iter__(self) -> "Generation":
        return self

    def __next__(self) -> GeneratedToken:
        if self._done:
            raise StopIteration
        seq = self.sequence
        session = seq.session
        if session._owner.get(seq.id) != self._ticket:
            self._done = True
            raise DetinferError(Status.ERR_STATE, f"sequence {seq.id} was reset, truncated, copied over or "
                                "given a later generate(): this generation cannot go on")
        session._step([(seq.id, self._feed)])
        session._pending.pop(seq.id, None)
        if self._grammar is not None and not self.tokens:
            seq.set_grammar(self._grammar)  # after the prompt: it is not constrained
        digest = session.logits_digest(seq.id)
        token = seq.sample_token()  # with the defaults, the greedy token
        session._pending[seq.id] = token
        self.tokens.append(token)
        self._feed = [token]
        if len(self.tokens) >= self.max_new:
            self._done = True
        if self._eos is not None and token == self._eos:
            self.stopped_at_eos = self._done = True
        return GeneratedToken(token, self._piece(token), digest)

    def _piece(self, token: int) -> str:
        try:
            return self.sequence.session.model.token_piece(token)
        except DetinferError as e:
            if e.status == Status.ERR_UNSUPPORTED:  # a model file without a tokenizer
                return ""
            raise

    @property
    def digest(self) -> str:
        """The sequence digest of the generation so far."""
        return self.sequence.digest(self._feed)

    @property
    def length(self) -> int:
        """Tokens in the generation (stepped and the last chosen one)."""
        return len(self.sequence) + len(self._feed)

    def text(self) -> str:
        return self.sequence.session.model.detokenize(self.tokens)
