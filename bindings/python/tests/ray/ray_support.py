"""Shared parts of the detinfer.ray suite (make check-ray): inputs, request
generation, fixtures (imported by the test modules) and the single-process
reference: the plain package, one Sequence.generate() per request in one
session, no Ray and no detinfer.ray code.

Not a conftest.py: the parent suite imports names from its own conftest, which
a second module of that name would shadow. test_ray_pipeline.py runs only with
DI_RAY_TESTS=1 (make check-ray sets it): it starts a local two-node Ray cluster."""
import json
import os
import pathlib
import random

import pytest

# The parent suite's inputs (its conftest, which pytest has loaded: it sets DETINFER_LIB).
from conftest import MODELS, REAL, ROOT  # noqa: F401  (ROOT: the test modules import it from here)

import detinfer  # noqa: E402  (after DETINFER_LIB)

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
        pytest.skip(f"{REAL} is absent (tools/scripts/fetch-model.sh fetches it)")
    return REAL

def reference_records(model_path, requests, threads=1):
    """{id: (tokens, digest, logits digests, text)} or {id: ("error", message)}."""
    out = {}
    # the integer profile: the pipeline's default (WorkerConfig.profile)
    with detinfer.Model(model_path) as model, model.session(threads=threads,
                                                           profile=detinfer.Profile.INTEGER) as session:
        for req in requests:
            seq = session.sequence(0)
            try:
                prompt = req["tokens"] if "tokens" in req else model.tokenize(req["prompt"])
                if "sampling" in req or "seed" in req:
                    seq.set_sampling(detinfer.SamplingParams(**req.get("sampling", {}),
                                                             seed=req.get("seed", 0)))
                gen = seq.generate(prompt, max_new=req["max_new"])
                steps = list(gen)
                out[req["id"]] = ([s.token for s in steps], gen.digest, [s.digest for s in steps],
                                  model.detokenize(gen.tokens))
            except detinfer.DetinferError as e:
                out[req["id"]] = ("error", str(e))
            finally:
                seq.reset()
                try:
                    session.set_sampling(0, None)
                except detinfer.DetinferError:
                    pass
    return out


def check_against_reference(records, ref, logits=True):
    """Every record equals the reference; returns the number of error records."""
    assert sorted(r["id"] for r in records) == sorted(ref), "not exactly one record per input"
    from detinfer._api import numerics_version
    errors = 0
    for r in records:
        want = ref[r["id"]]
        # the reference's profile, the pipeline's default, named in every record
        assert (r["profile"], r["numerics"]) == ("integer", numerics_version("integer")), r
        if want[0] == "error":
            assert r["error"] is not None and r["digest"] is None, (r, want)
            errors += 1
            continue
        assert r["error"] is None, (r, want)
        assert r["tokens"] == want[0], r["id"]
        assert r["digest"] == want[1], r["id"]
        if logits:
            assert r["logits_digests"] == want[2], r["id"]
        assert r["text"] == want[3], r["id"]
    return errors


def expected_run_digest(ref):
    """The run digest as docs/SCALE.md defines it, computed here from the
    reference: XXH3-128 over '[id,digest]\\n' lines in id order (integer ids)."""
    import json

    import xxhash

    h = xxhash.xxh3_128()
    for rid in sorted(ref):
        d = None if ref[rid][0] == "error" else ref[rid][1]
        h.update((json.dumps([rid, d], separators=(",", ":")) + "\n").encode())
    return h.hexdigest()
