#!/usr/bin/env python3
"""Independent float64 forward pass of a llama, qwen2, qwen3, gemma3, gemma2 or phi3 GGUF model.

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


ARCHS = ("llama", "qwen2", "qwen3", "gemma3", "gemma2", "phi3")
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
        # RoPE rotates the first n_rot values of each head, the rest pass through
        self.n_rot = int(self.field(a + "rope.dimension_count", self.hd))
        # llama pairs (2i, 2i+1); the others pair (i, i + n_rot/2) ("NEOX")
        self.neox = arch != "llama"
        # QK-norm: RMSNorm of every head of q and k before RoPE
        self.qk_norm = arch in ("qwen3", "gemma3")
        # Only the Gemmas read their sliding window (gemma2: 4096 when the
        # file has none, as llama.cpp); llama.cpp ignores
        # llama.attention.sliding_window and phi3.attention.sliding_window
        # (full attention on every layer).
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
        self.n_ctx_train = int(self.field(a + "context_length"))
        self.read_rope_scaling(a)

    def read_rope_scaling(self, a):
        """RoPE scaling as llama.cpp reads it (llama-model.cpp, llama-context.cpp):
        the type defaults to "linear"; freq_scale = 1/factor ("none": 1); YaRN
        (ext_factor 1) with betas 32 and 1 over the original context
        (rope.scaling.original_context_length, else context_length); the
        attention factor multiplies cos and sin; rope_freqs.weight (llama)
        divides the frequencies."""
        self.scaling_type = self.field(a + "rope.scaling.type", "linear")
        factor = float(self.field(a + "rope.scaling.factor", 0.0))
        if factor == 0.0:
            factor = float(self.field(a + "rope.scale_linear", 0.0))
        # llama.cpp forms 1/factor in float32 (rope_freq_scale_train)
        self.freq_scale = float(np.float32(1.0) / np.float32(factor)) if factor else 1.0
        if self.scaling_type == "none":
            self.freq_scale = 1.0
        if self.scaling_type not in ("none", "linear", "yarn", "longrope"):
            raise ValueError(f"rope scaling type {self.scaling_type!r} is not modelled here")
        self.attn_factor = float(self.field(a + "rope.scaling.attn_factor", 1.0))
        orig = int(self.field(a + "rope.scaling.original_context_length", 0))
        self.n_ctx_orig = orig or int(self.field(a + "context_length"))
        self.rope_freqs = self.weight("rope_freqs.weight") if self.has("rope_freqs.weight") else None
        # Phi-3 128k's LongRoPE: both tensors or neither
        self.longrope = None
        if self.has("rope_factors_long.weight") or self.has("rope_factors_short.weight"):
            self.longrope = {k: self.weight(f"rope_factors_{k}.weight") for k in ("long", "short")}

    def freq_factors(self, n_ctx_seq):
        """The per-frequency divisors, as llama.cpp's get_rope_factors picks
        them: rope_freqs.weight; else LongRoPE's long factors when the context
        per sequence exceeds the original context, its short ones otherwise."""
        if self.rope_freqs is not None:
            return self.rope_freqs
        if self.longrope is not None:
            return self.longrope["long" if n_ctx_seq > self.n_ctx_orig else "short"]
        return None

    def default_context(self):
        """libdetinfer's default session context: the training context capped at 4096."""
        return min(self.n_ctx_train, 4096)

    def local(self, i):
        """Gemma 3: layers with i % 6 < 5 use a sliding window and RoPE base 1e4.
        Gemma 2: even layers use the window, with the model's RoPE base."""
        return (self.arch == "gemma3" and i % 6 < 5) or (self.arch == "gemma2" and i % 2 == 0)

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


def rope_angles(m, base, freq_scale, n_rot, n_ctx_seq):
    """Per pair i of the n_rot rotated values of a head: the angle per position and the amplitude of
    cos and sin, by ggml's rope (ggml_rope_cache_init, rope_yarn,
    ggml_rope_yarn_corr_dims) in float64:
      theta_extrap = base^(-2i/n_rot) / factors[i]   (m.freq_factors(n_ctx_seq))
      theta_interp = freq_scale * theta_extrap
      YaRN: theta = theta_interp (1 - r_i) + theta_extrap r_i, with the ramp
            r_i = 1 - clamp((i - low) / max(0.001, high - low), 0, 1) between the
            correction dimensions low = max(0, floor(d(32))), high =
            min(n_rot - 1, ceil(d(1))), d(beta) = n_rot ln(n_ctx_orig / (2 pi beta)) / (2 ln base);
            amplitude attn_factor (1 + 0.1 ln(1 / freq_scale))
      else: theta = theta_interp, amplitude attn_factor."""
    i = np.arange(n_rot // 2, dtype=np.float64)
    theta_extrap = base ** (-2.0 * i / n_rot)
    factors = m.freq_factors(n_ctx_seq)
    if factors is not None:
        theta_extrap = theta_extrap / factors
    theta_interp = freq_scale * theta_extrap
    if m.scaling_type != "yarn":
        return theta_interp, m.attn_factor

    def corr_dim(beta):
        return n_rot * np.log(m.n_ctx_orig / (beta * 2.0 * np.pi)) / (2.0 * np.log(base))

    low = max(0.0, np.floor(corr_dim(32.0)))
    high = min(n_rot - 1.0, np.ceil(corr_dim(1.0)))
    r = 1.0 - np.clip((i - low) / max(0.001, high - low), 0.0, 1.0)
    theta = theta_interp * (1.0 - r) + theta_extrap * r
    return theta, m.attn_factor * (1.0 + 0.1 * np.log(1.0 / freq_scale))


def rope(x, positions, freq, amplitude, neox, n_rot):
    """Rotate pairs of the first n_rot values of every head of x (n, heads,
    hd): (2i, 2i+1), or (i, i + n_rot/2) when neox, by the angle
    pos * freq[i], with cos and sin multiplied by amplitude; values n_rot.. of
    each head stay as they are."""
    theta = positions[:, None].astype(np.float64) * freq
    cos = amplitude * np.cos(theta)[:, None, :]
    sin = amplitude * np.sin(theta)[:, None, :]
    first = np.s_[..., : n_rot // 2] if neox else np.s_[..., 0:n_rot:2]
    second = np.s_[..., n_rot // 2 : n_rot] if neox else np.s_[..., 1:n_rot:2]
    a, b = x[first], x[second]
    out = x.copy()
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


def layer(m, i, x, positions, n_ctx_seq):
    """One transformer block on the residual stream x of shape (n, n_embd)."""
    p = f"blk.{i}."
    n = x.shape[0]
    hd = m.hd
    gemma = m.arch in GEMMAS

    def proj(h, name):
        y = h @ m.weight(p + name + ".weight").T
        return y + m.weight(p + name + ".bias") if m.has(p + name + ".bias") else y

    h = rmsnorm(x, m.weight(p + "attn_norm.weight"), m.eps)
    if m.has(p + "attn_qkv.weight"):
        # phi3: the rows of Q, then K, then V in one matrix
        qkv = h @ m.weight(p + "attn_qkv.weight").T
        nq, nkv = m.n_head * hd, m.n_head_kv * hd
        q, k, v = qkv[:, :nq], qkv[:, nq:nq + nkv], qkv[:, nq + nkv:]
        if v.shape[1] != nkv:
            raise ValueError(f"{p}attn_qkv.weight has {qkv.shape[1]} rows, expected {nq + 2 * nkv}")
    else:
        q, k, v = proj(h, "attn_q"), proj(h, "attn_k"), proj(h, "attn_v")
    q = q.reshape(n, m.n_head, hd)
    k = k.reshape(n, m.n_head_kv, hd)
    v = v.reshape(n, m.n_head_kv, hd)
    if m.qk_norm:
        q = rmsnorm(q, m.weight(p + "attn_q_norm.weight"), m.eps)
        k = rmsnorm(k, m.weight(p + "attn_k_norm.weight"), m.eps)
    # Gemma 3's local layers: base 1e4 and no scaling factor (llama.cpp's
    # rope_freq_scale_train_swa = 1); the rest of the scaling applies to both.
    # Gemma 2's local layers use the model's RoPE.
    if m.arch == "gemma3" and m.local(i):
        freq, amplitude = rope_angles(m, 10000.0, 1.0, m.n_rot, n_ctx_seq)
    else:
        freq, amplitude = rope_angles(m, m.rope_base, m.freq_scale, m.n_rot, n_ctx_seq)
    q = rope(q, positions, freq, amplitude, m.neox, m.n_rot)
    k = rope(k, positions, freq, amplitude, m.neox, m.n_rot)
    att = attention(q, k, v, m.n_head, m.n_head_kv, m.window if m.local(i) else 0,
                    m.attn_scale, m.attn_softcap)
    out = att @ m.weight(p + "attn_output.weight").T
    if gemma:
        out = rmsnorm(out, m.weight(p + "post_attention_norm.weight"), m.eps)
    x = x + out

    h = rmsnorm(x, m.weight(p + "ffn_norm.weight"), m.eps)
    if m.arch == "phi3":
        # one ffn_up of 2 n_ff rows: llama.cpp's SwiGLU takes silu of the
        # first half (the gate) times the second
        both = h @ m.weight(p + "ffn_up.weight").T
        gate, up = np.split(both, 2, axis=-1)
    else:
        gate = h @ m.weight(p + "ffn_gate.weight").T
        up = h @ m.weight(p + "ffn_up.weight").T
    act = gelu_tanh(gate) if gemma else silu(gate)
    out = (act * up) @ m.weight(p + "ffn_down.weight").T
    if gemma:
        out = rmsnorm(out, m.weight(p + "post_ffw_norm.weight"), m.eps)
    return x + out


def forward(m, tokens, n_ctx_seq=None):
    """float64 logits of shape (len(tokens), n_vocab) in a session whose
    sequences hold n_ctx_seq positions (default: libdetinfer's default)."""
    n_ctx_seq = n_ctx_seq or m.default_context()
    tokens = np.asarray(tokens, dtype=np.int64)
    if tokens.size == 0 or tokens.min() < 0 or tokens.max() >= m.n_vocab:
        raise ValueError(f"tokens must be non-empty and in [0, {m.n_vocab})")
    positions = np.arange(tokens.size)
    embd = m.weight("token_embd.weight")
    x = embd[tokens]
    if m.arch in GEMMAS:
        x = x * np.sqrt(m.n_embd)
    for i in range(m.n_layer):
        x = layer(m, i, x, positions, n_ctx_seq)
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


def make_reference(model_path, tokens, out_path, n_ctx_seq=None):
    m = Model(model_path)
    logits = forward(m, tokens, n_ctx_seq)
    write_ref(out_path, tokens, logits)
    return logits


def parse_tokens(text):
    return [int(t) for t in text.replace(",", " ").split()]


def main(argv=None):
    ap = argparse.ArgumentParser(description="float64 reference logits of a llama, qwen2, qwen3, gemma3, gemma2 or phi3 GGUF model")
    ap.add_argument("model")
    ap.add_argument("--tokens", required=True, help="comma-separated token ids")
    ap.add_argument("--out", required=True)
    ap.add_argument("--ctx", type=int, default=0,
                    help="context length per sequence (LongRoPE's choice); default the training context capped at 4096")
    a = ap.parse_args(argv)
    make_reference(a.model, parse_tokens(a.tokens), a.out, a.ctx or None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
