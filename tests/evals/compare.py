"""make check-evals' checker (tests/evals/run.sh): the harness runs agree.

  compare.py --url URL [--model GGUF] --lm-eval DIR... --inspect DIR...

- lm-eval: every run's scores (results_*.json) and every per-sample record
  (samples_*.jsonl of --log_samples: arguments, resps, filtered_resps, metrics)
  are the same as the first run's, whatever the batch size and concurrency;
- each loglikelihood lm-eval reports (and its is_greedy), and each rolling
  one (perplexity, texts of one window), is what the server
  itself gives: the sum of the echoed prompt log-probabilities of the
  continuation's tokens (POST /v1/completions, echo, logprobs 1, max_tokens 0),
  the tokens split as lm-eval splits them (its _encode_pair, through /tokenize);
  and the library's own LLM.score of the same tokens (the Python bindings of
  this tree, with --model) gives the same sum;
- inspect-ai: every run succeeded, and each sample's answer and score, and the
  scores, are the same in every run (chat completions and Responses API alike).
Exit status 1 with the first difference."""
import argparse
import glob
import json
import os
import sys

import requests


def fail(msg):
    print("compare: FAILED: " + msg, file=sys.stderr)
    sys.exit(1)


def one(pattern):
    found = sorted(glob.glob(pattern, recursive=True))
    if len(found) != 1:
        fail(f"expected one file {pattern}, found {found}")
    return found[0]


def lm_eval_run(out_dir, tasks):
    """{"results": {task: metrics}, task: {doc_id: sample record}} of one run."""
    with open(one(os.path.join(out_dir, "**", "results_*.json"))) as f:
        results = json.load(f)["results"]
    run = {"results": {t: results[t] for t in tasks}}
    for t in tasks:
        samples = {}
        with open(one(os.path.join(out_dir, "**", f"samples_{t}_*.jsonl"))) as f:
            for line in f:
                s = json.loads(line)
                samples[s["doc_id"]] = s
        run[t] = samples
    return run


def first_difference(a, b, path=""):
    if type(a) is not type(b):
        return f"{path}: {a!r} != {b!r}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                return f"{path}/{k}: only in one run"
            d = first_difference(a[k], b[k], f"{path}/{k}")
            if d:
                return d
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} != {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    return None if a == b else f"{path}: {a!r} != {b!r}"


def args_of(sample):
    """The (context, continuation) pairs of a multiple-choice sample's requests."""
    args = sample["arguments"]
    if isinstance(args, dict):  # {"gen_args_0": {"arg_0": ..., "arg_1": ...}, ...}
        args = [[v["arg_0"], v["arg_1"]] for _, v in sorted(args.items(), key=lambda kv: int(kv[0].split("_")[-1]))]
    return args


class Server:
    def __init__(self, url):
        self.url = url
        self.s = requests.Session()

    def post(self, path, body):
        r = self.s.post(self.url + path, json=body, timeout=600)
        if r.status_code != 200:
            fail(f"{path} {body!r}: {r.status_code} {r.text}")
        return r.json()

    def encode(self, text):  # what lm-eval's RemoteTokenizer sends
        return self.post("/tokenize", {"prompt": text, "add_special_tokens": False})["tokens"]

    def loglikelihood(self, context, continuation):
        """lm-eval's _encode_pair (trailing spaces of the context move to the
        continuation), then the server's prompt log-probabilities."""
        n = len(context) - len(context.rstrip())
        if n:
            context, continuation = context[:-n], context[-n:] + continuation
        return self.score(self.encode(context + continuation), len(self.encode(context)))

    def rolling(self, text):
        """lm-eval's loglikelihood_rolling of a text shorter than its max_length:
        one window, the text's tokens after its prefix token (its remote
        tokenizer's bos_token_id or else eos_token_id: /tokenizer_info's texts,
        tokenized)."""
        info = self.s.get(self.url + "/tokenizer_info", timeout=60).json()
        prefix = self.encode(info["bos_token"] or info["eos_token"])[0]
        return self.score([prefix] + self.encode(text), 1)[0]

    def score(self, whole, ctxlen):
        """The sum of the server's echoed log-probabilities of whole[ctxlen:], and
        whether each is its position's top one (lm-eval's is_greedy)."""
        out = self.post("/v1/completions", {"model": "x", "prompt": whole, "echo": True, "logprobs": 1,
                                            "max_tokens": 0, "temperature": 0})
        lp = out["choices"][0]["logprobs"]
        if len(lp["token_logprobs"]) != len(whole):
            fail(f"echo gave {len(lp['token_logprobs'])} log-probabilities for {len(whole)} prompt tokens")
        token_logprobs, top = lp["token_logprobs"][ctxlen:], lp["top_logprobs"][ctxlen:]
        greedy = all(t == max(alts.values()) for t, alts in zip(token_logprobs, top))
        return sum(token_logprobs), greedy, whole, ctxlen


def number(v):
    """The samples file writes lm-eval's results as str(): repr, exact for a float."""
    return {"True": True, "False": False}[v] if v in ("True", "False") else float(v)


def check_lm_eval(dirs, url, model):
    tasks = ["detinfer_mc", "detinfer_gen", "detinfer_ppl"]
    runs = [lm_eval_run(d, tasks) for d in dirs]
    base = runs[0]
    for t in tasks:
        if len(base[t]) == 0:
            fail(f"{dirs[0]}: no samples of {t}")
    for d, run in zip(dirs[1:], runs[1:]):
        diff = first_difference(base, run)
        if diff:
            fail(f"lm-eval {os.path.basename(dirs[0])} and {os.path.basename(d)} differ at {diff}")
    server = Server(url)
    scored = []  # (token ids, context length, lm-eval's loglikelihood)
    for doc_id, sample in sorted(base["detinfer_mc"].items()):
        for (context, continuation), resp in zip(args_of(sample), sample["resps"]):
            ll, greedy = map(number, resp[0])
            want, want_greedy, ids, ctxlen = server.loglikelihood(context, continuation)
            if (ll, greedy) != (want, want_greedy):
                fail(f"detinfer_mc doc {doc_id} {continuation!r}: lm-eval has {(ll, greedy)}, the server's "
                     f"echoed prompt log-probabilities give {(want, want_greedy)}")
            scored.append((ids, ctxlen, ll))
    for doc_id, sample in sorted(base["detinfer_ppl"].items()):
        text = sample["arguments"]["gen_args_0"]["arg_0"] if isinstance(sample["arguments"], dict) \
            else sample["arguments"][0][0]
        if number(sample["resps"][0][0]) != server.rolling(text):
            fail(f"detinfer_ppl doc {doc_id}: lm-eval has {sample['resps'][0][0]}, the server's echoed prompt "
                 f"log-probabilities give {server.rolling(text)}")
    library = ""
    if model:
        import detinfer  # the bindings of this tree (run.sh sets PYTHONPATH and DETINFER_LIB)
        info = server.s.get(url + "/v1/models", timeout=60).json()["data"][0]["detinfer"]
        with detinfer.LLM(model, threads=2, context_length=2048, profile=info["fingerprint"]["profile"]) as llm:
            for (ids, ctxlen, ll), ps in zip(scored, llm.score([ids for ids, _, _ in scored])):
                if sum(ps.token_logprobs[ctxlen:]) != ll:
                    fail(f"LLM.score of {ids} gives {sum(ps.token_logprobs[ctxlen:])}, lm-eval {ll}")
        library = " and to the library's LLM.score"
    scores = {t: {k: v for k, v in base["results"][t].items() if "stderr" not in k and k != "alias"} for t in tasks}
    print(f"compare: lm-eval: {len(runs)} runs identical ({', '.join(os.path.basename(d) for d in dirs)}): "
          f"{sum(len(base[t]) for t in tasks)} samples, scores {json.dumps(scores)}; "
          f"{len(scored)} loglikelihoods equal to the server's echoed prompt log-probabilities{library}, "
          f"{len(base['detinfer_ppl'])} rolling loglikelihoods equal to the server's")


def inspect_run(log_dir):
    with open(one(os.path.join(log_dir, "*.json"))) as f:
        log = json.load(f)
    if log.get("status") != "success":
        fail(f"{log_dir}: status {log.get('status')}: {(log.get('error') or {}).get('message')}")
    samples = {}
    for s in log["samples"]:
        if s.get("error"):
            fail(f"{log_dir}: sample {s['id']}: {s['error'].get('message')}")
        content = s["output"]["choices"][0]["message"]["content"]
        if isinstance(content, list):  # content parts: their text
            content = "".join(c.get("text", "") for c in content if c.get("type") == "text")
        samples[(s["id"], s["epoch"])] = {"answer": content,
                                          "scores": {k: [v["value"], v.get("answer")] for k, v in s["scores"].items()}}
    scores = [(sc["name"], {m: v["value"] for m, v in sc["metrics"].items()}) for sc in log["results"]["scores"]]
    return {"samples": samples, "scores": scores}


def check_inspect(dirs):
    runs = [inspect_run(d) for d in dirs]
    for d, run in zip(dirs[1:], runs[1:]):
        if run["samples"].keys() != runs[0]["samples"].keys():
            fail(f"inspect {dirs[0]} and {d} hold different samples")
        for key, s in runs[0]["samples"].items():
            if run["samples"][key] != s:
                fail(f"inspect {os.path.basename(dirs[0])} and {os.path.basename(d)} differ at sample {key}: "
                     f"{s} != {run['samples'][key]}")
        if run["scores"] != runs[0]["scores"]:
            fail(f"inspect {dirs[0]} and {d}: scores {runs[0]['scores']} != {run['scores']}")
    print(f"compare: inspect-ai: {len(runs)} runs identical ({', '.join(os.path.basename(d) for d in dirs)}): "
          f"{len(runs[0]['samples'])} samples, scores {runs[0]['scores']}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", help="the served GGUF: check the loglikelihoods with the bindings' LLM.score too")
    ap.add_argument("--lm-eval", nargs="+", required=True)
    ap.add_argument("--inspect", nargs="+", required=True)
    a = ap.parse_args()
    check_lm_eval(a.lm_eval, a.url, a.model)
    check_inspect(a.inspect)


if __name__ == "__main__":
    main()
