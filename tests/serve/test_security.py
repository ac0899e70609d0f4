"""Security and limits of `detinfer serve`, over raw HTTP (curl, sockets): the
allowlist (403), the API key (401), oversized bodies (413), a corpus of bad
requests (400 with OpenAI's error body), a full queue (429 + Retry-After),
stalled clients; after each the server keeps serving."""
import json
import os
import socket
import subprocess
import tempfile
import threading
import time

import pytest
from conftest import SLOW, SMALL, check_against_reference, metric, reference, step_delay, wait_until


def curl(url, *args, body=None, interface=None):
    """(status, body) of one request; body is bytes sent exactly as given."""
    cmd = ["curl", "-sS", "-g", "--max-time", str(int(60 * SLOW)), "-o", "-", "-w", "\n%{http_code}", url, *args]
    if interface:
        cmd[1:1] = ["--interface", interface]
    if body is not None:
        fd, path = tempfile.mkstemp()
        os.write(fd, body)
        os.close(fd)
        cmd += ["-H", "Content-Type: application/json", "--data-binary", "@" + path]
    try:
        out = subprocess.run(cmd, capture_output=True, timeout=90 * SLOW)
    finally:
        if body is not None:
            os.unlink(path)
    assert out.returncode == 0, out.stderr
    text, _, status = out.stdout.rpartition(b"\n")
    return int(status), text


def assert_error(status, text, want_status, param=None):
    assert status == want_status, (status, text)
    err = json.loads(text)["error"]
    assert isinstance(err["message"], str) and err["message"], err
    assert isinstance(err["type"], str) and err["type"]
    if param is not None:
        assert err["param"] == param, err
    return err


def assert_still_serving(s):
    # With the neutral values of fields some clients always send.
    status, text = curl(s.url + "/v1/completions", body=b'{"prompt": "Hello", "max_tokens": 4, "logit_bias": {}, '
                        b'"suffix": null, "best_of": 1, "user": "u", "stream_options": null}')
    assert status == 200, text
    check_against_reference(json.loads(text)["detinfer"], reference(SMALL, prompt="Hello", max_tokens=4))


# (body, status, param): the small model's context is 64 tokens, the server's
# --max-tokens cap 63 ("hi" is 3 tokens with BOS).
CORPUS = [
    (b"{", 400, None),
    (b"", 400, None),
    (b"[]", 400, None),
    (b'"prompt"', 400, None),
    (b'{"prompt": "hi"} trailing', 400, None),
    (b'{"prompt": "a", "prompt": "b"}', 400, None),
    (b'{"max_tokens": 5}', 400, "prompt"),
    (b'{"prompt": 5}', 400, "prompt"),
    (b'{"prompt": null}', 400, "prompt"),
    (b'{"prompt": []}', 400, "prompt"),
    (b'{"prompt": [1, 2, 1000000]}', 400, "prompt"),
    (b'{"prompt": [1, -2]}', 400, "prompt"),
    (b'{"prompt": [1, 2.5]}', 400, "prompt"),
    (b'{"prompt": ["a", [1]]}', 400, "prompt"),
    (b'{"prompt": [[1], []]}', 400, "prompt"),
    (b'{"prompt": [' + b",".join(b"5" for _ in range(100)) + b"]}", 400, "prompt"),
    (b'{"prompt": "hi", "max_tokens": "5"}', 400, "max_tokens"),
    (b'{"prompt": "hi", "max_tokens": 0}', 400, "max_tokens"),
    (b'{"prompt": "hi", "max_tokens": -1}', 400, "max_tokens"),
    (b'{"prompt": "hi", "max_tokens": 100000}', 400, "max_tokens"),
    (b'{"prompt": "hi", "max_tokens": 63}', 400, "max_tokens"),  # 3 + 63 - 1 tokens to hold: past the context
    (b'{"prompt": "hi", "max_tokens": 99999999999999999999999999}', 400, None),
    (b'{"prompt": "hi", "max_tokens": 1e400}', 400, None),
    (b'{"prompt": "hi", "max_tokens": 5.0}', 400, "max_tokens"),
    (b'{"prompt": "hi", "temperature": -1}', 400, "temperature"),
    (b'{"prompt": "hi", "temperature": "hot"}', 400, "temperature"),
    (b'{"prompt": "hi", "top_p": 0}', 400, "top_p"),
    (b'{"prompt": "hi", "top_p": 1.5}', 400, "top_p"),
    (b'{"prompt": "hi", "top_k": -3}', 400, "top_k"),
    (b'{"prompt": "hi", "presence_penalty": 1e300}', 400, "presence_penalty"),
    (b'{"prompt": "hi", "seed": "x"}', 400, "seed"),
    (b'{"prompt": "hi", "n": 9}', 400, "n"),  # over --max-n (8)
    (b'{"prompt": "hi", "n": 0}', 400, "n"),
    (b'{"prompt": "hi", "stream_options": {"include_usage": true}}', 400, "stream_options"),
    (b'{"prompt": "hi", "stream": true, "stream_options": {"x": 1}}', 400, "stream_options"),
    (b'{"prompt": "hi", "detinfer": {"prompt_ids": 1}}', 400, "detinfer"),
    (b'{"prompt": "hi", "stream": "yes"}', 400, "stream"),
    (b'{"prompt": "hi", "stop": [1]}', 400, "stop"),
    (b'{"prompt": "hi", "stop": ["a", "b", "c", "d", "e"]}', 400, "stop"),
    (b'{"prompt": "hi", "stop": ""}', 400, "stop"),
    (b'{"prompt": "hi", "logprobs": 6}', 400, "logprobs"),
    (b'{"prompt": "hi", "echo": 1}', 400, "echo"),
    (b'{"prompt": "hi", "echo": true, "max_tokens": 0, "stream": true}', 400, "max_tokens"),
    (b'{"prompt": "hi", "bogus": 1}', 400, "bogus"),
    (b'{"prompt": "hi", "messages": []}', 400, "messages"),
    (b'{"prompt": "hi", "detinfer": {"bogus": true}}', 400, "detinfer"),
    (b'{"prompt": "hi", "detinfer": 1}', 400, "detinfer"),
    (b'{"prompt": "\xff\xfe"}', 400, None),              # invalid UTF-8
    (b'{"prompt": "\xc0\xaf"}', 400, None),              # overlong encoding
    (b'{"prompt": "\xed\xa0\x80"}', 400, None),          # a surrogate in UTF-8
    (b'{"prompt": "\\ud800"}', 400, None),               # a lone surrogate escape
    (b'{"prompt": "a\\u0000b"}', 400, None),             # NUL
    (b'{"prompt": "hi", "model": 7}', 400, "model"),
    (b'{"prompt": "hi", "' + "\u00e9".encode() * 40 + b'": 1}', 400, None),  # an unknown key, cut to fit
    (b'{"prompt": "hi", "logit_bias": {"5": 100}}', 400, "logit_bias"),
    (b'{"prompt": "hi", "suffix": "x"}', 400, "suffix"),
    (b'{"prompt": "hi", "best_of": 3}', 400, "best_of"),
]


def test_bad_input_corpus(serve):
    s = serve(SMALL, "--max-tokens", "63")
    for body, want, param in CORPUS:
        status, text = curl(s.url + "/v1/completions", body=body)
        try:
            assert_error(status, text, want, param)
        except AssertionError as e:
            raise AssertionError("body %r: %s" % (body[:80], e))
    # The messages name the limit that was hit.
    def message(body):
        return assert_error(*curl(s.url + "/v1/completions", body=body), 400)["message"]
    assert "context" in message(b'{"prompt": "hi", "max_tokens": 63}')
    assert "cap" in message(b'{"prompt": "hi", "max_tokens": 64}')
    assert "context" in message(b'{"prompt": [' + b",".join(b"5" for _ in range(65)) + b"]}")
    assert "not valid JSON" in message(b'{"prompt": "\xff"}')
    # Chat's own fields.
    for body, param in [(b'{"messages": "hi"}', "messages"), (b'{"messages": []}', "messages"),
                        (b'{"messages": [{"role": "user"}]}', "messages"), (b'{"prompt": "hi"}', "prompt")]:
        status, text = curl(s.url + "/v1/chat/completions", body=body)
        assert_error(status, text, 400, param)
    # Routes and methods.
    assert_error(*curl(s.url + "/v1/completions"), 405)
    assert_error(*curl(s.url + "/v1/nothing"), 404)
    assert_error(*curl(s.url + "/health", body=b"{}"), 405)
    # Oversized: refused from Content-Length, and from a chunked body that grows too big.
    big = b'{"prompt": "' + b"a" * (1 << 20) + b'"}'
    assert_error(*curl(s.url + "/v1/completions", body=big), 413)
    assert_error(*curl(s.url + "/v1/completions", "-H", "Transfer-Encoding: chunked", body=big), 413)
    assert_still_serving(s)
    m = curl(s.url + "/metrics")[1].decode()
    assert metric(m, "detinfer_requests_total", {"endpoint": "/v1/completions", "status": "400"}) == len(CORPUS) + 4
    assert metric(m, "detinfer_requests_total", {"endpoint": "/v1/completions", "status": "413"}) == 2


def refused(url, interface=None):
    """1 when the server closed the connection without a byte (curl: "Empty
    reply from server", or the connection reset): a client outside the
    allowlist is refused at accept, before any byte of its request is read."""
    cmd = ["curl", "-sS", "-g", "--max-time", str(int(30 * SLOW)), "-o", "/dev/null", url]
    if interface:
        cmd[1:1] = ["--interface", interface]
    out = subprocess.run(cmd, capture_output=True, timeout=60 * SLOW)
    return out.returncode in (52, 56), out.returncode  # empty reply, or reset


def test_allowlist(serve):
    s = serve(SMALL, "--allow", "127.0.0.1/32")
    assert refused(s.url + "/v1/completions", interface="127.0.0.2")[0]
    assert refused(s.url + "/health", interface="127.0.0.2")[0]
    assert curl(s.url + "/health", interface="127.0.0.1")[0] == 200
    assert_still_serving(s)
    # IPv6: ::1 is allowed by default, and an IPv4 client is not in ::1/128.
    s6 = serve(SMALL, "--host", "::1", "--allow", "::1/128")
    assert curl(s6.url + "/health")[0] == 200
    s4 = serve(SMALL, "--allow", "::1/128,10.0.0.0/8")
    assert refused(s4.url + "/health")[0]
    # "::" takes IPv4 clients too (IPv4-mapped), matched against IPv4 networks.
    s_any = serve(SMALL, "--host", "::", "--allow", "127.0.0.1/32")
    assert curl("http://127.0.0.1:%d/health" % s_any.port)[0] == 200
    assert refused("http://[::1]:%d/health" % s_any.port)[0]
    assert refused("http://127.0.0.1:%d/health" % s_any.port, interface="127.0.0.2")[0]


def test_allow_option_errors():
    from conftest import TOOL
    for bad in ["300.0.0.1/8", "10.0.0.0/33", "::1/129", "nonsense", ""]:
        out = subprocess.run([TOOL, "serve", "--model", SMALL, "--allow", bad], capture_output=True, text=True,
                             timeout=30)
        assert out.returncode == 2 and "--allow" in out.stderr, (bad, out.stderr)


def test_api_key(serve, tmp_path):
    import openai
    key = "sk-test-0123456789abcdef"
    path = tmp_path / "key"
    path.write_text(key + "\n")
    s = serve(SMALL, "--api-key-file", str(path))
    body = b'{"prompt": "Hello", "max_tokens": 4}'
    assert_error(*curl(s.url + "/v1/completions", body=body), 401)
    assert_error(*curl(s.url + "/v1/completions", "-H", "Authorization: Bearer wrong", body=body), 401)
    assert_error(*curl(s.url + "/v1/completions", "-H", "Authorization: Bearer " + key + "x", body=body), 401)
    assert_error(*curl(s.url + "/v1/completions", "-H", "Authorization: Bearer " + key[:-1], body=body), 401)
    assert_error(*curl(s.url + "/v1/completions", "-H", "Authorization: Basic " + key, body=body), 401)
    assert_error(*curl(s.url + "/metrics"), 401)
    assert curl(s.url + "/health")[0] == 200  # for load balancers
    status, _ = curl(s.url + "/v1/completions", "-H", "Authorization: Bearer " + key, body=body)
    assert status == 200
    c = openai.OpenAI(base_url=s.url + "/v1", api_key=key, max_retries=0)
    r = c.completions.create(model="x", prompt="Hello", max_tokens=4)
    check_against_reference(r.model_extra["detinfer"], reference(SMALL, prompt="Hello", max_tokens=4))
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=s.url + "/v1", api_key="nope", max_retries=0).models.list()


def test_stalled_client_times_out(serve):
    s = serve(SMALL, "--timeout", "1")
    sock = socket.create_connection(("127.0.0.1", s.port), timeout=10 * SLOW)
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"prompt\"")
    start = time.time()
    data = sock.recv(4096)  # the server closes the stalled connection
    assert time.time() - start < 8 * SLOW
    assert data == b"" or b"HTTP/1.1" in data
    sock.close()
    assert_still_serving(s)


def test_full_queue_429(serve):
    # One slot, one queue place, 50 ms per step: a request holds the slot ~1 s.
    s = serve(SMALL, "--max-sequences", "1", "--queue", "1", env=step_delay(50))
    prompt = "Hello world"
    body = json.dumps({"prompt": prompt, "max_tokens": 20}).encode()
    results = [None] * 6

    def one(i):
        results[i] = curl(s.url + "/v1/completions", "-D", "-", body=body)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(results))]
    for t in threads:
        t.start()
        time.sleep(0.05)
    for t in threads:
        t.join()
    statuses = sorted(r[0] for r in results)
    assert statuses.count(200) == 2 and statuses.count(429) == 4, statuses
    ref = reference(SMALL, prompt=prompt, max_tokens=20)
    for status, text in results:
        headers, _, payload = text.partition(b"\r\n\r\n")
        if status == 429:
            assert b"Retry-After: 1" in headers
            assert_error(status, payload, 429)
        else:
            check_against_reference(json.loads(payload)["detinfer"], ref)
    assert_still_serving(s)


def test_max_tokens_boundary(serve):
    """P prompt tokens and max_tokens M fit when P + M - 1 <= context: the
    last generated token is never fed back. The small model's context is 64;
    "hi" is 3 tokens with BOS."""
    from conftest import logprobs_reference
    s = serve(SMALL)
    ids = [1] + [5] * 63  # 64 prompt tokens, with max_tokens 1: exactly the context
    status, text = curl(s.url + "/v1/completions", body=json.dumps({"prompt": ids, "max_tokens": 1}).encode())
    assert status == 200, text
    check_against_reference(json.loads(text)["detinfer"], reference(SMALL, tokens=ids, max_tokens=1))
    assert_error(*curl(s.url + "/v1/completions", body=json.dumps({"prompt": ids, "max_tokens": 2}).encode()),
                 400, "max_tokens")
    assert_error(*curl(s.url + "/v1/completions", body=json.dumps({"prompt": ids + [5], "max_tokens": 1}).encode()),
                 400, "prompt")
    # 3 + 62 - 1 = 64: fits, and equals the library's run in a session of exactly 64 tokens
    status, text = curl(s.url + "/v1/completions", body=b'{"prompt": "hi", "max_tokens": 62}')
    assert status == 200, text
    d = json.loads(text)["detinfer"]
    ref = reference(SMALL, prompt="hi", max_tokens=62)
    check_against_reference(d, ref)
    assert d["completion_token_ids"] == [t["token"] for t in logprobs_reference(SMALL, ref["prompt_tokens"], 62, 0)]
    err = assert_error(*curl(s.url + "/v1/completions", body=b'{"prompt": "hi", "max_tokens": 63}'), 400,
                       "max_tokens")
    assert "context" in err["message"]
    # the cap follows: a 1-token prompt may ask for the whole context
    status, text = curl(s.url + "/v1/completions", body=b'{"prompt": [1], "max_tokens": 64}')
    assert status == 200, text
    assert_error(*curl(s.url + "/v1/completions", body=b'{"prompt": [1], "max_tokens": 65}'), 400, "max_tokens")
    assert_still_serving(s)


def http_get_health(sock):
    """Sends GET /health on sock; the bytes received until the server closes
    or answers (b"" when it closed the connection at once)."""
    try:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        return sock.recv(4096)
    except (ConnectionResetError, BrokenPipeError):
        return b""


def test_connections_per_ip_limit(serve):
    s = serve(SMALL, "--max-connections-per-ip", "2")
    held = [socket.create_connection(("127.0.0.1", s.port), timeout=10 * SLOW) for _ in range(2)]
    assert b"200 OK" in http_get_health(held[0])  # the held connections are served
    third = socket.create_connection(("127.0.0.1", s.port), timeout=10 * SLOW)
    # past the limit, the address's oldest idle connection gives its place
    # (test_attack.py: with none idle, 429)
    assert b"200 OK" in http_get_health(third)
    assert sorted(http_get_health(sock) == b"" for sock in held) == [False, True]  # one gave way
    third.close()
    # another client address has its own count
    other = socket.create_connection(("127.0.0.1", s.port), timeout=10 * SLOW, source_address=("127.0.0.2", 0))
    assert b"200 OK" in http_get_health(other)
    other.close()
    for sock in held:
        sock.close()

    def served():
        sock = socket.create_connection(("127.0.0.1", s.port), timeout=10 * SLOW)
        try:
            return b"200 OK" in http_get_health(sock)
        finally:
            sock.close()
    assert wait_until(served, timeout=10)
    assert_still_serving(s)


def test_connections_per_ip_default_and_option_errors(serve):
    s = serve(SMALL)  # default 32
    held = [socket.create_connection(("127.0.0.1", s.port), timeout=10 * SLOW) for _ in range(32)]
    assert b"200 OK" in http_get_health(held[-1])
    extra = socket.create_connection(("127.0.0.1", s.port), timeout=10 * SLOW)
    assert b"200 OK" in http_get_health(extra) and http_get_health(held[0]) == b""  # the oldest idle one gave way
    extra.close()
    for sock in held:
        sock.close()
    unlimited = serve(SMALL, "--max-connections-per-ip", "0")
    held = [socket.create_connection(("127.0.0.1", unlimited.port), timeout=10 * SLOW) for _ in range(40)]
    assert b"200 OK" in http_get_health(held[-1])
    for sock in held:
        sock.close()
    from conftest import TOOL
    for bad in ["-1", "x", "70000"]:
        out = subprocess.run([TOOL, "serve", "--model", SMALL, "--max-connections-per-ip", bad], capture_output=True,
                             text=True, timeout=30)
        assert out.returncode == 2 and "--max-connections-per-ip" in out.stderr, (bad, out.stderr)
