"""One worker's generator: a model loaded once, one session, requests
generated together in batched steps (continuous batching over the session's
max_sequences). Batch invariance makes every record equal to the one
Sequence.generate() gives alone; the tests check exactly that. No Ray here."""

from __future__ import annotations

import json
import os
import socket
from typing import Any, Dict, List, Optional

from .._api import Backend, CpuPath, DetinferError, Grammar, Model, Session, Status
from .records import Request, WorkerConfig, empty_record


class _Slot:
    """A request in flight on one sequence of the session."""

    def __init__(self, req: Request, index: int, prompt: List[int]) -> None:
        self.req = req
        self.index = index          # position in the batch given to generate()
        self.prompt = prompt
        self.feed = list(prompt)    # tokens the next step appends
        self.tokens: List[int] = []
        self.logits_digests: List[str] = []
        self.finish: Optional[str] = None
        self.grammar: Optional[Grammar] = None  # set once the prompt is in


class Generator:
    """Loads the model once; generate(requests) returns one record per request."""

    def __init__(self, model_path: str, config: WorkerConfig, logits_digests: bool = False,
                 provenance: bool = False) -> None:
        self.config = config
        self.logits_digests = logits_digests
        self.model = Model(model_path)
        settings: Dict[str, Any] = dict(
            threads=config.threads, max_sequences=config.max_sequences,
            context_length=config.context_length, cpu_path=CpuPath[config.cpu_path.upper()],
            backend=Backend[config.backend.upper()])
        if config.backend.lower() != "cpu":
            settings["device"] = config.device
        try:
            self.session: Session = self.model.session(**settings)
        except BaseException:
            self.model.close()
            raise
        self.eos = self.model.eos
        self.grammars: Dict[str, Grammar] = {}  # compiled once per text in this worker
        self.backend_info = self.session.backend_info
        self.worker = (f"{socket.gethostname()}:{os.getpid()} {self.backend_info}"
                       if provenance else None)

    def close(self) -> None:
        for g in self.grammars.values():
            g.close()
        self.model.close()  # closes the session too

    def _grammar(self, req: Request) -> Optional[Grammar]:
        if req.json_schema is None and req.grammar is None:
            return None
        key = ("s" + json.dumps(req.json_schema, ensure_ascii=False) if req.json_schema is not None
               else "g" + (req.grammar or ""))
        if key not in self.grammars:
            self.grammars[key] = (Grammar.from_json_schema(req.json_schema) if req.json_schema is not None
                                  else Grammar.from_gbnf(req.grammar or ""))
        return self.grammars[key]

    # -- one request --------------------------------------------------------------

    def _prompt(self, req: Request) -> List[int]:
        if req.tokens is not None:
            return list(req.tokens)
        return self.model.tokenize(req.prompt or "", add_bos=True, parse_special=req.parse_special)

    def _text(self, tokens: List[int]) -> Optional[str]:
        try:
            return self.model.detokenize(tokens)
        except DetinferError as e:
            if e.status == Status.ERR_UNSUPPORTED:  # a model file without a tokenizer
                return None
            raise

    def _record(self, slot: _Slot, seq: int, error: Optional[str] = None) -> Dict[str, Any]:
        rec = empty_record(slot.req.id)
        rec["n_prompt"] = len(slot.prompt)
        if error is not None:
            rec["finish"], rec["error"] = "error", error
        else:
            rec["tokens"] = slot.tokens
            rec["text"] = self._text(slot.tokens)
            # prompt and generated ids: the stepped tokens and the last chosen one
            rec["digest"] = self.session.digest(seq, extra=slot.feed)
            rec["finish"] = slot.finish
        if self.logits_digests:
            rec["logits_digests"] = slot.logits_digests if error is None else None
        if self.worker is not None:
            rec["worker"] = self.worker
        return rec

    # -- a batch of requests ------------------------------------------------------

    def generate(self, requests: List[Request]) -> List[Dict[str, Any]]:
        out: List[Optional[Dict[str, Any]]] = [None] * len(requests)
        pending = list(enumerate(requests))
        pending.reverse()  # pop() takes them in order
        free = list(range(self.config.max_sequences - 1, -1, -1))
        active: Dict[int, _Slot] = {}

        def finish(seq: int, error: Optional[str] = None) -> None:
            slot = active.pop(seq)
            out[slot.index] = self._record(slot, seq, error)
            self.session.reset(seq)
            if slot.req.sampling is not None:
                try:
                    self.session.set_sampling(seq, None)
                except DetinferError:
                    pass  # sampling refused before it was set: nothing to restore
            free.append(seq)

        while pending or active:
            while pending and free:
                index, req = pending.pop()
                seq = free.pop()
                slot = _Slot(req, index, [])
                active[seq] = slot
                try:
                    slot.prompt = self._prompt(req)
                    slot.feed = list(slot.prompt)
                    if not slot.prompt:
                        raise ValueError("the prompt has no tokens")
                    if req.sampling is not None:
                        self.session.set_sampling(seq, req.sampling)
                    slot.grammar = self._grammar(req)
                except (DetinferError, ValueError) as e:
                    finish(seq, str(e))
                    continue
                if req.max_new <= 0:
                    slot.finish = "length"
                    finish(seq)
            if active:
                self._step(active, finish)
        return [r for r in out if r is not None]

    def _step(self, active: Dict[int, _Slot], finish: Any) -> None:
        """One batched step of every active sequence, then one token each. A
        step that fails changes nothing (all or nothing): the sequences are then
        stepped alone, so the error goes to the request that caused it."""
        entries = [(seq, slot.feed) for seq, slot in active.items()]
        try:
            self.session.step(entries)
            stepped = [seq for seq, _ in entries]
        except DetinferError:
            if len(entries) == 1:
                finish(entries[0][0], str(self._solo_error(entries[0])))
                return
            stepped = []
            for entry in entries:
                err = self._solo_error(entry)
                if err is None:
                    stepped.append(entry[0])
                else:
                    finish(entry[0], str(err))
        for seq in stepped:
            slot = active[seq]
            if slot.grammar is not None and not slot.tokens:
                try:
                    self.session.set_grammar(seq, slot.grammar)  # the prompt is in: it starts here
                except DetinferError as e:
                    finish(seq, str(e))
                    continue
            if self.logits_digests:
                slot.logits_digests.append(self.session.logits_digest(seq))
            token = (self.session.sample_token(seq) if slot.req.sampling is not None
                     else self.session.greedy_token(seq))
            slot.tokens.append(token)
            slot.feed = [token]
            if slot.req.stop_at_eos and self.eos is not None and token == self.eos:
                slot.finish = "eos"
            elif len(slot.tokens) >= slot.req.max_new:
                slot.finish = "length"
            if slot.finish:
                finish(seq)

    def _solo_error(self, entry: Any) -> Optional[DetinferError]:
        try:
            self.session.step([entry])
            return None
        except DetinferError as e:
            return e

