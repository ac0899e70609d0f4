#!/usr/bin/env bash
# make check-bindings: the Python, Go and Rust bindings against an installed
# copy of the library, then one cross-language table: C, Python, Go and Rust
# generate from the same models and prompts and must print identical token
# ids and digests (logits digest per token, sequence digest of the
# generation, and the digest of every step's log-probabilities, the chosen
# token's and the top 5's, through each binding's logprobs call). A language
# is reported as skipped only where its toolchain is absent; anything else
# that fails, fails the run.
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

declare -A gen skipped
gen[C]="$stage/generate-c"
summary=()

echo "== Python: pip install ./bindings/python into a virtual environment, then pytest"
"${PYTHON:-python3}" -m venv --system-site-packages "$stage/venv"
if ! "$stage/venv/bin/pip" install -q "$root/bindings/python" 2>"$stage/pip.err"; then
    # no index reachable: build with the setuptools already installed
    "$stage/venv/bin/pip" install -q --no-build-isolation --no-index "$root/bindings/python" ||
        { cat "$stage/pip.err"; exit 1; }
fi
# run from outside the tree, so that the installed package is the one imported
(cd "$stage" && DETINFER_LIB=$prefix/lib/libdetinfer.so.1 "$stage/venv/bin/python" -m pytest -q -p no:cacheprovider \
    "$root/bindings/python/tests")
gen[Python]="$stage/venv/bin/python $root/bindings/python/examples/generate.py"
summary+=("Python: pytest passed")
# numpy is optional: the suite again in an environment without it, and the
# type hints under mypy --strict (both need pytest, xxhash and mypy from PyPI)
"${PYTHON:-python3}" -m venv "$stage/bare"
if "$stage/bare/bin/pip" install -q pytest xxhash mypy "$root/bindings/python" 2>"$stage/pip-bare.err"; then
    ! "$stage/bare/bin/python" -c 'import numpy' 2>/dev/null || { echo "the bare environment has numpy"; exit 1; }
    (cd "$stage" && DETINFER_LIB=$prefix/lib/libdetinfer.so.1 "$stage/bare/bin/python" -m pytest -q \
        -p no:cacheprovider "$root/bindings/python/tests")
    "$stage/bare/bin/mypy" --strict --no-incremental --cache-dir=/dev/null --exclude "/ray/" "$root/bindings/python/src/detinfer"
    summary+=("Python without numpy: pytest passed; mypy --strict passed (detinfer.ray left out: ray, numpy and pyarrow are not in this environment)")
else
    summary+=("Python without numpy and mypy: NOT RUN (pip could not install pytest, xxhash, mypy: no index?)")
fi

echo "== Go: go test"
if command -v go >/dev/null; then
    (cd "$root/bindings/go" && go vet ./... && go test -count=1 ./... && go build -o "$stage/generate-go" ./cmd/detinfer-generate)
    # the README's example, as written, in a module of its own
    mkdir -p "$stage/goexample"
    sed -n '/^```go$/,/^```$/p' "$root/bindings/go/README.md" | sed '1d;$d' > "$stage/goexample/main.go"
    printf 'module example\n\ngo 1.19\n\nrequire detinfer v0.0.0\n\nreplace detinfer => %s\n' "$root/bindings/go" \
        > "$stage/goexample/go.mod"
    (cd "$stage/goexample" && go run . "$models/tok_spm.gguf") > "$stage/goexample.out"
    grep -q '^sequence digest [0-9a-f]\{32\} <nil>$' "$stage/goexample.out" || { cat "$stage/goexample.out"; exit 1; }
    gen[Go]="$stage/generate-go"
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
langs=(C Python Go Rust)
echo
echo "== C, Python, Go and Rust: the same tokens and digests (8 new tokens each)"
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
echo
for s in "${summary[@]}"; do echo "$s"; done
for lang in "${!skipped[@]}"; do echo "$lang: SKIPPED: ${skipped[$lang]}"; done
[ "$fail" = 0 ] || { echo "check-bindings: FAILED (the languages disagree)"; exit 1; }
echo "check-bindings: OK"
