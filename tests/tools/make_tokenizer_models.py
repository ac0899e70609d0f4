#!/usr/bin/env python3
"""Write small llama GGUF models with synthetic tokenizers for the tokenizer tests.

Usage:
  make_tokenizer_models.py OUTDIR [--check-goldens DIR]

Writes, into OUTDIR, one tiny random llama model (make_model.write_model)
per synthetic vocabulary, and finally OUTDIR/tokenizers.txt with one line
"NAME DIGEST" per model. DIGEST is the sha256 of the tokenizer metadata in a
canonical form, independent of how gguf-py lays out the file; the goldens
recorded from llama.cpp (tests/data/tokenizer_goldens/NAME.txt) carry the
digest of the vocabulary they were recorded on, and --check-goldens fails
when the two differ (the goldens must then be recorded again, see
record_tokenizer_goldens.py).

Everything is deterministic: a fixed corpus, fixed rules, no randomness
except the weights, which come from a fixed seed.

The vocabularies:
  spm           SentencePiece ("llama"): <unk> <s> </s>, byte tokens
                <0x00>..<0xFF>, user-defined and control tokens, an unused,
                an undefined and an empty token, "<end_of_turn>" typed normal
                (llama.cpp makes it control by name), and pieces of a small
                corpus with scores that tie on purpose. add_space_prefix on.
  spm_noprefix  the same vocabulary, add_space_prefix off, add_eos_token on.
  bpe_*         byte-level BPE ("gpt2"): the 256 GPT-2 byte characters, merges
                learned from the corpus (each adds its token), control and
                user-defined tokens, a whole-word token no merge reaches
                ("Ġxyzzy", for llama3's ignore_merges) and a normal token
                outside the byte alphabet ("€"), with tokenizer.ggml.pre =
                llama-bpe, qwen2, default, gpt-2 and smollm.
  chat-STEM     the spm vocabulary with tokenizer.chat_template set to the
                text of tests/data/chat_templates/STEM.jinja (real templates,
                for the recognition tests of tests/check_chat.c).
"""

import argparse
import hashlib
import json
import os
import re
import struct
import sys
from collections import Counter

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SPACE = "\u2581"

CORPUS = """
The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs away!
It's a truth universally acknowledged that they'll read what we've written, and I'm sure you'd agree.
Hello, world! Hello again, world. Tokenizers split text into pieces: words, numbers and symbols.
In 2024 there were 365 days, 12 months and 8760 hours; pi is 3.14159 and e is 2.71828.
Le café est très bon, naïve résumé à la française. Ça va? Où est la gare?
Der Straßenbahnfahrer fährt über die Brücke. Schöne Grüße aus München!
El niño comió una manzana. ¿Dónde está la biblioteca? ¡Qué bueno!
Привет, мир! Как дела? Москва — столица России.
你好，世界！今天天气很好。我们学习中文。
日本語のテキストです。東京は大きい都市です。
안녕하세요 세계
def main(argv): return sum(x * 2 for x in argv) if argv else None
for (int i = 0; i < n; i++) { total += values[i]; }
<html><body class="main">text &amp; more</body></html>
email: someone@example.com, url: https://example.org/path?q=1&r=2
""".strip()

N_SPM_PIECES = 420
N_BPE_MERGES = 380

MODEL_SHAPE = dict(wtype="f32", n_embd=32, n_layer=1, n_head=2, n_head_kv=1,
                   n_ff=64, ctx=64, tied=True, seed=5)


# ---- SentencePiece -----------------------------------------------------------

def spm_pieces():
    """Pieces of the corpus words and their scores, most frequent first."""
    counts = Counter()
    chars = set()
    for line in CORPUS.split("\n"):
        for word in line.split(" "):
            if not word:
                continue
            w = SPACE + word
            chars.update(w)
            for i in range(len(w)):
                for j in range(i + 2, min(len(w), i + 6) + 1):
                    counts[w[i:j]] += 1
    # leave some characters out so that byte fallback is exercised
    missing = set("ï?ö한국😀")
    chars = sorted(c for c in chars if c not in missing)
    multi = sorted((p for p, c in counts.items() if c >= 2 and not set(p) & missing),
                   key=lambda p: (-counts[p] * (len(p) - 1), p))[:N_SPM_PIECES]
    pieces = []
    # scores in steps, so that pairs often tie and the leftmost must win
    for rank, p in enumerate(multi):
        pieces.append((p, -float(rank // 4)))
    for c in chars:
        pieces.append((c, -1000.0))
    return pieces


# The markers of every built-in chat template (lib/tokenizer/chat_template.c),
# as control tokens of tok_chat_markers: each template's end of turn among them.
CHAT_MARKERS = ["<start_of_turn>", "<end_of_turn>", "<|im_start|>", "<|im_end|>",
                "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|user|>",
                "<|assistant|>", "<|system|>", "<|end|>", "<|endoftext|>", "[INST]", "[/INST]",
                "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "<<SYS>>", "<</SYS>>"]


def spm_vocab(markers=False):
    """(tokens, scores, types): normal 1, unknown 2, control 3, user-defined 4,
    unused 5, byte 6, undefined 0. markers: CHAT_MARKERS as control tokens
    and one user-defined token after them (in place of the other special
    tokens after the bytes)."""
    toks = [("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3)]
    toks += [(f"<0x{b:02X}>", 0.0, 6) for b in range(256)]
    if markers:
        toks += [(t, 0.0, 3) for t in CHAT_MARKERS] + [("<tool>", 0.0, 4)]
    else:
        toks += [("<tool>", 0.0, 4), ("</tool>", 0.0, 4), ("\n\n", 0.0, 4), ("  ", 0.0, 4),
                 ("<ctrl>", 0.0, 3), ("<end_of_turn>", 0.0, 1), ("<unused0>", 0.0, 5),
                 ("<undef>", 0.0, 0), ("", 0.0, 1)]
    seen = {t for t, _, _ in toks}
    for p, s in spm_pieces():
        if p not in seen:
            seen.add(p)
            toks.append((p, s, 1))
    return toks


def add_spm(prefix, add_eos, pad_to=0, markers=False):
    """The synthetic SentencePiece vocabulary: (count, writer hook, metadata).
    pad_to: pad the vocabulary with unused tokens (type 5) to that many
    (bench/make_big_model.py's 32000); markers: spm_vocab's."""
    toks = spm_vocab(markers)
    toks += [(f"<pad{i}>", -1e4, 5) for i in range(pad_to - len(toks))]

    def hook(w):
        w.add_tokenizer_model("llama")
        w.add_tokenizer_pre("default")
        w.add_token_list([t for t, _, _ in toks])
        w.add_token_scores([s for _, s, _ in toks])
        w.add_token_types([ty for _, _, ty in toks])
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        w.add_unk_token_id(0)
        w.add_add_bos_token(True)
        w.add_add_eos_token(add_eos)
        w.add_add_space_prefix(prefix)

    meta = {"model": "llama", "pre": "default", "tokens": [t for t, _, _ in toks],
            "scores": [struct.pack("<f", s).hex() for _, s, _ in toks],
            "types": [ty for _, _, ty in toks], "bos": 1, "eos": 2, "unk": 0,
            "add_bos": True, "add_eos": add_eos, "add_space_prefix": prefix}
    return len(toks), hook, meta


# ---- byte-level BPE ------------------------------------------------------------

def byte_chars():
    """GPT-2's bytes_to_unicode: byte -> character."""
    keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, n = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + n)
            n += 1
    return out


def bpe_words():
    """Corpus words, split roughly like the llama3 pre-tokenizer."""
    pat = re.compile(r"'(?:[sdmt]|ll|ve|re)| ?[^\W\d_]+| ?\d{1,3}| ?[^\s\w]+|\s+")
    bc = byte_chars()
    counts = Counter()
    for m in pat.finditer(CORPUS):
        counts["".join(bc[b] for b in m.group(0).encode())] += 1
    return counts


def bpe_merges():
    words = {w: list(w) for w in bpe_words()}
    freq = bpe_words()
    merges = []
    for _ in range(N_BPE_MERGES):
        pairs = Counter()
        for w, syms in words.items():
            for a, b in zip(syms, syms[1:]):
                pairs[(a, b)] += freq[w]
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        for w, syms in words.items():
            i, out = 0, []
            while i < len(syms):
                if i + 1 < len(syms) and (syms[i], syms[i + 1]) == best:
                    out.append(syms[i] + syms[i + 1])
                    i += 2
                else:
                    out.append(syms[i])
                    i += 1
            words[w] = out
    return merges


def bpe_vocab():
    bc = byte_chars()
    toks = [(bc[b], 1) for b in sorted(bc, key=lambda b: ord(bc[b]))]
    seen = {t for t, _ in toks}
    merges = bpe_merges()
    for a, b in merges:
        if a + b not in seen:
            seen.add(a + b)
            toks.append((a + b, 1))
    for t, ty in (("\u0120xyzzy", 1), ("\u20ac", 1), ("<|begin_of_text|>", 3),
                  ("<|end_of_text|>", 3), ("<|eot_id|>", 1), ("<tool>", 4),
                  ("<|reserved_0|>", 5)):
        toks.append((t, ty))
    return toks, [a + " " + b for a, b in merges]


def add_bpe(pre, add_bos):
    toks, merges = bpe_vocab()
    ids = {t: i for i, (t, _) in enumerate(toks)}
    bos, eos = ids["<|begin_of_text|>"], ids["<|end_of_text|>"]

    def hook(w):
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre(pre)
        w.add_token_list([t for t, _ in toks])
        w.add_token_types([ty for _, ty in toks])
        w.add_token_merges(merges)
        w.add_bos_token_id(bos)
        w.add_eos_token_id(eos)
        w.add_add_bos_token(add_bos)

    meta = {"model": "gpt2", "pre": pre, "tokens": [t for t, _ in toks],
            "types": [ty for _, ty in toks], "merges": merges, "bos": bos, "eos": eos,
            "add_bos": add_bos}
    return len(toks), hook, meta


# ---- chat templates -------------------------------------------------------------

CHAT_TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "data",
                              "chat_templates")


def chat_templates():
    """STEM -> the text of tests/data/chat_templates/STEM.jinja, sorted by STEM."""
    out = {}
    for f in sorted(os.listdir(CHAT_TEMPLATES)):
        if f.endswith(".jinja"):
            with open(os.path.join(CHAT_TEMPLATES, f), encoding="utf-8", newline="") as fh:
                out[f[:-len(".jinja")]] = fh.read()
    return out


def add_chat(text):
    n_vocab, hook, meta = add_spm(prefix=True, add_eos=False)

    def chat_hook(w):
        hook(w)
        w.add_chat_template(text)

    return n_vocab, chat_hook, dict(meta, chat_template=text)


# ---- the set -------------------------------------------------------------------

# Models whose shape differs from MODEL_SHAPE: the server's tool-turn tests
# need room for a chat with tool calls spelled in this small vocabulary.
SHAPE_OF = {"tok_chat_markers_ctx512": dict(ctx=512),
            # a draft model for tok_spm (speculative decoding): its vocabulary, other weights
            "tok_spm_draft": dict(n_embd=16, n_ff=32, seed=6)}


def models():
    """name -> (n_vocab, writer hook, canonical metadata)."""
    return {
        "tok_spm": add_spm(prefix=True, add_eos=False),
        "tok_spm_noprefix": add_spm(prefix=False, add_eos=True),
        "tok_spm_draft": add_spm(prefix=True, add_eos=False),
        "tok_bpe_llama3": add_bpe("llama-bpe", add_bos=True),
        "tok_bpe_qwen2": add_bpe("qwen2", add_bos=False),
        "tok_bpe_default": add_bpe("default", add_bos=False),
        "tok_bpe_gpt2": add_bpe("gpt-2", add_bos=False),
        "tok_bpe_smollm": add_bpe("smollm", add_bos=False),
        "tok_chat_markers": add_spm(prefix=True, add_eos=False, markers=True),
        "tok_chat_markers_ctx512": add_spm(prefix=True, add_eos=False, markers=True),
        **{"chat-" + stem: add_chat(text) for stem, text in chat_templates().items()},
    }


def digest(meta):
    return hashlib.sha256(json.dumps(meta, sort_keys=True, ensure_ascii=True).encode()).hexdigest()


def golden_digest(path):
    with open(path, encoding="ascii") as f:
        for line in f:
            if line.startswith("# tokenizer digest: "):
                return line.split(":", 1)[1].strip()
    return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir")
    ap.add_argument("--check-goldens", metavar="DIR",
                    help="fail when a golden file was recorded on another vocabulary")
    a = ap.parse_args(argv)
    import make_model  # numpy and gguf only when writing

    os.makedirs(a.outdir, exist_ok=True)
    lines = []
    for name, (n_vocab, hook, meta) in models().items():
        make_model.write_model(os.path.join(a.outdir, name + ".gguf"), n_vocab=n_vocab,
                               name=name, tokenizer=hook, **{**MODEL_SHAPE, **SHAPE_OF.get(name, {})})
        lines.append(f"{name} {digest(meta)}\n")
    bad = []
    if a.check_goldens:
        for line in lines:
            name, d = line.split()
            path = os.path.join(a.check_goldens, name + ".txt")
            if os.path.exists(path) and golden_digest(path) != d:
                bad.append(f"{path}: recorded on tokenizer digest {golden_digest(path)}, "
                           f"the generator now gives {d}")
    if bad:
        print("make_tokenizer_models.py: the synthetic vocabularies changed; record the goldens "
              "again (tests/tools/record_tokenizer_goldens.py):\n  " + "\n  ".join(bad),
              file=sys.stderr)
        return 1
    with open(os.path.join(a.outdir, "tokenizers.txt"), "w") as f:
        f.writelines(lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
