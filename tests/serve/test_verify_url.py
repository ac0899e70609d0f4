"""`detinfer verify --url`: passes against a live server under load, with the
local library as reference and without; fails, naming the request and the
position, when one response's digest is wrong (a proxy that alters it)."""
import http.server
import json
import os
import subprocess
import threading
import urllib.request

from conftest import SLOW, SMALL, TOOL


def verify(url, *args):
    return subprocess.run([TOOL, "verify", "--url", url, *args], capture_output=True, text=True,
                          timeout=300 * SLOW)


def test_verify_url_passes_against_a_live_server(serve):
    s = serve(SMALL, "--max-sequences", "8", "--chunk", "4")
    out = verify(s.url, "--model", SMALL)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "local library" in out.stdout and "near-tie" in out.stdout
    assert "OK: every response equals its reference." in out.stdout
    assert "\ngreedy [" in out.stdout and " 50 " in out.stdout  # the same request 50 times
    assert "\njson schema [" in out.stdout  # a constrained request, 50 times too
    with urllib.request.urlopen(s.url + "/v1/models") as r:
        if json.load(r)["data"][0]["detinfer"]["sampling"]:
            assert "\nsampled seed " in out.stdout
    out = verify(s.url, "--reps", "10")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "first response" in out.stdout
    # Another model file than the server's: refused before anything is compared.
    other = os.path.join(os.path.dirname(SMALL), "tok_spm_noprefix.gguf")
    out = verify(s.url, "--model", other)
    assert out.returncode == 1 and "is not the server's model file" in out.stderr
    # Usage errors.
    assert verify("ftp://x").returncode == 2


class Proxy(http.server.ThreadingHTTPServer):
    daemon_threads = True


def start_proxy(target, corrupt_request):
    """Forwards to target; in the corrupt_request-th of each 20 repeated
    greedy requests it changes the logits digest of generated position 3."""
    count = {"n": 0}
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def forward(self, body=None):
            req = urllib.request.Request(target + self.path, data=body, method=self.command,
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, r.read()

        def reply(self, status, data):
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self.reply(*self.forward())

        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            status, data = self.forward(body)
            req = json.loads(body)
            with lock:
                if req.get("max_tokens") == 16 and len(req["prompt"]) == 12:  # the repeated greedy request
                    count["n"] += 1
                    n = count["n"]
                else:
                    n = 0
            if n and n % 20 == corrupt_request:
                d = json.loads(data)
                digests = d["detinfer"]["logits_digests"]
                digests[3] = "%032x" % (int(digests[3], 16) ^ 1)
                data = json.dumps(d).encode()
            self.reply(status, data)

    proxy = Proxy(("127.0.0.1", 0), Handler)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    return proxy


def test_verify_url_names_the_request_and_position_of_a_mismatch(serve):
    s = serve(SMALL, "--max-sequences", "8")
    proxy = start_proxy(s.url, corrupt_request=17)
    try:
        url = "http://127.0.0.1:%d" % proxy.server_address[1]
        for args in (["--model", SMALL], []):
            out = verify(url, "--reps", "20", "--traffic", "10", *args)
            assert out.returncode == 1, out.stdout + out.stderr
            assert "MISMATCH greedy [" in out.stdout
            assert "generated position 3" in out.stdout
            assert "FAILED." in out.stdout
    finally:
        proxy.shutdown()
