#!/usr/bin/env python3
"""llama.cpp's own timings of prompt processing and generation on a GGUF file.

    python llamacpp_bench.py MODEL.gguf --threads 2 --pp 512 --tg 128

Run with the Python that has llama-cpp-python installed (bench/compare-llamacpp.sh
uses ~/.cache/detinfer/peer-venv, built by `make check-peer`). pp N evaluates N
prompt tokens in one batch; tg N evaluates N single tokens one after another, each
the greedy token of the previous logits. Tokens per second come from llama.cpp's
performance counters (llama_perf_context: t_p_eval_ms/n_p_eval for the prompt,
t_eval_ms/n_eval for generation, read after llama_synchronize, which is where
llama.cpp updates them), not from Python timers. Prints one JSON line.
"""

import argparse
import json

import llama_cpp
import numpy as np
from llama_cpp import Llama


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    args = ap.parse_args()

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
    print(json.dumps({"engine": "llama.cpp", "version": llama_cpp.__version__,
                      "threads": args.threads, "pp": args.pp, "tg": args.tg,
                      "pp_tps": round(pp_tps, 2), "tg_tps": round(tg_tps, 2),
                      "n_p_eval": n_p_eval, "n_eval": perf.n_eval}))


if __name__ == "__main__":
    main()
