package detinfer

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

// BatchOptions.Speculate: speculative decoding gives bit for bit the output
// of decoding without it (tokens, text, sequence digest, every logits digest
// and log-probability), greedy and seeded, alone and in batches; on a
// repeating prompt drafts must actually be accepted, else the comparison
// would prove nothing.

// A prompt whose continuation on the generated llama repeats itself.
var repeatPrompt = []int32{1, 5, 9, 2, 33, 7, 5, 9, 2, 33, 7, 5, 9, 2}

// withoutCounts is c without its speculation counts, to compare with a run without.
func withoutCounts(cs []Completion) []Completion {
	out := append([]Completion(nil), cs...)
	for i := range out {
		out[i].Drafted, out[i].Accepted = 0, 0
	}
	return out
}

func accepted(cs []Completion) (n int) {
	for _, c := range cs {
		n += c.Accepted
	}
	return n
}

func generate(t *testing.T, l *LLM, prompts []Prompt, opts BatchOptions) []Completion {
	t.Helper()
	out, err := l.Generate(prompts, opts)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSpeculationEqualsDecodingWithout(t *testing.T) {
	l := newLLM(t, "gqa_untied_q8_0.gguf", LLMOptions{MaxSequences: 2})
	cases := []struct {
		name     string
		prompts  [][]int32
		sampling []*SamplingParams
		spec     BatchOptions
	}{
		{"greedy, draft 1", [][]int32{repeatPrompt}, nil, BatchOptions{Speculate: "ngram", DraftMax: 1}},
		{"greedy, draft 8", [][]int32{repeatPrompt}, nil, BatchOptions{Speculate: "ngram"}},
		{"greedy, draft 32, ngram 1", [][]int32{repeatPrompt}, nil, BatchOptions{Speculate: "ngram", DraftMax: 32, Ngram: 1}},
		{"seeded", [][]int32{repeatPrompt}, []*SamplingParams{{Temperature: 0.3, TopP: 1, RepetitionPenalty: 1, Seed: 7}},
			BatchOptions{Speculate: "ngram", Ngram: 2}},
		{"seeded, penalties", [][]int32{repeatPrompt},
			[]*SamplingParams{{Temperature: 0.5, TopK: 5, TopP: 1, RepetitionPenalty: 1.1, Seed: 3}},
			BatchOptions{Speculate: "ngram", Ngram: 2}},
		{"a batch mixing prompts and drafts", [][]int32{repeatPrompt, {1, 17, 42}, repeatPrompt[:7], {5, 9, 2, 33, 7, 100, 5, 9}},
			[]*SamplingParams{nil, {Temperature: 0.3, TopP: 1, RepetitionPenalty: 1, Seed: 7}, nil, nil},
			BatchOptions{Speculate: "ngram"}},
		{"the F32 twin as draft model", [][]int32{repeatPrompt, {1, 17, 42}}, nil,
			BatchOptions{Speculate: modelPath(t, "gqa_untied_f32.gguf"), DraftMax: 4}},
	}
	for _, c := range cases {
		opts := BatchOptions{MaxNew: 40, LogitsDigests: true, Logprobs: true, TopLogprobs: 3, PerPrompt: c.sampling}
		if c.sampling == nil {
			opts.PerPrompt = nil
		}
		want := generate(t, l, tokenPrompts(c.prompts), opts)
		opts.Speculate, opts.DraftMax, opts.Ngram = c.spec.Speculate, c.spec.DraftMax, c.spec.Ngram
		got := generate(t, l, tokenPrompts(c.prompts), opts)
		if !reflect.DeepEqual(withoutCounts(got), want) {
			t.Errorf("%s: speculating gives another output:\n%+v\nwithout:\n%+v", c.name, got, want)
		}
		if accepted(got) == 0 {
			t.Errorf("%s: no draft token accepted: the comparison proves nothing", c.name)
		}
		if want[0].Drafted != 0 || got[0].Drafted < got[0].Accepted {
			t.Errorf("%s: counts %d / %d", c.name, got[0].Accepted, got[0].Drafted)
		}
	}
}

// Every token of the plain output as a stop token (a chat's end of turn, as
// the batch takes it): some end inside an accepted draft, where the sequence
// must be cut back (the digest says so).
func TestSpeculationStopsInsideADraft(t *testing.T) {
	l := newLLM(t, "gqa_untied_q8_0.gguf", LLMOptions{MaxSequences: 1})
	full := generate(t, l, tokenPrompts([][]int32{repeatPrompt}), BatchOptions{MaxNew: 40})[0].Tokens
	inside := 0
	for _, stop := range full {
		job := batchJob{prompt: repeatPrompt, maxNew: 40, stop: map[int32]bool{stop: true}}
		a := runBatch(l.session, 1, []batchJob{job}, nil)[0]
		b := runBatch(l.session, 1, []batchJob{job}, &speculation{draftMax: 8, ngram: 3})[0]
		if a.err != nil || b.err != nil {
			t.Fatal(a.err, b.err)
		}
		if !reflect.DeepEqual(a.tokens, b.tokens) || a.digest != b.digest || a.finish != b.finish ||
			!reflect.DeepEqual(a.logits, b.logits) {
			t.Errorf("stop %d: %v %v %s, speculating %v %v %s", stop, a.tokens, a.digest, a.finish, b.tokens, b.digest, b.finish)
		}
		if b.accepted > 0 && a.finish == "stop" {
			inside++
		}
	}
	if inside == 0 {
		t.Error("no run ended with drafts accepted")
	}
}

func TestSpeculationOptionsAreChecked(t *testing.T) {
	l := newLLM(t, "gqa_untied_q8_0.gguf", LLMOptions{MaxSequences: 1})
	p := tokenPrompts([][]int32{repeatPrompt})
	for _, c := range []struct {
		opts BatchOptions
		want string
	}{
		{BatchOptions{Speculate: "ngram", DraftMax: 33}, "DraftMax 33"},
		{BatchOptions{Speculate: "ngram", DraftMax: -1}, "DraftMax -1"},
		{BatchOptions{Speculate: "ngram", Ngram: 9}, "Ngram 9"},
		{BatchOptions{Speculate: "ngrams"}, "no such file"},
	} {
		c.opts.MaxNew = 4
		_, err := l.Generate(p, c.opts)
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want ErrInvalidArgument naming %q", c.opts, err, c.want)
		}
	}
	_, err := l.Generate(p, BatchOptions{MaxNew: 4, Speculate: modelPath(t, "tok_spm.gguf")})
	if !errors.Is(err, ErrModel) || !strings.Contains(err.Error(), "vocabulary") {
		t.Errorf("a draft model of another vocabulary: %v, want ErrModel naming the vocabulary", err)
	}
	a := generate(t, l, p, BatchOptions{MaxNew: 8})
	b := generate(t, l, p, BatchOptions{MaxNew: 8, Speculate: "ngram"})
	if !reflect.DeepEqual(withoutCounts(b), a) {
		t.Error("the LLM is not usable after refused options")
	}
}

func TestRealModelSpeculation(t *testing.T) {
	if _, err := os.Stat(realPath); err != nil {
		t.Skip("the real model is not there")
	}
	l, err := NewLLM(realPath, LLMOptions{Threads: 2, MaxSequences: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := []Prompt{TextPrompt("Continue the list.\n1. apples, 2 kilograms, 3 euros\n2. pears, 1 kilogram, 2 euros\n" +
		"3. plums, 2 kilograms, 4 euros\n4.")}
	for _, s := range []*SamplingParams{nil, {Temperature: 0.7, TopP: 1, RepetitionPenalty: 1, Seed: 11}} {
		opts := BatchOptions{MaxNew: 32, LogitsDigests: true, Sampling: s}
		want := generate(t, l, p, opts)
		opts.Speculate = "ngram"
		got := generate(t, l, p, opts)
		if !reflect.DeepEqual(withoutCounts(got), want) || got[0].Accepted == 0 {
			t.Errorf("sampling %v: %q (%d accepted), without %q", s, got[0].Text, got[0].Accepted, want[0].Text)
		}
	}
}
