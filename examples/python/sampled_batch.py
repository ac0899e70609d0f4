"""A sampled continuation, alone and inside a batch of 16 mixed requests.

    python3 examples/python/sampled_batch.py MODEL.gguf [--prompt TEXT] [--max-new N]

Runs one sampled request (seeded, temperature > 0, top-k, top-p, min-p,
repetition penalty) alone in its own session, then again in slot 11 of a
16-sequence session beside 15 other requests (greedy ones and sampled ones
with other seeds and parameters, other prompts, prompts fed in chunks while
others decode), and prints, for both runs, each generated token with the
digest of the logits row it was chosen from and the sequence digest of the
generation (prompt + generated tokens, di_session_seq_digest_extra). Exit
status 0 only when the two runs are identical.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from detinfer import Library  # noqa: E402

TARGET = dict(temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, repetition_penalty=1.1, seed=20251201)
NEIGHBOURS = [  # (prompt, sampling parameters or None for greedy)
    ("The capital of France is", None),
    ("def fibonacci(n):", dict(temperature=1.0, seed=1)),
    ("Water boils at a temperature of", None),
    ("Once upon a time,", dict(temperature=1.3, top_p=0.9, seed=2)),
    ("The three primary colours are", dict(temperature=0.7, top_k=20, seed=3)),
    ("In 1969, the first person to walk on the Moon was", None),
    ("A haiku about the sea:", dict(temperature=1.1, presence_penalty=0.5, frequency_penalty=0.3, seed=4)),
    ("The quick brown fox", None),
    ("import numpy as np\n", dict(temperature=0.9, min_p=0.1, seed=5)),
    ("Photosynthesis is the process by which", None),
    ("My favourite recipe for pancakes:", dict(temperature=0.6, top_k=5, seed=6)),
    ("The largest planet in the solar system is", None),
    ("Dear diary, today", dict(temperature=1.5, top_p=0.8, seed=7)),
    ("SELECT name FROM users WHERE", None),
    ("The theory of relativity states that", dict(temperature=0.8, repetition_penalty=1.3, seed=8)),
]
TARGET_SLOT = 11


def alone(model, prompt, max_new):
    s = model.session(max_sequences=1, threads=2)
    s.set_sampling(0, **TARGET)
    s.step({0: prompt})
    tokens, digests = [], []
    for i in range(max_new):
        digests.append(s.logits(0)[1])
        tokens.append(s.sample(0))
        if i + 1 < max_new:
            s.step({0: [tokens[-1]]})
    return tokens, digests, s.sequence_digest(0, tokens[-1:])


def batched(model, prompt, max_new):
    """Continuous batching: every request starts at once, prompts in chunks of
    3 tokens, each step mixes prompt chunks and decode tokens, the entry order
    rotates."""
    s = model.session(max_sequences=16, threads=2)
    requests = {}
    others = iter(NEIGHBOURS)
    for slot in range(16):
        if slot == TARGET_SLOT:
            requests[slot] = dict(prompt=prompt, params=TARGET)
        else:
            text, params = next(others)
            requests[slot] = dict(prompt=model.tokenize(text), params=params)
    for slot, r in requests.items():
        if r["params"]:
            s.set_sampling(slot, **r["params"])
        r.update(fed=0, tokens=[], digests=[])
    step = 0
    while any(len(r["tokens"]) < max_new for r in requests.values()):
        entries = {}
        order = sorted(requests, key=lambda q: (q * 7 + step) % 16)
        for slot in order:
            r = requests[slot]
            if r["fed"] < len(r["prompt"]):
                chunk = r["prompt"][r["fed"]:r["fed"] + 3]
                entries[slot] = chunk
            elif len(r["tokens"]) < max_new:
                entries[slot] = [r["tokens"][-1]]
        s.step(entries)
        for slot, fed in entries.items():
            r = requests[slot]
            if r["fed"] < len(r["prompt"]):
                r["fed"] += len(fed)
                if r["fed"] < len(r["prompt"]):
                    continue
            r["digests"].append(s.logits(slot)[1])
            r["tokens"].append(s.sample(slot) if r["params"] else s.greedy(slot))  # done at max_new
        step += 1
    t = requests[TARGET_SLOT]
    # the target's sequence holds prompt + all generated tokens but the last
    return t["tokens"], t["digests"], s.sequence_digest(TARGET_SLOT, t["tokens"][-1:]), requests


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--prompt", default="Write a short poem about the ocean:")
    ap.add_argument("--max-new", type=int, default=24)
    a = ap.parse_args()
    lib = Library()
    model = lib.load(a.model)
    prompt = model.tokenize(a.prompt)
    print(f"libdetinfer {lib.version()}; model {a.model}")
    print(f"prompt {a.prompt!r}: {len(prompt)} tokens {prompt}")
    print("sampling " + " ".join(f"{k}={v}" for k, v in TARGET.items()))
    one = alone(model, prompt, a.max_new)
    many = batched(model, prompt, a.max_new)
    for name, (tokens, digests, seq) in (("alone", one[:3]), (f"batch of 16, slot {TARGET_SLOT}", many[:3])):
        print(f"\n{name}:")
        for i, (t, d) in enumerate(zip(tokens, digests)):
            print(f"step {i} token {t} logits {d} {model.detokenize([t])!r}")
        print(f"sequence {len(prompt) + len(tokens)} tokens digest {seq}")
        print(f"text {model.detokenize(tokens)!r}")
    kinds = {"greedy": 0, "sampled": 0}
    for r in many[3].values():
        kinds["sampled" if r["params"] else "greedy"] += 1
    print(f"\nbatch: {kinds['greedy']} greedy and {kinds['sampled']} sampled requests")
    same = one[:3] == many[:3]
    print("IDENTICAL" if same else "DIFFERENT")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
