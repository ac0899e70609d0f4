#!/usr/bin/env python3
"""Accuracy of libdetinfer's profiles and of llama.cpp against float64.

    python accuracy.py MODEL.gguf [MODEL.gguf ...] [--new 16] [--threads 2] [--json F]

Runs with the Python that has llama-cpp-python installed (make peer-venv). For each
model and each prompt the token sequence is the prompt followed by the portable
profile's greedy continuation; that same sequence is teacher-forced through the float64
forward pass (tests/tools/reference.py), libdetinfer's portable and integer profiles, and
llama.cpp in the default configuration tests/peer uses (tests/peer/llamacpp.py). Prints
a markdown table of tests/tools/logit_error.py's metric: the mean and maximum over
positions of ||l - l64|| / ||l64||, and the argmax agreement with float64.
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
import detinfer  # noqa: E402
import logit_error  # noqa: E402
import reference  # noqa: E402
from llamacpp import LlamaCpp  # noqa: E402

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):",
    "Once upon a time, in a small village by the sea,",
    "Water boils at a temperature of",
]
PROFILES = (("portable", 1), ("integer", 3))  # di_profile values of include/detinfer.h


def forced_logits(session, ids):
    session.reset(0)
    session.step({0: ids}, all_logits=True)
    return np.array([session.logits(0, i).values for i in range(len(ids))], dtype=np.float64)


def sequence(session, prompt, n_new):
    session.reset(0)
    session.step({0: prompt})
    out = list(prompt)
    for _ in range(n_new):
        t = session.greedy_token(0)
        out.append(t)
        session.step({0: [t]})
    return out


def measure(path, n_new, threads):
    model = detinfer.Model(path)
    ref_model = reference.Model(path)
    sessions = {name: model.session(threads=threads, context_length=512, profile=p) for name, p in PROFILES}
    llm = LlamaCpp(path, threads)
    parts = {name: [] for name in [n for n, _ in PROFILES] + ["llama.cpp"]}
    for text in PROMPTS:
        ids = sequence(sessions["portable"], model.tokenize(text), n_new)
        exact = reference.forward(ref_model, ids)
        for name, s in sessions.items():
            parts[name].append(logit_error.summary(forced_logits(s, ids), exact))
        parts["llama.cpp"].append(logit_error.summary(llm.logits(ids), exact))
    llm.close()
    return {name: logit_error.merge(p) for name, p in parts.items()}


def parser(doc):
    """The options of this tool and of activation_blocks.py: the models, the library,
    the greedy tokens after each prompt, the threads."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--lib", default=os.path.join(HERE, "..", "..", "build", "libdetinfer.so.1"))
    ap.add_argument("--new", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    return ap


def main(argv=None):
    ap = parser(__doc__)
    ap.add_argument("--json", help="also write the results to this file")
    a = ap.parse_args(argv)
    os.environ["DETINFER_LIB"] = os.path.abspath(a.lib)
    import llama_cpp
    print(f"accuracy against float64 (tests/tools/logit_error.py): libdetinfer {detinfer.version()}, "
          f"llama.cpp of llama-cpp-python {llama_cpp.__version__} (default configuration); "
          f"{len(PROMPTS)} prompts + {a.new} greedy tokens each, teacher-forced\n")
    print("| model | engine | mean | max | argmax |")
    print("| --- | --- | ---: | ---: | ---: |")
    results = {}
    for path in a.models:
        r = measure(path, a.new, a.threads)
        results[os.path.basename(path)] = r
        for name, s in r.items():
            print(f"| {os.path.basename(path)} | {name} | {s['mean']:.2e} | {s['max']:.2e} | "
                  f"{s['argmax']}/{s['positions']} |", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
