"""What a user of the installed package does first, checked against digests
computed elsewhere (tests/wheel/expect.sh: the source tree's own build):

    python smoke.py MODEL EXPECT.json

1. `import detinfer` loads the library bundled in the package;
2. LLM.generate on the expected prompts gives the expected digests;
3. the venv's `detinfer` command runs (run, a short verify), and
   `detinfer serve` answers on loopback: /health, then a completion whose
   sequence digest is the expected one; SIGTERM stops it with status 0.

Standard library and detinfer only: it runs in a bare Debian chroot.
Exit status 0 when everything held; the first failure says what differed."""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import urllib.request

import detinfer


def check(cond, what):
    if not cond:
        sys.exit(f"smoke: FAILED: {what}")
    print(f"smoke: ok: {what}", flush=True)


def command():
    """The venv's `detinfer` (the console script), beside its python."""
    return os.path.join(os.path.dirname(sys.executable), "detinfer")


def serve(model, prompt, max_tokens):
    proc = subprocess.Popen([command(), "serve", "--model", model, "--port", "0", "--threads", "2"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines, ready, found = [], threading.Event(), {}

    def pump():
        for line in proc.stderr:
            lines.append(line)
            m = re.search(r"listening on http://(\S+):(\d+) ", line)
            if m and not ready.is_set():
                found["url"] = f"http://{m.group(1)}:{m.group(2)}"
                ready.set()
        ready.set()

    threading.Thread(target=pump, daemon=True).start()
    ready.wait(120)
    try:
        check("url" in found, "detinfer serve started on loopback: " + "".join(lines).strip()[:300])
        with urllib.request.urlopen(found["url"] + "/health", timeout=30) as r:
            check(r.status == 200, f"GET /health: {r.status}")
        body = json.dumps({"model": "m", "prompt": prompt, "max_tokens": max_tokens, "temperature": 0}).encode()
        req = urllib.request.Request(found["url"] + "/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r:
            answer = json.load(r)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        rc = proc.wait(60)
    check(rc == 0, f"detinfer serve exited {rc} on SIGTERM")
    return answer


def main():
    model, expect_path = sys.argv[1], sys.argv[2]
    with open(expect_path, encoding="utf-8") as f:
        expect = json.load(f)
    lib = detinfer.library().path
    check(os.path.dirname(lib) == os.path.join(os.path.dirname(detinfer.__file__), "_native"),
          f"the bundled library is loaded ({lib})")
    check(detinfer.version() == expect["library_version"] == detinfer.__version__,
          f"library {detinfer.version()}, package {detinfer.__version__}")

    runs = expect["runs"]
    with detinfer.LLM(model, threads=2, max_sequences=2) as llm:
        got = llm.generate([r["prompt_text"] for r in runs], max_new=expect["max_new"])
    for r, c in zip(runs, got):
        check((c.prompt_token_ids, c.token_ids, c.digest) == (r["prompt_tokens"], r["tokens"], r["sequence_digest"]),
              f"LLM.generate {r['prompt_text']!r}: {c.digest}")

    first = runs[0]
    out = subprocess.run([command(), "run", "--model", model, "--prompt", first["prompt_text"],
                          "--max-new", str(expect["max_new"]), "--json"], capture_output=True, text=True, timeout=300)
    check(out.returncode == 0 and json.loads(out.stdout)["sequence_digest"] == first["sequence_digest"],
          "detinfer run from the venv's bin: the same digest")
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(first["prompt_text"] + "\n")
    out = subprocess.run([command(), "verify", "--model", model, "--prompts", f.name, "--reps", "2",
                          "--batch-sizes", "1,2", "--threads", "1,2", "--chunks", "3", "--processes", "1",
                          "--backends", "cpu", "--max-new", "4", "--near-ties", "0", "--no-progress"],
                         capture_output=True, text=True, timeout=600)
    check(out.returncode == 0, "detinfer verify (short) passed" + ("" if out.returncode == 0 else
                                                                  ":\n" + out.stdout + out.stderr))

    answer = serve(model, first["prompt_text"], expect["max_new"])
    check(answer["detinfer"]["sequence_digest"] == first["sequence_digest"],
          f"detinfer serve's completion: {answer['detinfer']['sequence_digest']}")
    print("smoke: PASS")


if __name__ == "__main__":
    main()
