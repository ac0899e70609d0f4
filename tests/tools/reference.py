#!/usr/bin/env python3
"""Independent float64 forward pass of a llama, qwen2, qwen3, gemma3 or gemma2 GGUF model.

Usage:
  reference.py MODEL.gguf --tokens 1,5,9,... --out REF.bin

Reads the file only through gguf.GGUFReader and gguf.quants.dequantize, so it
shares no code with libdetinfer's parser or kernels. Computes, in float64,
the logits of every position 0..n-1 of the token sequence (causal).

REF.bin, little-endian:
  8 bytes  magic b"DIREF001"
  uint32   n_tokens
  uint32   n_vocab
  int32    tokens[n_tokens]
  float64  logits[n_tokens][n_vocab]
"""

import argparse
import struct
import sys

import numpy as np
import gguf

MAGIC = b"DIREF001"


ARCHS = ("llama", "qwen2", "qwen3", "gemma3", "gemma2")
GEMMAS = ("gemma3", "gemma2")


class Model:
    """Hyperparameters and lazily dequantized float64 weights of one file."""

    def __init__(self, path):
        self.reader = gguf.GGUFReader(path)
        arch = self.field("general.architecture")
        if arch not in ARCHS:
            raise ValueError(f"{path}: architecture {arch!r}, expected one of {ARCHS}")
        self.arch = arch
        a = arch + "."
        self.n_embd = int(self.field(a + "embedding_length"))
        self.n_layer = int(self.field(a + "block_count"))
        self.n_head = int(self.field(a + "attention.head_count"))
        self.n_head_kv = int(self.field(a + "attention.head_count_kv"))
        self.hd = int(self.field(a + "attention.key_length", self.n_embd // self.n_head))
        self.eps = float(self.field(a + "attention.layer_norm_rms_epsilon"))
        default_base = 1e6 if arch == "gemma3" else 1e4
        self.rope_base = float(self.field(a + "rope.freq_base", default_base))
        # llama pairs (2i, 2i+1); qwen2, qwen3 and gemma3 pair (i, i + hd/2) ("NEOX")
        self.neox = arch != "llama"
        # QK-norm: RMSNorm of every head of q and k before RoPE
        self.qk_norm = arch in ("qwen3", "gemma3")
        # Only the Gemmas read their sliding window (gemma2: 4096 when the
        # file has none, as llama.cpp); llama.cpp ignores
        # llama.attention.sliding_window (full attention on every layer).
        self.window = {"gemma3": int(self.field(a + "attention.sliding_window", 0)),
                       "gemma2": int(self.field(a + "attention.sliding_window", 4096))}.get(arch, 0)
        # Scores are q.k / sqrt(hd), except Gemma's 27B models (62 layers of
        # gemma3, 46 of gemma2): q.k / sqrt(n_embd / n_head).
        big = {"gemma3": 62, "gemma2": 46}.get(arch)
        self.attn_scale = 1.0 / np.sqrt(self.n_embd // self.n_head if self.n_layer == big else self.hd)
        # Gemma 2 soft-caps the scores and the logits, c * tanh(x / c), with
        # llama.cpp's defaults 50 and 30 when the file has no value.
        self.attn_softcap = float(self.field(a + "attn_logit_softcapping", 50.0)) if arch == "gemma2" else None
        self.final_softcap = float(self.field(a + "final_logit_softcapping", 30.0)) if arch == "gemma2" else None
        self.tensors = {t.name: t for t in self.reader.tensors}
        self.n_vocab = int(self.tensors["token_embd.weight"].shape[1])

    def local(self, i):
        """Gemma 3: layers with i % 6 < 5 use a sliding window and RoPE base 1e4.
        Gemma 2: even layers use the window, with the model's RoPE base."""
        return (self.arch == "gemma3" and i % 6 < 5) or (self.arch == "gemma2" and i % 2 == 0)

    def layer_rope_base(self, i):
        return 10000.0 if self.arch == "gemma3" and self.local(i) else self.rope_base

    def field(self, key, default=None):
        f = self.reader.fields.get(key)
        if f is None:
            if default is not None:
                return default
            raise KeyError(f"missing metadata key {key}")
        return f.contents()

    def has(self, name):
        return name in self.tensors

    def weight(self, name):
        """float64 array; 2-D tensors come back as (rows, cols) = (ne1, ne0)."""
        t = self.tensors[name]
        w = gguf.quants.dequantize(t.data, t.tensor_type)
        expected = tuple(int(d) for d in reversed(t.shape))
        if w.shape != expected:
            raise ValueError(f"{name}: dequantized shape {w.shape}, dims {expected}")
        return w.astype(np.float64)


def rmsnorm(x, w, eps):
    """Row-wise x / sqrt(mean(x^2) + eps) * w."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(x, positions, base, neox):
    """Rotate pairs of every head of x (n, heads, hd): (2i, 2i+1), or
    (i, i + hd/2) when neox, by the angle pos * base^(-2i/hd)."""
    hd = x.shape[-1]
    i = np.arange(hd // 2, dtype=np.float64)
    theta = positions[:, None].astype(np.float64) * base ** (-2.0 * i / hd)
    cos = np.cos(theta)[:, None, :]
    sin = np.sin(theta)[:, None, :]
    first = np.s_[..., : hd // 2] if neox else np.s_[..., 0::2]
    second = np.s_[..., hd // 2 :] if neox else np.s_[..., 1::2]
    a, b = x[first], x[second]
    out = np.empty_like(x)
    out[first] = a * cos - b * sin
    out[second] = a * sin + b * cos
    return out


def softcap(x, cap):
    """Soft-capping: cap * tanh(x / cap)."""
    return cap * np.tanh(x / cap)


def attention(q, k, v, n_head, n_head_kv, window, scale, cap=None):
    """Causal grouped-query attention. q: (n, n_head, hd); k, v: (n, n_head_kv,
    hd). Scores q.k * scale, soft-capped when cap is given, then masked: a
    window > 0 keeps keys j with i - j < window."""
    n, _, hd = q.shape
    group = n_head // n_head_kv
    # Query head h reads kv head h // group.
    k = np.repeat(k, group, axis=1)
    v = np.repeat(v, group, axis=1)
    scores = np.einsum("qhd,khd->hqk", q, k) * scale
    if cap is not None:
        scores = softcap(scores, cap)
    i, j = np.indices((n, n))
    masked = (j > i) | ((i - j >= window) if window > 0 else False)
    scores[:, masked] = -np.inf
    scores -= scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("hqk,khd->qhd", p, v).reshape(n, n_head * hd)


def silu(z):
    return z / (1.0 + np.exp(-z))


def gelu_tanh(z):
    return 0.5 * z * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (z + 0.044715 * z ** 3)))


def layer(m, i, x, positions):
    """One transformer block on the residual stream x of shape (n, n_embd)."""
    p = f"blk.{i}."
    n = x.shape[0]
    hd = m.hd
    gemma = m.arch in GEMMAS

    def proj(h, name):
        y = h @ m.weight(p + name + ".weight").T
        return y + m.weight(p + name + ".bias") if m.has(p + name + ".bias") else y

    h = rmsnorm(x, m.weight(p + "attn_norm.weight"), m.eps)
    q = proj(h, "attn_q").reshape(n, m.n_head, hd)
    k = proj(h, "attn_k").reshape(n, m.n_head_kv, hd)
    v = proj(h, "attn_v").reshape(n, m.n_head_kv, hd)
    if m.qk_norm:
        q = rmsnorm(q, m.weight(p + "attn_q_norm.weight"), m.eps)
        k = rmsnorm(k, m.weight(p + "attn_k_norm.weight"), m.eps)
    base = m.layer_rope_base(i)
    q = rope(q, positions, base, m.neox)
    k = rope(k, positions, base, m.neox)
    att = attention(q, k, v, m.n_head, m.n_head_kv, m.window if m.local(i) else 0,
                    m.attn_scale, m.attn_softcap)
    out = att @ m.weight(p + "attn_output.weight").T
    if gemma:
        out = rmsnorm(out, m.weight(p + "post_attention_norm.weight"), m.eps)
    x = x + out

    h = rmsnorm(x, m.weight(p + "ffn_norm.weight"), m.eps)
    gate = h @ m.weight(p + "ffn_gate.weight").T
    up = h @ m.weight(p + "ffn_up.weight").T
    act = gelu_tanh(gate) if gemma else silu(gate)
    out = (act * up) @ m.weight(p + "ffn_down.weight").T
    if gemma:
        out = rmsnorm(out, m.weight(p + "post_ffw_norm.weight"), m.eps)
    return x + out


def forward(m, tokens):
    """float64 logits of shape (len(tokens), n_vocab)."""
    tokens = np.asarray(tokens, dtype=np.int64)
    if tokens.size == 0 or tokens.min() < 0 or tokens.max() >= m.n_vocab:
        raise ValueError(f"tokens must be non-empty and in [0, {m.n_vocab})")
    positions = np.arange(tokens.size)
    embd = m.weight("token_embd.weight")
    x = embd[tokens]
    if m.arch in GEMMAS:
        x = x * np.sqrt(m.n_embd)
    for i in range(m.n_layer):
        x = layer(m, i, x, positions)
    x = rmsnorm(x, m.weight("output_norm.weight"), m.eps)
    w_out = m.weight("output.weight") if m.has("output.weight") else embd
    logits = x @ w_out.T
    return logits if m.final_softcap is None else softcap(logits, m.final_softcap)


def write_ref(path, tokens, logits):
    tokens = np.asarray(tokens, dtype="<i4")
    logits = np.ascontiguousarray(logits, dtype="<f8")
    with open(path, "wb") as f:
        f.write(MAGIC)
        f.write(struct.pack("<II", logits.shape[0], logits.shape[1]))
        f.write(tokens.tobytes())
        f.write(logits.tobytes())


def read_ref(path):
    """Returns (tokens int32 array, logits float64 array of (n_tokens, n_vocab))."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != MAGIC:
        raise ValueError(f"{path}: bad magic")
    n_tokens, n_vocab = struct.unpack_from("<II", data, 8)
    tokens = np.frombuffer(data, dtype="<i4", count=n_tokens, offset=16)
    logits = np.frombuffer(data, dtype="<f8", count=n_tokens * n_vocab,
                           offset=16 + 4 * n_tokens)
    return tokens, logits.reshape(n_tokens, n_vocab)


def make_reference(model_path, tokens, out_path):
    m = Model(model_path)
    logits = forward(m, tokens)
    write_ref(out_path, tokens, logits)
    return logits


def parse_tokens(text):
    return [int(t) for t in text.replace(",", " ").split()]


def main(argv=None):
    ap = argparse.ArgumentParser(description="float64 reference logits of a llama, qwen2, qwen3, gemma3 or gemma2 GGUF model")
    ap.add_argument("model")
    ap.add_argument("--tokens", required=True, help="comma-separated token ids")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    make_reference(a.model, parse_tokens(a.tokens), a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
