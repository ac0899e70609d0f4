"""detinfer.ray: batch generation on a Ray cluster (Ray Data map_batches over
an actor pool), every record bit for bit the one a single process gives.

    import ray, detinfer.ray as dr
    ray.init()                                  # or ray.init("ray://head:10001")
    reqs = dr.read_requests("prompts.jsonl", default_max_new=32)
    summary = dr.run("model.gguf", reqs, "out/", workers=[dr.WorkerConfig(threads=2)], n_workers=4)
    print(summary.run_digest)

The command: python -m detinfer.ray --model M --input prompts.jsonl --output DIR
--workers N [--address ray://...] [--format jsonl|parquet]. docs/SCALE.md
describes the records, the run digest and clusters. Needs `pip install
"ray[data]" xxhash`; only run() imports Ray.
"""

from .engine import Generator
from .records import (Request, RequestError, Summary, WorkerConfig, parse_request, read_requests,
                      run_digest)
from .validate import ModelRefused, validate


def run(*args, **kwargs):  # type: ignore[no-untyped-def]
    """detinfer.ray.pipeline.run: imported on first use, so the rest of this
    package works without Ray."""
    from .pipeline import run as _run

    return _run(*args, **kwargs)

__all__ = ["Generator", "ModelRefused", "Request", "RequestError", "Summary", "WorkerConfig",
           "parse_request", "read_requests", "run", "run_digest", "validate"]
