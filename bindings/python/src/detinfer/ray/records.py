"""Input requests, output records and the run digest (no Ray needed here).

An input line (JSONL) is an object with:
  id           required, unique: a JSON integer or a string
  prompt       text, tokenized by the worker (BOS as the model asks), or
  tokens       token ids (exactly one of prompt / tokens)
  parse_special  optional bool: "<start_of_turn>" and the like become their tokens,
               anywhere in the prompt. Only for prompts whose every byte the job's
               author wrote: a prompt holding a user's words (a chat) must not set
               it, or the user can forge turns; give such a chat as `tokens`, from
               Model.chat_tokenize, which parses the template's markers only
  max_new      optional int >= 0 (default: the run's --max-new)
  stop_at_eos  optional bool (default true)
  sampling     optional object of SamplingParams fields (temperature, top_k, ...)
  seed         optional int: the sampling seed (overrides sampling.seed)
  json_schema  optional object (a JSON Schema): generate only JSON it allows
  grammar      optional string (GBNF): generate only text of that grammar
               (at most one of the two; docs/STRUCTURED.md; the prompt is not
               constrained, and the record ends at the EOS the grammar allows)

An output record holds id, text (the completion), tokens (generated ids),
n_prompt, digest (the sequence digest: prompt and generated ids, as
Generation.digest), finish ("eos", "length" or "error"), error (null, or the
library's message) and, when asked for, logits_digests (one per generated
token) and worker (where it was computed).

The run digest (docs/SCALE.md) is XXH3-128, as 32 hex digits (xxhsum -H2),
over the concatenation of one line per record, in id order:
    json.dumps([id, digest], separators=(",", ":"), ensure_ascii=False) + "\\n"
UTF-8 encoded, digest being null for a failed record. Id order: integers
first, numerically, then strings by their UTF-8 bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

from .._api import SamplingParams

RecordId = Union[int, str]

_SAMPLING_FIELDS = {f.name for f in fields(SamplingParams)}
_REQUEST_KEYS = {"id", "prompt", "tokens", "parse_special", "max_new", "stop_at_eos", "sampling", "seed",
                 "json_schema", "grammar"}

# The columns of an output record, in this order (one place for the schema).
RECORD_FIELDS = ("id", "text", "tokens", "n_prompt", "digest", "finish", "error", "profile", "numerics")
OPTIONAL_FIELDS = ("logits_digests", "worker")


class RequestError(ValueError):
    """An input line that is not a valid request (the message names the line)."""


@dataclass
class Request:
    id: RecordId
    prompt: Optional[str] = None
    tokens: Optional[List[int]] = None
    parse_special: bool = False
    max_new: int = 32
    stop_at_eos: bool = True
    sampling: Optional[SamplingParams] = None
    json_schema: Optional[Any] = None
    grammar: Optional[str] = None
    # where the request came from ("prompts.jsonl:7"), for messages; not sent to workers
    source: str = field(default="", compare=False)

    def to_json(self) -> str:
        d: Dict[str, Any] = {"id": self.id, "max_new": self.max_new, "stop_at_eos": self.stop_at_eos}
        if self.prompt is not None:
            d["prompt"] = self.prompt
            d["parse_special"] = self.parse_special
        else:
            d["tokens"] = self.tokens
        if self.sampling is not None:
            d["sampling"] = {f: getattr(self.sampling, f) for f in sorted(_SAMPLING_FIELDS)}
        if self.json_schema is not None:
            d["json_schema"] = self.json_schema
        if self.grammar is not None:
            d["grammar"] = self.grammar
        return json.dumps(d, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> "Request":
        return parse_request(json.loads(text), default_max_new=32, where="request")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def parse_request(obj: Any, default_max_new: int, where: str) -> Request:
    """A Request from one decoded input line; RequestError names `where`."""
    def bad(msg: str) -> RequestError:
        return RequestError(f"{where}: {msg}")

    if not isinstance(obj, dict):
        raise bad("not a JSON object")
    unknown = set(obj) - _REQUEST_KEYS
    if unknown:
        raise bad(f"unknown key(s) {sorted(unknown)} (known: {sorted(_REQUEST_KEYS)})")
    if "id" not in obj or not (_is_int(obj["id"]) or isinstance(obj["id"], str)):
        raise bad("'id' is required: an integer or a string")
    if ("prompt" in obj) == ("tokens" in obj):
        raise bad("give exactly one of 'prompt' (text) and 'tokens' (ids)")
    req = Request(id=obj["id"], max_new=default_max_new, source=where)
    if "prompt" in obj:
        if not isinstance(obj["prompt"], str) or not obj["prompt"]:
            raise bad("'prompt' must be a non-empty string")
        req.prompt = obj["prompt"]
    else:
        toks = obj["tokens"]
        if not isinstance(toks, list) or not toks or not all(_is_int(t) and t >= 0 for t in toks):
            raise bad("'tokens' must be a non-empty list of token ids (integers >= 0)")
        req.tokens = toks
    for key in ("parse_special", "stop_at_eos"):
        if key in obj:
            if not isinstance(obj[key], bool):
                raise bad(f"'{key}' must be true or false")
            setattr(req, key, obj[key])
    if "max_new" in obj:
        if not _is_int(obj["max_new"]) or obj["max_new"] < 0:
            raise bad("'max_new' must be an integer >= 0")
        req.max_new = obj["max_new"]
    if "sampling" in obj or "seed" in obj:
        s = obj.get("sampling") or {}
        if not isinstance(s, dict):
            raise bad("'sampling' must be an object of SamplingParams fields")
        unknown = set(s) - _SAMPLING_FIELDS
        if unknown:
            raise bad(f"unknown sampling field(s) {sorted(unknown)} (known: {sorted(_SAMPLING_FIELDS)})")
        try:
            req.sampling = SamplingParams(**s)
        except TypeError as e:
            raise bad(f"sampling: {e}") from None
        if "seed" in obj:
            if not _is_int(obj["seed"]) or obj["seed"] < 0:
                raise bad("'seed' must be an integer >= 0")
            req.sampling.seed = obj["seed"]
    if "json_schema" in obj and "grammar" in obj:
        raise bad("give at most one of 'json_schema' and 'grammar'")
    if "json_schema" in obj:
        if not isinstance(obj["json_schema"], (dict, bool)):
            raise bad("'json_schema' must be a JSON Schema (an object)")
        req.json_schema = obj["json_schema"]
    if "grammar" in obj:
        if not isinstance(obj["grammar"], str) or not obj["grammar"]:
            raise bad("'grammar' must be a non-empty string of GBNF")
        req.grammar = obj["grammar"]
    if (req.json_schema is not None or req.grammar is not None) and not req.stop_at_eos:
        raise bad("a grammar ends at the end-of-sequence token: 'stop_at_eos' cannot be false with it")
    return req


def read_requests(path: str, default_max_new: int) -> List[Request]:
    """Every request of a JSONL file (blank lines skipped); ids must be unique."""
    out: List[Request] = []
    seen: Dict[RecordId, int] = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path}:{n}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise RequestError(f"{where}: not JSON ({e})") from None
            req = parse_request(obj, default_max_new, where)
            if req.id in seen:
                raise RequestError(f"{where}: id {req.id!r} already used on line {seen[req.id]}")
            seen[req.id] = n
            out.append(req)
    if not out:
        raise RequestError(f"{path}: no requests")
    return out


def empty_record(req_id: RecordId) -> Dict[str, Any]:
    rec: Dict[str, Any] = {k: None for k in RECORD_FIELDS}
    rec["id"] = req_id
    return rec


# ---- The run digest -------------------------------------------------------------

def id_sort_key(req_id: RecordId) -> Tuple[int, Any]:
    """Integers first, numerically; then strings by their UTF-8 bytes."""
    return (0, req_id) if _is_int(req_id) else (1, req_id.encode("utf-8"))


def digest_line(req_id: RecordId, digest: Optional[str]) -> bytes:
    return (json.dumps([req_id, digest], separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8")


class RunDigest:
    """Accumulates (id, sequence digest) pairs in any order; hexdigest() sorts
    them by id and hashes the canonical lines with XXH3-128."""

    def __init__(self) -> None:
        self._pairs: List[Tuple[Tuple[int, Any], bytes]] = []

    def add(self, req_id: RecordId, digest: Optional[str]) -> None:
        self._pairs.append((id_sort_key(req_id), digest_line(req_id, digest)))

    def hexdigest(self) -> str:
        import xxhash  # the ray extra's dependency: XXH3-128 over arbitrary bytes

        h = xxhash.xxh3_128()
        for _, line in sorted(self._pairs, key=lambda p: p[0]):
            h.update(line)
        return h.hexdigest()


def run_digest(records: Iterable[Dict[str, Any]]) -> str:
    """The run digest of output records (dicts with id and digest)."""
    rd = RunDigest()
    for r in records:
        rd.add(r["id"], r["digest"])
    return rd.hexdigest()


@dataclass
class WorkerConfig:
    """How one actor runs its session: threads, CPU path (auto, scalar,
    avx2, avx512), backend (cpu, cuda), device, max_sequences (sequences
    generated together in one batched step: results do not depend on it),
    context_length (0: the model's, capped at 4096) and profile (integer,
    the default as the detinfer tools', or portable: float64-level
    accuracy; one per run, since a digest compares only within one profile)."""

    threads: int = 1
    cpu_path: str = "auto"
    backend: str = "cpu"
    device: int = 0
    max_sequences: int = 4
    context_length: int = 0
    profile: str = "integer"

    def __post_init__(self) -> None:
        if self.cpu_path not in ("auto", "scalar", "avx2", "avx512"):
            raise ValueError(f"cpu_path {self.cpu_path!r}: auto, scalar, avx2 or avx512")
        if self.backend not in ("cpu", "cuda"):
            raise ValueError(f"backend {self.backend!r}: cpu or cuda")
        if self.profile not in ("integer", "portable", "device"):
            raise ValueError(f"profile {self.profile!r}: integer, portable or device")
        if self.threads < 1 or self.max_sequences < 1 or self.context_length < 0 or self.device < 0:
            raise ValueError(f"worker config {self.describe()}: threads and max_sequences must be "
                             "at least 1, context_length and device at least 0")

    @classmethod
    def parse(cls, text: str) -> "WorkerConfig":
        """From "threads=2,cpu_path=avx2" (the command's --worker-config)."""
        kw: Dict[str, Any] = {}
        names = {f.name: f.type for f in fields(cls)}
        for item in filter(None, text.split(",")):
            key, sep, value = item.partition("=")
            key = key.strip()
            if not sep or key not in names:
                raise ValueError(f"worker config {text!r}: expected key=value with keys {sorted(names)}")
            try:
                kw[key] = value.strip() if key in ("cpu_path", "backend", "profile") else int(value)
            except ValueError:
                raise ValueError(f"worker config {text!r}: {key} must be an integer") from None
        return cls(**kw)

    def describe(self) -> str:
        return ",".join(f"{f.name}={getattr(self, f.name)}" for f in fields(self))


@dataclass
class Summary:
    records: int = 0
    errors: int = 0
    prompt_tokens: int = 0
    generated_tokens: int = 0
    duplicates_dropped: int = 0
    seconds: float = 0.0
    run_digest: str = ""
    profile: str = ""  # the run's: its digests compare only with digests of this profile and numerics
    numerics: int = 0
    workers: List[Dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> Dict[str, Any]:
        d = dict(self.__dict__)
        d["records_per_second"] = round(self.records / self.seconds, 3) if self.seconds else None
        d["generated_tokens_per_second"] = (round(self.generated_tokens / self.seconds, 3)
                                            if self.seconds else None)
        return d

    def text(self) -> str:
        d = self.as_dict()
        return (f"records {self.records} (errors {self.errors}), prompt tokens {self.prompt_tokens}, "
                f"generated tokens {self.generated_tokens}, {self.seconds:.1f} s, "
                f"{d['records_per_second']} records/s, {d['generated_tokens_per_second']} tokens/s\n"
                f"run digest {self.run_digest} (profile {self.profile}, numerics {self.numerics})")
