#!/usr/bin/env python3
"""Constrained decoding against llama.cpp's grammar sampler (make check-peer).

On each real model, for GBNF grammars and the GBNF of JSON schemas (the
library's conversion, handed to both), libdetinfer generates greedy under the
grammar; llama.cpp's grammar sampler (llama_sampler_init_grammar over the
model's vocabulary) is then teacher-forced on that output: at every position
our token must be one its sampler keeps (the candidate's logit not set to
-inf), and it accepts the token to move on. At the first positions of each
run the whole allowed sets are compared too: ours must lie within
llama.cpp's (end-of-generation tokens aside). llama.cpp allows more on
purpose of ours: bytes that can begin no valid UTF-8 (0xF5-0xFF, overlong
leads), which it decodes anyway, and control tokens whose printed name fits
the grammar; the count is printed.

    grammar_peer.py GEMMA.gguf [MORE.gguf ...] --lib build/libdetinfer.so.1.x.y [--new N]
"""
import argparse
import ctypes
import json
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

GRAMMARS = [
    ("list", 'root ::= "[" item ("," item){0,4} "]"\nitem ::= [0-9]{1,3} | "\\"" [a-z ]{1,12} "\\""'),
    ("sentence", 'root ::= [A-Z] [a-z]{1,10} (" " [a-z]{1,10}){2,8} "."'),
    ("answer", 'root ::= ("yes" | "no") ", because " [^.\\n]{1,60} "."'),
    ("unicode", 'root ::= "\\u00ab" [^\\u00bb\\n]{1,30} "\\u00bb"'),
]
SCHEMAS = [
    ("person", {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                                  "age": {"type": "integer", "minimum": 0, "maximum": 120},
                                                  "tags": {"type": "array", "items": {"type": "string"},
                                                           "maxItems": 3}},
                "required": ["name", "age"], "additionalProperties": False}),
    ("any", {"type": "object"}),
    ("event", {"type": "object", "properties": {"when": {"type": "string", "format": "date"},
                                                 "kind": {"enum": ["meeting", "call", "trip"]},
                                                 "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{2,4}$"}},
               "required": ["when", "kind", "code"], "additionalProperties": False}),
]
PROMPTS = ["Here is the answer:", "Data:"]
FULL_SET_POSITIONS = 6
SHOW = 6


class Peer:
    """llama.cpp's vocabulary (no weights) and grammar sampler."""

    def __init__(self, path):
        import llama_cpp as L
        self.L = L
        L.llama_backend_init()
        self._quiet = L.llama_log_callback(lambda level, text, data: None)
        L.llama_log_set(self._quiet, ctypes.c_void_p())
        mp = L.llama_model_default_params()
        mp.vocab_only = True
        self.model = L.llama_model_load_from_file(path.encode(), mp)
        if not self.model:
            raise RuntimeError("llama.cpp could not load " + path)
        self.vocab = L.llama_model_get_vocab(self.model)
        self.n_vocab = L.llama_vocab_n_tokens(self.vocab)

    def sampler(self, gbnf):
        s = self.L.llama_sampler_init_grammar(self.vocab, gbnf.encode(), b"root")
        if not s:
            raise RuntimeError("llama.cpp refused the grammar:\n" + gbnf)
        return s

    def kept(self, sampler, tokens):
        """The tokens of `tokens` the grammar sampler keeps (logit not -inf)."""
        L = self.L
        data = (L.llama_token_data * len(tokens))()
        for i, t in enumerate(tokens):
            data[i].id, data[i].logit, data[i].p = t, 0.0, 0.0
        arr = L.llama_token_data_array(data, len(tokens), -1, False)
        L.llama_sampler_apply(sampler, ctypes.byref(arr))
        return {arr.data[i].id for i in range(arr.size) if not math.isinf(arr.data[i].logit)}

    def is_eog(self, t):
        return bool(self.L.llama_vocab_is_eog(self.vocab, t))

    def close(self):
        self.L.llama_model_free(self.model)


def run_model(path, detinfer, new, threads):
    peer = Peer(path)
    failures = checked = compared = extra = 0
    with detinfer.Model(path) as m, m.session(threads=threads, context_length=256) as s:
        pieces = {t: m.token_piece_bytes(t) for t in range(m.n_vocab)}
        cases = [(n, detinfer.Grammar.from_gbnf(g)) for n, g in GRAMMARS]
        cases += [("schema " + n, detinfer.Grammar.from_json_schema(sc)) for n, sc in SCHEMAS]
        for name, g in cases:
            gbnf = g.gbnf
            for prompt in PROMPTS:
                seq = s.sequence(0)
                gen = seq.generate(m.tokenize(prompt), max_new=new, grammar=g)
                tokens = [t.token for t in gen]
                seq.reset()
                smpl = peer.sampler(gbnf)
                # the allowed sets of the first positions, replayed on the library
                seq.step(m.tokenize(prompt))
                seq.set_grammar(g)
                for k, t in enumerate(tokens):
                    checked += 1
                    if t not in peer.kept(smpl, [t]):
                        failures += 1
                        print("FAIL %s / %s after %r: llama.cpp's grammar refuses token %d %r" %
                              (os.path.basename(path), name, m.detokenize(tokens[:k]), t, pieces[t]))
                        break
                    if k < FULL_SET_POSITIONS:
                        ours = {x for x in seq.allowed_tokens() if not peer.is_eog(x)}
                        theirs = peer.kept(smpl, list(range(min(peer.n_vocab, m.n_vocab))))
                        compared += 1
                        extra += len(theirs - ours)
                        if ours - theirs:
                            failures += 1
                            print("FAIL %s / %s after %r: we allow %d tokens llama.cpp refuses, e.g. %s" %
                                  (os.path.basename(path), name, m.detokenize(tokens[:k]), len(ours - theirs),
                                   [(x, pieces[x]) for x in sorted(ours - theirs)[:SHOW]]))
                    peer.L.llama_sampler_accept(smpl, t)
                    if t != m.eos:
                        seq.step([t])
                peer.L.llama_sampler_free(smpl)
                seq.reset()
                print("%s / %s / %r: %d tokens, each allowed by llama.cpp: %r" %
                      (os.path.basename(path), name, prompt, len(tokens), m.detokenize(tokens)[:80]))
        for _, g in cases:
            g.close()
    peer.close()
    print("%s: llama.cpp allowed %d more tokens than we did over %d whole sets (invalid UTF-8, control tokens)" %
          (os.path.basename(path), extra, compared))
    return failures, checked, compared


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--lib", required=True)
    ap.add_argument("--new", type=int, default=40)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    os.environ["DETINFER_LIB"] = os.path.abspath(a.lib)
    sys.path.insert(0, os.path.join(ROOT, "bindings", "python", "src"))
    import detinfer
    total = [0, 0, 0]
    for path in a.models:
        for i, v in enumerate(run_model(path, detinfer, a.new, a.threads)):
            total[i] += v
    print("grammar peer: %d tokens checked against llama.cpp's grammar sampler, %d whole allowed sets found "
          "within its own, %d failures" % (total[1], total[2], total[0]))
    return 1 if total[0] else 0


if __name__ == "__main__":
    sys.exit(main())
