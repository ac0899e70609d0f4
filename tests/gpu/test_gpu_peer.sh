#!/usr/bin/env bash
# shellcheck disable=SC2015  # "A && ok || bad" is the pattern of every check here
# tests/gpu/test_gpu_peer.sh: what can be checked of bench/gpu-peer.sh and its helpers
# without a GPU: syntax (and shellcheck when installed), the argument handling, the
# split and join of bench/gpu-peer-parts.sh (a round trip with its checksum, a missing
# part, a corrupted part), the dry run, and bench/gpu_peer.py's alternation, retry,
# medians, ratios and table against stub engines that print canned JSON. Prints one
# line per check; exits 1 when any failed.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
tmp=$(mktemp -d /tmp/test-gpu-peer.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failed=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; failed=1; }
check() { local name=$1; shift; if "$@" > "$tmp/last.log" 2>&1; then ok "$name"; else bad "$name"; sed 's/^/     /' "$tmp/last.log" | tail -5; fi; }
fails() { local name=$1 want=$2; shift 2; "$@" > "$tmp/last.log" 2>&1; local rc=$?
    if [ "$rc" = "$want" ]; then ok "$name (exit $rc)"; else bad "$name: exit $rc, expected $want"; tail -3 "$tmp/last.log"; fi; }

scripts=(bench/gpu-peer.sh bench/gpu-peer-parts.sh bench/gpu-peer-stage.sh bench/gpu-peer-build.sh)
for s in "${scripts[@]}"; do check "bash -n $s" bash -n "$s"; done
if command -v shellcheck > /dev/null; then check "shellcheck" shellcheck "${scripts[@]}" "$0"; else echo "skip shellcheck (not installed)"; fi
check "python compiles bench/gpu_peer.py" python3 -m py_compile bench/gpu_peer.py

# ---- the parts: a round trip, a missing part, a corrupted one --------------------------
head -c $((5 * 1048576 + 12345)) /dev/urandom > "$tmp/model.gguf"
check "split into 1 MiB parts" bench/gpu-peer-parts.sh split "$tmp/model.gguf" "$tmp/stage/m" 1
n=$(find "$tmp/stage" -name 'model.gguf.part-*' | wc -l)
[ "$n" = 6 ] && ok "6 parts" || bad "$n parts, expected 6"
check "status: all present" bench/gpu-peer-parts.sh status model.gguf "$tmp"/stage/m-*
check "join" bench/gpu-peer-parts.sh join "$tmp/out/model.gguf" "$tmp"/stage/m-*
check "joined file is identical" cmp "$tmp/model.gguf" "$tmp/out/model.gguf"
check "join again keeps the file" bench/gpu-peer-parts.sh join "$tmp/out/model.gguf" "$tmp"/stage/m-*
rm -f "$tmp/out/model.gguf"
mv "$tmp/stage/m-3" "$tmp/m-3-away"
fails "status: a part missing" 1 bench/gpu-peer-parts.sh status model.gguf "$tmp"/stage/m-*
fails "join: a part missing" 1 bench/gpu-peer-parts.sh join "$tmp/out/model.gguf" "$tmp"/stage/m-*
[ ! -e "$tmp/out/model.gguf" ] && ok "no file after a failed join" || bad "a file after a failed join"
mv "$tmp/m-3-away" "$tmp/stage/m-3"
printf 'X' | dd of="$tmp/stage/m-3/model.gguf.part-003" bs=1 seek=777 conv=notrunc status=none
fails "join: a corrupted part" 1 bench/gpu-peer-parts.sh join "$tmp/out/model.gguf" "$tmp"/stage/m-*
[ ! -e "$tmp/out/model.gguf" ] && [ ! -e "$tmp/out/model.gguf.tmp" ] && ok "nothing left after a bad checksum" ||
    bad "files left after a bad checksum"
fails "split: no file" 1 bench/gpu-peer-parts.sh split "$tmp/none" "$tmp/x"
fails "split: bad size" 1 bench/gpu-peer-parts.sh split "$tmp/model.gguf" "$tmp/x" 0
fails "parts: unknown command" 2 bench/gpu-peer-parts.sh frobnicate

# ---- bench/gpu-peer.sh's arguments and dry run ----------------------------------------
fails "gpu-peer: unknown argument" 2 bench/gpu-peer.sh --frobnicate
fails "gpu-peer: --reps 0" 2 bench/gpu-peer.sh --reps 0
fails "gpu-peer: --reps without a value" 2 bench/gpu-peer.sh --reps
fails "gpu-peer: unknown model" 2 bench/gpu-peer.sh --models 3b,70b
fails "gpu-peer: unknown profile" 2 bench/gpu-peer.sh --profiles fast
fails "gpu-peer: bad budget" 2 bench/gpu-peer.sh --budget soon
check "gpu-peer: --help" bench/gpu-peer.sh --help
mkdir -p "$tmp/carry/gemma-1" "$tmp/carry/gemma-2"
cp "$tmp"/stage/m-1/* "$tmp/carry/gemma-1/"   # a stand-in: parts of another name
check "gpu-peer: dry run" bench/gpu-peer.sh --dry-run --stage "$tmp/carry" --work "$tmp/work" --out "$tmp/dry" \
    --models 8b --profiles integer --reps 2
grep -q 'make_big_model.py --out .*--n-embd 4096 --n-layer 32 --n-head 32 --n-head-kv 8 --n-ff 14336' "$tmp/last.log" &&
    ok "dry run: the 8B shape" || bad "dry run: no 8B generation line"
grep -q 'llama-bench -m .* -ngl 99 -p 512 -n 128 -r 1 -o json' "$tmp/last.log" && ok "dry run: llama-bench command" ||
    bad "dry run: llama-bench command"
grep -q 'detinfer bench .*--backend cuda --profile integer --pp 512 --tg 128' "$tmp/last.log" &&
    ok "dry run: detinfer command" || bad "dry run: detinfer command"

# ---- bench/gpu_peer.py against stub engines -----------------------------------------
mkdir -p "$tmp/bin"
cat > "$tmp/bin/llama-bench" <<'EOF'
#!/bin/sh
echo "log line on stderr" >&2
cat <<'J'
[
  {"n_prompt": 512, "n_gen": 0, "avg_ts": 10000.0, "model_filename": "m"},
  {"n_prompt": 0, "n_gen": 128, "avg_ts": 200.0, "model_filename": "m"}
]
J
EOF
cat > "$tmp/bin/llama-batched-bench" <<'EOF'
#!/bin/sh
echo '{"pp": 16, "tg": 16, "pl": 16, "speed_tg": 1600.0, "speed_pp": 5000.0}'
EOF
# detinfer: integer answers; portable fails with --batch (the retry without it answers)
cat > "$tmp/bin/detinfer" <<'EOF'
#!/bin/sh
prof=; batch=0
while [ $# -gt 0 ]; do case $1 in --profile) prof=$2; shift;; --batch) batch=$2; shift;; esac; shift; done
[ "$prof" = portable ] && [ "$batch" != 0 ] && { echo "no batched decode here" >&2; exit 1; }
if [ "$prof" = integer ]; then pp=5000; tg=100; else pp=2500; tg=50; fi
printf '{"command": "bench", "results": [{"n_prompt": 512, "n_gen": 0, "n_seq": 0, "avg_ts": %s},' $pp
printf '{"n_prompt": 0, "n_gen": 128, "n_seq": 0, "avg_ts": %s, "weight_bytes_per_token": 1500000000},' $tg
[ "$batch" != 0 ] && printf '{"n_prompt": 16, "n_gen": 16, "n_seq": 16, "avg_ts": 800.0},'
printf '{"n_prompt": 0, "n_gen": 0, "n_seq": 0, "avg_ts": 0}]}\n'
EOF
chmod +x "$tmp"/bin/*
touch "$tmp/a.gguf"
check "gpu_peer.py with stub engines" python3 bench/gpu_peer.py --detinfer "$tmp/bin/detinfer" \
    --llama-bench "$tmp/bin/llama-bench" --batched-bench "$tmp/bin/llama-batched-bench" --bandwidth 3000 \
    --model "a=$tmp/a.gguf" --model "missing=$tmp/none.gguf" --reps 2 --out "$tmp/runs"
cp "$tmp/last.log" "$tmp/table.log"
row() { grep -F "| $1 | $2 |" "$tmp/table.log"; }
row a "llama.cpp CUDA" | grep -q '| 10,000 (n=2) | 1 | 200 (n=2) | 1 | 10.0% | 1,600 (n=2) | 1 |' &&
    ok "table: llama.cpp row (medians, fraction 200 x 1.5 GB / 3000 GB/s)" || { bad "table: llama.cpp row"; cat "$tmp/table.log"; }
row a "detinfer CUDA, integer" | grep -q '| 5,000 (n=2) | 0.50× | 100 (n=2) | 0.50× | 5.0% | 800 (n=2) | 0.50× |' &&
    ok "table: integer row (ratios)" || { bad "table: integer row"; cat "$tmp/table.log"; }
row a "detinfer CUDA, portable" | grep -q '| 2,500 (n=2) | 0.25× | 50.0 (n=2) | 0.25× | 2.5% | — | — |' &&
    ok "table: portable row (retried without the batched decode)" || { bad "table: portable row"; cat "$tmp/table.log"; }
grep -q 'missing: no file' "$tmp/table.log" && grep -q '^no figures for: missing' "$tmp/table.log" &&
    ok "a missing model is skipped" || bad "a missing model"
[ -f "$tmp/runs/gpu-peer.md" ] && [ -f "$tmp/runs/gpu-peer.json" ] && ok "gpu-peer.md and gpu-peer.json written" ||
    bad "no gpu-peer.md or gpu-peer.json"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["median"]["a"]["integer"]["tg"] == 100' \
    "$tmp/runs/gpu-peer.json" && ok "json medians" || bad "json medians"

# the deadline: a run that took long is not started again when it no longer fits
cat > "$tmp/bin/slow" <<'EOF'
#!/bin/sh
sleep 3; exit 1
EOF
chmod +x "$tmp/bin/slow"
t0=$SECONDS
python3 bench/gpu_peer.py --detinfer "$tmp/bin/slow" --llama-bench "$tmp/bin/slow" --batch 0 \
    --model "a=$tmp/a.gguf" --reps 5 --profiles integer --timeout 2 --deadline $(($(date +%s) + 8)) \
    --out "$tmp/runs2" > "$tmp/slow.log" 2>&1
rc=$?
[ $rc = 1 ] && ok "no figures: exit 1" || bad "no figures: exit $rc"
[ $((SECONDS - t0)) -le 12 ] && ok "the deadline holds ($((SECONDS - t0)) s)" || bad "the deadline: $((SECONDS - t0)) s"
grep -q 'exit timeout' "$tmp/slow.log" && ok "a run's own limit (timeout)" || bad "no timeout seen"
grep -q 'skipped,' "$tmp/slow.log" && ok "runs skipped near the deadline" || bad "nothing skipped near the deadline"

echo
[ $failed = 0 ] && echo "test_gpu_peer: all passed" || echo "test_gpu_peer: FAILED"
exit $failed
