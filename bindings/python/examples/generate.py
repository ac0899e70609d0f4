#!/usr/bin/env python3
"""Generation with digests through the detinfer package: the same "step",
"sequence" and "logprobs" lines as examples/generate.c for the same tokens and options.

    python3 generate.py --model FILE (--tokens 1,2,3 | --prompt TEXT) [--max-new N] [--threads T]
                        [--temperature F --top-k N --top-p F --seed N] [--logprobs N]
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
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--top-k", type=int, default=0)
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--logprobs", type=int, metavar="N",
                    help="digest the chosen token's and the N most likely tokens' log-probabilities")
    a = ap.parse_args()
    try:
        with detinfer.Model(a.model) as model:
            prompt = ([int(t) for t in a.tokens.split(",")] if a.tokens
                      else model.tokenize(a.prompt or ""))
            print(f"model {a.model}: {model.architecture}, {model.get_int(detinfer.ModelKey.N_LAYER)} "
                  f"layers, vocabulary {model.n_vocab}; libdetinfer {detinfer.version()}")
            with model.session(threads=a.threads, context_length=len(prompt) + a.max_new) as session:
                sampling = detinfer.SamplingParams(temperature=a.temperature, top_k=a.top_k, top_p=a.top_p,
                                                   seed=a.seed)
                seq = session.sequence(0)
                gen = seq.generate(prompt, a.max_new, stop_at_eos=False, sampling=sampling)
                values: list = []
                ids: list = []
                for step, (token, _piece, digest) in enumerate(gen):
                    print(f"step {step} token {token} logits {digest}")
                    if a.logprobs is not None:
                        chosen, top = seq.logprobs(token, a.logprobs)
                        values += [chosen] + [v for _, v in top]
                        ids += [i for i, _ in top]
                print(f"sequence {gen.length} tokens digest {gen.digest}")
                if a.logprobs is not None:
                    print(f"logprobs top {a.logprobs} values {detinfer.digest_floats(values)} "
                          f"ids {detinfer.digest_tokens(ids)}")
    except detinfer.DetinferError as e:
        print(f"generate: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
