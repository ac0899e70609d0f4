"""LLM: a model and a session in one object, and generation in one call.

    llm = detinfer.LLM("model.gguf", threads=2, max_sequences=8)
    for c in llm.generate(["The capital of France is", [2, 818, 5279]], max_new=16):
        print(c.text, c.digest, c.finish_reason)

Prompts are generated together with continuous batching over the session's
sequences (detinfer._batch, the code detinfer.ray's workers run); each
result is bit for bit the prompt's run alone. LLM.score gives the
log-probability of every prompt token given the tokens before it."""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
from dataclasses import dataclass
from typing import (Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence as Seq, Set, Tuple,
                    Union)

from ._api import (DRAFT_DEFAULT, DRAFT_MAX, DRAFT_MAX_NGRAM, DRAFT_NGRAM_DEFAULT, DetinferError, Drafter, GeneratedToken, Logprobs, Model, Profile,
                   SamplingParams, Status, chat_turn_end)
from ._batch import Batch, Job, Outcome, Speculation, context_of, context_overflow, score_prompts
from ._lib import library

Prompt = Union[str, Seq[int]]
Message = Union[Tuple[str, str], Mapping[str, str]]


@dataclass(frozen=True)
class Completion:
    """One prompt's result. finish_reason: "stop" (EOS, or a chat's end of
    turn: that token ends token_ids) or "length" (max_new tokens). digest:
    the sequence digest (prompt and generated ids, as `detinfer run` and
    the C API report it). logits_digests and logprobs only when asked for:
    per generated token, the digest of the logits row it was chosen from,
    and its Logprobs (the token's and the top N, temperature 1)."""

    text: str
    token_ids: List[int]
    digest: str
    finish_reason: str
    prompt_token_ids: List[int]
    logits_digests: Optional[List[str]] = None
    logprobs: Optional[List[Logprobs]] = None
    drafted: Optional[int] = None
    accepted: Optional[int] = None
    """With speculate: the draft tokens stepped and how many of them decoding
    chose (accepted / drafted is the acceptance rate); None without."""


@dataclass(frozen=True)
class PromptScore:
    """One prompt's log-probabilities (LLM.score): logprobs[i] is token i's
    given tokens 0..i-1, a Logprobs with the `top` most likely tokens at
    that position; logprobs[0] is None (the first token has no prefix).
    logprob_sum: the sum of the token log-probabilities, in order, in
    float64."""

    token_ids: List[int]
    logprobs: List[Optional[Logprobs]]
    logprob_sum: float

    @property
    def token_logprobs(self) -> List[Optional[float]]:
        """Each token's log-probability alone; the first is None."""
        return [lp.token_logprob if lp is not None else None for lp in self.logprobs]


# The built-in template (docs/CHAT.md, "The built-in templates") that every
# chat model of an architecture speaks: LLM.chat's choice for a file without
# a tokenizer.chat_template of its own (Gemma 3 270M's), said once per LLM.
# The library names only a file's own template (di_model_chat_template), so
# this table is the binding's.
ARCHITECTURE_CHAT_TEMPLATES = {
    "gemma2": "gemma",
    "gemma3": "gemma",
    "phi3": "phi3",
    "qwen2": "chatml",
    "qwen3": "chatml",
}


def _sum(logprobs: List[Logprobs]) -> float:
    total = 0.0
    for lp in logprobs:
        assert lp.token_logprob is not None  # score_prompts always asks for the token's
        total += lp.token_logprob
    return total


class LLM:
    """A model file, loaded once, and one session of `max_sequences`
    sequences. Other keyword settings are Config keys (context_length,
    cpu_path, backend, ...). One call at a time (a lock makes threads
    wait); a stream holds the LLM from the call until it is exhausted,
    closed, left by `break` or dropped. profile: integer (the default, as
    the detinfer tools take it) or portable (float64-level accuracy); a
    digest compares only with digests of the same profile (a bare
    Model.session() keeps the library's default, portable)."""

    # The logits one step of score() keeps: an all-logits step holds a row of
    # n_vocab floats per token it appends, so long prompts go in chunks (the
    # bits do not depend on the chunking).
    SCORE_STEP_BYTES = 256 << 20

    def __init__(self, model_path: str, threads: int = 1, max_sequences: int = 8,
                 profile: Union[Profile, str] = Profile.INTEGER, **settings: Any) -> None:
        if isinstance(profile, str):
            try:
                profile = Profile[profile.upper()]
            except KeyError:
                raise ValueError(f"profile {profile!r}: portable, device or integer") from None
        self.model = Model(model_path)
        self._drafters: Dict[str, Tuple[Model, Drafter]] = {}  # speculate=PATH: (draft Model, Drafter), made once
        self._drafter_settings = dict(settings, threads=threads, max_sequences=max_sequences, profile=profile)
        try:
            self.session = self.model.session(threads=threads, max_sequences=max_sequences,
                                              profile=profile, **settings)
        except BaseException:
            self.model.close()
            raise
        self.max_sequences = max_sequences
        self.context_length: int = context_of(self.model, settings.get("context_length") or 0)
        self._lock = threading.Lock()
        self._stream_thread: Optional[int] = None  # the thread whose open stream holds _lock
        self._said_template = False  # the architecture's chat template was named in a warning

    def _acquire(self) -> None:
        """Takes the LLM's lock, or refuses where waiting could never end: an
        open stream of this thread holds it."""
        if self._stream_thread == threading.get_ident():
            raise RuntimeError("another stream of this LLM is open in this thread: exhaust or close it "
                               "(or use `with llm.stream(...) as s:`) first")
        self._lock.acquire()

    @contextlib.contextmanager
    def _turn(self) -> Iterator[None]:
        self._acquire()
        try:
            yield
        finally:
            self._lock.release()

    def close(self) -> None:
        for draft, drafter in self._drafters.values():
            drafter.close()
            draft.close()
        self._drafters.clear()
        self.model.close()  # closes the session too

    def _speculation(self, speculate: Optional[str], draft_max: int, ngram: int) -> Optional[Speculation]:
        """speculate None: none; "ngram": prompt lookup; else a draft model's
        path (its Drafter made on first use and kept). Checked before anything
        runs, as the CLI checks --speculate, --draft-max and --ngram."""
        for name, value, top in (("draft_max", draft_max, DRAFT_MAX), ("ngram", ngram, DRAFT_MAX_NGRAM)):
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= top:
                raise ValueError(f"{name} is {value!r}: an int 1..{top}")
        if speculate is None:
            return None
        if not isinstance(speculate, str) or not speculate:
            raise ValueError(f"speculate is {speculate!r}: None, \"ngram\" or a draft model's path")
        if speculate == "ngram":
            return Speculation(draft_max, ngram)
        if speculate not in self._drafters:
            library().fn("di_drafter_create")  # an older library is named before a file is read
            if not os.path.isfile(speculate):
                raise ValueError(f"speculate is {speculate!r}: \"ngram\" or the path of a draft model "
                                 "(no such file)")
            draft = Model(speculate)  # a missing or bad file: DetinferError naming it
            try:
                drafter = Drafter(self.model, draft, **self._drafter_settings)
            except BaseException:
                draft.close()
                raise
            self._drafters[speculate] = (draft, drafter)
        return Speculation(draft_max, ngram, self._drafters[speculate][1])

    def __enter__(self) -> "LLM":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- checks before anything runs --------------------------------------------

    def _prompt_ids(self, prompt: Prompt, where: str) -> List[int]:
        if isinstance(prompt, (bytes, bytearray)) or not isinstance(prompt, (str, Seq)):
            raise TypeError(f"{where}: a prompt is text (str) or token ids (a list of int), "
                            f"not {type(prompt).__name__}")
        try:
            ids = self.model.tokenize(prompt, add_bos=True) if isinstance(prompt, str) else list(prompt)
        except DetinferError as e:  # a model file without a tokenizer, text it cannot take
            raise DetinferError(e.status, f"{where}: {e.message}") from None
        if prompt == "":  # not BOS alone: refused, as the tools, the server and Go and Rust do
            raise ValueError(f"{where}: the prompt is empty (text \"\")")
        if not ids:
            raise ValueError(f"{where}: the prompt has no tokens")
        for t in ids:
            if not isinstance(t, int) or isinstance(t, bool):
                raise TypeError(f"{where}: token {t!r} is not an int")
            if not 0 <= t < self.model.n_vocab:
                raise DetinferError(Status.ERR_TOKEN_RANGE,
                                    f"{where}: token {t} is outside the vocabulary (0..{self.model.n_vocab - 1})")
        return ids

    def _check_sampling(self, params: Optional[SamplingParams], where: str) -> None:
        """The library's own check (di_session_seq_set_sampling) on a free sequence."""
        if params is None:
            return
        if not isinstance(params, SamplingParams):
            raise TypeError(f"{where}: sampling is a SamplingParams or None, not {type(params).__name__}")
        try:
            self.session.set_sampling(0, params)
        except DetinferError as e:
            raise DetinferError(e.status, f"{where}: {e.message}") from None
        finally:
            self.session.set_sampling(0, None)

    @staticmethod
    def _items(prompts: Union[Prompt, Seq[Prompt]], call: str) -> List[Any]:
        items: List[Any] = [prompts] if isinstance(prompts, str) else list(prompts)
        if items and all(isinstance(p, int) for p in items):
            raise TypeError("prompts is a list of prompts: put one prompt of token ids in a list, "
                            f"{call}([[1, 2, 3]])")
        return items

    def _jobs(self, prompts: Union[Prompt, Seq[Prompt]],
              sampling: Union[None, SamplingParams, Seq[Optional[SamplingParams]]], max_new: int,
              stop: Set[int], logprobs: Optional[int]) -> List[Job]:
        items = self._items(prompts, "generate")
        per: List[Optional[SamplingParams]]
        if isinstance(sampling, (list, tuple)):
            if len(sampling) != len(items):
                raise ValueError(f"{len(sampling)} sampling parameters for {len(items)} prompts")
            per = list(sampling)
        else:
            per = [sampling] * len(items)  # type: ignore[list-item]
        if not isinstance(max_new, int) or max_new < 0:
            raise ValueError(f"max_new is {max_new!r}: an int >= 0")
        if logprobs is not None and not 0 <= logprobs <= self.model.n_vocab:
            raise ValueError(f"logprobs is {logprobs}: 0 .. the vocabulary's size")
        jobs = []
        for i, (p, s) in enumerate(zip(items, per)):
            where = f"prompt {i}"
            ids = self._prompt_ids(p, where)
            overflow = context_overflow(len(ids), max_new, self.context_length)
            if overflow is not None:  # one call is refused whole
                raise DetinferError(overflow.status, f"{where}: {overflow.message}")
            jobs.append(Job(ids, max_new, stop, s, logprobs))
            self._check_sampling(s, where)
        return jobs

    def _stop(self, stop_at_eos: bool, extra: Iterable[int] = ()) -> Set[int]:
        eos = self.model.eos
        return ({eos} if stop_at_eos and eos is not None else set()) | set(extra)

    def _completion(self, i: int, job: Job, out: Outcome, logits_digests: bool,
                    speculating: bool = False) -> Completion:
        if out.error is not None:
            raise DetinferError(out.error.status, f"prompt {i}: {out.error.message}")
        try:
            text = self.model.detokenize(out.tokens)
        except DetinferError as e:
            if e.status != Status.ERR_UNSUPPORTED:  # a model file without a tokenizer has no text
                raise
            text = ""
        return Completion(text, out.tokens, out.digest or "", out.finish or "length", list(job.prompt),
                          out.logits_digests if logits_digests else None,
                          out.logprobs if job.logprobs is not None else None,
                          out.drafted if speculating else None, out.accepted if speculating else None)

    # -- generation -----------------------------------------------------------

    def generate(self, prompts: Union[Prompt, Seq[Prompt]],
                 sampling: Union[None, SamplingParams, Seq[Optional[SamplingParams]]] = None,
                 max_new: int = 32, stop_at_eos: bool = True, logits_digests: bool = False,
                 logprobs: Optional[int] = None, speculate: Optional[str] = None, draft_max: int = DRAFT_DEFAULT,
                 ngram: int = DRAFT_NGRAM_DEFAULT) -> List[Completion]:
        """One Completion per prompt, in order. prompts: a list of texts
        (tokenized with BOS as the model asks, special-token text as plain
        text) or token-id lists; one text alone is a list of one. sampling:
        None (greedy), one SamplingParams for all, or one (or None) per
        prompt. speculate: None, "ngram" (prompt lookup over each sequence's
        own tokens, keys of at most `ngram` tokens, 1..8) or a draft model's
        path (a smaller GGUF of the same vocabulary), verifying up to
        draft_max (1..32) draft tokens a step, as `detinfer run --speculate`
        does: the tokens, digests and log-probabilities are bit for bit those
        without it, only faster where drafts are accepted (Completion.drafted
        and .accepted say how many). Every prompt and parameter is checked
        before anything runs (ValueError, TypeError, or DetinferError naming
        the prompt)."""
        with self._turn():
            spec = self._speculation(speculate, draft_max, ngram)
            jobs = self._jobs(prompts, sampling, max_new, self._stop(stop_at_eos), logprobs)
            outcomes = Batch(self.session, self.max_sequences, jobs, spec).run()
            return [self._completion(i, j, o, logits_digests, spec is not None)
                    for i, (j, o) in enumerate(zip(jobs, outcomes))]

    def score(self, prompts: Union[Prompt, Seq[Prompt]], top: int = 0) -> List[PromptScore]:
        """One PromptScore per prompt, in order: the log-probability of each
        prompt token given the tokens before it (temperature 1, the library's
        log-softmax), and with `top` the most likely tokens at each position.
        Prompts as generate() takes them (text gets BOS as the model asks).
        Each prompt is one prefill with every position's logits
        (di_session_logprobs_at), prompts batched over the session's
        sequences: the bits of stepping the prompt one token at a time and
        asking di_session_logprobs after each. Every prompt is checked before
        anything runs; one longer than the context, or empty, is refused
        (DetinferError ERR_CONTEXT_FULL, ValueError), naming the prompt."""
        with self._turn():
            library().fn("di_session_logprobs_at")  # an older library is named before anything runs
            if not isinstance(top, int) or isinstance(top, bool) or not 0 <= top <= self.model.n_vocab:
                raise ValueError(f"top is {top!r}: 0 .. the vocabulary's size")
            ids = []
            for i, p in enumerate(self._items(prompts, "score")):
                where = f"prompt {i}"
                one = self._prompt_ids(p, where)
                if len(one) > self.context_length:
                    raise DetinferError(Status.ERR_CONTEXT_FULL, f"{where}: {len(one)} tokens, more than the "
                                        f"context of {self.context_length}")
                ids.append(one)
            rows = max(1, self.SCORE_STEP_BYTES // (4 * self.model.n_vocab))
            scored = score_prompts(self.session, self.max_sequences, ids, top, rows)
            return [PromptScore(p, [None, *lps], _sum(lps)) for p, lps in zip(ids, scored)]

    def chat(self, messages: Iterable[Message], template: Optional[str] = None,
             sampling: Optional[SamplingParams] = None, max_new: int = 32, logits_digests: bool = False,
             logprobs: Optional[int] = None, speculate: Optional[str] = None, draft_max: int = DRAFT_DEFAULT,
             ngram: int = DRAFT_NGRAM_DEFAULT) -> Completion:
        """The assistant's reply to a chat ((role, content) pairs or dicts), in
        the built-in template named by `template`, else the file's own, else
        its architecture's (ARCHITECTURE_CHAT_TEMPLATES, with a warning the
        first time): through di_chat_tokenize, so only the template's markers
        become control tokens and no message text can forge a turn. Stops at
        EOS or at the template's end of turn. speculate, draft_max, ngram:
        as generate() takes them."""
        if template is None:
            template = self.model.chat_template
        if template is None:
            arch = self.model.architecture
            template = ARCHITECTURE_CHAT_TEMPLATES.get(arch)
            if template is not None and not self._said_template:
                self._said_template = True
                warnings.warn(f"the model file has no chat template: using {template!r}, the {arch} "
                              f"architecture's (name one with template=...)", stacklevel=2)
        ids = self.model.chat_tokenize(messages, template=template)
        turn_end = chat_turn_end(template) if template else None
        extra = []
        if turn_end:
            try:
                extra.append(self.model.token_lookup(turn_end))
            except DetinferError:
                pass  # the vocabulary has no such token: EOS alone ends the reply
        with self._turn():
            spec = self._speculation(speculate, draft_max, ngram)
            jobs = self._jobs([ids], sampling, max_new, self._stop(True, extra), logprobs)
            out = Batch(self.session, self.max_sequences, jobs, spec).run()[0]
            return self._completion(0, jobs[0], out, logits_digests, spec is not None)

    def stream(self, prompt: Prompt, sampling: Optional[SamplingParams] = None, max_new: int = 32,
               stop_at_eos: bool = True) -> "Stream":
        """The tokens of one prompt as they are generated: iterate for
        GeneratedToken(token, piece, digest); afterwards .completion is the
        Completion (equal to generate([prompt])[0]). The prompt is checked
        here, and the stream holds the LLM from here until it is exhausted,
        closed, left by `break` or dropped; `with llm.stream(...) as s:`
        closes it at the block's end. A second stream (or call) while one is
        open in the same thread is a RuntimeError, not a wait without end."""
        return Stream(self, prompt, sampling, max_new, stop_at_eos)


class Stream(Iterator[GeneratedToken]):
    """LLM.stream's iterator. Nothing it holds refers back to it, so
    reference counting frees it (and the LLM) the moment it is dropped, as
    `for t in llm.stream(...): break` does; no cycle waits for the collector."""

    def __init__(self, llm: LLM, prompt: Prompt, sampling: Optional[SamplingParams], max_new: int,
                 stop_at_eos: bool) -> None:
        self.completion: Optional[Completion] = None
        self._llm: Optional[LLM] = None  # set while the stream holds the LLM
        llm._acquire()
        try:
            self._jobs = llm._jobs([prompt], sampling, max_new, llm._stop(stop_at_eos), None)
        except BaseException:
            llm._lock.release()
            raise
        llm._stream_thread = threading.get_ident()
        self._llm = llm
        self._batch = Batch(llm.session, 1, self._jobs)
        self._events = self._batch.events()

    def __iter__(self) -> "Stream":
        return self

    def __next__(self) -> GeneratedToken:
        llm = self._llm
        if llm is None:
            raise StopIteration
        try:
            _, token, digest = next(self._events)
            try:
                piece = llm.model.token_piece(token)
            except DetinferError as e:
                if e.status != Status.ERR_UNSUPPORTED:
                    raise
                piece = ""
        except StopIteration:
            out = self._batch.outcomes[0]
            assert out is not None
            try:
                self.completion = llm._completion(0, self._jobs[0], out, True)
            finally:
                self.close()
            raise
        except BaseException:
            self.close()
            raise
        return GeneratedToken(token, piece, digest)

    def close(self) -> None:
        """Stops the generation early (its sequence is emptied) and frees the
        LLM; closing again does nothing."""
        llm, self._llm = self._llm, None
        if llm is None:
            return
        try:
            if not llm.session.closed:  # LLM.close() came first: nothing left to empty
                self._events.close()  # type: ignore[attr-defined]  # a generator
        finally:
            llm._stream_thread = None
            llm._lock.release()

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()
