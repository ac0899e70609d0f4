#!/usr/bin/env python3
"""Greedy generation with digests through the detinfer package: the same
"step" and "sequence" lines as examples/generate.c for the same tokens.

    python3 generate.py --model FILE (--tokens 1,2,3 | --prompt TEXT) [--max-new N] [--threads T]
"""
import argparse
import sys

import detinfer


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokens", help="prompt as token ids, e.g. 1,17,42")
    ap.add_argument("--prompt", help="prompt text (a model with a tokenizer)")
    ap.add_argument("--max-new", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    try:
        with detinfer.Model(a.model) as model:
            prompt = ([int(t) for t in a.tokens.split(",")] if a.tokens
                      else model.tokenize(a.prompt or ""))
            print(f"model {a.model}: {model.architecture}, {model.get_int(detinfer.ModelKey.N_LAYER)} "
                  f"layers, vocabulary {model.n_vocab}; libdetinfer {detinfer.version()}")
            with model.session(threads=a.threads, context_length=len(prompt) + a.max_new) as session:
                gen = session.sequence(0).generate(prompt, a.max_new, stop_at_eos=False)
                for step, (token, _piece, digest) in enumerate(gen):
                    print(f"step {step} token {token} logits {digest}")
                print(f"sequence {gen.length} tokens digest {gen.digest}")
    except detinfer.DetinferError as e:
        print(f"generate: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
