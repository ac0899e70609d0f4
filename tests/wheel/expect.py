"""The digests tests/wheel/smoke.py must find, from the source tree's own
`detinfer run` (the Makefile's build: no code of the wheel):

    python expect.py DETINFER MODEL OUT.json
"""
import json
import subprocess
import sys

PROMPTS = ["The capital of France is", "def fibonacci(n):", "Once upon a time,"]
MAX_NEW = 8


def main():
    tool, model, out = sys.argv[1:4]
    runs = []
    for p in PROMPTS:
        r = json.loads(subprocess.run([tool, "run", "--model", model, "--prompt", p, "--max-new", str(MAX_NEW),
                                       "--json"], capture_output=True, text=True, check=True, timeout=300).stdout)
        runs.append({k: r[k] for k in ("prompt_text", "prompt_tokens", "tokens", "sequence_digest")})
        version = r["library_version"]
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"library_version": version, "max_new": MAX_NEW, "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
