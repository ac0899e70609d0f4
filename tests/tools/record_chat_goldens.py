#!/usr/bin/env python3
"""Record chat template goldens from llama.cpp (through llama-cpp-python).

Usage (with a Python that has llama-cpp-python; no model is needed):
  PEER/bin/python tests/tools/record_chat_goldens.py --out tests/data/chat_goldens

Writes two files:
  OUT/format.txt  F <tab> template <tab> add_ass <tab> output {<tab> role <tab> content}
                  for every built-in template of libdetinfer x every message
                  list of CONVERSATIONS x add_ass 0/1: output is what
                  llama_chat_apply_template(template name, messages, add_ass)
                  gives.
  OUT/detect.txt  D <tab> template text <tab> output
                  what llama_chat_apply_template gives for the PROBE messages
                  (add_ass 1) when given a template text: a llama.cpp template
                  name, a marker text, or "@FILE" for the text of
                  tests/data/chat_templates/FILE. "-1" when llama.cpp does not
                  recognise the text. The C test recognises the same text and
                  checks that its own formatting of PROBE gives this output
                  (or, when it recognises nothing, that no built-in does).
Text fields are bytes with printable ASCII kept, '\\' written as '\\\\' and
every other byte as \\xHH (as the tokenizer goldens).
"""

import argparse
import ctypes
import os
import sys

import llama_cpp

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATES = os.path.join(HERE, os.pardir, "data", "chat_templates")

# libdetinfer's built-in templates (lib/tokenizer/chat_template.c)
BUILT_IN = ["chatml", "gemma", "llama3", "llama2", "llama2-sys", "llama2-sys-bos",
            "llama2-sys-strip", "mistral-v1", "mistral-v3", "mistral-v3-tekken", "mistral-v7",
            "mistral-v7-tekken", "phi3", "zephyr"]

S, U, A = "system", "user", "assistant"
CONVERSATIONS = [
    [],
    [(U, "Hello")],
    [(S, "You are terse."), (U, "Hi!")],
    [(S, "You are terse."), (U, "What is 2+2?"), (A, "4"), (U, "And 3+3?")],
    [(U, "What is 2+2?"), (A, "4"), (U, "And 3+3?"), (A, "6")],
    [(A, "I speak first."), (U, "Then I answer.")],
    [(U, "one"), (U, "two")],
    [(S, ""), (U, "")],
    [(U, "")],
    [(S, "  padded system \n"), (U, " \t padded user \n\n"), (A, "\n padded assistant  ")],
    [(S, "R\u00e9ponds en fran\u00e7ais \U0001f642"), (U, "\u4f60\u597d\n\u4e16\u754c"),
     (A, " \u041f\u0440\u0438\u0432\u0435\u0442 "), (U, "na\u00efve\tcaf\u00e9 \u00a0")],
    [(U, "<|im_end|><end_of_turn><|eot_id|>[INST]</s>")],
    [(S, "first"), (S, "second"), (U, "question")],
    [(U, "q1"), (A, "a1"), (S, "late system"), (U, "q2")],
    [(S, "only a system message")],
    [(U, "q"), (A, "a"), (S, "system at the end")],
    [(S, "line one\nline two"), (U, "multi\nline\n")],
]

PROBE = [(S, "Sys."), (U, " Hi. "), (A, "Yo."), (U, "Bye.")]

# Marker texts that walk llama.cpp's detection order (llm_chat_detect_template).
MARKERS = [
    "", "{{ messages }}", "<|im_start|>", "<|im_start|><|im_sep|>",
    "<|im_start|><end_of_utterance>", "<|im_start|>[INST]", "mistral", "mistral-like",
    "[INST]", "[INST] <<SYS>>", "[INST] content.strip()", "[INST] bos_token + '[INST]",
    "[INST] <<SYS>> content.strip() bos_token + '[INST]", "[INST][SYSTEM_PROMPT]",
    "' [INST] ' + system_message", "[INST][AVAILABLE_TOOLS]", " [INST][AVAILABLE_TOOLS]",
    "\"[INST]\"[AVAILABLE_TOOLS]", "<|assistant|><|end|>", "<|assistant|><|end|><start_of_turn>",
    "[gMASK]<sop>", "<|assistant|><|user|></s>", "<|assistant|><|user|>",
    "<|assistant|><|user|><|tool_declare|></s>", "<|assistant|><|user|><|endoftext|>",
    "<|user|><|endoftext|>", "<|user|><|endoftext|><start_of_turn>",
    "bos_token + message['role']", "<start_of_turn>", "<start_of_turn><|start_header_id|><|end_header_id|>",
    "'\\n\\nAssistant: ' + eos_token", "GPT4 Correct ", "USER: ASSISTANT: ",
    "USER: ASSISTANT: SYSTEM: ", "### Instruction:<|EOT|>",
    "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>", "<|start_header_id|><|end_header_id|>",
    "<|start_header_id|>", "<|end_header_id|>", "<|START_OF_TURN_TOKEN|><|USER_TOKEN|><|start_header_id|><|end_header_id|>",
    "gemma\n", " gemma", "Gemma", "chatml ",
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


def apply(tmpl, messages, add_ass):
    """llama_chat_apply_template's text, or None when it returns < 0."""
    arr = (llama_cpp.llama_chat_message * max(1, len(messages)))()
    keep = []
    for i, (role, content) in enumerate(messages):
        r, c = role.encode(), content.encode("utf-8")
        keep += [r, c]
        arr[i].role = r
        arr[i].content = c
    cap = 256
    while True:
        buf = ctypes.create_string_buffer(cap)
        n = llama_cpp.llama_chat_apply_template(tmpl, arr, len(messages), add_ass, buf, cap)
        if n < 0:
            return None
        if n < cap:
            return buf.raw[:n]
        cap = n + 1


def builtin_names():
    n = llama_cpp.llama_chat_builtin_templates(None, 0)
    out = (ctypes.c_char_p * n)()
    llama_cpp.llama_chat_builtin_templates(out, n)
    return [x.decode() for x in out]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    header = ["# recorded from llama.cpp by llama-cpp-python %s" % llama_cpp.__version__,
              "# command: python tests/tools/record_chat_goldens.py --out tests/data/chat_goldens",
              "# see record_chat_goldens.py for the line format"]

    lines = list(header)
    for name in BUILT_IN:
        for conv in CONVERSATIONS:
            for add_ass in (0, 1):
                out = apply(name.encode(), conv, bool(add_ass))
                assert out is not None, name
                fields = ["F", name, str(add_ass), esc(out)]
                for role, content in conv:
                    fields += [role, esc(content.encode("utf-8"))]
                lines.append("\t".join(fields))
    with open(os.path.join(a.out, "format.txt"), "w", encoding="ascii") as f:
        f.write("\n".join(lines) + "\n")

    lines = list(header)
    texts = [(n, n.encode()) for n in builtin_names()]
    texts += [(m, m.encode()) for m in MARKERS]
    for fname in sorted(os.listdir(TEMPLATES)):
        if fname.endswith(".jinja"):
            with open(os.path.join(TEMPLATES, fname), "rb") as fh:
                texts.append(("@" + fname, fh.read()))
    for label, text in texts:
        out = apply(text, PROBE, True)
        lines.append("\t".join(["D", esc(label.encode()), "-1" if out is None else esc(out)]))
    with open(os.path.join(a.out, "detect.txt"), "w", encoding="ascii") as f:
        f.write("\n".join(lines) + "\n")
    print("recorded %s" % a.out, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
