#!/usr/bin/env python3
"""Speculative decoding, both engines side by side in one process, on the
project's two prompt sets (prompts.jsonl: "copy", text the answer repeats;
"open", text it does not), greedy:

  - ours: libdetinfer through the Python binding's batch loop (the code of
    detinfer.LLM.generate), without speculation and with prompt lookup
    (speculate="ngram", --draft-max, --ngram);
  - llama.cpp: llama-cpp-python (0.3.36 in `make peer-venv`), Llama.generate
    without a draft model and with LlamaPromptLookupDecoding
    (--peer-ngram, --peer-draft), on the same prompt token ids.

For each: decode tokens/s (from the first generated token to the last, so
model load and prefill are left out; the median over --reps runs, the four
runs of a prompt taken in turn, one after another), the acceptance rate, and
whether the speculative output equals the engine's own output without it,
prompt by prompt (ours: the tokens, every logits digest and the sequence
digest; llama.cpp: the tokens, and the prompts that differ are counted).
Prints the CPU and caches, the date and the commit first.

    PYTHON=~/.cache/detinfer/peer-venv/bin/python  # has llama_cpp; any python3 runs ours alone
    $PYTHON bench/speculate/run.py --model M [--threads 1,2] [--max-new 128] [--reps 3]

DETINFER_LIB names the library (default: build/libdetinfer.so.1 of this tree).
Without llama_cpp importable, llama.cpp's columns say so and ours still run.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bindings", "python", "src"))
os.environ.setdefault("DETINFER_LIB", os.path.join(ROOT, "build", "libdetinfer.so.1"))

import detinfer  # noqa: E402
from detinfer._batch import Batch, Job, Speculation  # noqa: E402


def machine():
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    keep = ("Model name", "L1d cache", "L2 cache", "L3 cache")
    return "; ".join(" ".join(l.split()) for l in out.splitlines() if l.split(":")[0].strip() in keep)


def commit():
    r = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"], capture_output=True, text=True)
    return r.stdout.strip() or "unknown"


class Ours:
    name = "ours"

    def __init__(self, model, threads, draft_max, ngram):
        self.llm = detinfer.LLM(model, threads=threads, max_sequences=1)
        self.spec = Speculation(draft_max, ngram)

    def tokenize(self, text):
        return self.llm.model.tokenize(text, add_bos=True)

    def run(self, ids, max_new, speculate):
        """(decode seconds for tokens 2..max_new, output to compare, drafted, accepted)"""
        batch = Batch(self.llm.session, 1, [Job(ids, max_new, ())], self.spec if speculate else None)
        first = last = None
        for _ in batch.events():
            last = time.perf_counter()
            first = first or last
        out = batch.outcomes[0]
        if out is None or out.error is not None:
            raise RuntimeError(f"ours: {out.error if out else 'no outcome'}")
        return last - first, (out.tokens, out.logits_digests, out.digest), out.drafted, out.accepted


class Peer:
    name = "llama.cpp"

    def __init__(self, model, threads, ngram, draft, n_ctx):
        import llama_cpp
        from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

        class Counting(LlamaPromptLookupDecoding):
            """The prompt-lookup drafter, counting its drafts: llama-cpp-python
            does not report how many it accepted, so that is inferred from
            the steps (each step gives the accepted drafts and one token)."""
            calls = drafted = 0

            def __call__(self, input_ids, *args, **kwargs):
                d = super().__call__(input_ids, *args, **kwargs)
                Counting.calls += 1
                Counting.drafted += len(d)
                return d

        self.counting = Counting
        self.version = llama_cpp.__version__
        kw = dict(model_path=model, n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads, verbose=False)
        self.plain = llama_cpp.Llama(**kw)
        self.spec = llama_cpp.Llama(draft_model=Counting(max_ngram_size=ngram, num_pred_tokens=draft), **kw)

    def run(self, ids, max_new, speculate):
        llm = self.spec if speculate else self.plain
        llm.reset()  # no prefix of an earlier run is reused
        c = self.counting
        c.calls = c.drafted = 0
        tokens, first, last = [], None, None
        for t in llm.generate(ids, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0, reset=True):
            last = time.perf_counter()
            first = first or last
            tokens.append(t)
            if len(tokens) == max_new:
                break
        # Llama.generate calls the drafter before each step after the prompt's
        # (the first token comes from the prompt's); each such step gives its
        # accepted drafts and one token, so tokens after the first = steps + accepted
        steps = c.calls if speculate else 0
        drafted = c.drafted if speculate else 0
        accepted = max(len(tokens) - 1 - steps, 0) if speculate else 0
        return last - first, tokens, drafted, accepted


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--max-new", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--draft-max", type=int, default=3, help="ours: draft tokens per step at most (DI_DRAFT_DEFAULT)")
    ap.add_argument("--ngram", type=int, default=3, help="ours: the longest key the lookup matches")
    ap.add_argument("--peer-draft", type=int, default=10, help="llama.cpp: num_pred_tokens (its default 10)")
    ap.add_argument("--peer-ngram", type=int, default=2, help="llama.cpp: max_ngram_size (its default 2)")
    ap.add_argument("--no-peer", action="store_true", help="ours alone")
    ap.add_argument("--sets", default="copy,open")
    a = ap.parse_args()
    prompts = [json.loads(l) for l in open(os.path.join(HERE, "prompts.jsonl"))]
    print(f"date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; commit {commit()}")
    print(f"machine: {machine()}; {os.cpu_count()} CPUs")
    print(f"libdetinfer {detinfer.version()} ({os.environ['DETINFER_LIB']}), integer profile, "
          f"draft <= {a.draft_max}, ngram <= {a.ngram}")
    peer_error = None
    if a.no_peer:
        peer_error = "not run (--no-peer)"
    else:
        try:
            import llama_cpp  # noqa: F401
            from llama_cpp import llama_speculative  # noqa: F401
        except ImportError as e:
            peer_error = f"not run: {e} (make peer-venv, then run this with its python)"
    print(f"llama.cpp: {peer_error or 'llama-cpp-python ' + llama_cpp.__version__}"
          f"{'' if peer_error else f', LlamaPromptLookupDecoding(max_ngram_size={a.peer_ngram}, num_pred_tokens={a.peer_draft})'}")
    print(f"model {os.path.basename(a.model)}, greedy, {a.max_new} new tokens (EOS ignored), decode t/s from "
          f"the first token to the last, medians of {a.reps}, runs alternating per prompt")
    print()
    print("| engine | set | threads | decode t/s without | with | ratio | accepted / drafted | outputs equal |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for threads in map(int, a.threads.split(",")):
        engines = [Ours(a.model, threads, a.draft_max, a.ngram)]
        if peer_error is None:
            engines.append(Peer(a.model, threads, a.peer_ngram, a.peer_draft, n_ctx=4096))
        rows = {}
        for name in a.sets.split(","):
            texts = [x["prompt"] for x in prompts if x["set"] == name]
            acc = {(e.name, s): {"time": 0.0, "drafted": 0, "accepted": 0} for e in engines for s in (False, True)}
            equal = {e.name: 0 for e in engines}
            tokens = 0
            for text in texts:
                ids = engines[0].tokenize(text)
                times = {(e.name, s): [] for e in engines for s in (False, True)}
                outs = {}
                for _ in range(a.reps):
                    for e in engines:
                        for s in (False, True):
                            t, out, drafted, accepted = e.run(ids, a.max_new, s)
                            times[(e.name, s)].append(t)
                            if (e.name, s) in outs and outs[(e.name, s)][0] != out:
                                raise RuntimeError(f"{e.name}: two runs of one prompt differ")
                            outs[(e.name, s)] = (out, drafted, accepted)
                for k, v in times.items():
                    acc[k]["time"] += statistics.median(v)
                    acc[k]["drafted"] += outs[k][1]
                    acc[k]["accepted"] += outs[k][2]
                for e in engines:
                    equal[e.name] += outs[(e.name, False)][0] == outs[(e.name, True)][0]
                tokens += a.max_new - 1
            for e in engines:
                without = tokens / acc[(e.name, False)]["time"]
                with_ = tokens / acc[(e.name, True)]["time"]
                sp = acc[(e.name, True)]
                rate = f" ({100 * sp['accepted'] / sp['drafted']:.0f}%)" if sp["drafted"] else ""
                note = "" if e.name == "ours" else f"; {len(texts) - equal[e.name]} differ"
                print(f"| {e.name} | {name} | {threads} | {without:.1f} | {with_:.1f} | {with_ / without:.2f}x | "
                      f"{sp['accepted']} / {sp['drafted']}{rate} | {equal[e.name]} of {len(texts)}{note} |")
                rows[(e.name, name)] = with_
            sys.stdout.flush()
        if ("llama.cpp", "copy") in rows:
            print(f"| ours with / llama.cpp with | copy | {threads} | | | "
                  f"{rows[('ours', 'copy')] / rows[('llama.cpp', 'copy')]:.2f}x | | |")
        for e in engines:
            if hasattr(e, "llm"):
                e.llm.close()


if __name__ == "__main__":
    main()
