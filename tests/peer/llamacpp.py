"""llama.cpp through llama-cpp-python's low-level API, for the peer comparisons.

One model and one context, one sequence: the logits of every position of a
token sequence in one batch (teacher forcing), greedy continuation, and the
model's own tokenizer. The high-level llama_cpp.Llama is not used: in 0.3.36
its eval with logits_all crashes in llama_decode on Gemma 3.

config "exact": KV cache in F32 and flash attention off, so llama.cpp's
attention rounds nothing to F16; "default": llama.cpp's own defaults (flash
attention auto, which is on for the CPU, and an F16 KV cache).
"""

import ctypes

import numpy as np

N_CTX = 512
# llama.cpp's extra weight buffers (repacked and AMX layouts of quantized
# weights) off: on this machine (Xeon with AMX) they crash llama_decode on any
# quantized file; the plain CPU buffers compute the same operations.
_EXTRA_BUFTS = False


class LlamaCpp:
    def __init__(self, path, threads, config="default", overrides=()):
        """overrides: (GGUF key, str | int | float) metadata overrides, applied
        in memory (the file is not changed); a key may be absent from the file."""
        import llama_cpp as L
        self.L = L
        L.llama_backend_init()
        self._quiet = L.llama_log_callback(lambda level, text, data: None)
        L.llama_log_set(self._quiet, ctypes.c_void_p())
        mp = L.llama_model_default_params()
        mp.use_extra_bufts = _EXTRA_BUFTS
        if overrides:
            self._kv = (L.llama_model_kv_override * (len(overrides) + 1))()  # zeroed end mark
            for o, (key, value) in zip(self._kv, overrides):
                o.key = key.encode()
                if isinstance(value, str):
                    o.tag = L.LLAMA_KV_OVERRIDE_TYPE_STR
                    o.value.val_str = value.encode()
                elif isinstance(value, float):
                    o.tag = L.LLAMA_KV_OVERRIDE_TYPE_FLOAT
                    o.value.val_f64 = value
                else:
                    o.tag = L.LLAMA_KV_OVERRIDE_TYPE_INT
                    o.value.val_i64 = value
            mp.kv_overrides = self._kv
        self.model = L.llama_model_load_from_file(path.encode(), mp)
        if not self.model:
            raise RuntimeError(f"llama.cpp could not load {path}")
        cp = L.llama_context_default_params()
        cp.n_ctx = cp.n_batch = cp.n_ubatch = N_CTX
        cp.n_threads = cp.n_threads_batch = threads
        if config == "exact":
            cp.flash_attn_type = L.LLAMA_FLASH_ATTN_TYPE_DISABLED
            cp.type_k = cp.type_v = L.GGML_TYPE_F32
        elif config != "default":
            raise ValueError(f"config must be exact or default, not {config!r}")
        self.ctx = L.llama_init_from_model(self.model, cp)
        if not self.ctx:
            L.llama_model_free(self.model)
            raise RuntimeError(f"llama.cpp could not make a context for {path}")
        self.vocab = L.llama_model_get_vocab(self.model)
        self.n_vocab = L.llama_vocab_n_tokens(self.vocab)

    def tokenize(self, text):
        """Token ids of text with the file's special-token rules (BOS as the
        file says), special tokens in the text not parsed."""
        data = text.encode()
        buf = (self.L.llama_token * (len(data) + 8))()
        n = self.L.llama_tokenize(self.vocab, data, len(data), buf, len(buf), True, False)
        if n < 0:
            raise RuntimeError(f"llama_tokenize returned {n}")
        return list(buf[:n])

    def _decode(self, tokens, start, all_logits):
        L = self.L
        n = len(tokens)
        batch = L.llama_batch_init(n, 0, 1)
        try:
            batch.n_tokens = n
            for i, t in enumerate(tokens):
                batch.token[i] = int(t)
                batch.pos[i] = start + i
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = 1 if all_logits or i == n - 1 else 0
            rc = L.llama_decode(self.ctx, batch)
            if rc != 0:
                raise RuntimeError(f"llama_decode returned {rc}")
            rows = range(n) if all_logits else [n - 1]
            return np.array([np.ctypeslib.as_array(L.llama_get_logits_ith(self.ctx, i),
                                                    shape=(self.n_vocab,)) for i in rows],
                            dtype=np.float64)
        finally:
            L.llama_batch_free(batch)

    def _clear(self):
        self.L.llama_memory_clear(self.L.llama_get_memory(self.ctx), True)

    def logits(self, tokens):
        """float64 copy of the logits of every position of tokens (one batch,
        from an empty cache)."""
        self._clear()
        return self._decode(tokens, 0, True)

    def greedy(self, prompt, n_new):
        """n_new tokens, each the argmax of the last logits (prompt in one
        batch, then one token per decode)."""
        self._clear()
        row = self._decode(prompt, 0, False)[0]
        out = []
        for i in range(n_new):
            out.append(int(np.argmax(row)))
            if i + 1 < n_new:
                row = self._decode([out[-1]], len(prompt) + i, False)[0]
        return out

    def close(self):
        self.L.llama_free(self.ctx)
        self.L.llama_model_free(self.model)
