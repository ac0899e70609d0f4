package detinfer

import (
	"errors"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
)

// oneAtATime steps each token of the prompt alone in a fresh session, then
// asks Session.Logprobs for the next token: the path LLM.Score must equal.
func oneAtATime(t *testing.T, path string, prompt []int32, top int) []*TokenLogprobs {
	m, err := LoadModel(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s := session(t, m, 1)
	defer s.Close()
	out := []*TokenLogprobs{nil}
	for i := 0; i+1 < len(prompt); i++ {
		if err := s.Step([]Entry{{0, prompt[i : i+1]}}, 0); err != nil {
			t.Fatal(err)
		}
		lp, tops, err := s.Logprobs(0, prompt[i+1], top)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, &TokenLogprobs{lp, tops})
	}
	return out
}

// sameBits: every float32 of a and b has the same bits.
func sameBits(a, b []*TokenLogprobs) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if (a[i] == nil) != (b[i] == nil) {
			return false
		}
		if a[i] == nil {
			continue
		}
		if math.Float32bits(a[i].Logprob) != math.Float32bits(b[i].Logprob) || len(a[i].Top) != len(b[i].Top) {
			return false
		}
		for j, x := range a[i].Top {
			y := b[i].Top[j]
			if x.Token != y.Token || math.Float32bits(x.Logprob) != math.Float32bits(y.Logprob) {
				return false
			}
		}
	}
	return true
}

func TestLLMScoreEqualsThePromptOneTokenAtATime(t *testing.T) {
	for _, name := range []string{"gqa_untied_q8_0.gguf", "gemma3_q8_0.gguf", "qwen2_q8_0.gguf"} {
		path := modelPath(t, name)
		l := newLLM(t, name, LLMOptions{MaxSequences: 3}) // 7 prompts on 3 sequences
		got, err := l.Score(tokenPrompts(batchPrompts), 4)
		if err != nil || len(got) != len(batchPrompts) {
			t.Fatal(name, err, len(got))
		}
		for i, p := range batchPrompts {
			want := oneAtATime(t, path, p, 4)
			r := got[i]
			if !reflect.DeepEqual(r.Tokens, p) || !sameBits(r.Logprobs, want) {
				t.Errorf("%s prompt %d: %v, one at a time %v", name, i, r.Logprobs, want)
			}
			sum := 0.0
			for _, lp := range want[1:] {
				sum += float64(lp.Logprob)
			}
			if r.Sum != sum {
				t.Errorf("%s prompt %d: sum %g, want %g", name, i, r.Sum, sum)
			}
		}
		// negative control: another prompt of the same length gives other values
		other := append([]int32{2}, batchPrompts[3][1:]...)
		if sameBits(oneAtATime(t, path, other, 4), got[3].Logprobs) {
			t.Errorf("%s: the comparison cannot tell prompts apart", name)
		}
		for seq := uint32(0); seq < 3; seq++ {
			if n, _ := l.session.SeqLength(seq); n != 0 {
				t.Errorf("%s: sequence %d holds %d tokens", name, seq, n)
			}
		}
	}
}

func TestLLMScoreInChunksAndTextPrompts(t *testing.T) {
	path := modelPath(t, "tok_spm.gguf")
	l := newLLM(t, "tok_spm.gguf", LLMOptions{MaxSequences: 2})
	texts := []Prompt{TextPrompt("hello world"), TextPrompt("the quick brown fox"), TextPrompt("a")}
	got, err := l.Score(texts, 2)
	if err != nil {
		t.Fatal(err)
	}
	// steps of at most 2 tokens: the prompts go in chunks, with the same bits
	chunked, err := scorePrompts(l.session, 2, [][]int32{got[0].Tokens, got[1].Tokens, got[2].Tokens}, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range texts {
		ids, _ := l.Model().Tokenize(p.Text, TokenizeAddBOS)
		want := oneAtATime(t, path, ids, 2)
		if !reflect.DeepEqual(got[i].Tokens, ids) || !sameBits(got[i].Logprobs, want) ||
			!sameBits(append([]*TokenLogprobs{nil}, chunked[i]...), want) {
			t.Errorf("%q: %v %v, one at a time %v", p.Text, got[i].Tokens, got[i].Logprobs, want)
		}
	}
}

func TestLLMScoreIsTheFloat64LogSoftmaxOfTheLogits(t *testing.T) {
	prompt := batchPrompts[3]
	l := newLLM(t, "gemma3_q8_0.gguf", LLMOptions{})
	n := l.Model().NVocab()
	got, err := l.Score([]Prompt{TokenPrompt(prompt...)}, n)
	if err != nil {
		t.Fatal(err)
	}
	m := load(t, "gemma3_q8_0.gguf")
	s := session(t, m, 1)
	if err := s.Step([]Entry{{0, prompt}}, StepAllLogits); err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(prompt); i++ {
		row, _, err := s.LogitsAt(0, uint32(i))
		if err != nil {
			t.Fatal(err)
		}
		ref := logSoftmax64(row)
		lp := got[0].Logprobs[i+1]
		if d := math.Abs(float64(lp.Logprob) - ref[prompt[i+1]]); d > logprobTolerance {
			t.Errorf("position %d: %g, reference %g", i, lp.Logprob, ref[prompt[i+1]])
		}
		for _, x := range lp.Top {
			if d := math.Abs(float64(x.Logprob) - ref[x.Token]); d > logprobTolerance {
				t.Errorf("position %d token %d: %g, reference %g", i, x.Token, x.Logprob, ref[x.Token])
			}
		}
	}
}

func TestLLMScoreRefusesBadInputBeforeRunning(t *testing.T) {
	l := newLLM(t, "gqa_untied_q8_0.gguf", LLMOptions{MaxSequences: 2, ContextLength: 16})
	n := int32(l.Model().NVocab())
	long := make([]int32, 17)
	for i := range long {
		long[i] = 1
	}
	cases := []struct {
		prompts []Prompt
		top     int
		status  Status
		text    string
	}{
		{[]Prompt{TokenPrompt(1, 2), TokenPrompt(long...)}, 0, ErrContextFull, "prompt 1: 17 tokens, more than the context of 16"},
		{[]Prompt{TokenPrompt(1, 2), {Tokens: []int32{}}}, 0, ErrInvalidArgument, "prompt 1: the prompt has no tokens"},
		{[]Prompt{{}}, 0, ErrInvalidArgument, "prompt 0: set exactly one"},
		{[]Prompt{TokenPrompt(1, n)}, 0, ErrTokenRange, "prompt 0: token"},
		{[]Prompt{TokenPrompt(1, 2)}, -1, ErrInvalidArgument, "top -1"},
		{[]Prompt{TokenPrompt(1, 2)}, int(n) + 1, ErrInvalidArgument, "top"},
		{[]Prompt{TokenPrompt(1, 2), TextPrompt("text")}, 0, ErrUnsupported, "prompt 1: "}, // no tokenizer
	}
	for _, c := range cases {
		_, err := l.Score(c.prompts, c.top)
		if !errors.Is(err, c.status) || !strings.Contains(err.Error(), c.text) {
			t.Errorf("%v top %d: %v, want %s and %q", c.prompts, c.top, err, c.status, c.text)
		}
	}
	for seq := uint32(0); seq < 2; seq++ { // nothing ran
		if k, _ := l.session.SeqLength(seq); k != 0 {
			t.Errorf("sequence %d holds %d tokens", seq, k)
		}
	}
	full := make([]int32, 16) // a prompt that fills the context exactly
	for i := range full {
		full[i] = int32(i + 1)
	}
	got, err := l.Score([]Prompt{TokenPrompt(full...)}, 0)
	if err != nil || !sameBits(got[0].Logprobs, oneAtATime(t, modelPath(t, "gqa_untied_q8_0.gguf"), full, 0)) {
		t.Error(err)
	}
}

func TestLogprobsAtErrors(t *testing.T) {
	m := load(t, "gqa_untied_q8_0.gguf")
	s := session(t, m, 2)
	if _, _, err := s.LogprobsAt(0, 0, 2, 0); !errors.Is(err, ErrState) { // no step yet
		t.Error(err)
	}
	s.Step([]Entry{{0, []int32{1, 2, 3}}}, 0) // not an all-logits step
	if _, _, err := s.LogprobsAt(0, 0, 2, 0); !errors.Is(err, ErrState) {
		t.Error(err)
	}
	if err := s.Step([]Entry{{0, []int32{4, 5}}}, StepAllLogits); err != nil {
		t.Fatal(err)
	}
	n := m.NVocab()
	var e *Error
	for _, c := range []struct {
		seq, index uint32
		token      int32
		top        int
		want       Status
	}{
		{0, 2, 1, 0, ErrInvalidArgument}, // it appended 2 positions
		{0, 0, int32(n), 0, ErrTokenRange},
		{0, 0, -2, 0, ErrTokenRange},
		{0, 0, NoToken, n + 1, ErrInvalidArgument},
		{0, 0, NoToken, -1, ErrInvalidArgument},
		{1, 0, 1, 0, ErrState}, // not in that step
		{5, 0, 1, 0, ErrSequence},
	} {
		if _, _, err := s.LogprobsAt(c.seq, c.index, c.token, c.top); !errors.As(err, &e) || e.Status != c.want || e.Message == "" {
			t.Errorf("%+v: %v, want %s", c, err, c.want)
		}
	}
	// the step's last position is Logprobs' own
	a, at, err1 := s.LogprobsAt(0, 1, 7, 3)
	b, bt, err2 := s.Logprobs(0, 7, 3)
	if err1 != nil || err2 != nil || math.Float32bits(a) != math.Float32bits(b) || !reflect.DeepEqual(at, bt) {
		t.Error(a, at, err1, b, bt, err2)
	}
}

func TestRealModelScore(t *testing.T) {
	if _, err := os.Stat(realPath); err != nil {
		t.Skip("the real model is not in the cache")
	}
	l, err := NewLLM(realPath, LLMOptions{Threads: 2, MaxSequences: 2, Profile: ProfilePortable})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got, err := l.Score([]Prompt{TextPrompt("The capital of France is Paris"), TextPrompt("def fibonacci(n):")}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got[0].Tokens[:6], []int32{2, 818, 5279, 529, 7001, 563}) {
		t.Fatal(got[0].Tokens)
	}
	for _, r := range got {
		if want := oneAtATime(t, realPath, r.Tokens, 3); !sameBits(r.Logprobs, want) {
			t.Errorf("%v: %v, one at a time %v", r.Tokens, r.Logprobs, want)
		}
	}
}
