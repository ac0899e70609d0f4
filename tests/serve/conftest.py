"""Fixtures of the `detinfer serve` tests (make check-serve).

The server under test is the detinfer tool ($DETINFER, default build/tools/detinfer)
started on a free loopback port (--port 0: it prints the port) and stopped by
each test with SIGTERM, which must exit 0. References come from `detinfer run
--json`, the library run alone on one sequence: never from the server.

Models: $DI_TEST_MODELS (default build/models) for the generated ones, and the
real Gemma 3 270M file from tools/scripts/fetch-model.sh for the end-to-end case.
"""
import json
import os
import re
import signal
import subprocess
import threading
import time

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOOL = os.environ.get("DETINFER", os.path.join(ROOT, "build", "tools", "detinfer"))
MODELS = os.environ.get("DI_TEST_MODELS", os.path.join(ROOT, "build", "models"))
# A 1-layer llama with a SentencePiece tokenizer: fast, text prompts, context 64.
SMALL = os.path.join(MODELS, "tok_spm.gguf")
START_TIMEOUT = 60
# Sanitizer builds are several times slower.
SLOW = float(os.environ.get("DI_TEST_SLOW", "1"))


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "heavy: runs the real model many times over server code that lighter tests reach too; "
                   "the sanitizer run (tests/check_serve.c under SANITIZE=1) leaves these out")


def real_model():
    path = os.environ.get("DI_TEST_REAL_MODEL")
    if path is None:
        try:
            path = subprocess.run([os.path.join(ROOT, "tools", "scripts", "fetch-model.sh")], capture_output=True,
                                  text=True, timeout=60).stdout.strip()
        except Exception:
            path = ""
    return path if path and os.path.exists(path) else None


def serve_real(serve, *args):
    """serve(the real Gemma 3 270M, *args), or the test skipped when its file is absent."""
    path = real_model()
    if not path:
        pytest.skip("the real Gemma 3 270M file is needed (tools/scripts/fetch-model.sh)")
    return serve(path, *args)


class Server:
    def __init__(self, model, *args, env=None):
        self.model = model
        self.stderr_lines = []
        cmd = [TOOL, "serve", "--model", model, "--port", "0", *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     env=env)
        self.port = None
        ready = threading.Event()

        def pump():
            for line in self.proc.stderr:
                self.stderr_lines.append(line)
                m = re.search(r"listening on http://(\S+):(\d+) ", line)
                if m and not ready.is_set():
                    self.host, self.port = m.group(1), int(m.group(2))
                    ready.set()
            ready.set()

        self.pump = threading.Thread(target=pump, daemon=True)
        self.pump.start()
        ready.wait(START_TIMEOUT * SLOW)
        if self.port is None:
            self.proc.kill()
            raise RuntimeError("server did not start: " + "".join(self.stderr_lines))
        self.url = f"http://{self.host}:{self.port}"

    def stderr(self):
        return "".join(self.stderr_lines)

    def stop(self, timeout=60):
        """SIGTERM: the server drains and must exit 0."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout * SLOW)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("server did not stop within %ds after SIGTERM\n%s" % (timeout, self.stderr()))
        self.pump.join(5)
        assert rc == 0, "server exited %d\n%s" % (rc, self.stderr())
        # Sanitizer reports go to stderr; the exit status may not show them all.
        assert "ERROR: AddressSanitizer" not in self.stderr() and "runtime error:" not in self.stderr() and \
            "WARNING: ThreadSanitizer" not in self.stderr(), self.stderr()
        return rc


def step_delay(ms):
    """The environment of a server that pauses ms after every engine step
    (TEST ONLY hook DETINFER_TEST_STEP_DELAY_MS), so that lifecycle tests act
    while requests are in flight on the tiny model. Results do not change."""
    return dict(os.environ, DETINFER_TEST_STEP_DELAY_MS=str(ms))


@pytest.fixture
def serve():
    """serve(model, *args) starts a server; every one is stopped (SIGTERM, exit 0) at the end."""
    started = []

    def start(model=SMALL, *args, env=None):
        s = Server(model, *args, env=env)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


_reference_cache = {}


def reference(model, prompt=None, tokens=None, max_tokens=16):
    """The library alone: `detinfer run --json` for this prompt (text, with BOS, or token ids)."""
    key = (model, prompt, tuple(tokens) if tokens else None, max_tokens)
    if key in _reference_cache:
        return _reference_cache[key]
    cmd = [TOOL, "run", "--model", model, "--max-new", str(max_tokens), "--json"]
    if tokens is not None:
        cmd += ["--tokens", ",".join(map(str, tokens))]
    else:
        cmd += ["--prompt", prompt]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300 * SLOW)
    assert out.returncode == 0, out.stderr
    ref = json.loads(out.stdout)
    _reference_cache[key] = ref
    return ref


def check_against_reference(d, ref, n_tokens=None):
    """d: a response's detinfer object; ref: the reference run. With n_tokens,
    the response may stop earlier (a stop string): its tokens are then the
    first n_tokens of the reference, and the sequence digest is checked with
    an independent XXH3-128 of the ids."""
    import struct

    import xxhash
    ids = d["completion_token_ids"]
    if n_tokens is None:
        assert ids == ref["tokens"], (ids, ref["tokens"])
        assert d["sequence_digest"] == ref["sequence_digest"]
    else:
        assert ids == ref["tokens"][:n_tokens]
    assert d["prompt_tokens"] == len(ref["prompt_tokens"])
    all_ids = ref["prompt_tokens"] + ids
    assert d["sequence_digest"] == xxhash.xxh3_128_hexdigest(struct.pack("<%di" % len(all_ids), *all_ids))
    if "logits_digests" in d:
        assert d["logits_digests"] == [s["logits_digest"] for s in ref["steps"]][:len(ids)]


def bindings():
    """The Python bindings (bindings/python) over the plain library of this
    tree, for references the detinfer command cannot give (special-token
    tokenization, sampling). Not a sanitizer build: its runtimes cannot be
    loaded into Python."""
    import sys
    lib = os.path.join(ROOT, "build", "libdetinfer.so.1")
    if not os.path.exists(lib):
        pytest.skip("build/libdetinfer.so.1 (make) is needed for this reference")
    os.environ.setdefault("DETINFER_LIB", lib)
    src = os.path.join(ROOT, "bindings", "python", "src")
    if src not in sys.path:
        sys.path.insert(0, src)
    import detinfer
    return detinfer


def sampled_reference(model, tokens, max_tokens, **params):
    """The library alone (through the bindings) generating with sampling
    parameters: {"tokens", "digests", "sequence_digest"}."""
    detinfer = bindings()
    with detinfer.Model(model) as m:
        with m.session(max_sequences=1, context_length=len(tokens) + max_tokens,
                       profile=detinfer.Profile.INTEGER) as s:  # the server's default profile
            seq = s.sequence(0)
            seq.set_sampling(detinfer.SamplingParams(**params))
            gen = seq.generate(tokens, max_new=max_tokens)
            steps = list(gen)
            return {"tokens": [t.token for t in steps], "digests": [t.digest for t in steps],
                    "sequence_digest": gen.digest, "prompt_tokens": list(tokens)}


def metric(text, name, labels=None):
    """The value of one sample of Prometheus text, or 0 when absent."""
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"([a-zA-Z_:]+)(\{[^}]*\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        if labels:
            got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
            if any(got.get(k) != v for k, v in labels.items()):
                continue
        return float(m.group(3))
    return 0.0


def wait_until(predicate, timeout=10.0, interval=0.05):
    end = time.time() + timeout * SLOW
    while time.time() < end:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def token_string(piece):
    """A token's text as the server spells it: the piece when it is valid
    UTF-8 without NUL, else OpenAI's "bytes:\\xNN..." spelling."""
    try:
        if b"\0" not in piece:
            return piece.decode("utf-8")
    except UnicodeDecodeError:
        pass
    return "bytes:" + "".join("\\x%02x" % b for b in piece)


def library_logprobs():
    """di_session_logprobs of the bindings' library, by ctypes: (session
    handle, seq, token, &logprob, n_top, ids, logprobs) -> status."""
    import ctypes as C
    bindings()
    from detinfer._lib import library
    fn = library().c.di_session_logprobs
    fn.restype = C.c_int
    fn.argtypes = [C.c_void_p, C.c_uint32, C.c_int32, C.POINTER(C.c_float), C.c_uint32,
                   C.POINTER(C.c_int32), C.POINTER(C.c_float)]
    return fn


def logprobs_reference(model, tokens, max_tokens, n_top, **params):
    """The library alone (through the bindings, and di_session_logprobs by
    ctypes): the prompt, then up to max_tokens tokens chosen as the server
    would choose them (greedy, or the sampling params), stopping at EOS. For
    each token: {"token", "piece" (bytes), "logprob", "top": [(id, piece,
    logprob), ...]}; the session's context is the prompt plus max_tokens - 1
    tokens, exactly what the server promises to fit."""
    import ctypes as C
    detinfer = bindings()
    fn = library_logprobs()
    out = []
    with detinfer.Model(model) as m:
        with m.session(max_sequences=1, context_length=len(tokens) + max_tokens - 1,
                       profile=detinfer.Profile.INTEGER) as s:  # the server's default profile
            seq = s.sequence(0)
            if params:
                seq.set_sampling(detinfer.SamplingParams(**params))
            seq.step(list(tokens))
            for k in range(max_tokens):
                token = seq.sample_token()  # greedy without params
                lp = C.c_float()
                ids, lps = (C.c_int32 * max(n_top, 1))(), (C.c_float * max(n_top, 1))()
                assert fn(s._h(), 0, token, C.byref(lp), n_top, ids, lps) == 0, s._msg()
                out.append({"token": token, "piece": m.token_piece_bytes(token), "logprob": lp.value,
                            "top": [(ids[j], m.token_piece_bytes(ids[j]), lps[j]) for j in range(n_top)]})
                if token == m.eos or k + 1 == max_tokens:
                    break
                seq.step([token])
    return out
