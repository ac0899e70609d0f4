#!/usr/bin/env bash
# The grammar's extra time per generated token against the decode step
# (docs/STRUCTURED.md, "Speed"): bench/grammar_mask.c on the real model (or
# MODEL) with the nested schema of bench/grammar/nested_schema.json (or
# SCHEMA), THREADS (2) threads, N (200) tokens at most; prints the CPU model
# and caches first. Run it on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
model=${MODEL:-$(tools/scripts/fetch-model.sh)}
schema=${SCHEMA:-bench/grammar/nested_schema.json}
lib=$(ls build/libdetinfer.so.1.* | head -1)
mkdir -p build/bench
cc -std=c11 -O2 -Wall -Iinclude bench/grammar_mask.c -o build/bench/grammar_mask "$lib" -Wl,-rpath,"$(pwd)/build"
lscpu | grep -E '^(Model name|L1d|L2|L3)' || true
build/bench/grammar_mask "$model" "$schema" "${THREADS:-2}" "${N:-200}"
