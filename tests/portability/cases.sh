#!/usr/bin/env bash
# The cases of tests/portability/digests.c, for make check-portability and the
# golden digests of make check (tests/data/golden_digests): each weight
# type's generated model and the other families with their 24-token prompts
# and 4 greedy tokens, then, when REAL_MODEL is given, the real model on
# fixed prompts (token ids given directly) and one tokenization.
#
#   cases.sh MODELS_DIR [REAL_MODEL] > cases.txt
set -euo pipefail
models=$1 real=${2:-}
for m in mha_tied_f32 mha_tied_f16 mha_tied_bf16 mha_tied_q8_0 mha_tied_q4_0 mha_tied_q4_1 \
         mha_tied_q5_0 mha_tied_q5_1 gqa_untied_f32 gqa_untied_q8_0 odd_f32 qwen2_f32 qwen2_q8_0 \
         gemma3_f32 gemma3_q8_0 qwen3_f32 qwen3_q8_0 \
         phi3_f32 phi3_q8_0 llama3_rope_f32 qwen2_yarn_f32 phi3_longrope_f32; do
    ids=$(tr -s ' \n' ',,' < "$models/$m.tokens" | sed 's/,$//')
    printf '%s\t%s\tids:%s\t4\n' "$m" "$models/$m.gguf" "$ids"
done
if [ -n "$real" ]; then
    # BOS + "The capital of France is" / "def fibonacci(n):" as Gemma 3 tokenizes them
    printf 'real\t%s\tids:2,818,5279,529,7001,563\t2\n' "$real"
    printf 'real-tokens\t%s\ttext:The capital of France is\t-1\n' "$real"
fi
