#!/usr/bin/env bash
# make check-evals: the evaluation harnesses people run, unchanged, against
# `detinfer serve` on the real model (docs/SERVING.md, "Evaluation harnesses"):
#   - lm-evaluation-harness, local-completions with tokenizer_backend=remote, the
#     tasks of tasks/ (multiple choice, generation, perplexity; data/*.jsonl), at batch
#     sizes 1 and 4 and num_concurrent 1 and 4;
#   - inspect-ai, inspect_task.py through openai-api/... (chat completions) and
#     openai/... with responses_api=true (the Responses API), max connections 1 and 4.
# Every run must complete (inspect exits 0 after a failed eval: compare.py reads
# its log's status); compare.py then checks that scores and every
# per-sample result are the same across the runs, and that each loglikelihood
# lm-eval reports is the sum of the server's echoed prompt log-probabilities,
# and of the library's own (the bindings' LLM.score).
#   tests/evals/run.sh DETINFER VENV    (the venv of make evals-venv)
set -euo pipefail
tool=$1
venv=$2
here=$(cd "$(dirname "$0")" && pwd)
model=$("$here/../../tools/scripts/fetch-model.sh")
work=$(mktemp -d "${TMPDIR:-/tmp}/detinfer-evals.XXXXXX")
server=
finish() {
    status=$?
    if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
    if [ $status -eq 0 ]; then rm -rf "$work"; else echo "check-evals: FAILED; logs in $work" >&2; fi
}
trap finish EXIT

# Nothing from a hub: the tasks' data are local JSONL files.
export HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 HF_HOME="$work/hf" INSPECT_LOG_DIR="$work/inspect"
export NO_COLOR=1 TOKENIZERS_PARALLELISM=false

# --chat-template gemma: the base model has none, and inspect-ai talks in chats.
"$tool" serve --model "$model" --port 0 --threads 2 --max-sequences 8 --chat-template gemma 2>"$work/server.log" &
server=$!
for _ in $(seq 600); do
    grep -q "listening on http" "$work/server.log" && break
    kill -0 "$server" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
    sleep 0.1
done
url=$(sed -n 's|.*listening on \(http://[^ ]*\) .*|\1|p' "$work/server.log" | head -1)
[ -n "$url" ] || { cat "$work/server.log" >&2; exit 1; }
echo "check-evals: $(head -1 "$work/server.log")"

run() { # NAME COMMAND...: one harness run, its output in $work/NAME.log
    local name=$1 t0=$SECONDS
    shift
    if ! (cd "$here" && "$@") >"$work/$name.log" 2>&1; then
        tail -40 "$work/$name.log" >&2
        echo "check-evals: $name did not complete" >&2
        exit 1
    fi
    echo "check-evals: $name ran ($((SECONDS - t0)) s)"
}

lm_runs=()
for bs in 1 4; do
    for nc in 1 4; do
        run "lm-eval-b$bs-c$nc" "$venv/bin/lm_eval" --model local-completions \
            --model_args "model=gemma-3-270m,base_url=$url/v1/completions,tokenizer_backend=remote,num_concurrent=$nc,max_retries=1,timeout=600" \
            --include_path tasks --tasks detinfer_mc,detinfer_gen,detinfer_ppl --batch_size "$bs" \
            --output_path "$work/lm-eval-b$bs-c$nc" --log_samples
        lm_runs+=("$work/lm-eval-b$bs-c$nc")
    done
done

export DETINFER_BASE_URL="$url/v1" DETINFER_API_KEY=none OPENAI_BASE_URL="$url/v1" OPENAI_API_KEY=none
inspect_runs=()
for provider in chat responses; do
    for mc in 1 4; do
        if [ $provider = chat ]; then model_args=(--model openai-api/detinfer/gemma-3-270m)
        else model_args=(--model openai/gemma-3-270m -M responses_api=true); fi
        run "inspect-$provider-c$mc" "$venv/bin/inspect" eval inspect_task.py "${model_args[@]}" \
            --max-connections "$mc" --max-tokens 24 --fail-on-error --display plain \
            --log-format json --log-dir "$work/inspect-$provider-c$mc"
        inspect_runs+=("$work/inspect-$provider-c$mc")
    done
done

# The bindings of this tree over the library the tool was linked with: LLM.score.
DETINFER_LIB="$(cd "$(dirname "$tool")/.." && pwd)/libdetinfer.so.1" PYTHONPATH="$here/../../bindings/python/src" \
    "$venv/bin/python" "$here/compare.py" --url "$url" --model "$model" --lm-eval "${lm_runs[@]}" \
    --inspect "${inspect_runs[@]}"
