#!/usr/bin/env bash
# bench/serve.sh — `detinfer serve` under 1, 4 and 16 concurrent streams on the
# real model: aggregate output tokens per second, time to first token and
# inter-token latency (p50, p99), and the 16-stream / 1-stream throughput ratio.
# Not a timed test: the figures depend on the machine and what else runs on it.
#
#   bench/serve.sh [MODEL]        default: tools/scripts/fetch-model.sh's Gemma 3 270M
#
# Environment: DETINFER (the tool, default build/tools/detinfer), THREADS (2),
# PROFILE (the numerics profile, portable), LEVELS ("1 4 16"), ROUNDS (requests per stream per level, 3), MAX_TOKENS (64),
# PROMPT_WORDS (about the prompt's length, 32), SPECULATE (empty: none; ngram: serve --speculate ngram,
# the answers bit for bit the same) with DRAFT_MAX (its --draft-max, default the server's).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tool=${DETINFER:-$root/build/tools/detinfer}
model=${1:-$("$root/tools/scripts/fetch-model.sh")}
threads=${THREADS:-2}
profile=${PROFILE:-portable}
levels=${LEVELS:-"1 4 16"}
rounds=${ROUNDS:-3}
max_tokens=${MAX_TOKENS:-64}
prompt_words=${PROMPT_WORDS:-32}
speculate=()
if [ -n "${SPECULATE:-}" ]; then
    speculate=(--speculate "$SPECULATE")
    [ -z "${DRAFT_MAX:-}" ] || speculate+=(--draft-max "$DRAFT_MAX")
fi
max_level=$(echo $levels | tr ' ' '\n' | sort -n | tail -1)

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) CPUs"
lscpu 2>/dev/null | grep -E '^(L1d|L2|L3) cache' | sed 's/  */ /g; s/^/  /' || true
echo "model: $model; detinfer serve --threads $threads --profile $profile --max-sequences $max_level ${speculate[*]:-}"

log=$(mktemp)
"$tool" serve --model "$model" --port 0 --threads "$threads" --profile "$profile" --max-sequences "$max_level" \
    --context $((max_tokens + 4 * prompt_words + 64)) --queue 256 ${speculate[@]+"${speculate[@]}"} 2>"$log" &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 100); do
    port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\) .*/\1/p' "$log")
    [ -n "$port" ] && break
    kill -0 $server 2>/dev/null || { cat "$log"; exit 1; }
    sleep 0.1
done
[ -n "$port" ] || { echo "the server did not start"; cat "$log"; exit 1; }
sed 's/^/  /' "$log"

python3 - "$port" "$levels" "$rounds" "$max_tokens" "$prompt_words" <<'EOF'
import http.client, json, statistics, sys, threading, time

port, levels, rounds, max_tokens, words = int(sys.argv[1]), [int(x) for x in sys.argv[2].split()], \
    int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
vocab = "the of and a to in is was for on that with as by at from his her an were are which this".split()


def prompt(i):
    return " ".join(vocab[(i * 7 + k * 3) % len(vocab)] for k in range(words))


def stream(i, out):
    """One streamed request: (time to first token, [inter-token gaps], tokens)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    body = json.dumps({"prompt": prompt(i), "max_tokens": max_tokens, "stream": True})
    start = time.perf_counter()
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    r = conn.getresponse()
    assert r.status == 200, r.read()
    first, last, gaps, tokens = None, None, [], 0
    for line in r:
        if not line.startswith(b"data: {"):
            continue
        now = time.perf_counter()
        d = json.loads(line[6:])
        if "detinfer" in d:
            tokens = len(d["detinfer"]["completion_token_ids"])
            spec = d["detinfer"].get("speculation") or {}
            with drafts_lock:
                drafts[0] += spec.get("drafted", 0)
                drafts[1] += spec.get("accepted", 0)
            continue
        if first is None:
            first = now - start
        else:
            gaps.append(now - last)
        last = now
    conn.close()
    out.append((first or 0.0, gaps, tokens))


drafts = [0, 0]  # with --speculate: drafted, accepted (the final chunks' detinfer.speculation)
drafts_lock = threading.Lock()


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else float("nan")


print("\n%8s %10s %12s %10s %10s %10s %10s" % ("streams", "requests", "output tok/s", "TTFT p50", "TTFT p99",
                                                 "ITL p50", "ITL p99"))
rates = {}
for level in levels:
    results = []

    def client(c):
        for r in range(rounds):
            stream(c * rounds + r, results)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(c,)) for c in range(level)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    tokens = sum(r[2] for r in results)
    ttft = [r[0] for r in results]
    itl = [g for r in results for g in r[1]]
    rates[level] = tokens / wall
    print("%8d %10d %12.1f %9.0fms %9.0fms %9.1fms %9.1fms" % (level, len(results), rates[level],
          pct(ttft, 50) * 1e3, pct(ttft, 99) * 1e3, pct(itl, 50) * 1e3, pct(itl, 99) * 1e3))
if drafts[0]:
    print("\nspeculation: %d of %d draft tokens accepted (%.0f%%)" % (drafts[1], drafts[0],
                                                                    100.0 * drafts[1] / drafts[0]))
if min(levels) in rates and max(levels) in rates and min(levels) != max(levels):
    print("\n%d streams give %.2fx the aggregate output tokens/s of %d" %
          (max(levels), rates[max(levels)] / rates[min(levels)], min(levels)))
EOF
kill -TERM $server
wait $server && echo "server stopped (exit 0)"
trap 'rm -f "$log"' EXIT
