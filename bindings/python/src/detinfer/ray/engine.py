"""One worker's generator: a model loaded once, one session, requests
generated together in batched steps (continuous batching over the session's
max_sequences: detinfer._batch, the code LLM.generate runs too). Batch
invariance makes every record equal to the one Sequence.generate() gives
alone; the tests check exactly that. No Ray here."""

from __future__ import annotations

import json
import os
import socket
from typing import Any, Dict, List, Optional

from .._api import Backend, CpuPath, DetinferError, Grammar, Model, Profile, Session, Status, numerics_version
from .._batch import Batch, Job, Outcome, context_of, context_overflow
from .records import Request, WorkerConfig, empty_record

# The records' finish reasons (docs/SCALE.md) for the batch's.
_FINISH = {"stop": "eos", "length": "length"}


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
            backend=Backend[config.backend.upper()], profile=Profile[config.profile.upper()])
        if config.backend.lower() != "cpu":
            settings["device"] = config.device
        try:
            self.session: Session = self.model.session(**settings)
        except BaseException:
            self.model.close()
            raise
        self.eos = self.model.eos
        self.context = context_of(self.model, config.context_length)
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

    # -- requests -----------------------------------------------------------------

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

    def _record(self, req: Request, prompt: List[int], out: Outcome, refused: Optional[str]) -> Dict[str, Any]:
        rec = empty_record(req.id)
        rec["n_prompt"] = len(prompt)
        # a digest compares only with digests of the same profile and numerics version
        rec["profile"], rec["numerics"] = self.config.profile, numerics_version(self.config.profile)
        error = refused or (str(out.error) if out.error is not None else None)
        if error is not None:
            rec["finish"], rec["error"] = "error", error
        else:
            rec["tokens"] = out.tokens
            rec["text"] = self._text(out.tokens)
            rec["digest"] = out.digest
            rec["finish"] = _FINISH[out.finish or "length"]
        if self.logits_digests:
            rec["logits_digests"] = out.logits_digests if error is None else None
        if self.worker is not None:
            rec["worker"] = self.worker
        return rec

    def generate(self, requests: List[Request]) -> List[Dict[str, Any]]:
        """One record per request, in order; a request that fails gets a
        record with its error, the others are unaffected."""
        prompts: List[List[int]] = []
        grammars: List[Optional[Grammar]] = []
        refused: Dict[int, str] = {}
        for i, req in enumerate(requests):
            prompt: List[int] = []
            try:
                prompt = self._prompt(req)
                overflow = context_overflow(len(prompt), req.max_new, self.context)
                if overflow is not None:  # refused before anything runs, not found mid-run
                    raise overflow
                grammar = self._grammar(req)
                prompts.append(prompt)
                grammars.append(grammar)
            except (DetinferError, ValueError) as e:
                prompts.append(prompt)  # its n_prompt, where it was tokenized
                grammars.append(None)
                refused[i] = str(e)
        stop = {self.eos} if self.eos is not None else set()
        jobs = [Job([] if i in refused else prompts[i], req.max_new, stop if req.stop_at_eos else (), req.sampling,
                    grammar=grammars[i])
                for i, req in enumerate(requests)]
        outcomes = Batch(self.session, self.config.max_sequences, jobs).run()
        return [self._record(req, prompts[i], outcomes[i], refused.get(i)) for i, req in enumerate(requests)]
