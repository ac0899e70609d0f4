#!/usr/bin/env python3
"""A sampled continuation, alone and inside a batch of 16 mixed requests.

    python3 sampled_batch.py --model FILE [--prompt TEXT] [--max-new N]

Runs one sampled request (seeded, temperature > 0, top-k, top-p, min-p,
repetition penalty) alone in its own session, then again in slot 11 of a
16-sequence session beside 15 other requests (greedy ones and sampled ones
with other seeds and parameters, other prompts, prompts fed 3 tokens per step
while others decode, the entry order rotating), and prints, for both runs,
each generated token with the digest of the logits row it was chosen from and
the sequence digest of the generation (prompt + generated tokens,
di_session_seq_digest_extra). Exit status 0 only when the two runs are
identical.
"""
import argparse
import sys

import detinfer
from detinfer import SamplingParams

TARGET = SamplingParams(temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, repetition_penalty=1.1,
                        seed=20251201)
NEIGHBOURS = [  # (prompt, sampling parameters or None for greedy)
    ("The capital of France is", None),
    ("def fibonacci(n):", SamplingParams(temperature=1.0, seed=1)),
    ("Water boils at a temperature of", None),
    ("Once upon a time,", SamplingParams(temperature=1.3, top_p=0.9, seed=2)),
    ("The three primary colours are", SamplingParams(temperature=0.7, top_k=20, seed=3)),
    ("In 1969, the first person to walk on the Moon was", None),
    ("A haiku about the sea:", SamplingParams(temperature=1.1, presence_penalty=0.5, frequency_penalty=0.3, seed=4)),
    ("The quick brown fox", None),
    ("import numpy as np\n", SamplingParams(temperature=0.9, min_p=0.1, seed=5)),
    ("Photosynthesis is the process by which", None),
    ("My favourite recipe for pancakes:", SamplingParams(temperature=0.6, top_k=5, seed=6)),
    ("The largest planet in the solar system is", None),
    ("Dear diary, today", SamplingParams(temperature=1.5, top_p=0.8, seed=7)),
    ("SELECT name FROM users WHERE", None),
    ("The theory of relativity states that", SamplingParams(temperature=0.8, repetition_penalty=1.3, seed=8)),
]
TARGET_SLOT = 11


def alone(model, prompt, max_new):
    with model.session(max_sequences=1, threads=2) as s:
        s.set_sampling(0, TARGET)
        s.step({0: prompt})
        tokens, digests = [], []
        for i in range(max_new):
            digests.append(s.logits_digest(0))
            tokens.append(s.sample_token(0))
            if i + 1 < max_new:
                s.step({0: [tokens[-1]]})
        return tokens, digests, s.digest(0, tokens[-1:])


def batched(model, prompt, max_new):
    with model.session(max_sequences=16, threads=2) as s:
        requests = {}
        others = iter(NEIGHBOURS)
        for slot in range(16):
            text, params = (None, TARGET) if slot == TARGET_SLOT else next(others)
            requests[slot] = dict(prompt=prompt if text is None else model.tokenize(text), params=params,
                                  fed=0, tokens=[], digests=[])
            if params is not None:
                s.set_sampling(slot, params)
        step = 0
        while any(len(r["tokens"]) < max_new for r in requests.values()):
            entries = {}
            for slot in sorted(requests, key=lambda q: (q * 7 + step) % 16):  # the entry order rotates
                r = requests[slot]
                if r["fed"] < len(r["prompt"]):
                    entries[slot] = r["prompt"][r["fed"]:r["fed"] + 3]
                elif len(r["tokens"]) < max_new:
                    entries[slot] = [r["tokens"][-1]]
            s.step(entries)
            for slot, fed in entries.items():
                r = requests[slot]
                if r["fed"] < len(r["prompt"]):
                    r["fed"] += len(fed)
                    if r["fed"] < len(r["prompt"]):
                        continue
                r["digests"].append(s.logits_digest(slot))
                r["tokens"].append(s.sample_token(slot) if r["params"] else s.greedy_token(slot))
            step += 1
        t = requests[TARGET_SLOT]
        greedy = sum(r["params"] is None for r in requests.values())
        return t["tokens"], t["digests"], s.digest(TARGET_SLOT, t["tokens"][-1:]), greedy


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompt", default="Write a short poem about the ocean:")
    ap.add_argument("--max-new", type=int, default=24)
    a = ap.parse_args()
    with detinfer.Model(a.model) as model:
        prompt = model.tokenize(a.prompt)
        print(f"libdetinfer {detinfer.version()}; model {a.model}")
        print(f"prompt {a.prompt!r}: {len(prompt)} tokens {prompt}")
        print(f"sampling {TARGET}")
        one = alone(model, prompt, a.max_new)
        many = batched(model, prompt, a.max_new)
        for name, (tokens, digests, seq) in (("alone", one), (f"batch of 16, slot {TARGET_SLOT}", many[:3])):
            print(f"\n{name}:")
            for i, (t, d) in enumerate(zip(tokens, digests)):
                print(f"step {i} token {t} logits {d} {model.detokenize([t])!r}")
            print(f"sequence {len(prompt) + len(tokens)} tokens digest {seq}")
            print(f"text {model.detokenize(tokens)!r}")
        print(f"\nbatch: {many[3]} greedy and {16 - many[3]} sampled requests")
        same = one == many[:3]
        print("IDENTICAL" if same else "DIFFERENT")
        return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
