#!/usr/bin/env bash
# Tests of the detinfer command (tools/detinfer.c and its folders), one section per call,
# run by tests/check_cli.c:
#   cli_test.sh SECTION ROOT TOOL MODELS_DIR [SANITIZE] [EXAMPLE]
# Sections: usage run verify verify-fails doctor bench install.
# Each check prints what it ran and what it expected when it fails.
set -uo pipefail
section=$1 root=$2 tool=$3 models=$4 sanitize=${5:-} example=${6:-}
model=$models/gqa_untied_q8_0.gguf
gemma=$models/gemma3_q8_0.gguf
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

fail() { echo "FAIL [$section]: $*"; failures=$((failures + 1)); }

# expect_rc WANT ARGS...: runs the tool; stdout in $work/out, stderr in $work/err.
expect_rc() {
    local want=$1; shift
    "$tool" "$@" </dev/null >"$work/out" 2>"$work/err"
    local rc=$?
    if [ "$rc" != "$want" ]; then
        fail "detinfer $* exited $rc, wanted $want"
        sed 's/^/    stdout: /' "$work/out" | tail -20
        sed 's/^/    stderr: /' "$work/err" | tail -20
        return 1
    fi
    return 0
}

# has FILE PATTERN: grep -E, reporting the miss.
has() {
    grep -qE -- "$2" "$work/$1" || { fail "$1 lacks /$2/"; sed 's/^/    | /' "$work/$1" | tail -30; }
}

# json EXPRESSION: a Python assertion about the JSON in $work/out (bound to d).
json() {
    python3 - "$work/out" "$1" <<'EOF' || fail "JSON check failed: $1"
import json, sys
d = json.load(open(sys.argv[1]))
s = d.get('speculation') or {}  # bench --speculate's object, and its first result
r0 = (s.get('results') or [{}])[0]
assert eval(sys.argv[2]), sys.argv[2]
EOF
}

test -x "$tool" || { echo "FAIL: $tool is not built (make detinfer)"; exit 1; }
test -f "$model" || { echo "FAIL: $model missing (make check generates the test models)"; exit 1; }

case $section in
usage)
    expect_rc 2 && has err 'a command is required'
    expect_rc 0 --help && has out 'verify' && has out 'doctor'
    expect_rc 0 --version && has out 'libdetinfer'
    for sub in run verify doctor bench; do
        expect_rc 0 "$sub" --help && has out "^usage: detinfer $sub" && has out 'exit status'
    done
    expect_rc 2 bogus && has err "unknown command 'bogus'"
    # every bad argument: exit 2, a message naming it, the usage line
    while IFS='|' read -r args pattern; do
        # shellcheck disable=SC2086
        expect_rc 2 $args && has err "$pattern" && has err '^usage: detinfer'
    done <<EOF
run|--model is required
run --model $model|exactly one of --prompt TEXT or --tokens LIST
run --model $model --tokens 1,2 --max-new abc|--max-new wants an integer
run --model $model --tokens 1,x|--tokens wants token ids
run --model $model --tokens|--tokens needs a value
run --model $model --tokens 1 --threads 0|--threads wants an integer in 1..256
run --model $model --tokens 1 --backend tpu|--backend wants cpu or cuda
run --model $model --tokens 1 --device 256|--device wants an integer in 0..255
run --model $model --tokens 1 --cpu-path sse|--cpu-path wants auto, scalar, avx2 or avx512
run --model $model --tokens 1 --frobnicate|unknown option '--frobnicate'
verify|--model is required
verify --model $model --reps 0|--reps wants an integer
verify --model $model --batch-sizes 1,,2|--batch-sizes wants
verify --model $model --profile fast|--profile wants portable, device or integer
verify --model $model --backends cpu,tpu|--backends wants cpu or cuda
verify --model $model --device x|--device wants an integer
verify --model $model --cpu-path x|--cpu-path wants auto, scalar, avx2 or avx512
doctor --profile fast|--profile wants portable, device or integer
doctor --json=yes|--json takes no value
doctor stray|unexpected argument 'stray'
doctor --backend tpu|--backend wants cpu or cuda
doctor --device -1|--device wants an integer in 0..255
bench|--model is required
bench --model $model --threads 0|--threads wants
bench --model $model --reps 0|--reps wants an integer
bench --model $model --cpu-path x|--cpu-path wants auto, scalar, avx2 or avx512
bench --model $model --device 999|--device wants an integer in 0..255
bench --model $model --batch 257|--batch wants
bench --model $model --batch-tokens 0|--batch-tokens wants
bench --model $model --speculate ngram --draft-max 0|--draft-max wants an integer in 1..32
bench --model $model --speculate ngram --draft-max 33|--draft-max wants an integer in 1..32
bench --model $model --speculate ngram --ngram 9|--ngram wants an integer in 1..8
bench --model $model --draft-max 4|--draft-max, --ngram and --prompt go with --speculate
bench --model $model --speculate ngram --tg 1|a --tg length of 1 times no decode step
bench --model $model --speculate ngram --tg 0|--speculate times generation
bench --model $model --speculate ngram --prompt=|--prompt is empty
EOF
    DETINFER_TEST_PERTURB=nonsense expect_rc 2 verify --model "$model" && has err 'DETINFER_TEST_PERTURB'
    ;;

run)
    tokens=$(tr ' ' ',' < "$models/gqa_untied_q8_0.tokens")
    # the tools' default is the integer profile, and run says so; the
    # comparisons with the example (the library's default) name portable
    expect_rc 0 run --model "$model" --tokens "$tokens" --max-new 5 || exit 1
    has out '; backend cpu, profile integer \(numerics 1\), 1 thread$'
    grep -E '^(step|sequence)' "$work/out" > "$work/integer"
    expect_rc 0 run --model "$model" --tokens "$tokens" --max-new 5 --profile portable || exit 1
    has out '; backend cpu, profile portable \(numerics 1\), 1 thread$'
    has out '^step 4 token [0-9]+ logits [0-9a-f]{32}$'
    has out '^sequence 29 tokens digest [0-9a-f]{32}$'
    grep -E '^(step|sequence)' "$work/out" > "$work/one"
    # the same digests as the example program and with another thread count
    if [ -n "$example" ]; then
        "$example" --model "$model" --tokens "$tokens" --max-new 5 | grep -E '^(step|sequence)' > "$work/ex"
        cmp -s "$work/one" "$work/ex" || { fail "run and examples/generate disagree"; diff "$work/one" "$work/ex"; }
    fi
    ! cmp -s "$work/one" "$work/integer" || fail "the integer and portable profiles gave the same digests"
    expect_rc 0 run --model "$model" --tokens "$tokens" --max-new 5 --threads 3 --profile portable
    grep -E '^(step|sequence)' "$work/out" | cmp -s - "$work/one" || fail "run with 3 threads differs"
    seq_digest=$(sed -n 's/^sequence .* digest //p' "$work/one")
    expect_rc 0 run --model "$model" --tokens "$tokens" --max-new 5 --json --profile portable &&
        json "len(d['steps']) == 5 and d['sequence_digest'] == '$seq_digest' and d['sequence_length'] == 29 and d['profile'] == 'portable' and d['numerics'] == 1"
    # JSON strings are UTF-8: a byte that is not (here in the model's file name) becomes U+FFFD
    bad_name=$work/$'m\xff.gguf'
    ln -s "$(realpath "$model")" "$bad_name"
    expect_rc 0 run --model "$bad_name" --tokens 1 --max-new 1 --json &&
        json "d['model'].endswith('m\\ufffd.gguf') and d['prompt_text'] is None and d['prompt_tokens'] == [1]"
    expect_rc 0 run --model "$model" --tokens "$tokens" --max-new 5 --cpu-path scalar --device 0 --profile portable
    grep -E '^(step|sequence)' "$work/out" | cmp -s - "$work/one" || fail "run on the scalar CPU path differs"
    expect_rc 0 run --model "$model" --tokens "$tokens" --max-new 5 --cpu-path scalar
    grep -E '^(step|sequence)' "$work/out" | cmp -s - "$work/integer" || fail "the integer profile on the scalar CPU path differs"
    # CUDA without its plugin: the documented refusal, exit 1
    DETINFER_CUDA_PLUGIN=$work/none.so expect_rc 1 run --model "$model" --tokens 1 --backend cuda &&
        has err 'DI_ERR_BACKEND_UNAVAILABLE.*DETINFER_CUDA_PLUGIN'
    expect_rc 0 run --model "$gemma" --tokens 1,2,3 --max-new 4 && has out '^sequence 7 tokens'
    expect_rc 1 run --model "$model" --prompt hello && has err 'no tokenizer'
    # an empty text is refused, not run from BOS alone (issue 41)
    expect_rc 2 run --model "$models/tok_spm.gguf" --prompt "" && has err 'prompt is empty'
    expect_rc 1 run --model "$work/missing.gguf" --tokens 1 && has err "missing.gguf.*DI_ERR_IO"
    expect_rc 1 run --model "$model" --tokens 1,100000 --max-new 1 && has err 'DI_ERR_TOKEN_RANGE'
    # seeded sampling: the same tokens with other threads and CPU paths, other tokens with other seeds
    sampling="--temperature 1.2 --top-k 50 --top-p 0.95 --min-p 0.01 --repeat-penalty 1.1 --presence-penalty 0.2 --frequency-penalty 0.1 --penalty-window 16"
    expect_rc 0 run --model "$model" --tokens "$tokens" --max-new 8 $sampling --seed 7 || exit 1
    has out '^sampling temperature 1.2 top-k 50 .* seed 7$'
    grep -E '^(step|sequence)' "$work/out" > "$work/sampled"
    expect_rc 0 run --model "$model" --tokens "$tokens" --max-new 8
    grep -E '^(step|sequence)' "$work/out" | cmp -s - "$work/sampled" && fail "sampling gave the greedy output"
    expect_rc 0 run --model "$model" --tokens "$tokens" --max-new 8 $sampling --seed 7 --threads 3 --cpu-path scalar
    grep -E '^(step|sequence)' "$work/out" | cmp -s - "$work/sampled" || fail "sampled run with 3 threads on scalar differs"
    for seed in 8 9 10; do
        expect_rc 0 run --model "$model" --tokens "$tokens" --max-new 8 $sampling --seed $seed
        grep -E '^(step|sequence)' "$work/out" >> "$work/seeds"
    done
    [ "$(grep -c '^sequence' "$work/seeds")" = 3 ] && [ "$(grep '^sequence' "$work/seeds" "$work/sampled" | sed 's/.*digest //' | sort -u | wc -l)" = 4 ] ||
        fail "four seeds did not give four different sequences"
    expect_rc 0 run --model "$model" --tokens "$tokens" --max-new 8 $sampling --seed 7 --json &&
        json "d['sampling']['seed'] == '7' and d['sampling']['top_k'] == 50 and len(d['steps']) == 8"
    expect_rc 1 run --model "$model" --tokens 1 --temperature -0.5 && has err 'DI_ERR_INVALID_ARGUMENT.*temperature = -0.5'
    expect_rc 1 run --model "$model" --tokens 1 --temperature 1 --top-p 1.5 && has err 'top_p = 1.5'
    expect_rc 2 run --model "$model" --tokens 1 --top-p x && has err '--top-p wants a number'
    expect_rc 2 run --model "$model" --tokens 1 --seed -1 && has err '--seed wants an integer'
    # --speculate ngram: the same steps and sequence, greedy and sampled, for any draft length;
    # a prompt that repeats itself gives the lookup drafts, and some must be accepted
    twice="$tokens,$tokens"
    for mode in "" "$sampling --seed 7"; do
        expect_rc 0 run --model "$model" --tokens "$twice" --max-new 40 $mode || exit 1
        grep -E '^(step|sequence)' "$work/out" > "$work/plain"
        for k in 1 4 16; do
            expect_rc 0 run --model "$model" --tokens "$twice" --max-new 40 $mode --speculate ngram --draft-max $k
            grep -E '^(step|sequence)' "$work/out" | cmp -s - "$work/plain" ||
                fail "--speculate ngram --draft-max $k ${mode:+(sampled) }differs from decoding without it"
            has out '^speculation ngram: [0-9]+ steps after the prompt for 40 tokens'
        done
    done
    expect_rc 0 run --model "$model" --tokens "$twice" --max-new 40 --speculate ngram --json &&
        json "d['speculation']['accepted'] > 0 and d['speculation']['steps'] < 39"
    # --speculate FILE: a draft model (here the model itself, whose greedy drafts are all right)
    expect_rc 0 run --model "$model" --tokens "$twice" --max-new 40 || exit 1
    grep -E '^(step|sequence)' "$work/out" > "$work/plain"
    expect_rc 0 run --model "$model" --tokens "$twice" --max-new 40 --speculate "$model" --draft-max 6
    grep -E '^(step|sequence)' "$work/out" | cmp -s - "$work/plain" || fail "--speculate with a draft model differs"
    has out '^speculation draft-model: [0-9]+ steps after the prompt for 40 tokens'
    expect_rc 0 run --model "$model" --tokens "$twice" --max-new 40 --speculate "$model" --json &&
        json "d['speculation']['draft'] == 'draft-model' and d['speculation']['accepted'] > 0"
    expect_rc 1 run --model "$model" --tokens 1 --speculate "$models/mha_tied_f32.gguf" &&
        has err 'DI_ERR_MODEL.*vocabulary has 96 tokens, the model.s 128'
    expect_rc 1 run --model "$model" --tokens 1 --speculate "$work/missing.gguf" && has err 'missing.gguf.*DI_ERR_IO'
    expect_rc 2 run --model "$model" --tokens 1 --speculate ngram --draft-max 0 && has err '--draft-max'
    expect_rc 2 run --model "$model" --tokens 1 --speculate ngram --ngram 9 && has err '--ngram'
    ;;

verify)
    # the defaults (50 repetitions, batch 1..16, ...) where time allows, --quick under sanitizers
    quick=; [ -n "$sanitize" ] && quick=--quick
    expect_rc 0 verify --model "$model" $quick --no-progress || exit 1
    for axis in repeat batch threads chunk process mixed; do
        has out "^$axis .* ok$"
    done
    has out '^backend +cuda .*skipped'
    has out '^near ties: the [0-9]+ smallest top-1/top-2 logit gaps'
    has out '^  1 .* held +held +held +held +held +skipped +held +held *$'
    has out '^path +scalar .* ok$'
    has out '^PASS: '
    [ -z "$quick" ] && has out '^repeat +50x' && has out '^batch +16 '
    expect_rc 0 verify --model "$gemma" --quick --json &&
        json "d['result'] == 'pass' and d['first_mismatch'] is None and all(a['result'] in ('ok', 'skipped') for a in d['axes']) and len(d['near_ties']) == 4 and all(t['held'] for t in d['near_ties'])"
    # the near ties: structure, held on every axis that ran, and the gap in ulp
    # recounted from the two logits (tests/tools/ulp_gap.py, exact arithmetic)
    expect_rc 0 verify --model "$model" --quick --json --near-ties 6 --tie-positions 3000 || exit 1
    python3 "$root/tests/tools/ulp_gap.py" --check-verify "$work/out" 6 || fail "near-tie report or ulp gaps wrong"
    # each near tie's token and digest, as `detinfer run` gives them for its prefix
    python3 - "$work/out" > "$work/prefixes" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
src = d['near_tie_search']['sources']
for t in d['near_ties'][:3]:
    s = src[t['source']]
    seq = s['tokens'] + s['continuation']
    print(','.join(map(str, seq[:t['position'] + 1])), t['top1'], t['digest'])
EOF
    while read -r prefix top1 digest; do
        expect_rc 0 run --model "$model" --tokens "$prefix" --max-new 1 &&
            has out "^step 0 token $top1 logits $digest\$"
    done < "$work/prefixes"
    expect_rc 0 verify --model "$model" --quick --near-ties 0 --no-progress && ! grep -q '^near ties' "$work/out" ||
        fail "--near-ties 0 still searched"
    printf '# two prompts\ntokens: 1,2,3\n\ntokens: 5 6 7 8 9\n' > "$work/prompts"
    expect_rc 0 verify --model "$model" --prompts "$work/prompts" --quick --json &&
        json "len(d['prompts']) == 5 and d['prompts'][1]['tokens'] == [5, 6, 7, 8, 9] and d['result'] == 'pass' and [p['tokens'] for p in d['prompts'][2:]] == [[1, 2, 3], [5, 6, 7, 8, 9], [1, 2, 3]] and len({p['sampling']['seed'] for p in d['prompts'][2:]}) == 3 and 'sampling' not in d['prompts'][0]"
    expect_rc 0 verify --model "$model" --prompts "$work/prompts" --quick --json --sampled 0 &&
        json "len(d['prompts']) == 2"
    printf 'a text line\n' > "$work/text"
    expect_rc 1 verify --model "$model" --prompts "$work/text" && has err 'line 1 is text, but the model has no tokenizer'
    ;;

verify-fails)
    # TEST ONLY hook: one logit of batch slot 3 at position 5 is off by one ulp
    DETINFER_TEST_PERTURB=3:5 expect_rc 1 verify --model "$model" --quick --no-progress
    has out '^batch +1 .* ok$'
    has out '^batch +4 .*MISMATCH'
    has out '^first divergence: batch 4 .* in slot 3$'
    has out 'position 5 '
    has out 'logits digest: reference [0-9a-f]{32}, this run [0-9a-f]{32}'
    has out '^FAIL: '
    a=$(sed -n 's/.*logits digest: reference \([0-9a-f]*\), this run \([0-9a-f]*\)/\1 \2/p' "$work/out")
    [ "${a% *}" != "${a#* }" ] || fail "the two digests of the divergence are equal: $a"
    DETINFER_TEST_PERTURB=3:5 expect_rc 1 verify --model "$gemma" --quick --json &&
        json "d['result'] == 'fail' and d['first_mismatch']['axis'] == 'batch' and d['first_mismatch']['slot'] == 3 and d['first_mismatch']['position'] == 5 and d['first_mismatch']['digest'] != d['first_mismatch']['reference_digest']"
    # a near tie's result altered before the comparison: the comparison says DIFFERS
    DETINFER_TEST_PERTURB=tie-token:0 expect_rc 1 verify --model "$model" --quick --no-progress
    has out '^batch +4 .* ok$'
    has out '^  1 .* held +DIFFERS +held'
    has out '^  2 .* held +held +held'
    has out '^near tie 1 DIFFERS on batch 4: token [0-9]+ \(reference [0-9]+\)'
    has out '^FAIL: 0 of [0-9]+ runs differ or failed, near ties differ'
    a=$(sed -n 's/^near tie 1 DIFFERS on batch 4: token \([0-9]*\) (reference \([0-9]*\)).*/\1 \2/p' "$work/out")
    [ -n "$a" ] && [ "${a% *}" != "${a#* }" ] || fail "the altered token equals the reference: $a"
    DETINFER_TEST_PERTURB=tie-digest:1 expect_rc 1 verify --model "$model" --quick --json &&
        json "d['result'] == 'fail' and d['first_mismatch'] is None and [t['held'] for t in d['near_ties']] == [True, False, True, True] and all((a['result'] == 'differs') == (a['axis'] in ('batch', 'mixed') and a['value'] != '1') for a in d['near_ties'][1]['axes'] if a['result'] != 'skipped') and all(a['token'] == d['near_ties'][1]['top1'] and (a['digest'] != d['near_ties'][1]['digest']) == (a['result'] == 'differs') for a in d['near_ties'][1]['axes'] if a['result'] != 'skipped')"
    # the fresh-process axis can fail too
    DETINFER_TEST_PERTURB=child:2 expect_rc 1 verify --model "$model" --quick --no-progress
    has out '^process +fresh #1 .*MISMATCH'
    has out '^first divergence: process fresh #1'
    ;;

doctor)
    expect_rc 0 doctor || exit 1
    has out '^  OK +library +libdetinfer'
    has out '^  (OK|WARN) +build flags'
    has out '^  INFO +floating point .*does not affect results'
    has out '^  INFO +cpu '
    has out '^  INFO +simd path'
    expect_rc 0 doctor --model "$model" && has out '^  OK +session +backend=cpu path=[a-z0-9]+ profile=integer threads=1$'
    has out '^  INFO +os '
    has out '^  INFO +libc '
    has out '^  (OK|INFO|WARN) +cuda driver'
    # the tools' default profile, integer (the other tools' and the server's)
    has out '^fingerprint \(integer profile\): [0-9a-f]{32}$'
    fp=$(sed -n 's/^fingerprint (integer profile): //p' "$work/out")
    expect_rc 0 doctor --profile portable && has out '^fingerprint \(portable profile\): ' &&
        { ! grep -q "$fp" "$work/out" || fail "the portable profile's fingerprint is the integer one's"; }
    expect_rc 0 doctor --json &&
        json "d['fingerprint'] == '$fp' and d['profile'] == 'integer' and 'cpu.model' in d['facts'] and all(c['status'] in ('OK', 'INFO', 'WARN') for c in d['checks'])"
    expect_rc 0 doctor --save "$work/fp.txt" && has out "$fp"
    # the digest is xxh128sum of the canonical text (the integer and portable keys, sorted, padded to 4 bytes)
    python3 - "$work/fp.txt" "$fp" <<'EOF' || fail "the fingerprint is not the XXH3-128 of its canonical text"
import sys, xxhash
keys = ["profile", "library.version", "library.numerics", "library.fast_math", "library.fp_contract"]
facts = dict(l.split("=", 1) for l in open(sys.argv[1]).read().splitlines() if l and not l.startswith("#"))
text = "".join(f"{k}={facts[k]}\n" for k in sorted(keys)).encode()
text += b"\n" * (-len(text) % 4)
assert xxhash.xxh3_128_hexdigest(text) == sys.argv[2]
EOF
    expect_rc 0 doctor --compare "$work/fp.txt" && has out '^EQUAL DIGESTS PROMISED'
    # other hardware: still equal digests in the integer (and portable) profile
    sed -e 's/^cpu.model=.*/cpu.model=Some Other CPU/' -e 's/^gpu.name=.*/gpu.name=NVIDIA H100/' \
        "$work/fp.txt" > "$work/hw.txt"
    expect_rc 0 doctor --compare "$work/hw.txt" && has out '^  INFO +cpu.model' && has out '^EQUAL DIGESTS PROMISED'
    # but not in the device profile
    expect_rc 0 doctor --profile device --save "$work/dev.txt"
    sed -e 's/^gpu.name=.*/gpu.name=NVIDIA H100/' "$work/dev.txt" > "$work/dev-hw.txt"
    expect_rc 1 doctor --profile device --compare "$work/dev-hw.txt" && has out '^  DIFF +gpu.name' &&
        has out 'NOT PROMISED'
    # the host's floating-point state does not matter (the library pins its own)
    sed -e 's/^float.rounding=.*/float.rounding=other/' -e 's/^float.denormals=.*/float.denormals=flushed/' \
        -e 's/^libm.fmaf=.*/libm.fmaf=not-fused/' "$work/fp.txt" > "$work/fpenv.txt"
    expect_rc 0 doctor --compare "$work/fpenv.txt" && has out '^  INFO +float.rounding' &&
        has out '^  INFO +float.denormals' && has out '^  INFO +libm.fmaf' && has out '^EQUAL DIGESTS PROMISED'
    # another library version: not promised
    sed -e 's/^library.version=.*/library.version=9.9.9/' "$work/fp.txt" > "$work/lib.txt"
    expect_rc 1 doctor --compare "$work/lib.txt" && has out '^  DIFF +library.version' && has out 'NOT PROMISED'
    # the SIMD path is the library's own answer (di_cpu_path_resolve)
    DETINFER_CPU_PATH=scalar expect_rc 0 doctor && has out '^  INFO +simd path +scalar, from DETINFER_CPU_PATH'
    DETINFER_CPU_PATH=sse expect_rc 0 doctor && has out '^  WARN +simd path +a default session cannot start'
    expect_rc 1 doctor --compare "$work/dev.txt" && has out 'NOT COMPARABLE'
    expect_rc 1 doctor --compare "$work/nonexistent" && has err 'cannot read'
    echo "hello" > "$work/junk.txt"
    expect_rc 1 doctor --compare "$work/junk.txt" && has err 'not a fingerprint'
    ;;

bench)
    expect_rc 0 bench --model "$model" --threads 1,2 --pp 16 --tg 8 --reps 2 || exit 1
    has out '^memory bandwidth'
    has out '\| +1 \| +pp16 \| +[0-9.]+ ± +[0-9.]+ \|'
    has out '\| +2 \| +tg8 \| +[0-9.]+ ± +[0-9.]+ \| +[0-9.]+% of [0-9.]+ t/s'
    has out 'sequence digests of the tg runs: equal across 4 runs'
    expect_rc 0 bench --model "$model" --pp 8,16 --tg 4 --reps 3 --bandwidth 10 --json &&
        json "len(d['results']) == 3 and all(r['avg_ts'] > 0 and len(r['samples_ts']) == 3 for r in d['results']) and d['results'][2]['n_gen'] == 4 and d['results'][2]['bandwidth_gbs'] == 10 and 0 < d['results'][2]['bandwidth_fraction'] and d['tg_digests_equal']"
    # batched decode: 3 sequences x 4 tokens after a 16-token prompt each, at 1 and 2 threads
    expect_rc 0 bench --model "$model" --threads 1,2 --pp 0 --tg 0 --batch 3 --batch-tokens 4 --reps 2 || exit 1
    has out '\| +1 \| +bd3x4 \| +[0-9.]+ ± +[0-9.]+ \|'
    has out '\| +2 \| +bd3x4 \| +[0-9.]+ ± +[0-9.]+ \|'
    has out 'sequence digests of the batched runs: equal across 4 runs'
    expect_rc 0 bench --model "$model" --pp 16 --tg 4 --batch 2 --batch-tokens 3 --reps 2 --bandwidth 10 --json &&
        json "[(r['n_prompt'], r['n_gen'], r['n_seq']) for r in d['results']] == [(16, 0, 0), (0, 4, 0), (16, 3, 2)] and d['results'][2]['avg_ts'] > 0 and 'bandwidth_gbs' not in d['results'][2] and d['bd_digests_equal']"
    # --speculate: each tg length after the prompt without and with speculation, side by side; the
    # outputs must be equal (exit 1 otherwise). Speed is not asserted, only that it is reported.
    expect_rc 0 bench --model "$model" --threads 1,2 --pp 0 --tg 8,12 --reps 2 --speculate ngram --draft-max 4 || exit 1
    has out '^speculation ngram \(draft-max 4, ngram 3\): 1 prompt \(generated: 16 tokens twice\)'
    has out '\| +without t/s \| +with t/s \| +with/out \| +steps \| +drafted \| +accepted \| +acceptance \|'
    has out '\| +2 \| +tg12 \| +[0-9.]+ ± +[0-9.]+ \| +[0-9.]+ ± +[0-9.]+ \| +[0-9.]+× \| +[0-9]+ \| +[0-9]+ \| +[0-9]+ \| +[0-9.]+% \|'
    has out '^outputs with speculation: equal to those without across 8 runs'
    has out 'sequence digests of the tg runs: equal across 8 runs'
    # a draft model (the model itself: every draft token right, so acceptance is 100%)
    expect_rc 0 bench --model "$model" --pp 0 --tg 10 --reps 2 --speculate "$model" --json &&
        json "s['draft'] == 'draft-model' and s['draft_model'].endswith('gqa_untied_q8_0.gguf') and s['draft_max'] == 3 and s['generated_prompt'] and s['prompt_tokens'] == [32] and s['runs'] == 2 and s['outputs_equal'] and len(s['results']) == 1 and all(k in r0 for k in ('without_avg_ts', 'without_stddev_ts', 'without_samples_ts', 'with_avg_ts', 'with_stddev_ts', 'with_samples_ts', 'speedup', 'steps')) and r0['n_threads'] == 1 and r0['n_gen'] == 10 and r0['accepted'] == r0['drafted'] > 0 and r0['acceptance_rate'] == 1 and len(r0['with_samples_ts']) == 2 and d['tg_digests_equal'] and len(d['results']) == 1"
    expect_rc 0 bench --model "$model" --pp 0 --tg 10 --reps 1 --speculate "$model" &&
        has out '\| +1 \| +tg10 \| .* \| +100\.0% \|'
    # the JSON of a run without --speculate has no speculation object
    expect_rc 0 bench --model "$model" --pp 0 --tg 4 --reps 1 --json && json "'speculation' not in d"
    # a draft model of another vocabulary, a missing one, a text prompt without a tokenizer: refused before timing
    expect_rc 1 bench --model "$model" --tg 8 --speculate "$models/mha_tied_f32.gguf" &&
        has err 'the draft model: DI_ERR_MODEL.*vocabulary has 96 tokens, the model.s 128' &&
        { [ ! -s "$work/out" ] || fail "bench timed something before refusing the draft model"; }
    expect_rc 1 bench --model "$model" --tg 8 --speculate "$work/missing.gguf" && has err 'missing.gguf.*DI_ERR_IO'
    expect_rc 1 bench --model "$model" --tg 8 --speculate ngram --prompt "text" &&
        has err 'cannot take a text prompt.*DI_ERR_UNSUPPORTED'
    ;;

install)
    stage=$work/stage prefix=/opt/detinfer-cli-test
    mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$root" "$@" DESTDIR="$stage" PREFIX="$prefix" \
           SANITIZE="$sanitize" >/dev/null; }
    mk install install-tools || { fail "make install install-tools"; exit 1; }
    bin=$stage$prefix/bin/detinfer
    test -x "$bin" || fail "install-tools did not install $bin"
    readelf -d "$bin" | grep -qE "(RUNPATH|RPATH).*\[$prefix/lib\]" || fail "$bin does not look in $prefix/lib"
    LD_LIBRARY_PATH=$stage$prefix/lib "$bin" doctor > "$work/out" 2>&1 || fail "the installed tool does not run"
    has out '^fingerprint'
    mk uninstall-tools uninstall || fail "make uninstall-tools uninstall"
    test ! -e "$bin" || fail "uninstall-tools left $bin"
    ;;

*)
    echo "cli_test.sh: unknown section '$section'"
    exit 2
    ;;
esac

if [ "$failures" -gt 0 ]; then
    echo "cli $section: $failures failure(s)"
    exit 1
fi
echo "cli $section: OK"
