#!/usr/bin/env python3
"""libdetinfer against llama.cpp on the generated F32 test models, teacher-forced.

    compare_generated.py MODELS_DIR [--lib build/libdetinfer.so.1] [--threads 2] [--json OUT] [--measure]

Runs with the Python that has llama-cpp-python installed (make check-peer; no
llama.cpp code enters this repository). For every model named in
MODELS_DIR/models.txt whose tensors are all F32, it feeds the model's prompt
(the token ids in NAME.ref) to both engines in one batch, takes the logits of
every position, and compares them with each other and with the float64
reference (NAME.ref, tests/tools/reference.py). Which models take part
follows from the file alone (general.architecture and the tensor types), so
a new generated model joins by its name in models.txt once ARCHS lists its
architecture. llama.cpp runs in two configurations (CONFIGS, llamacpp.py).

Errors are normwise relative per position, max_j |a_j - b_j| / max_j |ref_j|,
the measure of the float64 checks in make check. The checks, each a failure
(exit 1) when broken:
  - libdetinfer against float64: at most OURS_BOUND;
  - llama.cpp against float64 on TOLERANCE_MODELS: at most its bound
    LLAMACPP_OWN_ERROR[config, activation] (else the llama.cpp in the venv is
    not the one the tolerance was derived from: re-derive it with --measure);
  - libdetinfer against llama.cpp: at most the tolerance, K times that bound
    (docs/MODELS.md derives it);
  - argmax: the same token wherever the float64 top-2 gap is wider than
    2 * tolerance * max|ref| (where llama.cpp's error could not swap them);
  - a negative control: llama.cpp ("exact") with the RoPE base of the first
    model moved by NEGATIVE_ROPE_FACTOR must differ from libdetinfer by more
    than the tolerance, so the check can catch a wrong position encoding.
A model of an architecture llama.cpp lacks (ARCHS) is listed, not compared;
one of an architecture missing from ARCHS is an error.
--measure prints the figures and skips the pass/fail checks.
"""

import argparse
import json
import os
import sys

import numpy as np
import gguf

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bindings", "python", "src"))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True
import detinfer  # noqa: E402  (the ctypes binding of the public API)
import reference  # noqa: E402  (the float64 reference's file format)
from llamacpp import LlamaCpp  # noqa: E402

# general.architecture -> (llama.cpp in llama-cpp-python 0.3.36 runs it, the
# activation of its feed-forward, which decides llama.cpp's own error: GELU
# comes from an F16 table there, SiLU is computed in float32).
ARCHS = {
    "llama": (True, "silu"),
    "qwen2": (True, "silu"),
    "qwen3": (True, "silu"),
    "gemma3": (True, "gelu"),
    "gemma2": (True, "gelu"),
    "phi3": (True, "silu"),
}
# The models whose llama.cpp error sets the tolerances: the F32 models of the
# architectures and features libdetinfer had before issue 17 (plain RoPE, no
# scaling). Models added since are checked against the tolerances.
TOLERANCE_MODELS = ("mha_tied_f32", "gqa_untied_f32", "odd_f32", "qwen2_f32",
                    "gemma3_f32", "qwen3_f32")

# llama.cpp's settings: "exact" is its most exact configuration (KV cache in
# F32, flash attention off: its attention then rounds nothing to F16);
# "default" is what a user gets (flash attention auto, which is on for the
# CPU, and an F16 KV cache).
CONFIGS = ("exact", "default")
# (config, activation) -> llama.cpp's worst normwise relative error against
# float64 on TOLERANCE_MODELS, rounded up to one digit (docs/MODELS.md has
# the measured figures; --measure prints them).
LLAMACPP_OWN_ERROR = {
    ("exact", "silu"): 2e-6,
    ("exact", "gelu"): 6e-4,
    ("default", "silu"): 2e-3,
    ("default", "gelu"): 2e-3,
}
# Tolerance = K x that error: about twice the largest spread (worst / best
# model, 2.1) of llama.cpp's own error within one group on the existing
# models, for new architectures of other depths and widths. libdetinfer's own
# error (<= 1e-6) is below half of the smallest tolerance.
K = 4
OURS_BOUND = 1e-6
# The negative control: the first model, llama.cpp's RoPE base moved by 1%,
# "exact" config; the difference must exceed the tolerance.
NEGATIVE_ROPE_FACTOR = 1.01


def tolerance(config, arch):
    return K * LLAMACPP_OWN_ERROR[(config, ARCHS[arch][1])]


def f32_model(path):
    """general.architecture of the file when every tensor in it is F32, else None."""
    r = gguf.GGUFReader(path)
    if any(t.tensor_type != gguf.GGMLQuantizationType.F32 for t in r.tensors):
        return None
    field = r.fields["general.architecture"]
    return bytes(field.parts[field.data[0]]).decode()


def n_vocab_of(path):
    r = gguf.GGUFReader(path)
    return int(next(t for t in r.tensors if t.name == "token_embd.weight").shape[1])


def llamacpp_logits(path, arch, tokens, threads, config, overrides=()):
    """llama.cpp's logits of every position. The generated files carry no
    tokenizer, which llama.cpp requires: metadata overrides (in memory, the
    file unchanged) give it tokenizer.ggml.model = "none" and ARCH.vocab_size,
    with which it loads the model as it is and takes token ids only."""
    overrides = [("tokenizer.ggml.model", "none"), (f"{arch}.vocab_size", n_vocab_of(path))] + \
        list(overrides)
    cpp = LlamaCpp(path, threads, config, overrides)
    try:
        return cpp.logits(tokens)
    finally:
        cpp.close()


def ours_logits(path, tokens, threads):
    with detinfer.Model(path) as model, model.session(threads=threads, context_length=256) as s:
        s.step({0: list(tokens)}, all_logits=True)
        return np.array([s.logits(0, i).values for i in range(len(tokens))], dtype=np.float64)


def normwise(a, ref):
    """Per position: max_j |a_j - ref_j| / max_j |ref_j|."""
    return np.abs(a - ref).max(1) / np.abs(ref).max(1)


def argmax_check(ours, theirs, exact, tol):
    """(positions compared, disagreements) among the positions whose float64
    top-2 gap exceeds 2 * tol * max|ref| (no near tie)."""
    top2 = np.sort(exact, 1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > 2 * tol * np.abs(exact).max(1)
    differ = np.argmax(ours, 1) != np.argmax(theirs, 1)
    return int(clear.sum()), int((clear & differ).sum())


def rope_base_of(path, arch):
    r = gguf.GGUFReader(path)
    f = r.fields.get(f"{arch}.rope.freq_base")
    return float(f.parts[f.data[0]][0]) if f else 10000.0


def compare_one(models_dir, name, arch, threads):
    """The figures of one model, for each llama.cpp config, and its failures."""
    path = os.path.join(models_dir, name + ".gguf")
    tokens, exact = reference.read_ref(os.path.join(models_dir, name + ".ref"))
    tokens = [int(t) for t in tokens]
    ours = ours_logits(path, tokens, threads)
    e_ours = normwise(ours, exact)
    r = {"model": name, "arch": arch, "positions": len(tokens),
         "ours_max": float(e_ours.max()), "sets_tolerance": name in TOLERANCE_MODELS}
    failures = []
    if r["ours_max"] > OURS_BOUND:
        failures.append(f"libdetinfer is {r['ours_max']:.3g} from float64 (bound {OURS_BOUND:g})")
    for config in CONFIGS:
        theirs = llamacpp_logits(path, arch, tokens, threads, config)
        e_cpp, d = normwise(theirs, exact), normwise(ours, theirs)
        tol = tolerance(config, arch)
        own = LLAMACPP_OWN_ERROR[(config, ARCHS[arch][1])]
        clear, disagree = argmax_check(ours, theirs, exact, tol)
        r[config] = {"llamacpp_max": float(e_cpp.max()), "llamacpp_mean": float(e_cpp.mean()),
                     "diff_max": float(d.max()), "diff_mean": float(d.mean()),
                     "tolerance": tol, "argmax_clear": clear, "argmax_disagree": disagree}
        if r["sets_tolerance"] and e_cpp.max() > own:
            failures.append(f"{config}: llama.cpp is {e_cpp.max():.3g} from float64, above the "
                            f"{own:g} its tolerance was derived from: re-derive it")
        if d.max() > tol:
            failures.append(f"{config}: libdetinfer and llama.cpp differ by {d.max():.3g} "
                            f"(tolerance {tol:g})")
        if disagree:
            failures.append(f"{config}: argmax differs at {disagree} of {clear} positions "
                            "without a near tie")
    return r, ours, failures


def negative_control(models_dir, name, arch, ours, threads):
    """Normwise difference between libdetinfer and a llama.cpp ("exact") whose
    RoPE base is off by NEGATIVE_ROPE_FACTOR (an override in memory)."""
    path = os.path.join(models_dir, name + ".gguf")
    tokens = [int(t) for t in reference.read_ref(os.path.join(models_dir, name + ".ref"))[0]]
    base = rope_base_of(path, arch) * NEGATIVE_ROPE_FACTOR
    theirs = llamacpp_logits(path, arch, tokens, threads, "exact",
                             overrides=[(f"{arch}.rope.freq_base", base)])
    return float(normwise(ours, theirs).max())


def select(models_dir):
    """([(name, arch)] to compare, [(name, arch)] llama.cpp cannot run), or
    raises ValueError for an architecture missing from ARCHS."""
    with open(os.path.join(models_dir, "models.txt")) as f:
        names = f.read().split()
    selected, skipped = [], []
    for name in names:
        arch = f32_model(os.path.join(models_dir, name + ".gguf"))
        if arch is None:
            continue
        if arch not in ARCHS:
            raise ValueError(f"{name}: architecture {arch!r} is not in ARCHS (tests/peer/"
                             "compare_generated.py); add it with whether llama.cpp runs it")
        (selected if ARCHS[arch][0] else skipped).append((name, arch))
    return selected, skipped


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models_dir")
    ap.add_argument("--lib", default=os.path.join(HERE, "..", "..", "build", "libdetinfer.so.1"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--measure", action="store_true", help="figures only, no pass/fail")
    a = ap.parse_args(argv)
    os.environ["DETINFER_LIB"] = os.path.abspath(a.lib)  # the binding loads it on first use
    import llama_cpp

    try:
        selected, skipped = select(a.models_dir)
    except ValueError as e:
        print(f"compare_generated: {e}", file=sys.stderr)
        return 1
    print(f"libdetinfer {detinfer.version()} vs llama.cpp (llama-cpp-python "
          f"{llama_cpp.__version__}), generated F32 models, teacher-forced, {a.threads} threads")
    print("normwise relative error per position, max (mean) over the prompt; tolerance = "
          f"{K} x llama.cpp's own error bound of the model's group\n")
    print("| model | arch | positions | libdetinfer vs float64 | llama.cpp config | llama.cpp vs float64 "
          "| libdetinfer vs llama.cpp | tolerance | argmax agree (clear positions) |")
    print("| --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    results, failures, first = [], {}, None
    for name, arch in selected:
        r, ours, fails = compare_one(a.models_dir, name, arch, a.threads)
        results.append(r)
        if fails:
            failures[name] = fails
        if first is None:
            first = (name, arch, ours)
        for config in CONFIGS:
            c = r[config]
            print(f"| {name} | {arch} | {r['positions']} | {r['ours_max']:.2e} | {config} | "
                  f"{c['llamacpp_max']:.2e} ({c['llamacpp_mean']:.2e}) | "
                  f"{c['diff_max']:.2e} ({c['diff_mean']:.2e}) | {c['tolerance']:.2g} | "
                  f"{c['argmax_clear'] - c['argmax_disagree']}/{c['argmax_clear']} |")
    for name, arch in skipped:
        print(f"| {name} | {arch} | not run: llama.cpp lacks {arch} | | | | | | |")
    print()
    for config in CONFIGS:
        for act in ("silu", "gelu"):
            own = [r[config]["llamacpp_max"] for r in results
                   if r["sets_tolerance"] and ARCHS[r["arch"]][1] == act]
            if own:
                print(f"llama.cpp's own error, {config}, {act}, tolerance-setting models: "
                      f"worst {max(own):.3e}, best {min(own):.3e} "
                      f"(bound {LLAMACPP_OWN_ERROR[(config, act)]:g})")
    missing = sorted(set(TOLERANCE_MODELS) - {r["model"] for r in results})
    if missing:
        failures["tolerance"] = [f"models not found or not F32: {', '.join(missing)}"]
    control = None
    if first is not None:
        control = negative_control(a.models_dir, *first, a.threads)
        tol = tolerance("exact", first[1])
        print(f"negative control ({first[0]}, llama.cpp exact, RoPE base x{NEGATIVE_ROPE_FACTOR}): "
              f"difference {control:.3e}, must exceed {tol:g}")
        if control <= tol:
            failures["negative control"] = ["a wrong RoPE base stays within the tolerance"]
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"models": results, "negative_control": control, "K": K}, f, indent=1)
    if not results:
        print("compare_generated: no generated F32 model to compare", file=sys.stderr)
        return 1
    if a.measure:
        return 0
    for subject, msgs in failures.items():
        for msg in msgs:
            print(f"FAIL {subject}: {msg}")
    n_failed = sum(1 for r in results if r["model"] in failures)
    print(f"\ncompare_generated: {len(results) - n_failed} passed, {n_failed} failed"
          + ("" if failures.keys() <= {r["model"] for r in results} else ", and the checks above"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
