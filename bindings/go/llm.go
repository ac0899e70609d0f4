package detinfer

import (
	"errors"
	"fmt"
	"os"
	"sync"
)

// LLM is a model file, loaded once, and one session of MaxSequences
// sequences: generation of many prompts in one call.
//
//	llm, err := detinfer.NewLLM("model.gguf", detinfer.LLMOptions{Threads: 2})
//	out, err := llm.Generate([]detinfer.Prompt{detinfer.TextPrompt("The capital of France is")},
//		detinfer.BatchOptions{MaxNew: 16})
//	fmt.Println(out[0].Text, out[0].Digest, out[0].FinishReason)
//
// Prompts run with continuous batching over the session's sequences; each
// result is bit for bit the prompt's run alone. Safe for concurrent use (one
// call at a time: the others wait).
type LLM struct {
	mu            sync.Mutex
	model         *Model
	session       *Session
	maxSequences  int
	contextLength int // the most tokens a sequence holds
	opts          LLMOptions
	drafters      map[string]*Drafter // BatchOptions.Speculate = a path: made once, kept
	draftModels   []*Model
}

// LLMOptions: zero values take the defaults (1 thread, 8 sequences, the
// integer profile as the detinfer tools take it, the model's context capped
// at 4096). ProfilePortable gives float64-level accuracy; a digest compares
// only with digests of the same profile (a bare Session keeps the library's
// default, portable).
type LLMOptions struct {
	Threads       int
	MaxSequences  int
	Profile       Profile
	ContextLength int
}

// DefaultMaxNew is BatchOptions.MaxNew's value when it is 0.
const DefaultMaxNew = 32

// BatchOptions of Generate. Sampling applies to every prompt (nil: greedy);
// PerPrompt, when given, has one entry per prompt (nil entries: greedy).
// IgnoreEOS generates past the end-of-sequence token. LogitsDigests and
// Logprobs ask for, per generated token, the digest of the logits row it was
// chosen from and its log-probability (with the TopLogprobs most likely).
type BatchOptions struct {
	MaxNew        int // 0: DefaultMaxNew
	Sampling      *SamplingParams
	PerPrompt     []*SamplingParams
	IgnoreEOS     bool
	LogitsDigests bool
	Logprobs      bool
	TopLogprobs   int
	// Speculate: "" (none), "ngram" (prompt lookup over each sequence's own
	// tokens, keys of at most Ngram tokens, 1..8, 0: 3) or a draft model's
	// path (a smaller GGUF of the same vocabulary), verifying up to DraftMax
	// (1..32, 0: DraftDefault) draft tokens a step, as detinfer run --speculate does.
	// The tokens, digests and log-probabilities are bit for bit those
	// without it; Completion.Drafted and .Accepted say how many drafts ran.
	Speculate string
	DraftMax  int
	Ngram     int
}

// Prompt is text (tokenized with BOS as the model asks, special-token text
// as plain text) or token ids: set exactly one.
type Prompt struct {
	Text   string
	Tokens []int32
}

// TextPrompt is a text prompt.
func TextPrompt(text string) Prompt { return Prompt{Text: text} }

// TokenPrompt is a prompt of token ids.
func TokenPrompt(tokens ...int32) Prompt { return Prompt{Tokens: tokens} }

// TokenLogprobs is one generated token's log-probability and the most likely
// tokens at its position (temperature 1, as Session.Logprobs).
type TokenLogprobs struct {
	Logprob float32
	Top     []TokenLogprob
}

// Completion is one prompt's result. FinishReason: "stop" (the EOS token,
// which ends Tokens) or "length" (MaxNew tokens). Digest: the sequence digest
// (prompt and generated ids, as detinfer run and the C API report it).
type Completion struct {
	Text          string
	Tokens        []int32
	Digest        Digest
	FinishReason  string
	PromptTokens  []int32
	LogitsDigests []Digest        // with BatchOptions.LogitsDigests
	Logprobs      []TokenLogprobs // with BatchOptions.Logprobs
	// With BatchOptions.Speculate: the draft tokens stepped and how many of
	// them decoding chose (Accepted / Drafted is the acceptance rate).
	Drafted, Accepted int
}

// NewLLM loads the model and opens its session.
func NewLLM(path string, opts LLMOptions) (*LLM, error) {
	if opts.Threads == 0 {
		opts.Threads = 1
	}
	if opts.MaxSequences == 0 {
		opts.MaxSequences = 8
	}
	if opts.Profile == 0 {
		opts.Profile = ProfileInteger
	}
	m, err := LoadModel(path)
	if err != nil {
		return nil, err
	}
	cfg, err := NewConfig()
	if err != nil {
		m.Close()
		return nil, err
	}
	defer cfg.Close()
	for _, kv := range []struct {
		key   ConfigKey
		value int64
	}{{ConfigThreads, int64(opts.Threads)}, {ConfigMaxSequences, int64(opts.MaxSequences)},
		{ConfigProfile, int64(opts.Profile)}, {ConfigContextLength, int64(opts.ContextLength)}} {
		if err := cfg.SetInt(kv.key, kv.value); err != nil {
			m.Close()
			return nil, err
		}
	}
	s, err := m.NewSession(cfg)
	if err != nil {
		m.Close()
		return nil, err
	}
	ctx := opts.ContextLength
	if ctx == 0 { // include/detinfer.h, DI_CONFIG_CONTEXT_LENGTH: the model's, capped at 4096
		train, err := m.Int(ModelNCtxTrain)
		if err != nil {
			s.Close()
			m.Close()
			return nil, err
		}
		ctx = int(train)
		if ctx > 4096 {
			ctx = 4096
		}
	}
	return &LLM{model: m, session: s, maxSequences: opts.MaxSequences, contextLength: ctx, opts: opts,
		drafters: map[string]*Drafter{}}, nil
}

// Model is the LLM's model (tokenizer, metadata).
func (l *LLM) Model() *Model { return l.model }

// Close frees the session and the model. Idempotent.
func (l *LLM) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range l.drafters {
		d.Close()
	}
	for _, m := range l.draftModels {
		m.Close()
	}
	l.drafters, l.draftModels = map[string]*Drafter{}, nil
	l.session.Close()
	return l.model.Close()
}

// speculation checks BatchOptions' Speculate, DraftMax and Ngram (as the
// CLI checks --speculate, --draft-max and --ngram); nil without Speculate.
func (l *LLM) speculation(opts BatchOptions) (*speculation, error) {
	const op = "LLM.Generate"
	spec := &speculation{draftMax: opts.DraftMax, ngram: opts.Ngram}
	if spec.draftMax == 0 {
		spec.draftMax = DraftDefault
	}
	if spec.ngram == 0 {
		spec.ngram = DraftNgramDefault
	}
	if spec.draftMax < 1 || spec.draftMax > DraftMax || spec.ngram < 1 || spec.ngram > DraftMaxNgram {
		return nil, refuse(op, ErrInvalidArgument, "DraftMax %d, Ngram %d: DraftMax 1..%d and Ngram 1..%d (0: %d and %d)",
			opts.DraftMax, opts.Ngram, DraftMax, DraftMaxNgram, DraftDefault, DraftNgramDefault)
	}
	switch opts.Speculate {
	case "":
		return nil, nil
	case "ngram":
		return spec, nil
	}
	if d := l.drafters[opts.Speculate]; d != nil {
		spec.drafter = d
		return spec, nil
	}
	if st, err := os.Stat(opts.Speculate); err != nil || st.IsDir() {
		return nil, refuse(op, ErrInvalidArgument, "Speculate %q: \"ngram\" or the path of a draft model (no such file)",
			opts.Speculate)
	}
	dm, err := LoadModel(opts.Speculate)
	if err != nil {
		return nil, err
	}
	cfg, err := NewConfig()
	if err != nil {
		dm.Close()
		return nil, err
	}
	defer cfg.Close()
	for _, kv := range []struct {
		key   ConfigKey
		value int64
	}{{ConfigThreads, int64(l.opts.Threads)}, {ConfigMaxSequences, int64(l.opts.MaxSequences)},
		{ConfigProfile, int64(l.opts.Profile)}, {ConfigContextLength, int64(l.opts.ContextLength)}} {
		if err := cfg.SetInt(kv.key, kv.value); err != nil {
			dm.Close()
			return nil, err
		}
	}
	d, err := NewDrafter(l.model, dm, cfg)
	if err != nil {
		dm.Close()
		return nil, err
	}
	l.drafters[opts.Speculate], l.draftModels = d, append(l.draftModels, dm)
	spec.drafter = d
	return spec, nil
}

func refuse(op string, status Status, format string, args ...interface{}) error {
	return &Error{Op: op, Status: status, Message: fmt.Sprintf(format, args...)}
}

// promptIDs: prompt i's token ids (text tokenized with BOS as the model
// asks), checked against the vocabulary.
func (l *LLM) promptIDs(op string, i int, p Prompt) ([]int32, error) {
	ids := p.Tokens
	if (p.Text == "") == (p.Tokens == nil) { // an empty text is refused, not BOS alone
		return nil, refuse(op, ErrInvalidArgument, "prompt %d: set exactly one of Text and Tokens (an empty text is refused)", i)
	}
	if p.Tokens == nil {
		var err error
		if ids, err = l.model.Tokenize(p.Text, TokenizeAddBOS); err != nil {
			return nil, fmt.Errorf("prompt %d: %w", i, err)
		}
	}
	if len(ids) == 0 {
		return nil, refuse(op, ErrInvalidArgument, "prompt %d: the prompt has no tokens", i)
	}
	for _, t := range ids {
		if t < 0 || int(t) >= l.model.NVocab() {
			return nil, refuse(op, ErrTokenRange, "prompt %d: token %d is outside the vocabulary (0..%d)", i, t,
				l.model.NVocab()-1)
		}
	}
	return append([]int32(nil), ids...), nil
}

// jobs checks every prompt and sampling parameter before anything runs.
func (l *LLM) jobs(prompts []Prompt, opts BatchOptions) ([]batchJob, error) {
	const op = "LLM.Generate"
	if opts.PerPrompt != nil && len(opts.PerPrompt) != len(prompts) {
		return nil, refuse(op, ErrInvalidArgument, "%d sampling parameters for %d prompts", len(opts.PerPrompt), len(prompts))
	}
	if opts.MaxNew < 0 || opts.TopLogprobs < 0 || opts.TopLogprobs > l.model.NVocab() {
		return nil, refuse(op, ErrInvalidArgument, "MaxNew %d, TopLogprobs %d: both >= 0, TopLogprobs at most the vocabulary",
			opts.MaxNew, opts.TopLogprobs)
	}
	maxNew := opts.MaxNew
	if maxNew == 0 {
		maxNew = DefaultMaxNew
	}
	stop := map[int32]bool{}
	if eos, err := l.model.SpecialToken(TokenEOS); err == nil && !opts.IgnoreEOS {
		stop[eos] = true
	}
	jobs := make([]batchJob, len(prompts))
	for i, p := range prompts {
		ids, err := l.promptIDs(op, i, p)
		if err != nil {
			return nil, err
		}
		// the server's rule: the prompt and maxNew-1 generated tokens are
		// stepped (the last one chosen is not); one call is refused whole
		if len(ids)+maxNew-1 > l.contextLength { // maxNew >= 1 here
			return nil, fmt.Errorf("prompt %d: %w", i, refuse(op, ErrContextFull,
				"the prompt's %d tokens and MaxNew %d exceed the context of %d tokens", len(ids), maxNew, l.contextLength))
		}
		sampling := opts.Sampling
		if opts.PerPrompt != nil {
			sampling = opts.PerPrompt[i]
		}
		if sampling != nil { // the library's own check, on a free sequence
			err := l.session.SetSampling(0, sampling)
			_ = l.session.SetSampling(0, nil)
			if err != nil {
				return nil, fmt.Errorf("prompt %d: %w", i, err)
			}
		}
		jobs[i] = batchJob{prompt: ids, maxNew: maxNew, stop: stop, sampling: sampling,
			logprobs: opts.Logprobs, top: opts.TopLogprobs}
	}
	return jobs, nil
}

// Generate gives one Completion per prompt, in order. Every prompt and
// sampling parameter is checked before anything runs; an error names the
// prompt (and wraps the library's status: errors.Is(err, ErrTokenRange)).
func (l *LLM) Generate(prompts []Prompt, opts BatchOptions) ([]Completion, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	spec, err := l.speculation(opts)
	if err != nil {
		return nil, err
	}
	jobs, err := l.jobs(prompts, opts)
	if err != nil {
		return nil, err
	}
	outs := runBatch(l.session, l.maxSequences, jobs, spec)
	res := make([]Completion, len(outs))
	for i, o := range outs {
		if o.err != nil {
			return nil, fmt.Errorf("prompt %d: %w", i, o.err)
		}
		text, err := l.model.Detokenize(o.tokens)
		if err != nil && !errors.Is(err, ErrUnsupported) { // a model without a tokenizer has no text
			return nil, err
		}
		res[i] = Completion{Text: text, Tokens: o.tokens, Digest: o.digest, FinishReason: o.finish,
			PromptTokens: jobs[i].prompt, Drafted: o.drafted, Accepted: o.accepted}
		if opts.LogitsDigests {
			res[i].LogitsDigests = o.logits
		}
		if opts.Logprobs {
			res[i].Logprobs = o.logprobs
		}
	}
	return res, nil
}

// PromptScore is one prompt's log-probabilities (LLM.Score): Logprobs[i] is
// token i's given tokens 0..i-1, with the top most likely tokens at that
// position; Logprobs[0] is nil (the first token has no prefix). Sum adds the
// token log-probabilities in order, in float64.
type PromptScore struct {
	Tokens   []int32
	Logprobs []*TokenLogprobs
	Sum      float64
}

// scoreStepBytes bounds the logits one step of Score keeps: an all-logits
// step holds a row of NVocab floats per token it appends, so long prompts go
// in chunks (the bits do not depend on the chunking).
const scoreStepBytes = 256 << 20

// Score gives one PromptScore per prompt, in order: the log-probability of
// each prompt token given the tokens before it (temperature 1, the library's
// log-softmax), with the top most likely tokens at each position. Each prompt
// is one prefill with every position's logits (Session.LogprobsAt), prompts
// batched over the session's sequences: the bits of stepping the prompt one
// token at a time with Session.Logprobs after each. Every prompt is checked
// before anything runs: an empty one, or one longer than the context
// (ErrContextFull), is refused, naming the prompt.
func (l *LLM) Score(prompts []Prompt, top int) ([]PromptScore, error) {
	const op = "LLM.Score"
	l.mu.Lock()
	defer l.mu.Unlock()
	if top < 0 || top > l.model.NVocab() {
		return nil, refuse(op, ErrInvalidArgument, "top %d: 0 .. the vocabulary's size", top)
	}
	ids := make([][]int32, len(prompts))
	for i, p := range prompts {
		var err error
		if ids[i], err = l.promptIDs(op, i, p); err != nil {
			return nil, err
		}
		if len(ids[i]) > l.contextLength {
			return nil, refuse(op, ErrContextFull, "prompt %d: %d tokens, more than the context of %d", i,
				len(ids[i]), l.contextLength)
		}
	}
	rows := scoreStepBytes / (4 * l.model.NVocab())
	if rows < 1 {
		rows = 1
	}
	lps, err := scorePrompts(l.session, l.maxSequences, ids, top, rows)
	if err != nil {
		return nil, err
	}
	res := make([]PromptScore, len(ids))
	for i, p := range ids {
		res[i] = PromptScore{Tokens: p, Logprobs: append([]*TokenLogprobs{nil}, lps[i]...)}
		for _, lp := range lps[i] {
			res[i].Sum += float64(lp.Logprob)
		}
	}
	return res, nil
}
