"""Fixtures of the detinfer.ray suite (make check-ray). The parent conftest
finds the library and the generated models. The Ray tests (test_pipeline.py)
run only when DI_RAY_TESTS=1 (make check-ray sets it): they start a local
two-node Ray cluster, which takes a while."""
import json
import os
import pathlib
import random

import pytest

# The same inputs as the parent suite's conftest (which also sets DETINFER_LIB).
ROOT = pathlib.Path(__file__).resolve().parents[4]
MODELS = pathlib.Path(os.environ.get("DI_TEST_MODELS", ROOT / "build" / "models"))
REAL = pathlib.Path(os.environ.get("DI_TEST_REAL_MODEL",
                                   pathlib.Path.home() / ".cache/detinfer/gemma-3-270m-q4_k_m.gguf"))

WORDS = ("the quick brown fox jumps over a lazy dog while hello world of to in on "
         "river stone light green seven").split()


def make_requests(n: int, seed: int, max_new_hi: int = 20, sampled_every: int = 0):
    """n input lines (dicts): text prompts and a few token prompts, max_new
    from 0 to max_new_hi; every sampled_every-th has sampling parameters and a seed."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        req = {"id": i, "max_new": rnd.randint(0, max_new_hi)}
        if i % 7 == 3:
            req["tokens"] = [1] + [rnd.randrange(3, 600) for _ in range(rnd.randint(1, 12))]
        else:
            req["prompt"] = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(1, 10)))
        if sampled_every and i % sampled_every == sampled_every - 1:
            req["sampling"] = {"temperature": 0.8, "top_k": 40, "top_p": 0.95}
            req["seed"] = 1000 + i
        out.append(req)
    return out


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    return path


@pytest.fixture(scope="session")
def small_model() -> pathlib.Path:
    """A generated llama model with a SentencePiece tokenizer (context 64)."""
    p = MODELS / "tok_spm.gguf"
    if not p.exists():
        pytest.fail(f"{p} is missing: run `make build/models/tokenizers.txt` (or make check) first")
    return p


@pytest.fixture(scope="session")
def real_model() -> pathlib.Path:
    if os.environ.get("DI_RAY_REAL") != "1":
        pytest.skip("the real-model case runs with DI_RAY_REAL=1 (make check-ray RAY_REAL=1)")
    if not REAL.exists():
        pytest.skip(f"{REAL} is absent (tools/fetch-model.sh fetches it)")
    return REAL
