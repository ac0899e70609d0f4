"""Continuous batching over one session's sequences: jobs (prompt ids,
max_new, stop tokens, sampling, grammar) generated together, every active sequence
advanced one token per batched step, a finished job's sequence taken by the
next job. Batch invariance makes each job's tokens and digests equal to its
run alone (Sequence.generate); the tests check exactly that. LLM.generate,
LLM.stream and detinfer.ray's workers run on it. score_prompts is LLM.score's
prefill of prompts with every position's log-probabilities. No Ray here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Collection, Dict, Iterator, List, Optional, Sequence, Tuple

from ._api import DetinferError, Grammar, Logprobs, Model, ModelKey, SamplingParams, Session, Status


def context_of(model: Model, context_length: int) -> int:
    """The most tokens a sequence holds: the context_length setting, else
    (include/detinfer.h, DI_CONFIG_CONTEXT_LENGTH) the model's training
    context capped at 4096."""
    return context_length or min(model.get_int(ModelKey.N_CTX_TRAIN), 4096)


def context_overflow(n_prompt: int, max_new: int, context: int) -> Optional[DetinferError]:
    """The server's rule, checked before anything runs: the prompt and
    max_new - 1 generated tokens are stepped (the last one chosen is not)."""
    if n_prompt + max(max_new - 1, 0) <= context:
        return None
    return DetinferError(Status.ERR_CONTEXT_FULL, f"the prompt's {n_prompt} tokens and max_new {max_new} "
                         f"exceed the context of {context} tokens")


@dataclass
class Job:
    """One prompt to generate from. stop_tokens end it (the stop token is
    kept as its last token); sampling None is greedy; logprobs N asks for
    each token's log-probability and the N most likely alternatives; grammar
    constrains the generated tokens (not the prompt: it is set once the
    prompt is in), and ends at a stop token it allows."""

    prompt: Sequence[int]
    max_new: int
    stop_tokens: Collection[int] = ()
    sampling: Optional[SamplingParams] = None
    logprobs: Optional[int] = None
    grammar: Optional[Grammar] = None


@dataclass
class Outcome:
    """What a job gave: finish is "stop" (a stop token), "length" (max_new)
    or "error" (then `error` holds the library's error and nothing else is set)."""

    tokens: List[int] = field(default_factory=list)
    digest: Optional[str] = None  # the sequence digest: prompt and generated ids
    finish: Optional[str] = None
    error: Optional[DetinferError] = None
    logits_digests: List[str] = field(default_factory=list)
    logprobs: List[Logprobs] = field(default_factory=list)


class _Slot:
    """A job in flight on one sequence of the session."""

    def __init__(self, index: int, job: Job) -> None:
        self.index = index          # position in the list of jobs
        self.job = job
        self.feed = list(job.prompt)  # tokens the next step appends
        self.out = Outcome()


# (job index, token, digest of the logits row it was chosen from), as generated
TokenEvent = Tuple[int, int, str]


class Batch:
    """jobs on `slots` sequences (0 .. slots-1) of session, which must be
    empty and are left empty. Iterate events() for the tokens as they come,
    or call run(); outcomes[i] is job i's once it has finished."""

    def __init__(self, session: Session, slots: int, jobs: Sequence[Job]) -> None:
        self.session = session
        self.slots = slots
        self.jobs = list(jobs)
        self.outcomes: List[Optional[Outcome]] = [None] * len(self.jobs)

    def run(self) -> List[Outcome]:
        for _ in self.events():
            pass
        return [o for o in self.outcomes if o is not None]

    def events(self) -> Iterator[TokenEvent]:
        pending = list(enumerate(self.jobs))
        pending.reverse()  # pop() takes them in order
        free = list(range(self.slots - 1, -1, -1))
        active: Dict[int, _Slot] = {}
        try:
            while pending or active:
                while pending and free:
                    index, job = pending.pop()
                    seq = free.pop()
                    slot = _Slot(index, job)
                    active[seq] = slot
                    err = self._start(seq, slot)
                    if err is not None or job.max_new <= 0:
                        slot.out.finish = "length"
                        self._finish(active, free, seq, err)
                if active:
                    yield from self._step(active, free)
        finally:  # also when the caller stops iterating: the sequences are left empty
            for seq in list(active):
                self._finish(active, free, seq, None)

    def _start(self, seq: int, slot: _Slot) -> Optional[DetinferError]:
        if not slot.feed:
            return DetinferError(Status.ERR_INVALID_ARGUMENT, "the prompt has no tokens")
        if slot.job.sampling is not None:
            try:
                self.session.set_sampling(seq, slot.job.sampling)
            except DetinferError as e:
                return e
        return None

    def _finish(self, active: Dict[int, _Slot], free: List[int], seq: int,
                error: Optional[DetinferError]) -> None:
        slot = active.pop(seq)
        out = slot.out
        if error is not None:
            self.outcomes[slot.index] = Outcome(finish="error", error=error)
        else:
            # prompt and generated ids: the stepped tokens and the last chosen one
            out.digest = self.session.digest(seq, extra=slot.feed)
            self.outcomes[slot.index] = out
        self.session.reset(seq)
        if slot.job.sampling is not None:
            try:
                self.session.set_sampling(seq, None)
            except DetinferError:
                pass  # sampling refused before it was set: nothing to restore
        free.append(seq)

    def _step(self, active: Dict[int, _Slot], free: List[int]) -> Iterator[TokenEvent]:
        """One batched step of every active sequence, then one token each. A
        step that fails changes nothing (all or nothing): the sequences are then
        stepped alone, so the error goes to the job that caused it."""
        entries = [(seq, slot.feed) for seq, slot in active.items()]
        try:
            self.session.step(entries)
            stepped = [seq for seq, _ in entries]
        except DetinferError:
            stepped = []
            for entry in entries:
                err = self._solo_error(entry)
                if err is None:
                    stepped.append(entry[0])
                else:
                    self._finish(active, free, entry[0], err)
        for seq in stepped:
            slot = active[seq]
            job, out = slot.job, slot.out
            if job.grammar is not None and not out.tokens:
                try:
                    ends = [t for t in job.stop_tokens if t != self.session.model.eos]  # EOS is always one
                    self.session.set_grammar(seq, job.grammar, ends)  # the prompt is in: it starts here
                except DetinferError as e:
                    self._finish(active, free, seq, e)
                    continue
            digest = self.session.logits_digest(seq)
            token = (self.session.sample_token(seq) if job.sampling is not None
                     else self.session.greedy_token(seq))
            out.tokens.append(token)
            out.logits_digests.append(digest)
            if job.logprobs is not None:
                out.logprobs.append(self.session.logprobs(seq, token, job.logprobs))
            slot.feed = [token]
            if token in job.stop_tokens:
                out.finish = "stop"
            elif len(out.tokens) >= job.max_new:
                out.finish = "length"
            yield slot.index, token, digest
            if out.finish:
                self._finish(active, free, seq, None)

    def _solo_error(self, entry: Tuple[int, List[int]]) -> Optional[DetinferError]:
        try:
            self.session.step([entry])
            return None
        except DetinferError as e:
            return e



def score_prompts(session: Session, slots: int, prompts: Sequence[Sequence[int]], top: int,
                  rows: int) -> List[List[Logprobs]]:
    """Per prompt, the Logprobs of tokens 1.. given the tokens before each
    (`top` most likely with each), from all-logits steps of the prompts on
    sequences 0 .. slots-1 of session, which must be empty and are left
    empty. A step appends at most `rows` tokens over its sequences, so a
    long prompt goes in chunks, a finished prompt's sequence taking the next.
    A prompt's last token is never stepped: no position of the prompt reads
    the logits after it."""
    out: List[List[Logprobs]] = [[] for _ in prompts]
    pending = list(range(len(prompts) - 1, -1, -1))  # pop() takes them in order
    free = list(range(slots - 1, -1, -1))
    active: Dict[int, Tuple[int, int]] = {}  # seq: (prompt index, tokens stepped)
    try:
        while pending or active:
            while pending and free:
                active[free.pop()] = (pending.pop(), 0)
            entries: List[Tuple[int, List[int]]] = []
            budget = rows
            for seq, (i, done) in active.items():
                take = min(len(prompts[i]) - 1 - done, budget)
                if take > 0:
                    entries.append((seq, list(prompts[i][done:done + take])))
                    budget -= take
            if entries:
                session.step(entries, all_logits=True)
            for seq, chunk in entries:
                i, done = active[seq]
                for index in range(len(chunk)):
                    out[i].append(session.logprobs_at(seq, index, prompts[i][done + index + 1], top))
                active[seq] = (i, done + len(chunk))
            for seq, (i, done) in list(active.items()):
                if done == len(prompts[i]) - 1:
                    session.reset(seq)
                    del active[seq]
                    free.append(seq)
    finally:  # also on an error: the sequences are left empty
        for seq in active:
            session.reset(seq)
    return out
