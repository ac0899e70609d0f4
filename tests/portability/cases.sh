#!/usr/bin/env bash
# The cases of tests/portability/digests.c, for make check-portability and the
# golden digests of make check (tests/data/golden_digests): every
# generated model (MODELS_DIR/models.txt, the one list) with its 24-token prompt
# and 4 greedy tokens, then, when REAL_MODEL is given, the real model on
# fixed prompts (token ids given directly) and one tokenization.
#
#   cases.sh MODELS_DIR [REAL_MODEL] > cases.txt
set -euo pipefail
models=$1 real=${2:-}
[ -s "$models/models.txt" ] || { echo "cases.sh: no $models/models.txt" >&2; exit 1; }
while read -r m; do
    [ -n "$m" ] || continue
    ids=$(tr -s ' \n' ',,' < "$models/$m.tokens" | sed 's/,$//')
    printf '%s\t%s\tids:%s\t4\n' "$m" "$models/$m.gguf" "$ids"
done < "$models/models.txt"
if [ -n "$real" ]; then
    # BOS + "The capital of France is" / "def fibonacci(n):" as Gemma 3 tokenizes them
    printf 'real\t%s\tids:2,818,5279,529,7001,563\t2\n' "$real"
    printf 'real-tokens\t%s\ttext:The capital of France is\t-1\n' "$real"
fi
