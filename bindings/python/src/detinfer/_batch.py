"""Continuous batching over one session's sequences: jobs (prompt ids,
max_new, stop tokens, sampling, grammar) generated together, every active sequence
advanced one token per batched step, a finished job's sequence taken by the
next job. Batch invariance makes each job's tokens and digests equal to its
run alone (Sequence.generate); the tests check exactly that. LLM.generate,
LLM.stream and detinfer.ray's workers run on it. score_prompts is LLM.score's
prefill of prompts with every position's log-probabilities. No Ray here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Collection, Dict, Generator, Iterator, List, Optional, Sequence, Tuple

from ._api import DRAFT_DEFAULT, DRAFT_NGRAM_DEFAULT, DetinferError, Drafter, Grammar, Logprobs, Model, ModelKey, SamplingParams, Session, Status


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
class Speculation:
    """Speculative decoding for a Batch: each decoding step holds a sequence's
    chosen token and up to draft_max draft tokens, from prompt lookup (keys of
    at most `ngram` tokens) or from `drafter`, verified in one all-logits step
    (di_session_seq_accept_draft). The tokens, digests and log-probabilities
    are bit for bit those without it; only the number of steps changes."""

    draft_max: int = DRAFT_DEFAULT
    ngram: int = DRAFT_NGRAM_DEFAULT
    drafter: Optional[Drafter] = None


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
    drafted: int = 0   # with speculation: draft tokens stepped
    accepted: int = 0  # and of those, the ones decoding chose (kept)
    steps: int = 0     # decoding steps after the prompt


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

    def __init__(self, session: Session, slots: int, jobs: Sequence[Job],
                 speculation: Optional[Speculation] = None) -> None:
        self.session = session
        self.speculation = speculation
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
        """One batched step of every active sequence, then one token each (or,
        speculating, the accepted draft tokens and one more). A step that
        fails changes nothing (all or nothing): the sequences are then stepped
        alone, so the error goes to the job that caused it. Speculating, the
        prompts go in a step of their own first, so that the all-logits step
        of the drafts computes no row of a prompt."""
        if self.speculation is None:
            yield from self._run_step([(seq, slot.feed, 0) for seq, slot in active.items()], False,
                                      active, free)
            return
        prefill = [(seq, slot.feed, 0) for seq, slot in active.items() if not slot.out.tokens]
        if prefill:
            yield from self._run_step(prefill, False, active, free)
        decode = []
        for seq, slot in list(active.items()):
            if slot.out.tokens and seq in active and active[seq] is slot and slot.out.finish is None:
                draft = self._draft(seq, slot, active, free)
                if draft is None:
                    continue  # the drafter failed: the job has its error
                decode.append((seq, slot.feed + draft, len(draft)))
        if decode:
            yield from self._run_step(decode, any(n for _, _, n in decode), active, free)

    def _draft(self, seq: int, slot: _Slot, active: Dict[int, _Slot], free: List[int]) -> Optional[List[int]]:
        """The draft to step after slot's chosen token, cut so that no token
        past max_new is stepped; None when the drafter failed (the job then
        ends with its error)."""
        spec = self.speculation
        assert spec is not None and len(slot.feed) == 1
        room = min(spec.draft_max, slot.job.max_new - len(slot.out.tokens) - 1)
        if room <= 0:
            return []
        try:
            if spec.drafter is not None:
                return spec.drafter.propose(self.session, seq, slot.feed[0], room)
            return self.session.draft_lookup(seq, slot.feed[0], spec.ngram, room)
        except DetinferError as e:
            self._finish(active, free, seq, e)
            return None

    def _run_step(self, entries: List[Tuple[int, List[int], int]], all_logits: bool,
                  active: Dict[int, _Slot], free: List[int]) -> Iterator[TokenEvent]:
        try:
            self.session.step([(seq, feed) for seq, feed, _ in entries], all_logits=all_logits)
            stepped = entries
        except DetinferError:
            stepped = []
            for entry in entries:
                err = self._solo_error((entry[0], entry[1]), all_logits)
                if err is None:
                    stepped.append(entry)
                else:
                    self._finish(active, free, entry[0], err)
        for seq, fed, n_draft in stepped:
            slot = active[seq]
            job, out = slot.job, slot.out
            if job.grammar is not None and not out.tokens:
                try:
                    ends = [t for t in job.stop_tokens if t != self.session.model.eos]  # EOS is always one
                    self.session.set_grammar(seq, job.grammar, ends)  # the prompt is in: it starts here
                except DetinferError as e:
                    self._finish(active, free, seq, e)
                    continue
            if n_draft == 0:
                if out.tokens:
                    out.steps += 1
                digest = self.session.logits_digest(seq)
                token = (self.session.sample_token(seq) if job.sampling is not None
                         else self.session.greedy_token(seq))
                yield from self._take(active, free, seq, slot, token, digest, None)
                continue
            draft = fed[1:]
            accepted, nxt = self.session.accept_draft(seq, n_draft)
            out.steps += 1
            out.drafted += n_draft
            out.accepted += accepted
            chosen = draft[:accepted] + ([nxt] if nxt is not None else [])
            for i, token in enumerate(chosen):
                digest = self.session.logits_digest(seq, i)
                ended = yield from self._take(active, free, seq, slot, token, digest, i, i < accepted)
                if ended:
                    break
            else:
                if nxt is None:  # the grammar ended with no end token: as sample_token says it
                    self.session.sample_token(seq)

    def _take(self, active: Dict[int, _Slot], free: List[int], seq: int, slot: _Slot, token: int, digest: str,
              row: Optional[int], in_draft: bool = False) -> Generator[TokenEvent, None, bool]:
        """Records one generated token (chosen from the logits row `row` of the
        last step, or the last row); True when the job ended with it."""
        job, out = slot.job, slot.out
        out.tokens.append(token)
        out.logits_digests.append(digest)
        if job.logprobs is not None:
            out.logprobs.append(self.session.logprobs(seq, token, job.logprobs) if row is None
                                else self.session.logprobs_at(seq, row, token, job.logprobs))
        slot.feed = [token]
        if token in job.stop_tokens:
            out.finish = "stop"
        elif len(out.tokens) >= job.max_new:
            out.finish = "length"
        if out.finish and in_draft:  # ended inside the draft: the sequence ends where it would have
            self.session.truncate(seq, len(job.prompt) + len(out.tokens) - 1)
        yield slot.index, token, digest
        if out.finish:
            self._finish(active, free, seq, None)
            return True
        return False

    def _solo_error(self, entry: Tuple[int, List[int]], all_logits: bool = False) -> Optional[DetinferError]:
        try:
            self.session.step([entry], all_logits=all_logits)
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
