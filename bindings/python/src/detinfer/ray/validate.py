"""Every request checked in the driver before Ray starts (docs/SCALE.md,
"Checked before the run"): the model is opened once here, so a file the
library refuses is one line and no actor ever starts; token ids are checked
against its vocabulary, text prompts go through its tokenizer, and each
request's sampling parameters through a session's set_sampling (the
library's own check). No Ray here."""

from __future__ import annotations

from typing import List, Sequence

from .._api import DetinferError, Model
from .records import Request, RequestError

SHOWN = 10  # problems listed in the message; the rest are counted


class ModelRefused(Exception):
    """The library refused the model file; str() is one line."""


def _problem(model: Model, session: object, req: Request) -> str:
    """What is wrong with one request ("" when nothing is)."""
    try:
        if req.tokens is not None:
            bad = [t for t in req.tokens if t >= model.n_vocab]
            if bad:
                return f"token {bad[0]} is outside the vocabulary (0..{model.n_vocab - 1})"
        else:
            model.tokenize(req.prompt or "", add_bos=True, parse_special=req.parse_special)
        if req.sampling is not None:
            session.set_sampling(0, req.sampling)  # type: ignore[attr-defined]
            session.set_sampling(0, None)  # type: ignore[attr-defined]
    except DetinferError as e:
        return str(e)
    return ""


def validate(model_path: str, requests: Sequence[Request]) -> None:
    """Raises ModelRefused, or RequestError naming every invalid request
    (the first SHOWN of them, by input line), or returns: every request
    can run."""
    try:
        model = Model(model_path)
    except DetinferError as e:
        raise ModelRefused(f"{model_path}: {e}") from None
    problems: List[str] = []
    with model, model.session(max_sequences=1) as session:
        for req in requests:
            msg = _problem(model, session, req)
            if msg:
                problems.append(f"{req.source or f'request {req.id!r}'}: {msg}")
    if problems:
        more = f"\n  ... and {len(problems) - SHOWN} more" if len(problems) > SHOWN else ""
        raise RequestError(f"{len(problems)} of {len(requests)} requests cannot run:\n  "
                           + "\n  ".join(problems[:SHOWN]) + more)
