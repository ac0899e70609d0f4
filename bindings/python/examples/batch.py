#!/usr/bin/env python3
"""Several prompts in one call of detinfer.LLM.generate (continuous batching
over --max-sequences sequences), printing for each prompt, in order, the
"step" and "sequence" lines examples/generate.c prints for that prompt alone.

    python3 batch.py --model FILE --prompts "1,17,42;5,9,2" [--max-new N] [--max-sequences S]
                     [--temperature F --top-k N --top-p F --seed N]
"""
import argparse
import sys

import detinfer


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompts", required=True, help="token-id prompts, ';' between prompts")
    ap.add_argument("--max-new", type=int, default=16)
    ap.add_argument("--max-sequences", type=int, default=2)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--top-k", type=int, default=0)
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", choices=["integer", "portable"], default="integer", help="LLM's default: integer")
    a = ap.parse_args()
    prompts = [[int(t) for t in p.split(",")] for p in a.prompts.split(";")]
    sampling = detinfer.SamplingParams(temperature=a.temperature, top_k=a.top_k, top_p=a.top_p, seed=a.seed)
    try:
        with detinfer.LLM(a.model, max_sequences=a.max_sequences, profile=a.profile) as llm:
            results = llm.generate(prompts, sampling=sampling, max_new=a.max_new, stop_at_eos=False,
                                   logits_digests=True)
    except detinfer.DetinferError as e:
        print(f"batch: {e}", file=sys.stderr)
        return 1
    for prompt, r in zip(prompts, results):
        for step, (token, digest) in enumerate(zip(r.token_ids, r.logits_digests or [])):
            print(f"step {step} token {token} logits {digest}")
        print(f"sequence {len(prompt) + len(r.token_ids)} tokens digest {r.digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
