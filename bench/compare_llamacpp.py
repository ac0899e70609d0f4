#!/usr/bin/env python3
"""libdetinfer against llama.cpp on one GGUF file, side by side in one run.

    python compare_llamacpp.py MODEL.gguf --detinfer build/tools/detinfer
        [--threads 1,2] [--reps 5] [--pp 512] [--tg 128] [--llama-bench PATH]

For each thread count the two engines run alternately, one process per
repetition (llama.cpp, then libdetinfer, REPS times), so that both see the
same machine state. Prompt processing (pp: PP tokens in one batch) and
generation (tg: TG single-token steps) are measured by each engine itself:
libdetinfer by `detinfer bench --json`, llama.cpp by its performance counters
(bench/llamacpp_bench.py, run with this Python, which must have
llama-cpp-python) or by `llama-bench -o json` when --llama-bench is given.
The memory-bandwidth limit comes from detinfer bench's own measurement in the
same run (weight bytes per token / measured bandwidth). Prints a markdown
table and one JSON line; exit status 0 unless an engine fails.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run_json(cmd):
    """The JSON a command prints: its whole output, or else its last JSON line."""
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    try:
        return json.loads(out)
    except json.JSONDecodeError:
        return json.loads([ln for ln in out.splitlines() if ln.startswith("{")][-1])


def llamacpp_once(args, threads):
    if args.llama_bench:
        rows = run_json([args.llama_bench, "-m", args.model, "-t", str(threads), "-p", str(args.pp),
                         "-n", str(args.tg), "-r", "1", "-o", "json"])
        pp = next(r["avg_ts"] for r in rows if r["n_prompt"] == args.pp and r["n_gen"] == 0)
        tg = next(r["avg_ts"] for r in rows if r["n_gen"] == args.tg and r["n_prompt"] == 0)
        return pp, tg
    r = run_json([sys.executable, os.path.join(HERE, "llamacpp_bench.py"), args.model,
                  "--threads", str(threads), "--pp", str(args.pp), "--tg", str(args.tg)])
    return r["pp_tps"], r["tg_tps"]


def detinfer_once(args, threads):
    r = run_json([args.detinfer, "bench", "--model", args.model, "--threads", str(threads),
                  "--pp", str(args.pp), "--tg", str(args.tg), "--reps", "1", "--json"])
    pp = next(x for x in r["results"] if x["n_prompt"] == args.pp)
    tg = next(x for x in r["results"] if x["n_gen"] == args.tg)
    return pp["avg_ts"], tg["avg_ts"], tg["bandwidth_limit_ts"], r.get("backend_info", "")


def mean_sd(xs):
    return statistics.mean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--detinfer", required=True)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--llama-bench", default=None)
    args = ap.parse_args()

    results = []
    for threads in [int(t) for t in args.threads.split(",")]:
        lc_pp, lc_tg, di_pp, di_tg, limit = [], [], [], [], []
        info = ""
        for rep in range(args.reps):
            p, t = llamacpp_once(args, threads)
            lc_pp.append(p)
            lc_tg.append(t)
            p, t, lim, info = detinfer_once(args, threads)
            di_pp.append(p)
            di_tg.append(t)
            limit.append(lim)
            print(f"threads {threads} rep {rep + 1}/{args.reps}: llama.cpp pp {lc_pp[-1]:.1f} tg {lc_tg[-1]:.2f}"
                  f" | libdetinfer pp {di_pp[-1]:.1f} tg {di_tg[-1]:.2f}", file=sys.stderr, flush=True)
        row = {"threads": threads, "llamacpp_pp": mean_sd(lc_pp), "llamacpp_tg": mean_sd(lc_tg),
               "detinfer_pp": mean_sd(di_pp), "detinfer_tg": mean_sd(di_tg),
               "bandwidth_limit_tg": statistics.mean(limit), "backend_info": info}
        row["pp_ratio"] = row["detinfer_pp"][0] / row["llamacpp_pp"][0]
        row["tg_ratio"] = row["detinfer_tg"][0] / row["llamacpp_tg"][0]
        row["tg_bandwidth_fraction"] = row["detinfer_tg"][0] / row["bandwidth_limit_tg"]
        row["llamacpp_bandwidth_fraction"] = row["llamacpp_tg"][0] / row["bandwidth_limit_tg"]
        results.append(row)

    print(f"\nmodel {os.path.basename(args.model)}; pp{args.pp}, tg{args.tg}; {args.reps} alternating "
          f"repetitions per engine; tokens/s mean ± sd")
    print("| threads | llama.cpp pp | libdetinfer pp | pp ratio | llama.cpp tg | libdetinfer tg | tg ratio "
          "| tg / bandwidth limit (libdetinfer, llama.cpp) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        f = lambda ms: f"{ms[0]:.1f} ± {ms[1]:.1f}"  # noqa: E731
        print(f"| {r['threads']} | {f(r['llamacpp_pp'])} | {f(r['detinfer_pp'])} | {r['pp_ratio']:.2f}x "
              f"| {f(r['llamacpp_tg'])} | {f(r['detinfer_tg'])} | {r['tg_ratio']:.2f}x "
              f"| {100 * r['tg_bandwidth_fraction']:.0f}%, {100 * r['llamacpp_bandwidth_fraction']:.0f}% "
              f"of {r['bandwidth_limit_tg']:.1f} t/s |")
    print(json.dumps({"model": args.model, "pp": args.pp, "tg": args.tg, "reps": args.reps,
                      "results": results}))


if __name__ == "__main__":
    main()
