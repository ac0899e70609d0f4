#!/usr/bin/env python3
"""llama.cpp's own timings of prompt processing, generation and batched decode on a GGUF file.

    python llamacpp_bench.py MODEL.gguf --threads 2 --pp 512 --tg 128
        [--batch 16 --batch-tokens 64] [--extra-bufts auto|on|off]

Run with the Python that has llama-cpp-python installed (bench/compare-llamacpp.sh
uses ~/.cache/detinfer/peer-venv, built by `make peer-venv`); llama.cpp is driven
through its C API (llama_decode of llama_batch), one model load per process.

pp N evaluates N prompt tokens (BOS, then fixed pseudo-random ids) in one
llama_decode; tg N evaluates N single tokens one after another, each the greedy
token of the previous logits. Their tokens per second come from llama.cpp's
performance counters (llama_perf_context: t_p_eval_ms/n_p_eval for the prompt,
t_eval_ms/n_eval for generation, read after llama_synchronize, which is where
llama.cpp updates them), not from Python timers. --pp 0 or --tg 0 skips both.

--batch B (0: none) adds batched decode, measured the way `detinfer bench
--batch` measures it: B sequences in one context (n_seq_max B, a KV cache per
sequence: kv_unified off, llama.cpp's advice for sequences that share no
prefix), each given its own 16-token prompt in one llama_decode (untimed),
then --batch-tokens steps that each decode one llama_batch of B tokens, one
per sequence (seq_id q, its next position, logits on), each the greedy token
of that sequence's last logits. The figure is B x steps over the wall time of
the steps (Python's perf_counter; greedy selection included, as on
libdetinfer's side). The prompt tokens are libdetinfer's bench tokens,
(k * 7919 + 13) mod n_vocab for token k = 16 q + i of sequence q.

--extra-bufts: llama.cpp's extra weight buffer types (llama_model_params
use_extra_bufts: the AMX buffer and the CPU repacking of Q4_0/Q4_K/IQ4_NL...).
auto (the default) turns them off only on a CPU with AMX, where ggml's AMX
matrix product segfaults on Q4_K_M files (ggml-org/llama.cpp#20824, also
seen here on a Sapphire Rapids VM); the JSON says which was used.

Prints one JSON line.
"""

import argparse
import json
import time

import llama_cpp
import numpy as np

BATCH_PROMPT = 16  # prompt tokens of each sequence (as in detinfer bench)


def cpu_has_amx():
    try:
        with open("/proc/cpuinfo") as f:
            return any(ln.startswith("flags") and " amx_tile" in ln for ln in f)
    except OSError:
        return False


class Engine:
    """One loaded model; contexts are made per measurement."""

    def __init__(self, path, threads, extra_bufts):
        llama_cpp.llama_backend_init()
        mp = llama_cpp.llama_model_default_params()
        mp.use_extra_bufts = extra_bufts
        self.model = llama_cpp.llama_model_load_from_file(path.encode(), mp)
        if not self.model:
            raise SystemExit(f"llama.cpp cannot load {path}")
        self.vocab = llama_cpp.llama_model_get_vocab(self.model)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self.vocab)
        self.threads = threads
        self.ctx = None
        self.batch = None

    def open(self, n_ctx, n_batch, n_seq):
        self.close()
        cp = llama_cpp.llama_context_default_params()
        cp.n_seq_max = n_seq
        cp.n_ctx = n_ctx
        cp.n_batch = cp.n_ubatch = n_batch
        cp.n_threads = cp.n_threads_batch = self.threads
        cp.kv_unified = False
        cp.no_perf = False
        self.ctx = llama_cpp.llama_init_from_model(self.model, cp)
        if not self.ctx:
            raise SystemExit("llama.cpp cannot create the context")
        self.batch = llama_cpp.llama_batch_init(n_batch, 0, 1)

    def close(self):
        if self.batch is not None:
            llama_cpp.llama_batch_free(self.batch)
            self.batch = None
        if self.ctx:
            llama_cpp.llama_free(self.ctx)
            self.ctx = None

    def decode(self, entries):
        """entries: (token, pos, seq, wants_logits)"""
        b = self.batch
        b.n_tokens = len(entries)
        for i, (tok, pos, seq, want) in enumerate(entries):
            b.token[i] = tok
            b.pos[i] = pos
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = seq
            b.logits[i] = want
        rc = llama_cpp.llama_decode(self.ctx, b)
        if rc != 0:
            raise SystemExit(f"llama_decode returned {rc}")

    def greedy(self, i):
        """The greedy token of output i (a batch index) of the last decode."""
        row = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(self.ctx, i), shape=(self.n_vocab,))
        return int(np.argmax(row))

    def perf(self):
        llama_cpp.llama_synchronize(self.ctx)  # the counters are updated when the work is collected
        return llama_cpp.llama_perf_context(self.ctx)


def pp_tg(e, pp, tg):
    e.open(pp + tg + 8, max(pp, 8), 1)
    # a fixed pseudo-prompt of ordinary token ids (the same for every run)
    rng = np.random.default_rng(1234)
    prompt = [llama_cpp.llama_vocab_bos(e.vocab)] + [int(t) for t in rng.integers(1000, 20000, pp - 1)]
    llama_cpp.llama_perf_context_reset(e.ctx)
    e.decode([(t, i, 0, i == pp - 1) for i, t in enumerate(prompt)])
    perf = e.perf()
    pp_tps = perf.n_p_eval / (perf.t_p_eval_ms / 1000.0) if perf.t_p_eval_ms > 0 else 0.0
    n_p_eval = perf.n_p_eval

    llama_cpp.llama_perf_context_reset(e.ctx)
    last = pp - 1
    for k in range(tg):
        e.decode([(e.greedy(last), pp + k, 0, True)])
        last = 0
    perf = e.perf()
    tg_tps = perf.n_eval / (perf.t_eval_ms / 1000.0) if perf.t_eval_ms > 0 else 0.0
    return {"pp": pp, "tg": tg, "pp_tps": round(pp_tps, 2), "tg_tps": round(tg_tps, 2),
            "n_p_eval": n_p_eval, "n_eval": perf.n_eval}


def batched_decode(e, n_seq, n_gen):
    """Aggregate tokens/s of n_seq sequences decoding n_gen tokens each, one
    llama_decode of n_seq tokens per step."""
    e.open(n_seq * (BATCH_PROMPT + n_gen + 16), n_seq * BATCH_PROMPT, n_seq)  # n_ctx split per sequence
    e.decode([((k * 7919 + 13) % e.n_vocab, i, q, i == BATCH_PROMPT - 1)
              for q in range(n_seq) for i in range(BATCH_PROMPT)
              for k in [q * BATCH_PROMPT + i]])
    rows = [BATCH_PROMPT * q + BATCH_PROMPT - 1 for q in range(n_seq)]  # batch index of each sequence's logits
    t0 = time.perf_counter()
    for step in range(n_gen):
        nxt = [e.greedy(r) for r in rows]
        e.decode([(nxt[q], BATCH_PROMPT + step, q, True) for q in range(n_seq)])
        rows = list(range(n_seq))
    llama_cpp.llama_synchronize(e.ctx)
    return n_seq * n_gen / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--batch-tokens", type=int, default=64)
    ap.add_argument("--extra-bufts", choices=("auto", "on", "off"), default="auto")
    args = ap.parse_args()
    extra = args.extra_bufts == "on" or (args.extra_bufts == "auto" and not cpu_has_amx())
    e = Engine(args.model, args.threads, extra)
    result = {"engine": "llama.cpp", "version": llama_cpp.__version__, "threads": args.threads,
              "extra_bufts": extra}
    if args.pp > 0 and args.tg > 0:
        result.update(pp_tg(e, args.pp, args.tg))
    if args.batch > 0:
        result.update({"batch": args.batch, "batch_tokens": args.batch_tokens,
                       "bd_tps": round(batched_decode(e, args.batch, args.batch_tokens), 2)})
    e.close()
    llama_cpp.llama_model_free(e.model)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
