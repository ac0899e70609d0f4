"""Messages and documentation that said less or more than the truth (issue 42,
part 2, item 5): verify --help, run --max-tokens, the start-up line, and
docs/SERVING.md on response_format."""
import json
import os
import re
import subprocess

from conftest import ROOT, SMALL, TOOL, wait_until


def test_verify_help_lists_the_url_options():
    out = subprocess.run([TOOL, "verify", "--help"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    for option in ["--url", "--save", "--reps", "--ties", "--traffic", "--concurrency", "--api-key-file"]:
        assert re.search(r"^  %s " % option, out.stdout, re.M), (option, out.stdout)
    model = re.search(r"^  --model FILE +(.*)$", out.stdout, re.M).group(1)
    assert "optional" in model and "--url" in model, model


def test_run_takes_max_tokens_as_max_new():
    def tokens(*args):
        out = subprocess.run([TOOL, "run", "--model", SMALL, "--prompt", "Hello", "--json", *args],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)["tokens"]
    assert tokens("--max-tokens", "5") == tokens("--max-new", "5") and len(tokens("--max-tokens", "5")) == 5


def test_start_up_line_names_each_host_once(serve):
    for host in ["127.0.0.1", "127.0.0.2"]:
        s = serve(SMALL, "--host", host)
        assert wait_until(lambda: "Host header" in s.stderr(), timeout=10)  # the line after the listening one
        hosts = re.search(r"Host header checked against (\S+);", s.stderr()).group(1).split(",")
        assert sorted(hosts) == sorted(set(hosts)) and host in hosts, hosts


def test_serving_doc_does_not_refuse_response_format():
    with open(os.path.join(ROOT, "docs", "SERVING.md")) as f:
        refused = [line for line in f if "| refused |" in line]
    assert refused and not any("response_format" in line for line in refused), refused
