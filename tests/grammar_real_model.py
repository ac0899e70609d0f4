#!/usr/bin/env python3
"""Structured output on the real model (make check: tests/check_grammar.c).

The 50 JSON schemas of tests/data/structured_schemas.json (flat and nested
objects, arrays, enums, anyOf, $ref recursion, numbers, strings with bounds,
patterns, formats), each generated greedy and sampled on Gemma 3 270M, 16
sequences stepped together. Every completed output (one that ended at the
end-of-sequence token the grammar allowed) must parse with Python's json and
validate with the jsonschema package (formats checked where jsonschema
checks them); at least 80% of the runs of each kind must complete within
MAX_NEW tokens. The library is used through the Python bindings.

    grammar_real_model.py LIBDETINFER MODEL [SCHEMAS_JSON]
"""
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_NEW = 96
SLOTS = 16
MIN_COMPLETE = 0.8


def main():
    os.environ["DETINFER_LIB"] = sys.argv[1]
    sys.path.insert(0, os.path.join(ROOT, "bindings", "python", "src"))
    import detinfer
    import jsonschema

    model_path = sys.argv[2]
    cases = json.load(open(sys.argv[3] if len(sys.argv) > 3 else
                           os.path.join(ROOT, "tests", "data", "structured_schemas.json")))
    runs = [(i, kind) for kind in ("greedy", "sampled") for i in range(len(cases))]
    checker = jsonschema.FormatChecker()
    t0 = time.time()
    results = {}
    with detinfer.Model(model_path) as m, m.session(threads=2, max_sequences=SLOTS, context_length=160) as s:
        grammars = [detinfer.Grammar.from_json_schema(c["schema"]) for c in cases]
        pending = list(reversed(runs))
        active = {}  # slot -> [run, prompt fed?, tokens]
        free = list(range(SLOTS))
        while pending or active:
            while pending and free:
                slot = free.pop()
                run = pending.pop()
                s.reset(slot)
                params = detinfer.SamplingParams(temperature=0.9, top_p=0.95, seed=run[0]) \
                    if run[1] == "sampled" else None
                s.set_sampling(slot, params)
                active[slot] = [run, m.tokenize(cases[run[0]]["prompt"] + " "), []]
            s.step([(slot, a[1]) for slot, a in active.items()])
            for slot in list(active):
                run, feed, tokens = active[slot]
                if not tokens and len(feed) > 1:
                    s.set_grammar(slot, grammars[run[0]])  # the prompt is in
                token = s.sample_token(slot)
                tokens.append(token)
                active[slot][1] = [token]
                if token == m.eos or len(tokens) >= MAX_NEW:
                    results[run] = (token == m.eos, m.detokenize(tokens[:-1] if token == m.eos else tokens))
                    del active[slot]
                    free.append(slot)
        for g in grammars:
            g.close()
    failures = 0
    for kind in ("greedy", "sampled"):
        done = 0
        for i, case in enumerate(cases):
            complete, text = results[(i, kind)]
            if not complete:
                print("cut at %d tokens (%s, schema %d): %r" % (MAX_NEW, kind, i, text[:120]))
                continue
            done += 1
            try:
                jsonschema.validate(json.loads(text), case["schema"], format_checker=checker)
            except (ValueError, jsonschema.ValidationError) as e:
                failures += 1
                print("FAIL %s schema %d (%s): %r: %s" % (kind, i, case["prompt"], text, str(e).splitlines()[0]))
        print("%s: %d of %d outputs complete, every complete one valid: %s" %
              (kind, done, len(cases), "yes" if not failures else "NO"))
        if done < MIN_COMPLETE * len(cases):
            print("FAIL %s: only %d of %d complete within %d tokens" % (kind, done, len(cases), MAX_NEW))
            failures += 1
    print("real model: %d runs of %d schemas in %.1f s" % (len(runs), len(cases), time.time() - t0))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
