#!/usr/bin/env python3
"""llama.cpp's own timings of prompt processing and generation on a GGUF file.

    python llamacpp_bench.py MODEL.gguf --threads 2 --pp 512 --tg 128 [--batch 16 --batch-tokens 64]

Run with the Python that has llama-cpp-python installed (bench/compare-llamacpp.sh
uses ~/.cache/detinfer/peer-venv, built by `make check-peer`). pp N evaluates N
prompt tokens in one batch; tg N evaluates N single tokens one after another, each
the greedy token of the previous logits. Tokens per second come from llama.cpp's
performance counters (llama_perf_context: t_p_eval_ms/n_p_eval for the prompt,
t_eval_ms/n_eval for generation, read after llama_synchronize, which is where
llama.cpp updates them), not from Python timers.

--batch B (0: none) adds batched decode, measured the way `detinfer bench
--batch` measures it: B sequences in one context (n_seq_max B, a KV cache
per sequence: kv_unified off, llama.cpp's advice for sequences that share
no prefix), each given its own 16-token prompt in one llama_decode
(untimed), then --batch-tokens steps that each decode one llama_batch of B
tokens, one per sequence (seq_id q, its next position, logits on), each the
greedy token of that sequence's last logits. The figure is B x steps over
the wall time of the steps (Python's perf_counter; greedy selection
included, as on libdetinfer's side). The prompt tokens are libdetinfer's
bench tokens, (k * 7919 + 13) mod n_vocab for token k = 16 q + i of
sequence q. Prints one JSON line.
"""

import argparse
import json
import time

import llama_cpp
import numpy as np
from llama_cpp import Llama


BATCH_PROMPT = 16  # prompt tokens of each sequence (as in detinfer bench)


def batched_decode(path, threads, n_seq, n_gen):
    """Aggregate tokens/s of n_seq sequences decoding n_gen tokens each, one
    llama_decode of n_seq tokens per step, through the low-level API."""
    mp = llama_cpp.llama_model_default_params()
    model = llama_cpp.llama_model_load_from_file(path.encode(), mp)
    if not model:
        raise SystemExit(f"llama.cpp cannot load {path}")
    cp = llama_cpp.llama_context_default_params()
    cp.n_seq_max = n_seq
    cp.n_ctx = n_seq * (BATCH_PROMPT + n_gen + 16)  # split evenly between the sequences
    cp.n_batch = cp.n_ubatch = n_seq * BATCH_PROMPT
    cp.n_threads = cp.n_threads_batch = threads
    cp.kv_unified = False
    ctx = llama_cpp.llama_init_from_model(model, cp)
    if not ctx:
        raise SystemExit("llama.cpp cannot create the context")
    n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model))
    batch = llama_cpp.llama_batch_init(n_seq * BATCH_PROMPT, 0, 1)

    def decode(entries):
        """entries: (token, pos, seq, wants_logits)"""
        batch.n_tokens = len(entries)
        for i, (tok, pos, seq, want) in enumerate(entries):
            batch.token[i] = tok
            batch.pos[i] = pos
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = seq
            batch.logits[i] = want
        rc = llama_cpp.llama_decode(ctx, batch)
        if rc != 0:
            raise SystemExit(f"llama_decode returned {rc}")

    decode([((k * 7919 + 13) % n_vocab, i, q, i == BATCH_PROMPT - 1)
            for q in range(n_seq) for i in range(BATCH_PROMPT)
            for k in [q * BATCH_PROMPT + i]])
    # logits of the prompt step: output j belongs to sequence j (one per sequence, in order)
    rows = [BATCH_PROMPT * q + BATCH_PROMPT - 1 for q in range(n_seq)]
    t0 = time.perf_counter()
    for step in range(n_gen):
        nxt = [int(np.argmax(np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, r), shape=(n_vocab,))))
               for r in rows]
        decode([(nxt[q], BATCH_PROMPT + step, q, True) for q in range(n_seq)])
        rows = list(range(n_seq))
    llama_cpp.llama_synchronize(ctx)
    dt = time.perf_counter() - t0
    llama_cpp.llama_batch_free(batch)
    llama_cpp.llama_free(ctx)
    llama_cpp.llama_model_free(model)
    return n_seq * n_gen / dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--batch-tokens", type=int, default=64)
    args = ap.parse_args()
    result = {"engine": "llama.cpp", "version": llama_cpp.__version__, "threads": args.threads}
    if args.pp > 0 and args.tg > 0:
        result.update(pp_tg(args))
    if args.batch > 0:
        result.update({"batch": args.batch, "batch_tokens": args.batch_tokens,
                       "bd_tps": round(batched_decode(args.model, args.threads, args.batch, args.batch_tokens), 2)})
    print(json.dumps(result))


def pp_tg(args):

    llm = Llama(model_path=args.model, n_ctx=args.pp + args.tg + 8, n_batch=max(args.pp, 8),
                n_ubatch=max(args.pp, 8), n_threads=args.threads, n_threads_batch=args.threads,
                no_perf=False, verbose=False)
    # a fixed pseudo-prompt of ordinary token ids (the same for every run)
    rng = np.random.default_rng(1234)
    prompt = [llm.token_bos()] + [int(t) for t in rng.integers(1000, 20000, args.pp - 1)]

    llm.reset()
    llama_cpp.llama_perf_context_reset(llm.ctx)
    llm.eval(prompt)
    llama_cpp.llama_synchronize(llm.ctx)  # the counters are updated when the work is collected
    perf = llama_cpp.llama_perf_context(llm.ctx)
    pp_tps = perf.n_p_eval / (perf.t_p_eval_ms / 1000.0) if perf.t_p_eval_ms > 0 else 0.0
    n_p_eval = perf.n_p_eval

    n_vocab = llm.n_vocab()
    llama_cpp.llama_perf_context_reset(llm.ctx)
    for _ in range(args.tg):
        # the logits of the last evaluated token, read straight from the context
        last = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(n_vocab,))
        llm.eval([int(np.argmax(last))])
    llama_cpp.llama_synchronize(llm.ctx)
    perf = llama_cpp.llama_perf_context(llm.ctx)
    tg_tps = perf.n_eval / (perf.t_eval_ms / 1000.0) if perf.t_eval_ms > 0 else 0.0
    return {"pp": args.pp, "tg": args.tg, "pp_tps": round(pp_tps, 2), "tg_tps": round(tg_tps, 2),
            "n_p_eval": n_p_eval, "n_eval": perf.n_eval}


if __name__ == "__main__":
    main()
