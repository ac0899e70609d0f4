"""The Ray Data pipeline: map_batches over an actor pool, each actor a
Generator (the model loaded once), the driver writing one record per input.

Actors differ only through the configuration a small dealer actor hands each
of them when it starts (round-robin over the given WorkerConfigs): threads,
CPU path, backend. A restarted actor (after a crash) asks again."""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import numpy as np
import ray
import ray.data

from .._api import numerics_version
from .engine import Generator
from .records import Request, RunDigest, Summary, WorkerConfig
from .validate import validate
from .writer import open_writer


@ray.remote(num_cpus=0)
class _Dealer:
    """Hands out worker configurations round-robin and remembers who got
    which (the run's summary lists them). kill_after: test aid, see run()."""

    def __init__(self, configs: List[WorkerConfig], kill_after: Optional[int]) -> None:
        self.configs = configs
        self.kill_after = kill_after
        self.assigned: List[Dict[str, Any]] = []

    def take(self, node: str, host: str, pid: int) -> Any:
        cfg = self.configs[len(self.assigned) % len(self.configs)]
        ticket, self.kill_after = self.kill_after, None
        self.assigned.append({"node": node, "host": host, "pid": pid, "config": cfg.describe(),
                              "backend_info": None, "killed_itself": ticket is not None})
        return len(self.assigned) - 1, cfg, ticket

    def loaded(self, slot: int, backend_info: str) -> None:
        self.assigned[slot]["backend_info"] = backend_info

    def assignments(self) -> List[Dict[str, Any]]:
        return self.assigned


class _GenerateBatch:
    """The callable class of map_batches: one per actor of the pool."""

    def __init__(self, model_path: str, dealer: Any, logits_digests: bool, provenance: bool) -> None:
        node = ray.get_runtime_context().get_node_id()
        slot, cfg, self.kill_after = ray.get(dealer.take.remote(node, socket.gethostname(), os.getpid()))
        self.gen = Generator(model_path, cfg, logits_digests=logits_digests, provenance=provenance)
        if provenance:
            self.gen.worker = f"node={node[:12]} {self.gen.worker}"
        ray.get(dealer.loaded.remote(slot, self.gen.backend_info))
        self.calls = 0

    def __call__(self, batch: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        reqs = [Request.from_json(s) for s in batch["request"]]
        if self.kill_after is not None and self.calls == self.kill_after:
            # Test aid: die the hard way in the middle of a batch, half of it done.
            self.gen.generate(reqs[: max(1, len(reqs) // 2)])
            os.kill(os.getpid(), signal.SIGKILL)
        self.calls += 1
        recs = self.gen.generate(reqs)
        return {"idx": batch["idx"],
                "record": np.array([json.dumps(r, ensure_ascii=False) for r in recs], dtype=object)}


def _as_configs(workers: Union[int, Sequence[WorkerConfig]], n_workers: Optional[int]) -> Any:
    if isinstance(workers, int):
        return [WorkerConfig()], workers
    configs = list(workers)
    if not configs:
        raise ValueError("no worker configurations")
    return configs, n_workers or len(configs)


def run(model: str, requests: Sequence[Request], output_dir: str,
        workers: Union[int, Sequence[WorkerConfig]] = 2, n_workers: Optional[int] = None,
        fmt: str = "jsonl", batch_size: int = 8, logits_digests: bool = False,
        provenance: bool = False, cpus_per_worker: Optional[float] = None,
        gpus_per_worker: float = 0, progress: bool = True,
        wait_for_workers_s: int = 600,
        on_record: Optional[Callable[[Dict[str, Any]], None]] = None,
        kill_one_actor_after_batches: Optional[int] = None, check_first: bool = True) -> Summary:
    """Generates every request on a pool of actors of the connected Ray
    cluster (ray.init first, or Ray starts a local one) and writes
    output_dir/records.{jsonl,parquet} (one record per request, in input
    order) and output_dir/summary.json; returns the Summary.

    workers: a number of identical actors (WorkerConfig defaults), or a list
    of WorkerConfigs dealt round-robin to n_workers actors (default: one
    each). model must be a path every node can read. The run starts once
    every actor has loaded the model (at most wait_for_workers_s seconds, then
    it fails for want of resources; 0: start with the first actor).
    kill_one_actor_after_batches: a test aid; the first actor to start kills
    itself (SIGKILL) in the middle of its batch number k (0-based); Ray
    restarts it and retries the batch. check_first: every request is
    checked here first (detinfer.ray.validate: ModelRefused, RequestError)
    when the model file is on this machine."""
    configs, size = _as_configs(workers, n_workers)
    if size < 1:
        raise ValueError("at least one worker")
    if len({c.profile for c in configs}) > 1:
        raise ValueError("one profile per run: a digest compares only with digests of the same profile")
    if fmt not in ("jsonl", "parquet"):
        raise ValueError(f"unknown format {fmt!r} (jsonl or parquet)")
    if os.path.exists(model):
        model = os.path.abspath(model)  # else a path on the nodes only (Ray Client)
        if check_first:
            validate(model, requests)
    n = len(requests)
    start = time.monotonic()

    dealer = _Dealer.remote(configs, kill_one_actor_after_batches)
    ctx = ray.data.DataContext.get_current()  # a dataset copies it when created
    saved = (ctx.execution_options.preserve_order, ctx.enable_progress_bars, ctx.wait_for_min_actors_s)
    ctx.execution_options.preserve_order = True  # output files equal across runs
    ctx.enable_progress_bars = progress
    ctx.wait_for_min_actors_s = wait_for_workers_s
    rows = [{"idx": i, "request": r.to_json()} for i, r in enumerate(requests)]
    ds = ray.data.from_items(rows, override_num_blocks=max(1, min(n, -(-n // batch_size), 10000)))
    cpus = cpus_per_worker if cpus_per_worker is not None else max(c.threads for c in configs)
    out = ds.map_batches(
        _GenerateBatch, batch_size=batch_size, batch_format="numpy",
        fn_constructor_kwargs=dict(model_path=model, dealer=dealer, logits_digests=logits_digests,
                                   provenance=provenance),
        compute=ray.data.ActorPoolStrategy(size=size, max_tasks_in_flight_per_actor=2), num_cpus=cpus, num_gpus=gpus_per_worker or None)

    summary = Summary(profile=configs[0].profile, numerics=numerics_version(configs[0].profile))
    rd = RunDigest()
    seen: Dict[int, Optional[str]] = {}
    os.makedirs(output_dir, exist_ok=True)
    writer = open_writer(output_dir, fmt, requests, logits_digests, provenance)
    try:
        for batch in out.iter_batches(batch_size=None, batch_format="numpy"):
            for idx, text in zip(batch["idx"], batch["record"]):
                idx = int(idx)
                rec = json.loads(text)
                if idx in seen:  # a retried batch delivered twice: it must be equal
                    if seen[idx] != rec["digest"]:
                        raise RuntimeError(f"record {rec['id']!r} computed twice with different digests "
                                           f"{seen[idx]} and {rec['digest']}: determinism is broken")
                    summary.duplicates_dropped += 1
                    continue
                if rec["id"] != requests[idx].id:
                    raise RuntimeError(f"record {idx} has id {rec['id']!r}, expected {requests[idx].id!r}")
                seen[idx] = rec["digest"]
                writer.write(rec)
                rd.add(rec["id"], rec["digest"])
                summary.records += 1
                summary.errors += rec["error"] is not None
                summary.prompt_tokens += rec["n_prompt"] or 0
                summary.generated_tokens += len(rec["tokens"] or ())
                if on_record is not None:
                    on_record(rec)
        if len(seen) != n:
            missing = [requests[i].id for i in range(n) if i not in seen][:5]
            raise RuntimeError(f"{n - len(seen)} of {n} requests have no record (first: {missing})")
        writer.commit()
    finally:
        writer.close()
        ctx.execution_options.preserve_order, ctx.enable_progress_bars, ctx.wait_for_min_actors_s = saved
    summary.seconds = time.monotonic() - start
    summary.run_digest = rd.hexdigest()
    summary.workers = ray.get(dealer.assignments.remote())
    ray.kill(dealer)
    with open(os.path.join(output_dir, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(summary.as_dict(), f, indent=1)
        f.write("\n")
    return summary
