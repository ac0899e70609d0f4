#!/usr/bin/env python3
"""libdetinfer on CUDA against llama.cpp's CUDA llama-bench, same GPU, same GGUF files, one call.

    gpu_peer.py --detinfer build/tools/detinfer --llama-bench DIR/llama-bench
        --batched-bench DIR/llama-batched-bench --bandwidth GBS
        --model NAME=FILE [--model NAME=FILE ...] [--profiles integer,portable]
        [--reps 3] [--pp 512] [--tg 128] [--batch 16] [--batch-tokens 16]
        [--deadline UNIX_TIME] [--timeout 120] [--out DIR] [--dry-run]

The engines run alternately, one process per repetition, in rounds: round r runs,
for every model in order, llama-bench (pp and tg), llama-batched-bench (batched
decode), then `detinfer bench --backend cuda` in each profile (pp, tg and batched
decode in one process). So every model gets its first figures before any gets its
second. A run is started only when the time it last took (times 1.3, or --timeout the
first time) fits before --deadline; each has its own time limit (--timeout, or what
is left). A failed run is logged and the rest go on; a failed detinfer run is retried
once without the batched decode.

What each engine measures:
  llama.cpp pp, tg  `llama-bench -m FILE -ngl 99 -p PP -n TG -r 1 -o json` (all layers on
                    the GPU, its defaults otherwise: flash attention auto, n_batch 2048,
                    n_ubatch 512, one warm-up run); avg_ts.
  llama.cpp bd      `llama-batched-bench -m FILE -ngl 99 -npp 16 -ntg BT -npl B -c C
                    --output-format jsonl` (B sequences, each its own 16-token prompt,
                    not shared; then BT steps of one token per sequence); speed_tg, the
                    aggregate tokens per second of the BT steps.
  libdetinfer       `detinfer bench --backend cuda --profile P --pp PP --tg TG --batch B
                    --batch-tokens BT --reps 1 --bandwidth GBS --json`: the same three
                    (its batched decode: B sequences after their own 16-token prompts,
                    BT steps, aggregate tokens per second, greedy selection included).

Each figure is the median over the rounds that ran (n in the table). Decode as a
fraction of the bandwidth is tg x weight bytes per token (from detinfer bench's JSON:
the bytes one decode step reads) / --bandwidth. Writes gpu-peer.md, gpu-peer.json and
a log per run into --out; prints the table last.
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--detinfer", required=True)
    p.add_argument("--llama-bench", required=True)
    p.add_argument("--batched-bench", default="")
    p.add_argument("--bandwidth", type=float, default=0.0, help="GB/s: the measured device bandwidth")
    p.add_argument("--bandwidth-label", default="device-to-device copy, read + written")
    p.add_argument("--model", action="append", default=[], help="NAME=FILE, in order of importance")
    p.add_argument("--profiles", default="integer,portable")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--pp", type=int, default=512)
    p.add_argument("--tg", type=int, default=128)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--batch-tokens", type=int, default=16)
    p.add_argument("--deadline", type=float, default=0.0, help="Unix time by which every run must end")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds, one run's limit")
    p.add_argument("--backend", default="cuda", help="detinfer's backend (cpu: a check of this script without a GPU)")
    p.add_argument("--out", default=".")
    p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    a = p.parse_args(argv)
    models = []
    for m in a.model:
        if "=" not in m:
            p.error(f"--model {m}: expected NAME=FILE")
        name, path = m.split("=", 1)
        models.append((name, path))
    if not models:
        p.error("no --model")
    a.models = models
    a.profile_list = [x for x in a.profiles.split(",") if x]
    if a.reps < 1 or a.pp < 1 or a.tg < 1 or a.batch < 0 or a.batch_tokens < 1:
        p.error("--reps, --pp, --tg and --batch-tokens must be positive, --batch at least 0")
    return a


def last_json(text, kind):
    """The JSON a program printed: all of it, else its last line that parses as `kind`."""
    text = text.strip()
    try:
        v = json.loads(text)
        if isinstance(v, kind):
            return v
    except json.JSONDecodeError:
        pass
    # llama-bench -o json prints one array over many lines: from its first "[" line on
    if kind is list:
        lines = text.splitlines()
        for i, ln in enumerate(lines):
            if ln.strip() == "[":
                try:
                    return json.loads("\n".join(lines[i:]))
                except json.JSONDecodeError:
                    break
    rows = []
    for ln in text.splitlines():
        ln = ln.strip()
        if ln.startswith("{"):
            try:
                rows.append(json.loads(ln))
            except json.JSONDecodeError:
                pass
    if kind is list:
        return rows
    if rows:
        return rows[-1]
    raise ValueError("no JSON in the output")


class Runner:
    def __init__(self, a):
        self.a = a
        self.took = {}  # key -> seconds the last run took
        os.makedirs(a.out, exist_ok=True)
        self.n = 0
        self.last_err = ""

    def left(self):
        return self.a.deadline - time.time() if self.a.deadline else 1e9

    def run(self, key, cmd):
        """(stdout or None, seconds); None when skipped, failed or timed out."""
        a = self.a
        self.n += 1
        log = os.path.join(a.out, f"run-{self.n:02d}-{key.replace('/', '_')}.log")
        if a.dry_run:
            print("would run:", " ".join(shlex.quote(c) for c in cmd))
            return None, 0.0
        need = self.took.get(key, a.timeout) * 1.3 if key in self.took else min(a.timeout, 30.0)
        if self.left() < need:
            print(f"gpu_peer: {key}: skipped, {self.left():.0f} s left, needs about {need:.0f}", flush=True)
            return None, 0.0
        limit = min(a.timeout, self.left())
        t0 = time.time()
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
            out, err, rc = r.stdout, r.stderr, r.returncode
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
            rc = "timeout"
        except OSError as e:
            out, err, rc = "", str(e), "not run"
        dt = time.time() - t0
        self.took[key] = dt
        self.last_err = err
        with open(log, "w") as f:
            f.write(f"$ {' '.join(shlex.quote(c) for c in cmd)}\n# exit {rc}, {dt:.1f} s\n")
            f.write("## stdout\n" + out + "\n## stderr\n" + err)
        print(f"gpu_peer: {key}: exit {rc}, {dt:.1f} s ({os.path.basename(log)})", flush=True)
        return (out if rc == 0 else None), dt


def llama_pp_tg(runner, name, path):
    a = runner.a
    out, _ = runner.run(f"{name}/llama-bench",
                        [a.llama_bench, "-m", path, "-ngl", "99", "-p", str(a.pp), "-n", str(a.tg),
                         "-r", "1", "-o", "json"])
    if out is None:
        return None, None
    try:
        rows = last_json(out, list)
        pp = next((r["avg_ts"] for r in rows if r.get("n_prompt") == a.pp and r.get("n_gen") == 0), None)
        tg = next((r["avg_ts"] for r in rows if r.get("n_gen") == a.tg and r.get("n_prompt") == 0), None)
        return pp, tg
    except (ValueError, KeyError, TypeError):
        return None, None


def llama_bd(runner, name, path):
    a = runner.a
    if not a.batch or not a.batched_bench:
        return None
    ctx = max(2048, a.batch * (16 + a.batch_tokens) + 64)
    out, _ = runner.run(f"{name}/llama-batched-bench",
                        [a.batched_bench, "-m", path, "-ngl", "99", "-c", str(ctx), "-b", "2048", "-ub", "512",
                         "-npp", "16", "-ntg", str(a.batch_tokens), "-npl", str(a.batch),
                         "--output-format", "jsonl"])
    if out is None:
        return None
    try:
        # its JSON lines go to stdout; look in stderr too, should a version log them there
        rows = last_json(out, list) + last_json(runner.last_err, list)
        return next((r["speed_tg"] for r in rows if r.get("pl") == a.batch), None)
    except (ValueError, KeyError, TypeError):
        return None


def detinfer_once(runner, name, path, profile):
    """{"pp", "tg", "bd", "bytes"}: values or None."""
    a = runner.a
    base = [a.detinfer, "bench", "--model", path, "--backend", a.backend, "--profile", profile,
            "--pp", str(a.pp), "--tg", str(a.tg), "--reps", "1", "--json"]
    if a.bandwidth > 0:
        base += ["--bandwidth", str(max(1, round(a.bandwidth)))]  # an integer, GB/s
    res = {"pp": None, "tg": None, "bd": None, "bytes": None}
    key = f"{name}/detinfer-{profile}"
    out = None
    if a.batch:
        out, _ = runner.run(key, base + ["--batch", str(a.batch), "--batch-tokens", str(a.batch_tokens)])
    if out is None and not a.dry_run:
        out, _ = runner.run(key + "-nobatch", base + ["--batch", "0"])
    if out is None:
        return res
    try:
        r = last_json(out, dict)
    except ValueError:
        return res
    for x in r.get("results", []):
        if x.get("n_seq"):
            if x["n_seq"] == a.batch:
                res["bd"] = x.get("avg_ts")
        elif x.get("n_prompt") == a.pp and not x.get("n_gen"):
            res["pp"] = x.get("avg_ts")
        elif x.get("n_gen") == a.tg and not x.get("n_prompt"):
            res["tg"] = x.get("avg_ts")
            res["bytes"] = x.get("weight_bytes_per_token")
    return res


def med(xs):
    xs = [x for x in xs if x is not None]
    return (statistics.median(xs), min(xs), max(xs), len(xs)) if xs else None


def fmt(m):
    if not m:
        return "—"
    v, lo, hi, n = m
    f = (lambda x: f"{x:,.0f}") if v >= 100 else (lambda x: f"{x:,.1f}")
    return f"{f(v)} (n={n})" if lo == hi else f"{f(v)} ({f(lo)}–{f(hi)}, n={n})"


def ratio(x, y):
    return f"{x[0] / y[0]:.2f}×" if x and y and y[0] > 0 else "—"


def frac(tg, nbytes, bw):
    return f"{100 * tg[0] * nbytes / (bw * 1e9):.1f}%" if tg and nbytes and bw > 0 else "—"


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    runner = Runner(a)
    engines = ["llama.cpp"] + a.profile_list
    data = {name: {e: {"pp": [], "tg": [], "bd": []} for e in engines} for name, _ in a.models}
    nbytes = {}
    for rnd in range(a.reps):
        for name, path in a.models:
            if not a.dry_run and not os.path.isfile(path):
                if rnd == 0:
                    print(f"gpu_peer: {name}: no file {path}: skipped", flush=True)
                continue
            d = data[name]
            pp, tg = llama_pp_tg(runner, name, path)
            d["llama.cpp"]["pp"].append(pp)
            d["llama.cpp"]["tg"].append(tg)
            d["llama.cpp"]["bd"].append(llama_bd(runner, name, path))
            for prof in a.profile_list:
                r = detinfer_once(runner, name, path, prof)
                for k in ("pp", "tg", "bd"):
                    d[prof][k].append(r[k])
                if r["bytes"]:
                    nbytes[name] = r["bytes"]
        if a.dry_run:
            break

    lines = []
    lines.append(f"bandwidth: {a.bandwidth:,.0f} GB/s ({a.bandwidth_label})" if a.bandwidth > 0
                 else "bandwidth: not measured (no fraction column)")
    lines.append(f"pp{a.pp}, tg{a.tg}, batched decode {a.batch} sequences x {a.batch_tokens} tokens "
                 f"(each after its own 16-token prompt); tokens/s, median (min–max) over n alternating runs")
    lines.append("")
    lines.append(f"| model | engine, profile | pp{a.pp} t/s | vs llama.cpp | tg{a.tg} t/s | vs llama.cpp "
                 f"| tg / bandwidth | bd{a.batch}x{a.batch_tokens} t/s | vs llama.cpp |")
    lines.append("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    summary = {}
    not_run = []
    for name, path in a.models:
        d = data[name]
        if not any(x is not None for e in d.values() for v in e.values() for x in v):
            not_run.append(name)
            continue
        lc = {k: med(d["llama.cpp"][k]) for k in ("pp", "tg", "bd")}
        nb = nbytes.get(name)
        for e in engines:
            m = {k: med(d[e][k]) for k in ("pp", "tg", "bd")}
            summary.setdefault(name, {})[e] = {k: (m[k][0] if m[k] else None) for k in m}
            label = "llama.cpp CUDA" if e == "llama.cpp" else f"detinfer {a.backend.upper()}, {e}"
            if e == "llama.cpp":
                one = {k: ("1" if m[k] else "—") for k in m}
                lines.append(f"| {name} | {label} | {fmt(m['pp'])} | {one['pp']} | {fmt(m['tg'])} | {one['tg']} | "
                             f"{frac(m['tg'], nb, a.bandwidth)} | {fmt(m['bd'])} | {one['bd']} |")
            else:
                lines.append(f"| {name} | {label} | {fmt(m['pp'])} | {ratio(m['pp'], lc['pp'])} | {fmt(m['tg'])} | "
                             f"{ratio(m['tg'], lc['tg'])} | {frac(m['tg'], nb, a.bandwidth)} | {fmt(m['bd'])} | "
                             f"{ratio(m['bd'], lc['bd'])} |")
        if nb:
            summary[name]["weight_bytes_per_token"] = nb
    if not_run:
        lines.append("")
        lines.append("no figures for: " + ", ".join(not_run) + " (missing file, failed or skipped runs: see the logs)")
    text = "\n".join(lines)
    if not a.dry_run:
        with open(os.path.join(a.out, "gpu-peer.md"), "w") as f:
            f.write(text + "\n")
        with open(os.path.join(a.out, "gpu-peer.json"), "w") as f:
            json.dump({"bandwidth_gbs": a.bandwidth, "pp": a.pp, "tg": a.tg, "batch": a.batch,
                       "batch_tokens": a.batch_tokens, "raw": data, "median": summary}, f, indent=1)
    print(text, flush=True)
    got_any = any(x is not None for n in data.values() for e in n.values() for v in e.values() for x in v)
    return 0 if (got_any or a.dry_run) else 1


if __name__ == "__main__":
    sys.exit(main())
