"""detinfer.ray on a local two-node Ray cluster (loopback): heterogeneous
actors, a killed actor, runs with different worker counts, the command.
Every record is checked against the single-process reference (ray_support.py)."""
import json
import os
import subprocess
import sys

import pytest

if os.environ.get("DI_RAY_TESTS") != "1":
    pytest.skip("the Ray cluster tests run with DI_RAY_TESTS=1: make check-ray", allow_module_level=True)
ray = pytest.importorskip("ray", reason="ray is not installed: make check-ray installs tests/requirements-ray.txt")
pytest.importorskip("pyarrow")

from ray_support import (check_against_reference, expected_run_digest, make_requests,  # noqa: E402,F401
                         real_model, reference_records, small_model, write_jsonl)

import detinfer.ray as dr  # noqa: E402

N = 50
ROWS = make_requests(N, seed=15, sampled_every=10)


@pytest.fixture(scope="module")
def cluster():
    """A head node and a second node process on loopback, 2 logical CPUs each
    (more than this machine has: the actors run with 1 thread and just share)."""
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    c.add_node(num_cpus=2)
    c.wait_for_nodes()
    ray.init(address=c.address, log_to_driver=False)
    yield c
    ray.shutdown()
    c.shutdown()


@pytest.fixture(scope="module")
def reference(small_model):
    return reference_records(small_model, ROWS)


@pytest.fixture(scope="module")
def requests():
    return [dr.parse_request(r, 32, "test") for r in ROWS]


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


HETEROGENEOUS = [dr.WorkerConfig(threads=1, cpu_path="scalar", max_sequences=1),
                 dr.WorkerConfig(threads=2, cpu_path="avx2", max_sequences=4),
                 dr.WorkerConfig(threads=1, cpu_path="auto", max_sequences=3)]


@pytest.fixture(scope="module")
def three_actor_run(cluster, small_model, requests, tmp_path_factory):
    out = tmp_path_factory.mktemp("three")
    summary = dr.run(str(small_model), requests, str(out), workers=HETEROGENEOUS, batch_size=4,
                     logits_digests=True, provenance=True, cpus_per_worker=1, progress=False)
    return summary, read_jsonl(out / "records.jsonl")


def test_heterogeneous_actors_equal_single_process(three_actor_run, reference):
    summary, records = three_actor_run
    assert check_against_reference(records, reference) == 0 == summary.errors
    assert summary.records == N
    assert sum("sampling" in r for r in ROWS) == 5  # sampled records with their own seeds
    assert [r["id"] for r in records] == list(range(N))  # input order
    infos = {w["backend_info"] for w in summary.workers}
    # the pipeline's default profile, integer, which the backend line names
    assert {"backend=cpu path=scalar profile=integer threads=1",
            "backend=cpu path=avx2 profile=integer threads=2"} <= infos, infos
    used = {r["worker"].split(" ", 2)[2] for r in records}  # records computed on 2+ configs
    nodes = {r["worker"].split(" ")[0] for r in records}
    print(f"\nthree actors: {len(used)} configurations and {len(nodes)} nodes computed records: "
          f"{sorted(used)}")
    assert len(used) >= 2 and len(nodes) == 2
    assert summary.run_digest == expected_run_digest(reference)


def test_killed_actor_run_completes_with_same_digests(cluster, small_model, requests, reference,
                                                      three_actor_run, tmp_path):
    summary = dr.run(str(small_model), requests, str(tmp_path), workers=2, batch_size=4,
                     fmt="parquet", cpus_per_worker=1, progress=False, kill_one_actor_after_batches=1)
    import pyarrow.parquet as pq

    records = pq.read_table(tmp_path / "records.parquet").to_pylist()
    killed = [w for w in summary.workers if w["killed_itself"]]
    print(f"\nkilled actor: {killed[0]['host']}:{killed[0]['pid']} (SIGKILL in its 2nd batch); "
          f"{len(summary.workers)} actor starts in all: "
          + ", ".join(f"{w['pid']}{' (killed)' if w['killed_itself'] else ''}" for w in summary.workers))
    print(f"records {summary.records}, distinct ids {len({r['id'] for r in records})}, "
          f"errors {summary.errors}, duplicates dropped {summary.duplicates_dropped}, "
          f"run digest {summary.run_digest} (three-actor run: {three_actor_run[0].run_digest})")
    assert len(killed) == 1 and len(summary.workers) >= 3  # the killed actor was restarted
    assert len(records) == N == summary.records and sorted(r["id"] for r in records) == list(range(N))
    check_against_reference(records, reference, logits=False)
    assert summary.run_digest == three_actor_run[0].run_digest == expected_run_digest(reference)


def test_command_one_worker_same_run_digest(cluster, small_model, reference, three_actor_run, tmp_path):
    """python -m detinfer.ray with 1 worker against the three-actor run."""
    inp = write_jsonl(tmp_path / "prompts.jsonl", ROWS)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "detinfer.ray", "--model", str(small_model), "--input", str(inp),
           "--output", str(out), "--workers", "1", "--address", cluster.address, "--no-progress",
           "--logits-digests"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    print("\n" + p.stdout)
    assert p.returncode == 0, p.stderr[-3000:]
    # Ray's own INFO lines (start-up, execution plans, progress) stay off the command's output
    assert "\tINFO " not in p.stderr and "Starting execution of Dataset" not in p.stderr, p.stderr[-3000:]
    assert "Progress bars disabled" not in p.stderr, p.stderr[-3000:]
    records = read_jsonl(out / "records.jsonl")
    check_against_reference(records, reference)
    saved = json.loads((out / "summary.json").read_text())
    assert saved["records"] == N and len(saved["workers"]) == 1
    assert (saved["profile"], saved["numerics"]) == ("integer", 1)  # the default, named with its version
    assert f"run digest {three_actor_run[0].run_digest}" in p.stdout
    # the same records, field for field, as the three heterogeneous actors wrote
    assert records == [{k: v for k, v in r.items() if k != "worker"} for r in three_actor_run[1]]
    print(f"1 worker: run digest {saved['run_digest']}\n3 workers: run digest {three_actor_run[0].run_digest}")


def test_command_refuses_bad_input(tmp_path, small_model):
    bad = tmp_path / "in.jsonl"
    bad.write_text('{"id": 1, "prompt": "a"}\n{"id": 1, "prompt": "b"}\n')
    p = subprocess.run([sys.executable, "-m", "detinfer.ray", "--model", str(small_model), "--input",
                        str(bad), "--output", str(tmp_path / "o")], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 2 and "id 1 already used on line 1" in p.stderr


def test_bad_model_fails_with_the_library_message(cluster, requests, tmp_path):
    bad = tmp_path / "not-a-model.gguf"
    bad.write_bytes(b"GGUF but not really")
    with pytest.raises(Exception, match="DI_ERR_FORMAT"):
        dr.run(str(bad), requests[:4], str(tmp_path / "out"), workers=1, cpus_per_worker=1,
               progress=False, wait_for_workers_s=120)
    assert not (tmp_path / "out" / "records.jsonl").exists()


def test_real_model(cluster, real_model, tmp_path):
    """About 50 prompts of the real model (make check-ray RAY_REAL=1): two
    actors on different CPU paths against the single-process reference."""
    rows = make_requests(48, seed=21, max_new_hi=8)
    for r in rows:
        r["id"] = f"r{r['id']:02d}"  # string ids
        if "tokens" in r:  # ids of the generated model's vocabulary: words instead
            r["prompt"] = " ".join(str(t) for t in r.pop("tokens"))
    ref = reference_records(real_model, rows, threads=2)
    summary = dr.run(str(real_model), [dr.parse_request(r, 8, "t") for r in rows], str(tmp_path),
                     workers=[dr.WorkerConfig(threads=1, cpu_path="scalar"),
                              dr.WorkerConfig(threads=1, cpu_path="avx2", max_sequences=3)],
                     batch_size=4, logits_digests=True, cpus_per_worker=1, progress=False)
    assert check_against_reference(read_jsonl(tmp_path / "records.jsonl"), ref) == 0
    assert summary.run_digest == dr.run_digest(read_jsonl(tmp_path / "records.jsonl"))
    print(f"\nreal model: {summary.text()}")
