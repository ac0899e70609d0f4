"""python -m detinfer.ray: batch generation over a Ray cluster (docs/SCALE.md).

Exit status: 0 when every record was generated, 1 when some records hold an
error (they are still written), 2 on bad arguments or input."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from typing import List, Optional

from . import quiet
from .records import RequestError, WorkerConfig, read_requests
from .validate import ModelRefused, validate


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m detinfer.ray",
        description="Generate every prompt of a JSONL file on a pool of Ray actors; write one "
                    "record per input (keyed by its id) and a summary with the run digest.")
    p.add_argument("--model", required=True, help="GGUF file (the same path on every node)")
    p.add_argument("--input", required=True, help="JSONL: {\"id\", \"prompt\"|\"tokens\", ...} per line")
    p.add_argument("--output", required=True, help="directory for records.{jsonl,parquet} and summary.json")
    p.add_argument("--workers", type=int, default=2, help="actors in the pool (default 2)")
    p.add_argument("--address", help="Ray cluster: ray://HOST:10001, auto, or HOST:6379 "
                                     "(default: $RAY_ADDRESS, else a local Ray)")
    p.add_argument("--format", choices=("jsonl", "parquet"), default="jsonl")
    p.add_argument("--max-new", type=int, default=32, help="tokens per record unless it says max_new")
    p.add_argument("--threads", type=int, default=1, help="threads of each actor's session")
    p.add_argument("--cpu-path", default="auto", choices=("auto", "scalar", "avx2", "avx512"))
    p.add_argument("--backend", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--max-sequences", type=int, default=4,
                   help="sequences each actor generates together (results do not depend on it)")
    p.add_argument("--context-length", type=int, default=0, help="0: the model's, capped at 4096")
    p.add_argument("--profile", default="integer", choices=("integer", "portable", "device"),
                   help="numerics profile of every actor: integer (default, as the detinfer tools'), "
                        "portable (float64-level accuracy) or device (CUDA)")
    p.add_argument("--worker-config", action="append", metavar="KEY=VALUE,...",
                   help="a worker configuration such as threads=2,cpu_path=avx2; repeat it for "
                        "heterogeneous actors (dealt round-robin; replaces --threads, --cpu-path, "
                        "--backend, --max-sequences, --context-length)")
    p.add_argument("--batch-size", type=int, default=8, help="requests per map_batches call")
    p.add_argument("--cpus-per-worker", type=float, help="Ray CPUs per actor (default: its threads)")
    p.add_argument("--gpus-per-worker", type=float, default=0, help="Ray GPUs per actor (cuda backend)")
    p.add_argument("--logits-digests", action="store_true", help="per-token logits digests in each record")
    p.add_argument("--provenance", action="store_true",
                   help="each record names the node, host, pid and backend that computed it "
                        "(the output file then differs between runs; the run digest does not)")
    p.add_argument("--wait-for-workers", type=int, default=600, metavar="S",
                   help="start once every actor has loaded the model, failing after S seconds "
                        "(0: start with the first one)")
    p.add_argument("--no-progress", action="store_true", help="no Ray progress bars")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.worker_config:
            if any("profile" in t for t in args.worker_config):
                raise ValueError("--worker-config: the profile is the run's (--profile), one for every actor")
            configs = [replace(WorkerConfig.parse(t), profile=args.profile) for t in args.worker_config]
        else:
            configs = [WorkerConfig(threads=args.threads, cpu_path=args.cpu_path, backend=args.backend,
                                    max_sequences=args.max_sequences, context_length=args.context_length,
                                    profile=args.profile)]
        requests = read_requests(args.input, args.max_new)
    except (RequestError, ValueError, OSError) as e:
        print(f"detinfer.ray: {e}", file=sys.stderr)
        return 2
    if args.workers < 1 or args.batch_size < 1:
        print("detinfer.ray: --workers and --batch-size must be at least 1", file=sys.stderr)
        return 2
    remote = (args.address or os.environ.get("RAY_ADDRESS", "")).startswith("ray://")
    if os.path.exists(args.model):
        try:  # every record, before Ray starts
            validate(args.model, requests)
        except (ModelRefused, RequestError) as e:
            print(f"detinfer.ray: {e}", file=sys.stderr)
            return 2
    elif remote:  # through Ray Client it is the nodes' path
        print(f"detinfer.ray: {args.model} is not on this machine: the workers check the requests",
              file=sys.stderr)
    else:
        print(f"detinfer.ray: {args.model}: no such model file", file=sys.stderr)
        return 2

    import ray

    from .pipeline import run

    # The library's location travels to every worker when the driver names it.
    env = {k: os.environ[k] for k in ("DETINFER_LIB",) if k in os.environ}
    init = {"runtime_env": {"env_vars": env}} if env else {}
    if not args.address and not os.environ.get("RAY_ADDRESS"):
        init["include_dashboard"] = False  # a local Ray for this run only
    ray.init(address=args.address, **init, **quiet.init_options())
    quiet.after_init(progress=not args.no_progress)
    summary = run(args.model, requests, args.output, workers=configs, n_workers=args.workers,
                  fmt=args.format, batch_size=args.batch_size, logits_digests=args.logits_digests,
                  provenance=args.provenance, cpus_per_worker=args.cpus_per_worker,
                  gpus_per_worker=args.gpus_per_worker, progress=not args.no_progress,
                  wait_for_workers_s=args.wait_for_workers, check_first=False)
    for w in summary.workers:
        print(f"worker {w['host']}:{w['pid']} {w['backend_info']}"
              + (" (killed itself: test aid)" if w["killed_itself"] else ""))
    print(summary.text())
    print(f"records in {os.path.join(args.output, 'records.' + args.format)}; "
          f"summary in {os.path.join(args.output, 'summary.json')}")
    if summary.errors:
        print(f"detinfer.ray: {summary.errors} record(s) hold an error (their 'error' field)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
