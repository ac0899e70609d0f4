#!/usr/bin/env python3
"""Record the goldens of chat tool turns: the models' own Jinja templates
rendered as llama.cpp's Jinja engine (minja) is checked against.

Usage (jinja2, no model needed):
  python3 tests/tools/record_tool_goldens.py --out tests/data/chat_goldens

llama.cpp's built-in formatter (llama_chat_apply_template, the reference of
format.txt) has no tool turns; llama.cpp renders them with the model's Jinja
template. Its engine, minja, is tested against goldens that Python's jinja2
renders with trim_blocks, lstrip_blocks, a `tojson` of json.dumps with
ensure_ascii=False, and a tool call's `arguments` string parsed into an object
when the template writes `tool_call.arguments | tojson` (minja's
scripts/fetch_templates_and_goldens.py). This script renders the same way:

  chatml  tests/data/chat_templates/Qwen-Qwen2.5-7B-Instruct.jinja (the
          Hermes/Qwen 2.5 <tool_call>/<tool_response> layout). Every
          conversation opens with a system message (without one Qwen's
          template writes its own default system prompt, which llama.cpp's
          chatml does not).
  llama3  tests/data/chat_templates/meta-llama-Llama-3.1-8B-Instruct.jinja
          (3.3's is the same file; the ipython role, one JSON call per
          assistant turn). Its system turn carries a knowledge and a today
          date that llama.cpp's built-in llama3 formatter does not write:
          the text recorded is the rendering of the whole conversation less
          the rendering of its system message alone (checked to be a prefix),
          and the messages recorded are those after the system message.

Writes OUT/tools.txt, one line per conversation x add_generation_prompt:
  T <tab> template <tab> add_ass <tab> output {<tab> role <tab> content}
where role/content are what di_chat_format takes: a tool call is the message
("tool_call", NAME "\\n" ARGUMENTS), ARGUMENTS being json.dumps of the parsed
arguments (ensure_ascii=False: what the template's tojson writes), right after
the assistant message that carries it (content "" for null); a tool's answer is
("tool", content). Text fields are escaped as in format.txt.
"""

import argparse
import json
import os
import sys

import jinja2
import jinja2.ext

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATES = os.path.join(HERE, os.pardir, "data", "chat_templates")

SOURCES = {
    "chatml": ("Qwen-Qwen2.5-7B-Instruct.jinja", 0),
    "llama3": ("meta-llama-Llama-3.1-8B-Instruct.jinja", 1),
}


def call(name, arguments, ident="call_1"):
    return {"id": ident, "type": "function", "function": {"name": name, "arguments": arguments}}


S = {"role": "system", "content": "You are a helpful assistant."}
U = {"role": "user", "content": "What is the weather in Paris?"}

# Conversations for both templates (one call per assistant turn, no text
# beside a call: what Llama 3.1's template can express).
COMMON = [
    [S, U, {"role": "assistant", "content": None, "tool_calls": [call("get_weather", '{"city": "Paris"}')]}],
    [S, U, {"role": "assistant", "content": None, "tool_calls": [call("get_weather", '{"city": "Paris"}')]},
     {"role": "tool", "tool_call_id": "call_1", "content": '{"temperature": 21, "unit": "C"}'}],
    [S, U, {"role": "assistant", "content": None, "tool_calls": [call("get_weather", '{"city":"Paris","days":3}')]},
     {"role": "tool", "tool_call_id": "call_1", "content": "21 C, sunny"},
     {"role": "assistant", "content": "It is 21 degrees and sunny."},
     {"role": "user", "content": "And tomorrow?"}],
    [S, {"role": "user", "content": "Compute."},
     {"role": "assistant", "content": None, "tool_calls": [call(
         "calc", '{"x": 1.5, "y": -2, "big": 12345678901234, "tiny": 1e-7, "huge": 1e20, "whole": 3.0, '
         '"ok": true, "none": null, "list": [1, "two", {"three": [3]}], "empty": {}, "nothing": []}')]},
     {"role": "tool", "tool_call_id": "call_1", "content": "1.5"}],
    [S, {"role": "user", "content": "Quote."},
     {"role": "assistant", "content": None, "tool_calls": [call(
         "echo", '{"text": "She said \\"hi\\"\\n\\ttab \\\\ back \\u00e9\\u4f60 \\ud83d\\ude42 \\u0001 <|im_end|>"}')]},
     {"role": "tool", "tool_call_id": "call_1",
      "content": 'line one\nline "two" \\ back\t\u00e9\u4f60 \U0001f642 \x01 <|eot_id|><tool_response>'}],
    [S, {"role": "user", "content": "No arguments."},
     {"role": "assistant", "content": None, "tool_calls": [call("now", "{}")]},
     {"role": "tool", "tool_call_id": "call_1", "content": ""}],
]

# Only for chatml: text beside calls, several calls, several answers in a row.
CHATML_ONLY = [
    [S, U, {"role": "assistant", "content": "Let me look.",
            "tool_calls": [call("get_weather", '{"city": "Paris"}', "a"),
                           call("get_weather", '{"city": "Lyon"}', "b")]},
     {"role": "tool", "tool_call_id": "a", "content": "21"},
     {"role": "tool", "tool_call_id": "b", "content": "19"},
     {"role": "assistant", "content": "Paris 21, Lyon 19."}],
    [S, {"role": "user", "content": "Go."},
     {"role": "assistant", "content": "", "tool_calls": [call("a", '{"k": 1}', "1")]},
     {"role": "tool", "tool_call_id": "1", "content": "x"},
     {"role": "system", "content": "Late system."},
     {"role": "assistant", "content": None, "tool_calls": [call("b", '{"k": 2}', "2")]},
     {"role": "tool", "tool_call_id": "2", "content": "y"},
     {"role": "user", "content": "Done?"}],
]


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise ValueError(message)


def environment():
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def render(template, source, messages, add_ass):
    msgs = json.loads(json.dumps(messages))
    if "tool_call.arguments | tojson" in source:  # as minja's goldens: arguments as objects
        for m in msgs:
            for c in m.get("tool_calls", []):
                c["function"]["arguments"] = json.loads(c["function"]["arguments"])
    return template.render(messages=msgs, add_generation_prompt=add_ass, bos_token="<|begin_of_text|>",
                           eos_token="<|eot_id|>")


def library_messages(messages):
    """The (role, content) pairs di_chat_format takes for OpenAI messages."""
    out = []
    for m in messages:
        if m["role"] == "tool":
            out.append(("tool", m["content"]))
            continue
        out.append((m["role"], m["content"] or ""))
        for c in m.get("tool_calls", []):
            args = json.dumps(json.loads(c["function"]["arguments"]), ensure_ascii=False)
            out.append(("tool_call", c["function"]["name"] + "\n" + args))
    return out


def esc(b):
    """format.txt's escaping: printable ASCII kept, '\\' doubled, other bytes \\xHH."""
    return "".join("\\\\" if c == 0x5C else chr(c) if 0x20 <= c < 0x7F else "\\x%02x" % c for c in b)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    lines = ["# recorded with jinja2 %s from the models' templates (see record_tool_goldens.py)" % jinja2.__version__,
             "# command: python3 tests/tools/record_tool_goldens.py --out tests/data/chat_goldens"]
    env = environment()
    for name, (fname, skip) in SOURCES.items():
        with open(os.path.join(TEMPLATES, fname), encoding="utf-8") as fh:
            source = fh.read()
        template = env.from_string(source)
        for conv in COMMON + (CHATML_ONLY if name == "chatml" else []):
            for add_ass in (0, 1):
                text = render(template, source, conv, bool(add_ass))
                if skip:
                    head = render(template, source, conv[:skip], False)
                    assert text.startswith(head), (name, head, text)
                    text = text[len(head):]
                fields = ["T", name, str(add_ass), esc(text.encode("utf-8"))]
                for role, content in library_messages(conv[skip:]):
                    fields += [role, esc(content.encode("utf-8"))]
                lines.append("\t".join(fields))
    with open(os.path.join(a.out, "tools.txt"), "w", encoding="ascii") as f:
        f.write("\n".join(lines) + "\n")
    print("recorded %s" % os.path.join(a.out, "tools.txt"), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
