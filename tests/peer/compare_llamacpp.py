#!/usr/bin/env python3
"""Compare libdetinfer with llama.cpp on the same GGUF file.

    python compare_llamacpp.py MODEL.gguf [--lib build/libdetinfer.so.1] [--new 32] [--threads 2]

Runs with the Python that has llama-cpp-python installed (make check-peer builds that
virtual environment in ~/.cache/detinfer/peer-venv; no llama.cpp code enters this
repository). For each prompt it reports:
  - whether both engines tokenize the prompt to the same ids;
  - the greedy continuation of each engine (each on its own) and the first position
    where they differ, with libdetinfer's top-2 logit gap there;
  - teacher-forced logit differences: llama.cpp is fed libdetinfer's tokens (prompt
    and continuation), and the logits of every position are compared: max and mean
    absolute difference, and the share of positions whose argmax agrees;
  - both engines' distance to an independent float64 forward pass on the first prompt.
Prints a markdown table. Exit 1 (a failure) when a prompt's token ids differ, when
libdetinfer is further than OURS_BOUND from float64, or when the argmax differs at a
position whose top-2 gap (libdetinfer's) is wider than twice llama.cpp's own largest
error against float64 (where llama.cpp's approximations could not swap the two).
"""

import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bindings", "python", "src"))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
sys.path.insert(0, HERE)
import detinfer  # noqa: E402  (the ctypes binding of the public API)
import reference  # noqa: E402  (the float64 forward pass)
from llamacpp import LlamaCpp  # noqa: E402  (llama.cpp's low-level API, default config)

# Normwise relative, as in make check's float64 checks; looser than the 1e-6 of the
# generated models because a real model has 18-30 layers of float32 rounding
# (measured: 4.3e-07 Gemma 3 270M, 1.2e-06 SmolLM2 135M).
OURS_BOUND = 1e-5

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):",
    "Once upon a time, in a small village by the sea,",
    "The three primary colors are",
    "Water boils at a temperature of",
]


def ours_greedy(session, prompt, n_new):
    """Greedy continuation and the logits of every position (prompt + new)."""
    session.reset(0)
    session.step({0: prompt}, all_logits=True)
    rows = [session.logits(0, i).values for i in range(len(prompt))]
    out = []
    for _ in range(n_new):
        t = session.greedy_token(0)
        out.append(t)
        session.step({0: [t]})
        rows.append(session.logits(0).values)
    return out, np.array(rows[: len(prompt) + n_new - 1], dtype=np.float64)


def top2_gap(row):
    two = np.sort(row)[-2:]
    return float(two[1] - two[0])


def compare(path, n_new, threads):
    model = detinfer.Model(path)
    session = model.session(threads=threads, context_length=512)
    llm = LlamaCpp(path, threads)
    results = []
    for text in PROMPTS:
        ours_ids = model.tokenize(text)
        theirs_ids = llm.tokenize(text)
        ours_new, ours_rows = ours_greedy(session, ours_ids, n_new)
        theirs_new = llm.greedy(ours_ids, n_new)
        # teacher forcing: llama.cpp sees exactly our sequence
        forced = ours_ids + ours_new[:-1]
        theirs_rows = llm.logits(forced)
        diff = np.abs(ours_rows - theirs_rows)
        same = np.argmax(ours_rows, 1) == np.argmax(theirs_rows, 1)
        argmax_agree = np.mean(same)
        gaps = np.array([top2_gap(row) for row in ours_rows])
        first = next((i for i, (a, b) in enumerate(zip(ours_new, theirs_new)) if a != b), None)
        gap = top2_gap(ours_rows[len(ours_ids) - 1 + first]) if first is not None else None
        results.append({
            "prompt": text,
            "tokens_equal": ours_ids == list(theirs_ids),
            "greedy_agree": n_new if first is None else first,
            "n_new": n_new,
            "first_divergence": first,
            "top2_gap_at_divergence": gap,
            "max_abs_logit_diff": float(diff.max()),
            "mean_abs_logit_diff": float(diff.mean()),
            "argmax_agreement": float(argmax_agree),
            "disagreement_gaps": [float(g) for g in gaps[~same]],
            "positions": int(diff.shape[0]),
            "ours_text": model.detokenize(ours_new),
            "llamacpp_text": model.detokenize(theirs_new),
        })
    llm.close()
    return results


def against_float64(path, threads):
    """Distances of both engines' prompt logits to the float64 forward pass."""
    model = detinfer.Model(path)
    ids = model.tokenize(PROMPTS[0])
    exact = reference.forward(reference.Model(path), ids)
    session = model.session(threads=threads, context_length=512)
    session.step({0: ids}, all_logits=True)
    ours = np.array([session.logits(0, i).values for i in range(len(ids))], dtype=np.float64)
    llm = LlamaCpp(path, threads)
    theirs = llm.logits(ids)
    llm.close()
    out = {}
    for name, rows in (("libdetinfer", ours), ("llama.cpp", theirs)):
        d = np.abs(rows - exact)
        out[name] = {"max_abs": float(d.max()), "mean_abs": float(d.mean()),
                     "max_rel": float((d.max(1) / np.abs(exact).max(1)).max())}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--lib", default=os.path.join(HERE, "..", "..", "build", "libdetinfer.so.1"))
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", help="also write the results to this file")
    a = ap.parse_args(argv)
    os.environ["DETINFER_LIB"] = os.path.abspath(a.lib)  # the binding loads it on first use
    import llama_cpp
    results = compare(a.model, a.new, a.threads)
    print(f"libdetinfer {detinfer.version()} vs llama.cpp "
          f"(llama-cpp-python {llama_cpp.__version__}), {os.path.basename(a.model)}, "
          f"{a.new} greedy tokens, {a.threads} threads\n")
    print("| prompt | same ids | greedy agree | first diff (top-2 gap) | max abs diff | mean abs diff | argmax agree |")
    print("| --- | --- | ---: | --- | ---: | ---: | ---: |")
    for r in results:
        div = "none" if r["first_divergence"] is None else \
            f"{r['first_divergence']} ({r['top2_gap_at_divergence']:.3g})"
        print(f"| {r['prompt'][:32]} | {'yes' if r['tokens_equal'] else 'NO'} | "
              f"{r['greedy_agree']}/{r['n_new']} | {div} | {r['max_abs_logit_diff']:.4f} | "
              f"{r['mean_abs_logit_diff']:.5f} | {100 * r['argmax_agreement']:.1f}% |")
    total = sum(r["greedy_agree"] for r in results)
    print(f"\ngreedy tokens agreeing before the first divergence: {total}/{a.new * len(results)}")
    for r in results:
        print(f"\n> {r['prompt']}\n  libdetinfer: {r['ours_text']!r}\n  llama.cpp:   {r['llamacpp_text']!r}")
    exact = against_float64(a.model, a.threads)
    print(f"\nagainst an independent float64 forward pass, prompt {PROMPTS[0]!r}:")
    for name, r in exact.items():
        print(f"  {name:12s} max abs {r['max_abs']:.3e}  mean abs {r['mean_abs']:.3e}  "
              f"max normwise relative {r['max_rel']:.3e}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"prompts": results, "float64": exact}, f, indent=1)
    clear_gap = 2 * exact["llama.cpp"]["max_abs"]
    failures = [f"{r['prompt']!r}: token ids differ" for r in results if not r["tokens_equal"]]
    if exact["libdetinfer"]["max_rel"] > OURS_BOUND:
        failures.append(f"libdetinfer is {exact['libdetinfer']['max_rel']:.3g} from float64 "
                        f"(bound {OURS_BOUND:g})")
    for r in results:
        wide = [g for g in r["disagreement_gaps"] if g > clear_gap]
        if wide:
            failures.append(f"{r['prompt']!r}: argmax differs where the top-2 gap is "
                            f"{max(wide):.3g} > {clear_gap:.3g}")
    if not any("argmax" in f for f in failures):
        print(f"\nargmax disagreements all at top-2 gaps below {clear_gap:.3g} "
              "(2 x llama.cpp's max abs error against float64)")
    for msg in failures:
        print(f"FAIL {os.path.basename(a.model)}: {msg}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
