"""detinfer.ray without Ray: the worker's batched generator against the plain
package, request parsing, the run digest against xxhsum, the writers."""
import json
import shutil
import subprocess

import pytest

from ray_support import (check_against_reference, expected_run_digest, make_requests,  # noqa: F401
                         real_model, reference_records, small_model, write_jsonl)

from detinfer.ray.engine import Generator
from detinfer.ray.records import (RequestError, WorkerConfig, parse_request, read_requests,
                                  run_digest)


@pytest.mark.parametrize("max_sequences,cpu_path,threads",
                         [(1, "scalar", 1), (3, "avx2", 2), (4, "auto", 1)])
def test_generator_equals_plain_generate(small_model, max_sequences, cpu_path, threads):
    rows = make_requests(30, seed=2, sampled_every=6)
    # errors the library reports, attributed to the request that caused them:
    rows.append({"id": 30, "tokens": [1] * 60, "max_new": 10})     # fills the context (64)
    rows.append({"id": 31, "tokens": [1, 9999], "max_new": 3})     # a token out of range
    ref = reference_records(small_model, rows)
    reqs = [parse_request(r, 32, "test") for r in rows]
    gen = Generator(str(small_model), WorkerConfig(threads=threads, cpu_path=cpu_path,
                                                   max_sequences=max_sequences), logits_digests=True)
    try:
        records = gen.generate(reqs)
    finally:
        gen.close()
    assert [r["id"] for r in records] == [r["id"] for r in rows]  # the input order
    assert check_against_reference(records, ref) == 2  # sampled requests succeed
    sampled = [r for r, row in zip(records, rows) if "sampling" in row]
    assert len(sampled) == 5 and all(r["error"] is None for r in sampled)
    assert "token 1 is 9999" in records[31]["error"]
    assert records[30]["error"].startswith("DI_ERR_CONTEXT_FULL")
    assert "the prompt's 60 tokens and max_new 10 exceed the context of 64" in records[30]["error"]  # before it ran


def test_seed_is_per_record(small_model):
    """The same prompt under two seeds: the record follows its own seed."""
    rows = [{"id": i, "prompt": "the quick brown fox", "max_new": 12,
             "sampling": {"temperature": 1.5}, "seed": seed} for i, seed in enumerate((1, 2, 1))]
    gen = Generator(str(small_model), WorkerConfig(max_sequences=3))
    try:
        a, b, c = gen.generate([parse_request(r, 32, "test") for r in rows])
    finally:
        gen.close()
    assert a["tokens"] == c["tokens"] and a["digest"] == c["digest"]
    assert a["tokens"] != b["tokens"]
    check_against_reference([a, b, c], reference_records(small_model, rows), logits=False)


@pytest.mark.parametrize("line,message", [
    ({"prompt": "x"}, "'id' is required"),
    ({"id": 1.5, "prompt": "x"}, "'id' is required"),
    ({"id": 1}, "exactly one of"),
    ({"id": 1, "prompt": "x", "tokens": [1]}, "exactly one of"),
    ({"id": 1, "tokens": []}, "non-empty list"),
    ({"id": 1, "tokens": [1, -2]}, "non-empty list"),
    ({"id": 1, "prompt": "x", "max_new": -1}, "'max_new'"),
    ({"id": 1, "prompt": "x", "sampling": {"temp": 1}}, "unknown sampling field"),
    ({"id": 1, "prompt": "x", "seed": "7"}, "'seed'"),
    ({"id": 1, "prompt": "x", "colour": 1}, "unknown key"),
])
def test_bad_requests_are_refused(line, message):
    with pytest.raises(RequestError, match=message):
        parse_request(line, 32, "in.jsonl:4")


def test_read_requests_refuses_duplicate_ids(tmp_path):
    p = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "prompt": "x"}, {"id": "a", "prompt": "y"}])
    with pytest.raises(RequestError, match=r"in.jsonl:2: id 'a' already used on line 1"):
        read_requests(str(p), 32)
    (tmp_path / "bad.jsonl").write_text('{"id": 1, "prompt": "x"}\n{oops\n')
    with pytest.raises(RequestError, match=r"bad.jsonl:2: not JSON"):
        read_requests(str(tmp_path / "bad.jsonl"), 32)


def test_run_digest_matches_xxhsum_and_ignores_record_order():
    """The documented definition, checked with the xxhsum command (Debian's xxhash)."""
    records = [{"id": "b", "digest": "00" * 16}, {"id": 10, "digest": "ab" * 16},
               {"id": 9, "digest": None}, {"id": "a\u00e9", "digest": "cd" * 16}]
    text = ('[9,null]\n[10,"' + "ab" * 16 + '"]\n["a\u00e9","' + "cd" * 16 + '"]\n["b","'
            + "00" * 16 + '"]\n')
    ours = run_digest(records)
    assert ours == run_digest(list(reversed(records)))
    if shutil.which("xxhsum") is None:
        pytest.skip("xxhsum is not installed (Debian package xxhash)")
    out = subprocess.run(["xxhsum", "-H2"], input=text.encode("utf-8"), capture_output=True, check=True)
    assert out.stdout.split()[0].decode() == ours


def test_expected_run_digest_helper_agrees():
    ref = {2: ([1], "11" * 16, [], ""), 1: ("error", "x")}
    assert expected_run_digest(ref) == run_digest([{"id": 1, "digest": None},
                                                   {"id": 2, "digest": "11" * 16}])


def test_worker_config_parse():
    c = WorkerConfig.parse("threads=2,cpu_path=avx2,max_sequences=3")
    assert (c.threads, c.cpu_path, c.max_sequences, c.backend) == (2, "avx2", 3, "cpu")
    with pytest.raises(ValueError, match="expected key=value"):
        WorkerConfig.parse("thread=2")
    for bad, msg in (("cpu_path=avx3", "auto, scalar, avx2 or avx512"), ("threads=0", "at least 1"),
                     ("threads=two", "threads must be an integer"), ("backend=tpu", "cpu or cuda")):
        with pytest.raises(ValueError, match=msg):
            WorkerConfig.parse(bad)


def test_writers_commit_or_leave_nothing(tmp_path):
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    from detinfer.ray.records import Request
    from detinfer.ray.writer import open_writer

    rec = {"id": 1, "text": "a", "tokens": [5, 6], "n_prompt": 2, "digest": "ff" * 16,
           "finish": "length", "error": None, "profile": "integer", "numerics": 1}
    for fmt in ("jsonl", "parquet"):
        w = open_writer(str(tmp_path), fmt, [Request(id=1, prompt="x")], False, False)
        w.write(dict(rec))
        w.close()  # not committed: nothing left
        assert list(tmp_path.iterdir()) == []
    w = open_writer(str(tmp_path), "parquet", [Request(id=1, prompt="x")], False, False)
    w.write(dict(rec))
    w.commit()
    w.close()
    assert pq.read_table(tmp_path / "records.parquet").to_pylist() == [rec]
    w = open_writer(str(tmp_path), "jsonl", [Request(id=1, prompt="x")], False, False)
    w.write(dict(rec))
    w.commit()
    assert json.loads((tmp_path / "records.jsonl").read_text()) == rec


def test_kubernetes_example_parses():
    """docs/examples/detinfer-serve-k8s.yaml: YAML syntax, and `detinfer serve`
    options that docs/SCALE.md names (the manifest is not run here)."""
    yaml = pytest.importorskip("yaml")
    from ray_support import ROOT

    docs = list(yaml.safe_load_all((ROOT / "docs/examples/detinfer-serve-k8s.yaml").read_text()))
    kinds = {d["kind"]: d for d in docs}
    assert set(kinds) == {"Secret", "Deployment", "Service"}
    pod = kinds["Deployment"]["spec"]["template"]["spec"]
    args = pod["containers"][0]["args"]
    assert args[0] == "serve"
    options = {a.split("=", 1)[0] for a in args[1:]}
    assert options == {"--model", "--host", "--port", "--allow", "--api-key-file", "--threads",
                       "--max-sequences"}
    assert kinds["Service"]["spec"]["selector"] == kinds["Deployment"]["spec"]["selector"]["matchLabels"]
    assert pod["containers"][0]["readinessProbe"]["httpGet"]["path"] == "/health"


def test_parquet_ids_are_strings_when_any_id_is(tmp_path):
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    from detinfer.ray.records import Request, empty_record
    from detinfer.ray.writer import open_writer

    reqs = [Request(id=7, prompt="x"), Request(id="b", prompt="y")]
    w = open_writer(str(tmp_path), "parquet", reqs, True, True)
    for r in reqs:
        w.write(dict(empty_record(r.id), finish="error", error="e", logits_digests=None, worker="w"))
    w.commit()
    t = pq.read_table(tmp_path / "records.parquet")
    assert t.column("id").to_pylist() == ["7", "b"]
    assert t.column_names == ["id", "text", "tokens", "n_prompt", "digest", "finish", "error", "profile",
                              "numerics", "logits_digests", "worker"]
