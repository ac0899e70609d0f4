package detinfer

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

var batchPrompts = [][]int32{{1, 17, 42}, {5, 9, 2, 33, 7, 99}, {1, 3}, {1, 17, 42, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8},
	{44}, {1, 2, 3, 4, 5, 6, 7}, {9, 9}}

type single struct {
	tokens []int32
	digest Digest
	logits []Digest
	lps    []TokenLogprobs
}

// alone runs one prompt by itself: a fresh model and session, Session.Generate.
func alone(t *testing.T, path string, prompt []int32, maxNew int, sampling *SamplingParams, stopAtEOS bool, top int) single {
	m, err := LoadModel(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s := session(t, m, 1)
	defer s.Close()
	g := s.Generate(0, prompt, maxNew, GenerateOptions{StopAtEOS: stopAtEOS, Sampling: sampling})
	var out single
	for g.Next() {
		out.logits = append(out.logits, g.Token().Digest)
		if top >= 0 {
			lp, tops, err := s.Logprobs(0, g.Token().Token, top)
			if err != nil {
				t.Fatal(err)
			}
			out.lps = append(out.lps, TokenLogprobs{lp, tops})
		}
	}
	if g.Err() != nil {
		t.Fatal(g.Err())
	}
	out.tokens = g.Tokens()
	if out.digest, err = g.SequenceDigest(); err != nil {
		t.Fatal(err)
	}
	return out
}

// newLLM opens an LLM with the portable profile unless opts names one: the
// tests compare LLM with portable references (a bare session, the C
// example), while LLM's default is the integer profile (as the detinfer tools').
func newLLM(t *testing.T, name string, opts LLMOptions) *LLM {
	if opts.Profile == 0 {
		opts.Profile = ProfilePortable
	}
	l, err := NewLLM(modelPath(t, name), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func tokenPrompts(ps [][]int32) []Prompt {
	out := make([]Prompt, len(ps))
	for i, p := range ps {
		out[i] = TokenPrompt(p...)
	}
	return out
}

func join(ids []int32) string {
	s := make([]string, len(ids))
	for i, v := range ids {
		s[i] = strconv.Itoa(int(v))
	}
	return strings.Join(s, ",")
}

func TestLLMGenerateEqualsEachPromptAloneAndTheCExample(t *testing.T) {
	for _, name := range []string{"gqa_untied_q8_0.gguf", "gemma3_q8_0.gguf"} {
		l := newLLM(t, name, LLMOptions{MaxSequences: 3}) // 7 prompts on 3 slots: continuous batching
		got, err := l.Generate(tokenPrompts(batchPrompts), BatchOptions{MaxNew: 6, IgnoreEOS: true, LogitsDigests: true})
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range batchPrompts {
			want := alone(t, modelPath(t, name), p, 6, nil, false, -1)
			c := got[i]
			if !reflect.DeepEqual(c.Tokens, want.tokens) || c.Digest != want.digest || !reflect.DeepEqual(c.LogitsDigests, want.logits) {
				t.Errorf("%s prompt %d: %v %s, alone %v %s", name, i, c.Tokens, c.Digest, want.tokens, want.digest)
			}
			if c.FinishReason != "length" || !reflect.DeepEqual(c.PromptTokens, p) {
				t.Errorf("%s prompt %d: %q %v", name, i, c.FinishReason, c.PromptTokens)
			}
			lines := strings.Split(cExample(t, modelPath(t, name), join(p), 6), "\n")
			if !strings.HasSuffix(lines[len(lines)-1], c.Digest.String()) {
				t.Errorf("%s prompt %d: %s, C example %s", name, i, c.Digest, lines[len(lines)-1])
			}
			for j, line := range lines[:len(lines)-1] {
				if strings.Fields(line)[5] != c.LogitsDigests[j].String() {
					t.Errorf("%s prompt %d step %d: %s, C example %s", name, i, j, c.LogitsDigests[j], line)
				}
			}
		}
	}
}

func TestLLMPerPromptSamplingAndLogprobsEqualAlone(t *testing.T) {
	params := []*SamplingParams{nil, {Temperature: 1.5, TopK: 40, Seed: 7}, nil, {Temperature: 0.8, TopP: 0.95, Seed: 42},
		{Temperature: 1, Seed: 1}, nil, {Temperature: 2, MinP: 0.05, Seed: 3}}
	path := modelPath(t, "gqa_untied_q8_0.gguf")
	l := newLLM(t, "gqa_untied_q8_0.gguf", LLMOptions{MaxSequences: 2})
	got, err := l.Generate(tokenPrompts(batchPrompts), BatchOptions{MaxNew: 9, IgnoreEOS: true, PerPrompt: params,
		Logprobs: true, TopLogprobs: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range batchPrompts {
		want := alone(t, path, p, 9, params[i], false, 3)
		c := got[i]
		if !reflect.DeepEqual(c.Tokens, want.tokens) || c.Digest != want.digest || !reflect.DeepEqual(c.Logprobs, want.lps) {
			t.Errorf("prompt %d: %v %s, alone %v %s", i, c.Tokens, c.Digest, want.tokens, want.digest)
		}
		if c.LogitsDigests != nil || len(c.Logprobs) != 9 || len(c.Logprobs[0].Top) != 3 {
			t.Errorf("prompt %d: logits digests %v, logprobs %d", i, c.LogitsDigests, len(c.Logprobs))
		}
	}
}

func TestLLMTextPromptsStopAtEOS(t *testing.T) {
	path := modelPath(t, "tok_spm.gguf")
	l := newLLM(t, "tok_spm.gguf", LLMOptions{MaxSequences: 2})
	texts := []string{"hello world", "the quick brown fox", "a", "hello"}
	prompts := make([]Prompt, len(texts))
	for i, s := range texts {
		prompts[i] = TextPrompt(s)
	}
	got, err := l.Generate(prompts, BatchOptions{MaxNew: 12})
	if err != nil {
		t.Fatal(err)
	}
	eos, _ := l.Model().SpecialToken(TokenEOS)
	for i, s := range texts {
		ids, _ := l.Model().Tokenize(s, TokenizeAddBOS)
		want := alone(t, path, ids, 12, nil, true, -1)
		c := got[i]
		if !reflect.DeepEqual(c.Tokens, want.tokens) || c.Digest != want.digest || !reflect.DeepEqual(c.PromptTokens, ids) {
			t.Errorf("%q: %v %s, alone %v %s", s, c.Tokens, c.Digest, want.tokens, want.digest)
		}
		last := c.Tokens[len(c.Tokens)-1]
		if (c.FinishReason == "stop") != (last == eos) || (c.FinishReason == "length") != (len(c.Tokens) == 12 && last != eos) {
			t.Errorf("%q: finish %q, last token %d (EOS %d), %d tokens", s, c.FinishReason, last, eos, len(c.Tokens))
		}
		if text, _ := l.Model().Detokenize(c.Tokens); text != c.Text {
			t.Errorf("%q: text %q, detokenized %q", s, c.Text, text)
		}
	}
}

func TestLLMChecksEverythingBeforeRunning(t *testing.T) {
	l := newLLM(t, "gqa_untied_q8_0.gguf", LLMOptions{MaxSequences: 2})
	n := int32(l.Model().NVocab())
	cases := []struct {
		prompts []Prompt
		opts    BatchOptions
		status  Status
		text    string
	}{
		{[]Prompt{TokenPrompt(1, 2), TokenPrompt(1, n)}, BatchOptions{}, ErrTokenRange, "prompt 1: token"},
		{[]Prompt{TokenPrompt(1, 2), TokenPrompt(3)}, BatchOptions{PerPrompt: []*SamplingParams{nil, {Temperature: -1}}},
			ErrInvalidArgument, "prompt 1: "},
		{[]Prompt{TokenPrompt(1)}, BatchOptions{PerPrompt: []*SamplingParams{nil, nil}}, ErrInvalidArgument, "2 sampling parameters for 1 prompts"},
		{[]Prompt{{}}, BatchOptions{}, ErrInvalidArgument, "prompt 0: set exactly one"},
		{[]Prompt{{Tokens: []int32{}}}, BatchOptions{}, ErrInvalidArgument, "prompt 0: the prompt has no tokens"},
		{[]Prompt{TokenPrompt(1)}, BatchOptions{MaxNew: -1}, ErrInvalidArgument, "MaxNew -1"},
	}
	for _, c := range cases {
		_, err := l.Generate(c.prompts, c.opts)
		if !errors.Is(err, c.status) || !strings.Contains(err.Error(), c.text) {
			t.Errorf("%v: %v, want %s and %q", c.prompts, err, c.status, c.text)
		}
	}
	for seq := uint32(0); seq < 2; seq++ { // nothing ran
		if n, _ := l.session.SeqLength(seq); n != 0 {
			t.Errorf("sequence %d holds %d tokens", seq, n)
		}
	}
}

func TestLLMAFailingPromptIsNamed(t *testing.T) {
	l := newLLM(t, "gqa_untied_q8_0.gguf", LLMOptions{MaxSequences: 2, ContextLength: 16})
	_, err := l.Generate([]Prompt{TokenPrompt(1, 2), TokenPrompt(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)}, BatchOptions{MaxNew: 8})
	if !errors.Is(err, ErrContextFull) || !strings.HasPrefix(err.Error(), "prompt 1: ") {
		t.Fatal(err)
	}
	got, err := l.Generate([]Prompt{TokenPrompt(1, 2)}, BatchOptions{MaxNew: 8})
	if want := alone(t, modelPath(t, "gqa_untied_q8_0.gguf"), []int32{1, 2}, 8, nil, true, -1); err != nil || got[0].Digest != want.digest {
		t.Fatal(err, got)
	}
}

// A struct literal with only the fields one needs: a zero TopP and
// RepetitionPenalty mean 1; a zero PenaltyWindow keeps its C meaning (the
// whole sequence, as a window longer than the sequence), unlike a window of 1.
func TestSamplingParamsLiteral(t *testing.T) {
	path := modelPath(t, "gqa_untied_q8_0.gguf")
	literal := alone(t, path, []int32{1, 17, 42}, 12, &SamplingParams{Temperature: 0.8, Seed: 42}, false, -1)
	full := DefaultSampling()
	full.Temperature, full.Seed = 0.8, 42
	if want := alone(t, path, []int32{1, 17, 42}, 12, &full, false, -1); literal.digest != want.digest {
		t.Errorf("literal %v, DefaultSampling %v", literal.tokens, want.tokens)
	}
	window := func(w uint32) single {
		return alone(t, path, []int32{1, 17, 42}, 24, &SamplingParams{RepetitionPenalty: 3, PenaltyWindow: w}, false, -1)
	}
	whole, wide, one := window(0), window(1000), window(1)
	if whole.digest != wide.digest || whole.digest == one.digest {
		t.Errorf("window 0 %v, 1000 %v, 1 %v", whole.tokens, wide.tokens, one.tokens)
	}
}

// ---- a second Generate on a sequence continues it --------------------------------------

func TestSecondGenerateContinuesAsOneLongGeneration(t *testing.T) {
	path := modelPath(t, "gqa_untied_q8_0.gguf")
	long := alone(t, path, []int32{1, 17, 42}, 9, nil, false, -1)
	m, _ := LoadModel(path)
	defer m.Close()
	s := session(t, m, 1)
	first := s.Generate(0, []int32{1, 17, 42}, 3, GenerateOptions{})
	for first.Next() {
	}
	second := s.Generate(0, nil, 6, GenerateOptions{}) // steps first's last token, then goes on
	for second.Next() {
	}
	d, err := second.SequenceDigest()
	if got := append(first.Tokens(), second.Tokens()...); err != nil || !reflect.DeepEqual(got, long.tokens) || d != long.digest {
		t.Errorf("%v %s, one generation %v %s (%v)", got, d, long.tokens, long.digest, err)
	}
	if n, _ := second.Length(); n != 3+9 {
		t.Errorf("length %d", n)
	}
}

func TestStepAfterGenerateIsRefusedAndAnEarlierGenerationStops(t *testing.T) {
	m := load(t, "gqa_untied_q8_0.gguf")
	s := session(t, m, 1)
	g := s.Generate(0, []int32{1, 17, 42}, 3, GenerateOptions{})
	for g.Next() {
	}
	last := g.Tokens()[2]
	err := s.Step([]Entry{{0, []int32{5}}}, 0)
	if !errors.Is(err, ErrState) || !strings.Contains(err.Error(), "token "+strconv.Itoa(int(last))) ||
		!strings.Contains(err.Error(), "SeqReset") {
		t.Fatal(err)
	}
	if n, _ := s.SeqLength(0); n != 5 {
		t.Errorf("the refused step changed the sequence: %d tokens", n)
	}
	first := s.Generate(0, []int32{6}, 5, GenerateOptions{})
	first.Next()
	second := s.Generate(0, nil, 2, GenerateOptions{})
	if first.Next() || !errors.Is(first.Err(), ErrState) {
		t.Errorf("the earlier generation went on: %v", first.Err())
	}
	if !second.Next() {
		t.Fatal(second.Err())
	}
	if err := s.SeqReset(0); err != nil {
		t.Fatal(err)
	}
	if g := s.Generate(0, nil, 2, GenerateOptions{}); g.Next() || g.Err() == nil {
		t.Error("nothing to continue after a reset, yet it generated")
	}
	if err := s.Step([]Entry{{0, []int32{1, 2}}}, 0); err != nil {
		t.Errorf("step after reset: %v", err)
	}
}

// The default profile is integer, as the detinfer tools' (issue 41); a bare
// session keeps the library's, portable. The two profiles give other logits.
func TestLLMDefaultProfileIsInteger(t *testing.T) {
	logits := func(p Profile) string {
		l, err := NewLLM(modelPath(t, "gqa_untied_q8_0.gguf"), LLMOptions{Profile: p})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		c, err := l.Generate([]Prompt{TokenPrompt(1, 17, 42)}, BatchOptions{MaxNew: 4, IgnoreEOS: true, LogitsDigests: true})
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(c[0].LogitsDigests)
	}
	if def := logits(0); def != logits(ProfileInteger) || def == logits(ProfilePortable) {
		t.Fatal("the default profile is not integer")
	}
}

// Issue 41: every prompt is checked against the context before anything
// runs (the prompt and MaxNew-1 generated tokens are stepped), so no prompt's
// work is lost to another's overflow found mid-run; an empty text is refused.
func TestLLMContextIsCheckedBeforeAnythingRuns(t *testing.T) {
	l := newLLM(t, "gqa_untied_q8_0.gguf", LLMOptions{MaxSequences: 1, ContextLength: 16})
	_, err := l.Generate([]Prompt{TokenPrompt(1, 2, 3), TokenPrompt(1, 1, 1, 1, 1, 1, 1, 1, 1, 1)}, BatchOptions{MaxNew: 8, IgnoreEOS: true})
	if !errors.Is(err, ErrContextFull) || !strings.HasPrefix(err.Error(), "prompt 1: ") ||
		!strings.Contains(err.Error(), "exceed the context of 16 tokens") {
		t.Fatal(err)
	}
	got, err := l.Generate([]Prompt{TokenPrompt(1, 1, 1, 1, 1, 1, 1, 1, 1)}, BatchOptions{MaxNew: 8, IgnoreEOS: true})
	if err != nil || len(got[0].Tokens) != 8 { // 9 + 8 - 1 = 16 fits
		t.Fatal(err, got)
	}
	if _, err := l.Generate([]Prompt{TextPrompt("")}, BatchOptions{}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatal("an empty text prompt:", err)
	}
}
