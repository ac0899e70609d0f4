#!/usr/bin/env python3
"""libdetinfer against llama.cpp on one GGUF file, side by side in one run.

    python compare_llamacpp.py MODEL.gguf --detinfer build/tools/detinfer
        [--threads 1,2] [--reps 5] [--pp 512] [--tg 128] [--batch 16] [--batch-tokens 64]
        [--profiles portable,integer] [--llama-bench PATH]

For each thread count the engines run alternately, one process per
repetition (llama.cpp, then libdetinfer in each numerics profile of
--profiles, REPS times), so that all see the same machine state; each
figure is the median of the repetitions, with the spread (min-max). Prompt processing (pp: PP tokens in one batch) and
generation (tg: TG single-token steps) are measured by each engine itself:
libdetinfer by `detinfer bench --json`, llama.cpp by its performance counters
(bench/llamacpp_bench.py, run with this Python, which must have
llama-cpp-python) or by `llama-bench -o json` when --llama-bench is given.
The memory-bandwidth limit comes from detinfer bench's own measurement in the
same run (weight bytes per token / measured bandwidth).

Batched decode (--batch B, 0 for none): B sequences, each after its own
16-token prompt, advanced one token each per step for --batch-tokens steps;
aggregate tokens per second over the steps' wall time, by `detinfer bench
--batch` and by bench/llamacpp_bench.py --batch (llama_decode of a
llama_batch with one token of each of B sequence ids); with --llama-bench,
llama.cpp's side of it is left out.

The machine comes first in the output (CPU model, cores, cache sizes from
lscpu, load average before and after): figures from machines whose caches
differ must not be confused. Prints markdown tables and one JSON line;
exit status 0 unless an engine fails.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def machine():
    """CPU model, cores and caches (lscpu; per-core cache sizes of cpu0 from /sys)."""
    info = {}
    try:
        out = subprocess.run(["lscpu"], check=True, capture_output=True, text=True,
                             env=dict(os.environ, LC_ALL="C")).stdout
        fields = dict(ln.split(":", 1) for ln in out.splitlines() if ":" in ln)
        fields = {k.strip(): v.strip() for k, v in fields.items()}
        for key, name in [("Model name", "cpu_model"), ("CPU(s)", "logical_cpus"),
                          ("Core(s) per socket", "cores_per_socket"), ("Socket(s)", "sockets"),
                          ("Thread(s) per core", "threads_per_core"), ("L1d cache", "l1d"),
                          ("L2 cache", "l2"), ("L3 cache", "l3")]:
            if key in fields:
                info[name] = fields[key]
    except (OSError, subprocess.CalledProcessError):
        pass
    per_core = {}
    base = "/sys/devices/system/cpu/cpu0/cache"
    for idx in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        try:
            rd = lambda f: open(os.path.join(base, idx, f)).read().strip()  # noqa: E731
            kind = {"Data": "d", "Instruction": "i", "Unified": ""}.get(rd("type"), "?")
            per_core[f"L{rd('level')}{kind}"] = rd("size")
        except OSError:
            continue
    info["cpu0_caches"] = per_core
    info["usable_cpus"] = len(os.sched_getaffinity(0))
    return info


def describe(m):
    caches = ", ".join(f"{k} {v}" for k, v in m.get("cpu0_caches", {}).items())
    return (f"machine: {m.get('cpu_model', '?')}; {m.get('sockets', '?')} socket(s) x "
            f"{m.get('cores_per_socket', '?')} cores x {m.get('threads_per_core', '?')} threads "
            f"({m.get('usable_cpus', '?')} usable); caches (lscpu, all instances): L1d {m.get('l1d', '?')}, "
            f"L2 {m.get('l2', '?')}, L3 {m.get('l3', '?')}; cpu0 sees {caches}")


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
        return pp, tg, None
    r = run_json([sys.executable, os.path.join(HERE, "llamacpp_bench.py"), args.model,
                  "--threads", str(threads), "--pp", str(args.pp), "--tg", str(args.tg)])
    return r["pp_tps"], r["tg_tps"], r.get("extra_bufts")


def llamacpp_bd_once(args, threads):
    r = run_json([sys.executable, os.path.join(HERE, "llamacpp_bench.py"), args.model,
                  "--threads", str(threads), "--pp", "0", "--tg", "0", "--batch", str(args.batch),
                  "--batch-tokens", str(args.batch_tokens)])
    return r["bd_tps"]


def detinfer_once(args, threads, profile):
    r = run_json([args.detinfer, "bench", "--model", args.model, "--threads", str(threads), "--profile", profile,
                  "--pp", str(args.pp), "--tg", str(args.tg), "--batch", str(args.batch),
                  "--batch-tokens", str(args.batch_tokens), "--reps", "1", "--json"])
    single = [x for x in r["results"] if not x.get("n_seq")]
    pp = next(x for x in single if x["n_prompt"] == args.pp)
    tg = next(x for x in single if x["n_gen"] == args.tg)
    # single-sequence results carry n_seq 0 too: with --batch 0 there is no batched figure
    bd = next((x["avg_ts"] for x in r["results"] if args.batch and x.get("n_seq") == args.batch), None)
    return pp["avg_ts"], tg["avg_ts"], tg["bandwidth_limit_ts"], bd


def median_spread(xs):
    """(median, min, max): one noisy repetition moves the median least."""
    return statistics.median(xs), min(xs), max(xs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--detinfer", required=True)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--batch-tokens", type=int, default=64)
    ap.add_argument("--profiles", default="portable,integer")
    ap.add_argument("--llama-bench", default=None)
    args = ap.parse_args()

    mach = machine()
    mach["loadavg_start"] = os.getloadavg()
    print(describe(mach), file=sys.stderr, flush=True)
    profiles = args.profiles.split(",")
    results = []
    for threads in [int(t) for t in args.threads.split(",")]:
        lc_pp, lc_tg, lc_bd = [], [], []
        di = {p: {"pp": [], "tg": [], "bd": [], "limit": []} for p in profiles}
        for rep in range(args.reps):
            p, t, extra = llamacpp_once(args, threads)
            lc_pp.append(p)
            lc_tg.append(t)
            if args.batch and not args.llama_bench:
                lc_bd.append(llamacpp_bd_once(args, threads))
            line = f"threads {threads} rep {rep + 1}/{args.reps}: llama.cpp pp {lc_pp[-1]:.1f} tg {lc_tg[-1]:.2f}"
            line += f" bd{args.batch} {lc_bd[-1]:.1f}" if lc_bd else ""
            for prof in profiles:
                p, t, lim, bd = detinfer_once(args, threads, prof)
                d = di[prof]
                d["pp"].append(p)
                d["tg"].append(t)
                d["limit"].append(lim)
                if bd is not None:
                    d["bd"].append(bd)
                line += f" | libdetinfer {prof} pp {p:.1f} tg {t:.2f}" + (f" bd{args.batch} {bd:.1f}" if bd else "")
            print(line, file=sys.stderr, flush=True)
        for prof in profiles:
            d = di[prof]
            row = {"threads": threads, "profile": prof, "llamacpp_pp": median_spread(lc_pp),
                   "llamacpp_tg": median_spread(lc_tg), "detinfer_pp": median_spread(d["pp"]),
                   "detinfer_tg": median_spread(d["tg"]), "bandwidth_limit_tg": statistics.median(d["limit"]),
                   "llamacpp_extra_bufts": extra}
            if d["bd"]:
                row["detinfer_bd"] = median_spread(d["bd"])
                row["detinfer_bd_over_pp"] = row["detinfer_bd"][0] / row["detinfer_pp"][0]
            if lc_bd:
                row["llamacpp_bd"] = median_spread(lc_bd)
            if d["bd"] and lc_bd:
                row["bd_ratio"] = row["detinfer_bd"][0] / row["llamacpp_bd"][0]
            row["pp_ratio"] = row["detinfer_pp"][0] / row["llamacpp_pp"][0]
            row["tg_ratio"] = row["detinfer_tg"][0] / row["llamacpp_tg"][0]
            row["tg_bandwidth_fraction"] = row["detinfer_tg"][0] / row["bandwidth_limit_tg"]
            row["llamacpp_bandwidth_fraction"] = row["llamacpp_tg"][0] / row["bandwidth_limit_tg"]
            results.append(row)

    mach["loadavg_end"] = os.getloadavg()
    print(f"\n{describe(mach)}; load average {mach['loadavg_start'][0]:.1f} at the start, "
          f"{mach['loadavg_end'][0]:.1f} at the end")
    print(f"\nmodel {os.path.basename(args.model)}; pp{args.pp}, tg{args.tg}; {args.reps} alternating "
          f"repetitions per engine; tokens/s median (min-max); llama.cpp's extra buffer types (AMX, repacking) "
          f"{dict([(True, 'on'), (False, 'off (AMX CPU)'), (None, 'as llama-bench sets them')])[results[0]['llamacpp_extra_bufts']] if results else '?'}")
    print("| threads | profile | llama.cpp pp | libdetinfer pp | pp ratio | llama.cpp tg | libdetinfer tg | tg ratio "
          "| tg / bandwidth limit (libdetinfer, llama.cpp) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        f = lambda ms: f"{ms[0]:.1f} ({ms[1]:.1f}-{ms[2]:.1f})"  # noqa: E731
        print(f"| {r['threads']} | {r['profile']} | {f(r['llamacpp_pp'])} | {f(r['detinfer_pp'])} | {r['pp_ratio']:.2f}x "
              f"| {f(r['llamacpp_tg'])} | {f(r['detinfer_tg'])} | {r['tg_ratio']:.2f}x "
              f"| {100 * r['tg_bandwidth_fraction']:.0f}%, {100 * r['llamacpp_bandwidth_fraction']:.0f}% "
              f"of {r['bandwidth_limit_tg']:.1f} t/s |")
    if any("detinfer_bd" in r for r in results):
        f = lambda ms: f"{ms[0]:.1f} ({ms[1]:.1f}-{ms[2]:.1f})" if ms else "-"  # noqa: E731
        print(f"\nbatched decode: {args.batch} sequences x {args.batch_tokens} tokens (each after its own "
              f"16-token prompt), aggregate tokens/s")
        print("| threads | profile | llama.cpp bd | libdetinfer bd | bd ratio | libdetinfer bd / own pp |")
        print("|---|---|---|---|---|---|")
        for r in results:
            ratio = f"{r['bd_ratio']:.2f}x" if "bd_ratio" in r else "-"
            print(f"| {r['threads']} | {r['profile']} | {f(r.get('llamacpp_bd'))} | {f(r.get('detinfer_bd'))} | {ratio} "
                  f"| {r['detinfer_bd_over_pp']:.2f}x |")
    print(json.dumps({"model": args.model, "pp": args.pp, "tg": args.tg, "batch": args.batch,
                      "batch_tokens": args.batch_tokens, "reps": args.reps, "machine": mach,
                      "results": results}))


if __name__ == "__main__":
    main()
