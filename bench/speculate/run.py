#!/usr/bin/env python3
"""Prompt-lookup speculation against decoding without it, on the project's two
prompt sets (prompts.jsonl: "copy", text the answer repeats; "open", text it
does not), with `detinfer run`: tokens per second of decode with and without
`--speculate ngram`, the acceptance rate, and whether every output is bitwise
the output without speculation (the tokens and every logits digest).

Decode time is the time of a run of N new tokens less that of the same run of
1 new token (model load and prefill cancel), the median over --reps runs
taken in turn (plain, speculating, ...). Prints the CPU and caches first.

    bench/speculate/run.py --model M [--threads 1,2] [--max-new 128] [--reps 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOOL = os.environ.get("DETINFER", os.path.join(ROOT, "build", "tools", "detinfer"))


def machine():
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    keep = ("Model name", "L1d cache", "L2 cache", "L3 cache")
    return "; ".join(" ".join(l.split()) for l in out.splitlines() if l.split(":")[0].strip() in keep)


def run(model, prompt, max_new, threads, speculate, draft_max):
    cmd = [TOOL, "run", "--model", model, "--prompt", prompt, "--max-new", str(max_new), "--ignore-eos",
           "--threads", str(threads), "--json", "--profile", "integer"]
    if speculate:
        cmd += ["--speculate", "ngram", "--draft-max", str(draft_max)]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return time.perf_counter() - t0, json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--max-new", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--draft-max", type=int, default=8)
    a = ap.parse_args()
    prompts = [json.loads(l) for l in open(os.path.join(HERE, "prompts.jsonl"))]
    print(f"machine: {machine()}")
    print(f"model {os.path.basename(a.model)}, {a.max_new} new tokens, integer profile, draft <= {a.draft_max}, "
          f"medians of {a.reps}")
    print("| set | threads | decode t/s without | with | ratio | accepted / drafted | outputs equal |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for threads in map(int, a.threads.split(",")):
        for name in ("copy", "open"):
            plain_t, spec_t, drafted, accepted, equal = [], [], 0, 0, 0
            tokens = 0
            for p in (x["prompt"] for x in prompts if x["set"] == name):
                base = [run(a.model, p, 1, threads, s, a.draft_max)[0] for s in (False, True)]
                times = {False: [], True: []}
                outs = {}
                for _ in range(a.reps):
                    for s in (False, True):
                        t, d = run(a.model, p, a.max_new, threads, s, a.draft_max)
                        times[s].append(t)
                        outs[s] = d
                plain_t.append(statistics.median(times[False]) - base[0])
                spec_t.append(statistics.median(times[True]) - base[1])
                tokens += a.max_new - 1
                spec = outs[True]["speculation"]
                drafted += spec["drafted"]
                accepted += spec["accepted"]
                same = all(outs[True][k] == outs[False][k] for k in ("tokens", "steps", "sequence_digest"))
                equal += same
            without, with_ = tokens / sum(plain_t), tokens / sum(spec_t)
            n = sum(1 for x in prompts if x["set"] == name)
            print(f"| {name} | {threads} | {without:.1f} | {with_:.1f} | {with_ / without:.2f}x | "
                  f"{accepted} / {drafted} | {equal} of {n} |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
