#!/bin/sh
# libdetinfer against llama.cpp on the real model (Gemma 3 270M Q4_K_M,
# tools/scripts/fetch-model.sh), or on the GGUF file MODEL names, same threads,
# alternating runs:
#
#   [MODEL=file.gguf] bench/compare-llamacpp.sh [--threads 1,2] [--reps 5]
#       [--pp 512] [--tg 128] [--batch 16] [--batch-tokens 64]
#       [--llama-bench /path/to/llama-bench]
#
# llama.cpp comes from llama-cpp-python in a virtual environment outside the
# repository (~/.cache/detinfer/peer-venv, made by `make peer-venv`), or from a
# llama-bench binary you pass. See bench/compare_llamacpp.py for the method.
set -eu
cd "$(dirname "$0")/.."
CACHE=${CACHE:-$HOME/.cache/detinfer}
make -s all >&2
model=${MODEL:-$(tools/scripts/fetch-model.sh)}
case " $* " in
*" --llama-bench "*) python=python3 ;;
*) make -s peer-venv >&2; python="$CACHE/peer-venv/bin/python" ;;
esac
exec "$python" bench/compare_llamacpp.py "$model" --detinfer build/tools/detinfer "$@"
