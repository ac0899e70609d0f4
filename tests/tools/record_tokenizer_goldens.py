#!/usr/bin/env python3
"""Record tokenizer goldens from llama.cpp (through llama-cpp-python).

Usage (the synthetic models first, with the project's Python; then this
script with a Python that has llama-cpp-python):
  python3 tests/tools/make_tokenizer_models.py /tmp/tokmodels
  PEER/bin/python tests/tools/record_tokenizer_goldens.py --models /tmp/tokmodels \\
      [--gemma ~/.cache/detinfer/gemma-3-270m-q4_k_m.gguf] --out tests/data/tokenizer_goldens

For every model it writes OUT/NAME.txt:
  # header lines (llama-cpp-python version, command, tokenizer digest)
  T <tab> add_special <tab> text <tab> ids <tab> detokenized
  S <tab> add_special <tab> text <tab> ids
  P <tab> id <tab> piece
  D <tab> ids <tab> detokenized
where ids come from llama_tokenize(add_special, parse_special=false), on S
lines from llama_tokenize(add_special, parse_special=true) (for TEXTS and
SPECIAL_TEXTS),
"detokenized" from llama_detokenize(remove_special=false,
unparse_special=false) and "piece" from llama_token_to_piece(lstrip=0,
special=false): the exact C calls, not llama-cpp-python's Python-side
detokenize (which strips a space after BOS). Text fields are bytes with
printable ASCII kept, '\\' written as '\\\\' and every other byte as \\xHH.
"""

import argparse
import ctypes
import hashlib
import os
import random
import sys

import llama_cpp
from llama_cpp import Llama

SYNTHETIC = ["tok_spm", "tok_spm_noprefix", "tok_bpe_llama3", "tok_bpe_qwen2",
             "tok_bpe_default", "tok_bpe_gpt2", "tok_bpe_smollm"]

LONG = ("The quick brown fox jumps over the lazy dog. " * 20
        + "Le café, naïve résumé. 你好，世界！ Привет, мир! 12345678901234567890 😀👍🏽 " * 10)

TEXTS = [
    "", " ", "  ", "   ", "\t", "\n", "\r\n", " \n ", "\n\n\n", "\t\t\tindented",
    "a\n\nb", "  leading spaces", "trailing spaces  ", "multiple   spaces   here",
    "Hello world", "Hello, world!", "hello WORLD", "HELLO", "Hello\nworld\n",
    "1", "12", "123", "1234", "1234567890", "3.14159", "1,000,000", "x2024y", "٣٤٥ ١٢",
    "I'm", "don't", "we'll", "they've", "she'd", "it's", "IT'S", "'s", "'S'", "o'clock",
    "rock 'n' roll", "a , b . c ? d !", "x ' y", "he 's", "they 're", "we 've", "I 'll",
    "Hello?!", "...", "a.b,c;d:e", "(a) [b] {c} <d>", "#$%&*+-=/\\|^~`", "@user #tag",
    "email@example.com", "https://example.org/path?q=1&r=2",
    "café", "naïve résumé", "Straße", "Ça va? Où est la gare?", "e\u0301", "ö ï ü",
    "你好世界", "你好，世界！", "日本語のテキスト", "안녕하세요", "한국어",
    "😀", "👍🏽", "👨\u200d👩\u200d👧", "I ❤ NY",
    "Привет мир, hello 世界 123!", "مرحبا بالعالم", "नमस्ते दुनिया", "สวัสดีครับ",
    "Γειά σου Κόσμε",
    "a\u00a0b", "a\u3000b", "a\u2003b", "a\u180eb", "a\u0085b", "a\u200bb", "a\u2028b",
    "a \u00a0 b", "\u3000\u3000x",
    "<s>", "</s>", "<unk>", "<s>Hello</s>", "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>",
    "<tool>x</tool>", "<tool><tool>", " <tool> ", "<ctrl>", "<end_of_turn>", "<bos>", "<eos>",
    "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n", "<0x41>",
    "<unused0>", "[multimodal]", "\u2581", "a\u2581b", "\u2581\u2581x",
    "\u0120xyzzy", " xyzzy", "xyzzy", "\u20ac", "a\u20acb",
    "\x00", "a\x00b", "\x01\x1f\x7f", "\x1b[31mred\x1b[0m",
    "def f(x):\n    return x * 2\n", "for (int i = 0; i < n; i++) {\n\ttotal += v[i];\n}",
    "\U0010ffff", "\U0001f600\U0001f600", "\ue000", "\u0378", "\U000e0001", "\ufeffBOM",
    "a" * 300, "1" * 64, " " * 64, "\n" * 40, "ab " * 50, LONG,
]

# Texts with the control and user-defined tokens of the vocabularies (the
# synthetic ones and Gemma's), for parse_special=true: chat-formatted
# prompts, tokens back to back, inside words, overlapping, cut short.
SPECIAL_TEXTS = [
    "<s>Hello</s>", "<s><s>", "x</s>y</s>z", "<unk>", "a<unk>b", "<ctrl>", " <ctrl> ", "a<ctrl>b",
    "<ctrl><ctrl>", "\n\n<ctrl>\n\n", "<tool><ctrl></tool>", "<s</s>>", "<<s>>", "</s",
    "<end_of_turn", "<end_of_turn>", "<end_of_turn><end_of_turn>",
    "<|begin_of_text|>Hi<|end_of_text|>", "<|begin_of_text|><|begin_of_text|>",
    "<|eot_id|>x<|eot_id|>", "<|reserved_0|>", " <|end_of_text|> ",
    "<bos>", "<eos>", "<pad>", "<mask>", "<bos><bos>text<eos>", "<start_of_turn>",
    "<start_of_turn>user\nHi!<end_of_turn>\n<start_of_turn>model\n",
    "<start_of_turn>user\nYou are terse.\n\nWhat is 2+2?<end_of_turn>\n"
    "<start_of_turn>model\n4<end_of_turn>\n<start_of_turn>user\nAnd 3+3?<end_of_turn>\n"
    "<start_of_turn>model\n",
    "<start_of_turn>user\n\u4f60\u597d <end_of_turn>\n <start_of_turn>model\n",
    "<start_of_image>[multimodal]<end_of_image>", "<unused0><unused1>", "<unused99999>",
    "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\n",
]


def esc(b):
    out = []
    for c in b:
        if c == 0x5C:
            out.append("\\\\")
        elif 0x20 <= c < 0x7F:
            out.append(chr(c))
        else:
            out.append("\\x%02x" % c)
    return "".join(out)


class Vocab:
    def __init__(self, path):
        self.llm = Llama(model_path=path, vocab_only=True, verbose=False)
        self.vocab = llama_cpp.llama_model_get_vocab(self.llm.model)
        self.n = llama_cpp.llama_vocab_n_tokens(self.vocab)

    def tokenize(self, text, add_special, parse_special=False):
        cap = len(text) + 16
        buf = (llama_cpp.llama_token * cap)()
        n = llama_cpp.llama_tokenize(self.vocab, text, len(text), buf, cap, add_special,
                                     parse_special)
        assert n >= 0, n
        return list(buf[:n])

    def detokenize(self, ids):
        arr = (llama_cpp.llama_token * max(1, len(ids)))(*ids)
        cap = 64
        while True:
            buf = ctypes.create_string_buffer(cap)
            n = llama_cpp.llama_detokenize(self.vocab, arr, len(ids), buf, cap, False, False)
            if n >= 0:
                return buf.raw[:n]
            cap = -n + 1

    def piece(self, token):
        cap = 64
        while True:
            buf = ctypes.create_string_buffer(cap)
            n = llama_cpp.llama_token_to_piece(self.vocab, token, buf, cap, 0, False)
            if n >= 0:
                return buf.raw[:n]
            cap = -n + 1


def record(vocab, out_path, header, piece_ids, seqs):
    lines = list(header)
    for text in TEXTS:
        b = text.encode("utf-8")
        for add_special in (0, 1):
            ids = vocab.tokenize(b, bool(add_special))
            lines.append("T\t%d\t%s\t%s\t%s" % (add_special, esc(b), " ".join(map(str, ids)),
                                                 esc(vocab.detokenize(ids))))
    for text in TEXTS + SPECIAL_TEXTS:
        b = text.encode("utf-8")
        for add_special in (0, 1):
            ids = vocab.tokenize(b, bool(add_special), parse_special=True)
            lines.append("S\t%d\t%s\t%s" % (add_special, esc(b), " ".join(map(str, ids))))
    for t in piece_ids:
        lines.append("P\t%d\t%s" % (t, esc(vocab.piece(t))))
    for ids in seqs:
        lines.append("D\t%s\t%s" % (" ".join(map(str, ids)), esc(vocab.detokenize(ids))))
    with open(out_path, "w", encoding="ascii") as f:
        f.write("\n".join(lines) + "\n")


def sequences(n_vocab, seed, specials):
    """Random id sequences, some starting with special tokens."""
    rng = random.Random(seed)
    seqs = []
    for k in range(60):
        ids = [rng.randrange(n_vocab) for _ in range(rng.randrange(1, 16))]
        if k % 3 == 0:
            ids.insert(0, specials[k % len(specials)])
        seqs.append(ids)
    return seqs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", required=True, help="output of make_tokenizer_models.py")
    ap.add_argument("--gemma", help="the real Gemma 3 GGUF (optional)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    digests = dict(line.split() for line in open(os.path.join(a.models, "tokenizers.txt")))
    command = ("python3 tests/tools/make_tokenizer_models.py MODELS && "
               "python tests/tools/record_tokenizer_goldens.py --models MODELS "
               "--gemma GEMMA_GGUF --out tests/data/tokenizer_goldens")
    common = ["# recorded from llama.cpp by llama-cpp-python %s" % llama_cpp.__version__,
              "# command: " + command,
              "# lines: T add_special text ids detokenized | S add_special text ids "
              "| P id piece | D ids detokenized "
              "(tab-separated; see record_tokenizer_goldens.py)"]
    for name in SYNTHETIC:
        v = Vocab(os.path.join(a.models, name + ".gguf"))
        header = ["# tokenizer goldens of the synthetic vocabulary %s "
                  "(tests/tools/make_tokenizer_models.py)" % name] + common + \
                 ["# tokenizer digest: " + digests[name]]
        specials = [1, 2] if "spm" in name else [v.n - 5, v.n - 4, v.n - 3]
        record(v, os.path.join(a.out, name + ".txt"), header, range(v.n),
               sequences(v.n, name, specials))
        print("recorded", name, file=sys.stderr)
    if a.gemma:
        h = hashlib.sha256()
        with open(a.gemma, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        v = Vocab(a.gemma)
        header = ["# tokenizer goldens of Gemma 3 270M (%s, %d bytes, sha256 %s)" % (
            os.path.basename(a.gemma), os.path.getsize(a.gemma), h.hexdigest())] + common
        pieces = sorted(set(list(range(400)) + list(range(0, v.n, 499)) +
                            list(range(255900, 256100)) + list(range(v.n - 40, v.n))))
        record(v, os.path.join(a.out, "gemma3.txt"), header, pieces,
               sequences(v.n, "gemma3", [2, 1, 106, 107]))
        print("recorded gemma3", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
