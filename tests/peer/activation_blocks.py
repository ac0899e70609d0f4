#!/usr/bin/env python3
"""What the activation block of the integer profile costs in accuracy, before building it.

    python activation_blocks.py MODEL.gguf [MODEL.gguf ...] [--new 16] [--threads 2] [--jitter K]

A research tool for issue 23 (docs/PERFORMANCE-LOG.md "Activation blocks: accuracy
before speed"). The float64 forward pass of tests/tools/reference.py is run again with
the input of every product by a quantized weight replaced by its int8 codes times
their scale (the integer profile's activations, modelled in float64), for each
activation layout below. The weights stay the file's exact values, so the difference
from float64 is what the weights' quantization and the activations' give together,
as in the real profile. Printed beside them, from the same sequences: the library's
integer profile (whose error the layout "32" models, a check on the model) and
llama.cpp in tests/peer's default configuration. The metric is
tests/tools/logit_error.py's. With --jitter K, layout "32" runs K more times with
every activation first multiplied by 1 + u, |u| <= 2^-24 (the size of a float32
rounding): the spread of the max and the argmax count over those runs is what chance
alone moves them. Runs with the Python of `make peer-venv`.

Layouts (K types: the 256-weight super-block types; the rest are 32-weight types,
which always take "32"):
  32      one scale per 32 values, amax / 127 (today's definition, int_dot.h)
  256     K types: one scale per 256 values (llama.cpp's Q8_K)
  256/p2  K types: one scale a per 256 values and, per 32 values, a power of two
          2^-e (e in 0..7, the largest with amax_32 * 2^e <= amax_256), codes of
          x / (a * 2^-e): one float stage per 256 values, the per-32 refinement an
          integer shift
"""

import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import accuracy  # noqa: E402  (sets up the paths of detinfer, reference, logit_error)
from accuracy import detinfer, logit_error, reference, LlamaCpp  # noqa: E402

import gguf  # noqa: E402

Q = gguf.GGMLQuantizationType
K_TYPES = {Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K, Q.IQ4_XS}
FLOAT_TYPES = {Q.F32, Q.F16, Q.BF16}
LAYOUTS = ("32", "256", "256/p2")


JITTER = {"rng": None}  # --jitter: the activations times 1 + u, |u| <= 2^-24, before their codes


def codes_times_scale(x, block, p2):
    """x (rows, n) with each run of `block` values replaced by rint(x / s) * s,
    s = amax / 127 (with p2: per 32 values, s times the power of two of the
    layout above)."""
    if JITTER["rng"] is not None:
        x = x * (1 + JITTER["rng"].uniform(-2.0 ** -24, 2.0 ** -24, x.shape))
    rows, n = x.shape
    xb = x.reshape(rows, n // block, block)
    amax = np.abs(xb).max(axis=2, keepdims=True)
    s = np.where(amax > 0, amax / 127.0, 1.0)
    if p2:
        sub = xb.reshape(rows, n // block, block // 32, 32)
        a32 = np.abs(sub).max(axis=3, keepdims=True)
        big = amax[..., None]
        e = np.zeros_like(a32)
        for k in range(1, 8):  # the largest e <= 7 with a32 * 2^e <= amax
            e = np.where(a32 * 2.0 ** k <= big, k, e)
        s32 = s[..., None] * 2.0 ** -e
        return (np.rint(sub / s32) * s32).reshape(rows, n)
    return (np.rint(xb / s) * s).reshape(rows, n)


class QuantizedInput:
    """W.T whose product from the left quantizes the left operand first."""

    __array_ufunc__ = None  # numpy defers h @ this to __rmatmul__

    def __init__(self, w, ttype, layout):
        self.wt, self.ttype, self.layout = w.T, ttype, layout

    def __rmatmul__(self, h):
        if self.ttype in FLOAT_TYPES:
            return h @ self.wt
        if self.ttype in K_TYPES and self.layout != "32":
            return codes_times_scale(h, 256, self.layout == "256/p2") @ self.wt
        return codes_times_scale(h, 32, False) @ self.wt


class SimModel(reference.Model):
    """reference.Model whose 2-D matrices multiply quantized activations."""

    MATRICES = ("attn_q.", "attn_k.", "attn_v.", "attn_qkv.", "attn_output.", "ffn_gate.", "ffn_up.",
                "ffn_down.", "output.")

    def __init__(self, path, layout):
        super().__init__(path)
        self.layout = layout

    def weight(self, name):
        w = super().weight(name)
        if w.ndim == 2 and any(m in name for m in self.MATRICES):
            return _Transposable(w, self.tensors[name].tensor_type, self.layout)
        return w


class _Transposable:
    """Stands for a matrix in `h @ m.weight(name).T`."""

    def __init__(self, w, ttype, layout):
        self.w, self.ttype, self.layout = w, ttype, layout

    @property
    def T(self):
        return QuantizedInput(self.w, self.ttype, self.layout)


def forward(m, tokens):
    """reference.forward with the output matrix's product quantized too (the
    token embedding when the model ties them)."""
    if m.has("output.weight"):
        return reference.forward(m, tokens)  # its product goes through SimModel.weight
    # tied: the last product again, the embedding's type with quantized input; its
    # input is the output of the last RMSNorm (output_norm)
    plain, last = reference.rmsnorm, {}

    def rmsnorm_kept(x, w, eps):
        last["out"] = plain(x, w, eps)
        return last["out"]

    reference.rmsnorm = rmsnorm_kept
    try:
        reference.forward(m, tokens)
    finally:
        reference.rmsnorm = plain
    embd = reference.Model.weight(m, "token_embd.weight")
    ttype = m.tensors["token_embd.weight"].tensor_type
    logits = last["out"] @ QuantizedInput(embd, ttype, m.layout)
    return logits if m.final_softcap is None else reference.softcap(logits, m.final_softcap)


def measure(path, n_new, threads, jitter):
    model = detinfer.Model(path)
    exact_model = reference.Model(path)
    sims = {layout: SimModel(path, layout) for layout in LAYOUTS}
    portable = model.session(threads=threads, context_length=512, profile=1)
    integer = model.session(threads=threads, context_length=512, profile=3)
    llm = LlamaCpp(path, threads)
    parts = {name: [] for name in ["integer (library)"] + [f"model {x}" for x in LAYOUTS] + ["llama.cpp"]}
    for text in accuracy.PROMPTS:
        ids = accuracy.sequence(portable, model.tokenize(text), n_new)
        exact = reference.forward(exact_model, ids)
        parts["integer (library)"].append(logit_error.summary(accuracy.forced_logits(integer, ids), exact))
        for layout, sm in sims.items():
            parts[f"model {layout}"].append(logit_error.summary(forward(sm, ids), exact))
        parts["llama.cpp"].append(logit_error.summary(llm.logits(ids), exact))
        # the same layout "32" again with activations off by a float32 rounding's size:
        # how much of the max and the argmax count is chance
        for seed in range(jitter):
            JITTER["rng"] = np.random.default_rng(seed)
            parts.setdefault(f"model 32, jitter {seed + 1}", []).append(
                logit_error.summary(forward(sims["32"], ids), exact))
            JITTER["rng"] = None
    llm.close()
    types = sorted({t.tensor_type.name for t in exact_model.reader.tensors if t.tensor_type not in FLOAT_TYPES})
    return types, {name: logit_error.merge(p) for name, p in parts.items()}


def main(argv=None):
    ap = accuracy.parser(__doc__)
    ap.add_argument("--jitter", type=int, default=0, help="runs of layout 32 with jittered activations")
    a = ap.parse_args(argv)
    os.environ["DETINFER_LIB"] = os.path.abspath(a.lib)
    print(f"{len(accuracy.PROMPTS)} prompts + {a.new} greedy tokens each, teacher-forced; "
          "error against float64 (tests/tools/logit_error.py)\n")
    print("| model | quantized types | engine | mean | max | argmax |")
    print("| --- | --- | --- | ---: | ---: | ---: |")
    for path in a.models:
        types, r = measure(path, a.new, a.threads, a.jitter)
        for name, s in r.items():
            print(f"| {os.path.basename(path)} | {' '.join(types)} | {name} | {s['mean']:.3e} | {s['max']:.3e} | "
                  f"{s['argmax']}/{s['positions']} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
