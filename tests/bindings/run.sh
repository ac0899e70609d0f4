#!/usr/bin/env bash
# make check-bindings: the Python, Go and Rust bindings against an installed
# copy of the library (and the Python package also with the library its wheel
# bundles), then two cross-language tables. One prompt at a time: C, Python
# (the installed library and the wheel's), Go and Rust generate from the same
# models and prompts and must print identical token ids and digests (logits
# digest per token, sequence digest of the generation, and the digest of every
# step's log-probabilities, the chosen token's and the top 5's, through each
# binding's logprobs call). Batches: each binding's batch call
# (LLM.generate, LLM.Generate, Llm::generate) on several prompts over 2
# sequences must print what C prints for each prompt alone. Last, a fresh venv
# with only pip install ./bindings/python runs LLM.generate on the real model
# and detinfer serve (tests/wheel/smoke.py). A language is reported as skipped only where its
# toolchain is absent; anything else that fails, fails the run.
#   tests/bindings/run.sh ROOT MODELS_DIR [REAL_MODEL]
set -euo pipefail
root=$(cd "$1" && pwd) models=$(cd "$2" && pwd) real=${3:-}
build=$root/build/bindings
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
prefix=$stage/prefix

echo "== make install PREFIX=$prefix"
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$root" install PREFIX="$prefix" >/dev/null
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig LD_LIBRARY_PATH=$prefix/lib
export DI_TEST_ROOT=$root DI_TEST_MODELS=$models DI_TEST_REAL_MODEL=${real:-/nonexistent}
# A fresh Go build cache: go 1.19 does not key cached cgo packages on
# pkg-config's output, so a cache from another run would link against that
# run's (deleted) staging prefix.
export GOPROXY=off GOTOOLCHAIN=local GOFLAGS=-mod=readonly GOCACHE=$stage/go-cache
export CARGO_TARGET_DIR=$build/rust
mkdir -p "$build"

# The C example, built against the installed copy with pkg-config alone.
cc -std=c11 -Wall -Werror "$root/examples/generate.c" $(pkg-config --cflags --libs detinfer) -o "$stage/generate-c"
export DI_TEST_EXAMPLE=$stage/generate-c

declare -A gen batch skipped
gen[C]="$stage/generate-c"
summary=()

echo "== Python: the wheel of ./bindings/python (pip builds the library and the detinfer command with make and bundles them), in virtual environments, then pytest"
# The outer make's jobserver is not the wheel build's (setup.py starts make itself).
if ! env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL "${PYTHON:-python3}" -m pip wheel -q --no-deps -w "$stage/wheel" \
        "$root/bindings/python" >"$stage/pip.log" 2>&1; then
    # no index reachable: build with the setuptools and wheel already installed
    env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL "${PYTHON:-python3}" -m pip wheel -q --no-deps --no-build-isolation \
        --no-index -w "$stage/wheel" "$root/bindings/python" || { cat "$stage/pip.log"; exit 1; }
fi
wheel=$(ls "$stage"/wheel/libdetinfer-*.whl)
"${PYTHON:-python3}" -m venv --system-site-packages "$stage/venv"
"$stage/venv/bin/pip" install -q --no-index "$wheel"
# run from outside the tree, so that the installed package is the one imported
(cd "$stage" && DETINFER_LIB=$prefix/lib/libdetinfer.so.1 "$stage/venv/bin/python" -m pytest -q -p no:cacheprovider \
    "$root/bindings/python/tests")
gen[Python]="env DETINFER_LIB=$prefix/lib/libdetinfer.so.1 $stage/venv/bin/python $root/bindings/python/examples/generate.py"
gen[Python-wheel]="env -u DETINFER_LIB -u LD_LIBRARY_PATH $stage/venv/bin/python $root/bindings/python/examples/generate.py"
batch[Python]="env -u DETINFER_LIB -u LD_LIBRARY_PATH $stage/venv/bin/python $root/bindings/python/examples/batch.py"
summary+=("Python: pytest passed (the installed library)")
# numpy is optional: the suite again in an environment without it, with the
# library the wheel bundles (DI_TEST_BUNDLED), and the type hints under mypy
# --strict (both need pytest, xxhash and mypy from PyPI)
"${PYTHON:-python3}" -m venv "$stage/bare"
if "$stage/bare/bin/pip" install -q pytest xxhash mypy 2>"$stage/pip-bare.err"; then
    "$stage/bare/bin/pip" install -q --no-index "$wheel"
    ! "$stage/bare/bin/python" -c 'import numpy' 2>/dev/null || { echo "the bare environment has numpy"; exit 1; }
    # (LD_LIBRARY_PATH stays: the C example the suite compares with needs it; the package does not)
    (cd "$stage" && env -u DETINFER_LIB DI_TEST_BUNDLED=1 "$stage/bare/bin/python" -m pytest -q \
        -p no:cacheprovider "$root/bindings/python/tests")
    "$stage/bare/bin/mypy" --strict --no-incremental --cache-dir=/dev/null --exclude "/ray/" "$root/bindings/python/src/detinfer"
    summary+=("Python without numpy, the wheel's library: pytest passed; mypy --strict passed (detinfer.ray left out: ray, numpy and pyarrow are not in this environment)")
else
    summary+=("Python without numpy and mypy: NOT RUN (pip could not install pytest, xxhash, mypy: no index?)")
fi

echo "== Go: go test"
if command -v go >/dev/null; then
    (cd "$root/bindings/go" && go vet ./... && go test -count=1 ./... && go build -o "$stage/generate-go" ./cmd/detinfer-generate &&
        go build -o "$stage/batch-go" ./cmd/detinfer-batch)
    # the README's example, as written, in a module of its own
    mkdir -p "$stage/goexample"
    sed -n '/^```go$/,/^```$/p' "$root/bindings/go/README.md" | sed '1d;$d' > "$stage/goexample/main.go"
    printf 'module example\n\ngo 1.19\n\nrequire detinfer v0.0.0\n\nreplace detinfer => %s\n' "$root/bindings/go" \
        > "$stage/goexample/go.mod"
    (cd "$stage/goexample" && go run . "$models/tok_spm.gguf") > "$stage/goexample.out"
    grep -q '^sequence digest [0-9a-f]\{32\} <nil>$' "$stage/goexample.out" || { cat "$stage/goexample.out"; exit 1; }
    gen[Go]="$stage/generate-go"
    batch[Go]="$stage/batch-go"
    summary+=("Go: go test passed ($(go version | cut -d' ' -f3))")
else
    skipped[Go]="go not found (Debian package golang-go)"
fi

echo "== Rust: cargo test --offline"
if command -v cargo >/dev/null; then
    (cd "$root/bindings/rust" && cargo test --offline -q && cargo build --offline -q --examples)
    # the README's example is examples/readme.rs verbatim
    sed -n '/^```rust$/,/^```$/p' "$root/bindings/rust/README.md" | sed '1d;$d' |
        cmp - <(tail -n +2 "$root/bindings/rust/detinfer/examples/readme.rs") ||
        { echo "bindings/rust/README.md's example differs from detinfer/examples/readme.rs"; exit 1; }
    "$CARGO_TARGET_DIR/debug/examples/readme" "$models/tok_spm.gguf" | grep -q '^sequence digest [0-9a-f]\{32\}$'
    gen[Rust]="$CARGO_TARGET_DIR/debug/examples/generate"
    batch[Rust]="$CARGO_TARGET_DIR/debug/examples/batch"
    summary+=("Rust: cargo test passed ($(cargo --version | cut -d' ' -f2))")
else
    skipped[Rust]="cargo not found"
fi

# ---- the cross-language table ------------------------------------------------------
# model file | prompt token ids | sampling options (none: greedy); 8 new tokens each,
# with --logprobs 5 (di_session_logprobs after every step).
# The sampled cases pass di_sampling_params, a size-first struct, through each FFI.
sample="--temperature 1.5 --top-k 40 --top-p 0.95 --seed 7"
cases=(
    "$models/gqa_untied_q8_0.gguf|1,17,42|"
    "$models/gqa_untied_q8_0.gguf|5,9,2,33,7,100|"
    "$models/gqa_untied_q8_0.gguf|1,17,42|$sample"
    "$models/gemma3_q8_0.gguf|1,17,42|"
    "$models/gemma3_q8_0.gguf|1,17,42|$sample"
    "$models/qwen2_q8_0.gguf|1,17,42|"
    "$models/tok_spm.gguf|1,3,4,5|"
)
if [ -n "$real" ] && [ -f "$real" ]; then
    cases+=("$real|2,818,5279,529,7001,563|"          # BOS + "The capital of France is"
            "$real|2,2063,10779,78113,236769,236749,1473|"  # BOS + "def fibonacci(n):"
            "$real|2,818,5279,529,7001,563|$sample")
else
    echo "== the real model is not in the cache: the table has the generated models only"
fi
langs=(C Python Python-wheel Go Rust)
echo
echo "== C, Python (installed library, wheel's library), Go and Rust: the same tokens and digests (8 new tokens each)"
echo
echo "| model | prompt | sampling | generated token ids | sequence digest | logprobs digest (chosen + top 5) | languages |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
fail=0
for c in "${cases[@]}"; do
    IFS='|' read -r model tokens options <<< "$c"
    ran=()
    for lang in "${langs[@]}"; do
        [ -n "${gen[$lang]:-}" ] || continue
        # shellcheck disable=SC2086 # the command and the options are word lists
        ${gen[$lang]} --model "$model" --tokens "$tokens" --max-new 8 --logprobs 5 $options |
            grep -E '^(step|sequence|logprobs) ' > "$stage/$lang.out"
        ran+=("$lang")
        if ! cmp -s "$stage/C.out" "$stage/$lang.out"; then
            echo "MISMATCH: $lang differs from C on $(basename "$model") prompt $tokens ${options:-greedy}:"
            diff "$stage/C.out" "$stage/$lang.out" || true
            fail=1
        fi
    done
    ids=$(sed -n 's/^step [0-9]* token \([0-9]*\) .*/\1/p' "$stage/C.out" | paste -sd, -)
    digest=$(sed -n 's/^sequence .* digest //p' "$stage/C.out")
    logprobs=$(sed -n 's/^logprobs top 5 values \([0-9a-f]*\) .*/\1/p' "$stage/C.out")
    [ -n "$logprobs" ] || { echo "no logprobs line from C"; fail=1; }
    echo "| $(basename "$model") | $tokens | ${options:-greedy} | $ids | \`$digest\` | \`$logprobs\` | ${ran[*]} equal |"
done

# ---- the batch calls --------------------------------------------------------------
# model file | prompts (';' between) | sampling options; 8 new tokens each, 2 sequences
trio="1,17,42;5,9,2,33,7,99;1,3;44"
batch_cases=(
    "$models/gqa_untied_q8_0.gguf|$trio|"
    "$models/gqa_untied_q8_0.gguf|$trio|$sample"
    "$models/gemma3_q8_0.gguf|$trio|"
    "$models/qwen2_q8_0.gguf|$trio|$sample"
)
if [ -n "$real" ] && [ -f "$real" ]; then
    real_prompts="2,818,5279,529,7001,563;2,2063,10779,78113,236769,236749,1473;2,14946,3324,496,990,236764"
    batch_cases+=("$real|$real_prompts|" "$real|$real_prompts|$sample")
fi
echo
echo "== the batch calls (Python LLM.generate with the wheel's library, Go LLM.Generate, Rust Llm::generate):"
echo "   several prompts over 2 sequences, each equal to C's run of that prompt alone"
echo
echo "| model | prompts | sampling | sequence digests | languages |"
echo "| --- | --- | --- | --- | --- |"
for c in "${batch_cases[@]}"; do
    IFS='|' read -r model prompts options <<< "$c"
    : > "$stage/C-batch.out"
    IFS=';' read -ra list <<< "$prompts"
    for p in "${list[@]}"; do
        # shellcheck disable=SC2086 # the options are a word list
        "${gen[C]}" --model "$model" --tokens "$p" --max-new 8 $options | grep -E '^(step|sequence) ' >> "$stage/C-batch.out"
    done
    ran=()
    for lang in Python Go Rust; do
        [ -n "${batch[$lang]:-}" ] || continue
        # shellcheck disable=SC2086 # the command and the options are word lists
        # portable: the C example's profile (the library's default); LLM's is integer
        ${batch[$lang]} --model "$model" --prompts "$prompts" --max-new 8 --max-sequences 2 --profile portable $options \
            > "$stage/$lang-batch.out"
        ran+=("$lang")
        if ! cmp -s "$stage/C-batch.out" "$stage/$lang-batch.out"; then
            echo "MISMATCH: $lang's batch call differs from C's runs alone on $(basename "$model") ${options:-greedy}:"
            diff "$stage/C-batch.out" "$stage/$lang-batch.out" || true
            fail=1
        fi
    done
    digests=$(sed -n 's/^sequence .* digest \(.\{8\}\).*/\1…/p' "$stage/C-batch.out" | paste -sd' ' -)
    echo "| $(basename "$model") | ${#list[@]} | ${options:-greedy} | $digests | C alone = ${ran[*]} |"
done

# ---- the one-command install ---------------------------------------------------------
if [ -n "$real" ] && [ -f "$real" ]; then
    echo
    echo "== a fresh venv with only pip install ./bindings/python: LLM.generate on the real model, detinfer serve"
    "${PYTHON:-python3}" "$root/tests/wheel/expect.py" "$prefix/bin/detinfer" "$real" "$stage/expect.json"
    "${PYTHON:-python3}" -m venv "$stage/fresh"
    how="pip install ./bindings/python"
    if ! env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL "$stage/fresh/bin/pip" install -q "$root/bindings/python" \
            >"$stage/pip-fresh.log" 2>&1; then
        how="the wheel of ./bindings/python (no index for the build's setuptools)"
        "$stage/fresh/bin/pip" install -q --no-index "$wheel"
    fi
    (cd "$stage" && env -u DETINFER_LIB -u LD_LIBRARY_PATH -u PKG_CONFIG_PATH "$stage/fresh/bin/python" \
        "$root/tests/wheel/smoke.py" "$real" "$stage/expect.json")
    summary+=("$how in a fresh venv: LLM.generate and detinfer serve gave the installed detinfer's digests")
fi

echo
for s in "${summary[@]}"; do echo "$s"; done
for lang in "${!skipped[@]}"; do echo "$lang: SKIPPED: ${skipped[$lang]}"; done
[ "$fail" = 0 ] || { echo "check-bindings: FAILED (the languages disagree)"; exit 1; }
echo "check-bindings: OK"
