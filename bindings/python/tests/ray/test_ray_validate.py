"""detinfer.ray checks every request in the driver before Ray starts: a model
the library refuses is one line and exit 2, a bad value names its input
line. These run without Ray: a stand-in `ray` package that fails on import
proves the command never got as far as importing it."""
import json
import subprocess
import sys
import time

import pytest

from ray_support import small_model, write_jsonl  # noqa: F401

import detinfer.ray as dr


@pytest.fixture
def no_ray(tmp_path):
    """A PYTHONPATH whose `ray` raises as soon as it is imported."""
    fake = tmp_path / "fake" / "ray"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('ray was imported: the check came too late')\n")
    import os
    paths = [str(tmp_path / "fake")] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(paths))


def command(env, model, inp, out):
    start = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "detinfer.ray", "--model", str(model), "--input", str(inp),
                        "--output", str(out)], capture_output=True, text=True, timeout=60, env=env)
    return p, time.monotonic() - start


def test_refused_model_is_one_line_and_exit_2(tmp_path, no_ray):
    bad = tmp_path / "not-a-model.gguf"
    bad.write_bytes(b"GGUF but not really")
    inp = write_jsonl(tmp_path / "in.jsonl", [{"id": 1, "prompt": "a"}])
    p, seconds = command(no_ray, bad, inp, tmp_path / "out")
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"detinfer.ray: {bad}: DI_ERR_FORMAT"), p.stderr
    assert not (tmp_path / "out").exists()
    print(f"\nrefused model: exit 2 after {seconds:.2f} s: {lines[0]}")


def test_bad_values_are_named_by_line_before_ray(tmp_path, no_ray, small_model):
    n_vocab = detinfer_n_vocab(small_model)
    rows = [{"id": 1, "prompt": "hello"},
            {"id": 2, "tokens": [1, n_vocab]},
            {"id": 3, "prompt": "hi", "sampling": {"temperature": -0.5}},
            {"id": 4, "tokens": [1, 2], "sampling": {"top_p": 0.0}},
            {"id": 5, "prompt": "fine"}]
    inp = write_jsonl(tmp_path / "in.jsonl", rows)
    p, seconds = command(no_ray, small_model, inp, tmp_path / "out")
    assert p.returncode == 2, p.stderr
    err = p.stderr
    assert "3 of 5 requests cannot run" in err
    assert f"in.jsonl:2: token {n_vocab} is outside the vocabulary (0..{n_vocab - 1})" in err
    assert "in.jsonl:3: DI_ERR_INVALID_ARGUMENT" in err and "temperature" in err
    assert "in.jsonl:4: DI_ERR_INVALID_ARGUMENT" in err and "top_p" in err
    assert "in.jsonl:1:" not in err and "in.jsonl:5:" not in err and "Traceback" not in err
    print(f"\nbad values: exit 2 after {seconds:.2f} s:\n{err}")


def detinfer_n_vocab(path):
    import detinfer
    with detinfer.Model(path) as m:
        return m.n_vocab


def test_validate_lists_the_first_ten_and_counts_the_rest(small_model):
    reqs = [dr.parse_request({"id": i, "tokens": [1, 10 ** 6]}, 4, f"line {i}") for i in range(13)]
    with pytest.raises(dr.RequestError) as e:
        dr.validate(str(small_model), reqs)
    msg = str(e.value)
    assert msg.startswith("13 of 13 requests cannot run") and "line 9:" in msg and "line 10:" not in msg
    assert msg.endswith("... and 3 more")
    dr.validate(str(small_model), reqs[:0] + [dr.parse_request({"id": 1, "prompt": "ok"}, 4, "x")])


def test_text_prompt_needs_a_tokenizer(tmp_path, no_ray):
    from ray_support import MODELS
    model = MODELS / "gqa_untied_q8_0.gguf"  # no tokenizer in the file
    inp = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "prompt": "words"}])
    p, _ = command(no_ray, model, inp, tmp_path / "out")
    assert p.returncode == 2 and "in.jsonl:1: DI_ERR_UNSUPPORTED" in p.stderr, p.stderr
