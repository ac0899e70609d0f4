package detinfer

// #include <stdlib.h>
// #include <detinfer.h>
import "C"

import (
	"fmt"
	"math"
	"runtime"
	"unsafe"
)

// ConfigKey is a di_config_key. Keys are set with SetInt or SetFloat by their type.
type ConfigKey int

const (
	ConfigThreads           ConfigKey = 1  // int, 1..256
	ConfigMaxSequences      ConfigKey = 2  // int, 1..4096
	ConfigContextLength     ConfigKey = 3  // int; 0: the model's, capped at 4096
	ConfigBackend           ConfigKey = 4  // int, a Backend
	ConfigProfile           ConfigKey = 5  // int, a Profile
	ConfigTemperature       ConfigKey = 6  // float, >= 0: the sequences' starting sampling parameters
	ConfigDoSample          ConfigKey = 7  // int, 0 or 1 (must agree with the temperature)
	ConfigTopP              ConfigKey = 8  // float, (0, 1]
	ConfigTopK              ConfigKey = 9  // int, >= 0
	ConfigRepetitionPenalty ConfigKey = 10 // float, > 0
	ConfigSeed              ConfigKey = 11 // int, its 64 bits
	ConfigCPUPath           ConfigKey = 12 // int, a CPUPath
	ConfigDevice            ConfigKey = 13 // int, the CUDA device ordinal
	ConfigAllowLongContext  ConfigKey = 14 // int, 0 or 1: a context beyond the model's training context
)

// Backend is a di_backend.
type Backend int

const (
	BackendCPU  Backend = 1
	BackendCUDA Backend = 2
)

// Profile is a di_profile.
type Profile int

const (
	ProfilePortable Profile = 1
	ProfileDevice   Profile = 2
	ProfileInteger  Profile = 3
)

// CPUPath is a di_cpu_path.
type CPUPath int

const (
	CPUPathAuto   CPUPath = 0
	CPUPathScalar CPUPath = 1
	CPUPathAVX2   CPUPath = 2
	CPUPathAVX512 CPUPath = 3
)

// String is the DETINFER_CPU_PATH spelling of the path ("auto", "scalar",
// "avx2", "avx512"); "unknown" for any other value.
func (p CPUPath) String() string { return C.GoString(C.di_cpu_path_name(C.di_cpu_path(p))) }

// ResolveCPUPath is the CPU path a session created with ConfigCPUPath =
// requested would run on this machine: for CPUPathAuto, the one a default
// session takes (DETINFER_CPU_PATH included). ErrUnsupported when this CPU
// or build cannot run the path, ErrInvalidArgument for an unknown value (of
// requested or of DETINFER_CPU_PATH). Safe for concurrent use.
func ResolveCPUPath(requested CPUPath) (CPUPath, error) {
	var path C.di_cpu_path
	var eb errbuf
	err := check("di_cpu_path_resolve", C.di_cpu_path_resolve(C.di_cpu_path(requested), &path, eb.ptr(), eb.size()),
		eb.text())
	return CPUPath(path), err
}

// StepFlags are di_session_step's flags.
type StepFlags uint32

// StepAllLogits keeps the logits of every position of the step.
const StepAllLogits StepFlags = C.DI_STEP_ALL_LOGITS

// Config is a bag of session settings; one goroutine at a time.
type Config struct {
	p *C.di_config
}

// NewConfig gives a config with every default.
func NewConfig() (*Config, error) {
	var p *C.di_config
	if err := check("di_config_create", C.di_config_create(&p), nil); err != nil {
		return nil, err
	}
	c := &Config{p: p}
	runtime.SetFinalizer(c, (*Config).Close)
	return c, nil
}

// Close frees the config. Idempotent.
func (c *Config) Close() error {
	if c.p != nil {
		C.di_config_free(c.p)
		c.p = nil
		runtime.SetFinalizer(c, nil)
	}
	return nil
}

func (c *Config) handle() (*C.di_config, error) {
	if c == nil || c.p == nil {
		return nil, ErrClosed
	}
	return c.p, nil
}

func (c *Config) message() string { return C.GoString(C.di_config_errmsg(c.p)) }

// SetInt sets an integer key.
func (c *Config) SetInt(key ConfigKey, value int64) error {
	p, err := c.handle()
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(c)
	return check("di_config_set_int", C.di_config_set_int(p, C.di_config_key(key), C.int64_t(value)), c.message)
}

// SetFloat sets a float key.
func (c *Config) SetFloat(key ConfigKey, value float64) error {
	p, err := c.handle()
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(c)
	return check("di_config_set_float", C.di_config_set_float(p, C.di_config_key(key), C.double(value)), c.message)
}

// Int reads an integer key.
func (c *Config) Int(key ConfigKey) (int64, error) {
	p, err := c.handle()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(c)
	var v C.int64_t
	err = check("di_config_get_int", C.di_config_get_int(p, C.di_config_key(key), &v), c.message)
	return int64(v), err
}

// Float reads a float key.
func (c *Config) Float(key ConfigKey) (float64, error) {
	p, err := c.handle()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(c)
	var v C.double
	err = check("di_config_get_float", C.di_config_get_float(p, C.di_config_key(key), &v), c.message)
	return float64(v), err
}

// SamplingParams is di_sampling_params; DefaultSampling gives the header's
// defaults. A literal with only the fields you need works too
// (SamplingParams{Temperature: 0.8, Seed: 42}): a zero TopP or
// RepetitionPenalty, values C refuses, means the neutral 1. PenaltyWindow's
// zero keeps its C meaning, the whole sequence (DefaultSampling gives 64;
// it matters only with a penalty).
type SamplingParams struct {
	Temperature       float32 // >= 0; 0: greedy
	TopK              int32   // >= 0; 0: no cut
	TopP              float32 // (0, 1]; 1: no cut (0: 1)
	MinP              float32 // [0, 1]; 0: no cut
	RepetitionPenalty float32 // > 0; 1: none (0: 1)
	PresencePenalty   float32
	FrequencyPenalty  float32
	PenaltyWindow     uint32 // the last N tokens; 0: the whole sequence
	Seed              uint64
}

// DefaultSampling is greedy: the defaults include/detinfer.h lists.
func DefaultSampling() SamplingParams {
	return SamplingParams{TopP: 1, RepetitionPenalty: 1, PenaltyWindow: 64}
}

// LibrarySamplingDefaults is what the loaded library's di_sampling_params_init sets.
func LibrarySamplingDefaults() (SamplingParams, error) {
	var c C.di_sampling_params
	if err := check("di_sampling_params_init", C.di_sampling_params_init(&c), nil); err != nil {
		return SamplingParams{}, err
	}
	return SamplingParams{float32(c.temperature), int32(c.top_k), float32(c.top_p), float32(c.min_p),
		float32(c.repetition_penalty), float32(c.presence_penalty), float32(c.frequency_penalty),
		uint32(c.penalty_window), uint64(c.seed)}, nil
}

// neutralOne is 1 for a zero TopP or RepetitionPenalty (see SamplingParams).
func neutralOne(v float32) float32 {
	if v == 0 {
		return 1
	}
	return v
}

func (s SamplingParams) c() C.di_sampling_params {
	s.TopP, s.RepetitionPenalty = neutralOne(s.TopP), neutralOne(s.RepetitionPenalty)
	return C.di_sampling_params{
		size: C.uint32_t(unsafe.Sizeof(C.di_sampling_params{})), temperature: C.float(s.Temperature),
		top_k: C.int32_t(s.TopK), top_p: C.float(s.TopP), min_p: C.float(s.MinP),
		repetition_penalty: C.float(s.RepetitionPenalty), presence_penalty: C.float(s.PresencePenalty),
		frequency_penalty: C.float(s.FrequencyPenalty), penalty_window: C.uint32_t(s.PenaltyWindow),
		seed: C.uint64_t(s.Seed),
	}
}

// Session holds up to max_sequences sequences with their KV caches. One
// goroutine at a time.
type Session struct {
	p     *C.di_session
	model *Model // keeps the model reachable while the session lives
	// Per sequence: the last token a generation chose and did not step (the
	// next Generate steps it first), and the ticket of the generation that owns it.
	pending map[uint32]int32
	owner   map[uint32]uint64
}

// NewSession creates a session on m; config may be nil (every default) and
// may be closed afterwards.
func (m *Model) NewSession(config *Config) (*Session, error) {
	mp, err := m.handle()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(m)
	var cp *C.di_config
	if config != nil {
		if cp, err = config.handle(); err != nil {
			return nil, err
		}
		defer runtime.KeepAlive(config)
	}
	var p *C.di_session
	var eb errbuf
	if err := check("di_session_create", C.di_session_create(mp, cp, &p, eb.ptr(), eb.size()), eb.text()); err != nil {
		return nil, err
	}
	s := &Session{p: p, model: m, pending: map[uint32]int32{}, owner: map[uint32]uint64{}}
	runtime.SetFinalizer(s, (*Session).Close)
	return s, nil
}

// Close frees the session. Idempotent.
func (s *Session) Close() error {
	if s.p != nil {
		C.di_session_free(s.p)
		s.p = nil
		runtime.SetFinalizer(s, nil)
	}
	return nil
}

func (s *Session) handle() (*C.di_session, error) {
	if s == nil || s.p == nil {
		return nil, ErrClosed
	}
	return s.p, nil
}

func (s *Session) message() string { return C.GoString(C.di_session_errmsg(s.p)) }

// Model is the session's model.
func (s *Session) Model() *Model { return s.model }

// BackendInfo names what computes the results ("backend=cpu path=avx2 threads=1").
func (s *Session) BackendInfo() string {
	p, err := s.handle()
	if err != nil {
		return ""
	}
	defer runtime.KeepAlive(s)
	return C.GoString(C.di_session_backend_info(p))
}

// KVBytes is the bytes of KV cache the session holds now: on the CPU backend
// the sum over its sequences, which grows as they grow and falls when they are
// reset; on the CUDA backend the device caches reserved at creation.
func (s *Session) KVBytes() (uint64, error) {
	p, err := s.handle()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(s)
	var n C.uint64_t
	err = check("di_session_kv_bytes", C.di_session_kv_bytes(p, &n), s.message)
	return uint64(n), err
}

// Entry appends Tokens to sequence Seq in a step.
type Entry struct {
	Seq    uint32
	Tokens []int32
}

// Step advances the entries' sequences at once; all or nothing. A sequence
// whose generation chose a token it has not stepped is refused (ErrState):
// stepping other tokens would leave that one out; Generate continues it,
// SeqReset or SeqTruncate drops it.
func (s *Session) Step(entries []Entry, flags StepFlags) error {
	for _, e := range entries {
		if t, ok := s.pending[e.Seq]; ok {
			return &Error{Op: "di_session_step", Status: ErrState, Message: fmt.Sprintf(
				"sequence %d ends with token %d, chosen by Generate and not stepped: continue with Generate "+
					"(it steps that token first), or SeqReset or SeqTruncate the sequence before Step", e.Seq, t)}
		}
	}
	return s.step(entries, flags)
}

func (s *Session) step(entries []Entry, flags StepFlags) error {
	p, err := s.handle()
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(s)
	seqs := make([]C.uint32_t, len(entries)+1)
	counts := make([]C.uint32_t, len(entries)+1)
	var tokens []int32
	for i, e := range entries {
		seqs[i], counts[i] = C.uint32_t(e.Seq), C.uint32_t(len(e.Tokens))
		tokens = append(tokens, e.Tokens...)
	}
	return check("di_session_step", C.di_session_step(p, C.uint32_t(len(entries)), &seqs[0], &counts[0],
		int32s(tokens), C.uint32_t(flags)), s.message)
}

func (s *Session) row(logits *C.float) []float32 {
	n := s.model.nVocab
	return append([]float32(nil), unsafe.Slice((*float32)(unsafe.Pointer(logits)), n)...)
}

// Logits is a copy of seq's last logits row and its digest.
func (s *Session) Logits(seq uint32) ([]float32, Digest, error) {
	p, err := s.handle()
	if err != nil {
		return nil, Digest{}, err
	}
	defer runtime.KeepAlive(s)
	var l *C.float
	var d C.di_digest
	if err := check("di_session_logits", C.di_session_logits(p, C.uint32_t(seq), &l, &d), s.message); err != nil {
		return nil, Digest{}, err
	}
	return s.row(l), goDigest(&d), nil
}

// LogitsDigest is the digest of seq's last logits row, without copying it.
func (s *Session) LogitsDigest(seq uint32) (Digest, error) {
	p, err := s.handle()
	if err != nil {
		return Digest{}, err
	}
	defer runtime.KeepAlive(s)
	var l *C.float
	var d C.di_digest
	err = check("di_session_logits", C.di_session_logits(p, C.uint32_t(seq), &l, &d), s.message)
	return goDigest(&d), err
}

// LogitsAt is position index of what seq appended in the last step (which
// used StepAllLogits).
func (s *Session) LogitsAt(seq, index uint32) ([]float32, Digest, error) {
	p, err := s.handle()
	if err != nil {
		return nil, Digest{}, err
	}
	defer runtime.KeepAlive(s)
	var l *C.float
	var d C.di_digest
	st := C.di_session_logits_at(p, C.uint32_t(seq), C.uint32_t(index), &l, &d)
	if err := check("di_session_logits_at", st, s.message); err != nil {
		return nil, Digest{}, err
	}
	return s.row(l), goDigest(&d), nil
}

// NoToken asks Logprobs for no single token's log-probability.
const NoToken int32 = -1

// TokenLogprob is one token and its log-probability.
type TokenLogprob struct {
	Token   int32
	Logprob float32
}

// Logprobs gives log-probabilities of the model's own distribution at the
// last position of seq's last step: the log-softmax of its logits at
// temperature 1, no penalty and no filter (whatever the sampling parameters),
// computed with the library's own exp and log, so equal logits give equal
// bits everywhere. The first result is token's log-probability (NaN for
// NoToken); the second the top most likely tokens, by log-probability
// descending, then id ascending (top may not exceed the vocabulary).
// ErrState when seq has no logits, ErrTokenRange for a token outside the
// vocabulary (a negative one other than NoToken included), ErrInvalidArgument
// for a top below 0 or above the vocabulary.
func (s *Session) Logprobs(seq uint32, token int32, top int) (float32, []TokenLogprob, error) {
	return s.logprobs("di_session_logprobs", token, top,
		func(p *C.di_session, lp *C.float, n C.uint32_t, ids *C.int32_t, values *C.float) C.di_status {
			return C.di_session_logprobs(p, C.uint32_t(seq), C.int32_t(token), lp, n, ids, values)
		})
}

// LogprobsAt is Logprobs of position index (0-based within what seq appended
// in the session's last step, which must have used StepAllLogits): the same
// bits as Logprobs after stepping seq up to that position alone. A prompt's
// token i+1 given tokens 0..i is position i's logprob of token i+1 (LLM.Score
// does this). The errors of Logprobs, and ErrState when the last step was not
// an all-logits step of seq, ErrInvalidArgument for an index outside it.
func (s *Session) LogprobsAt(seq, index uint32, token int32, top int) (float32, []TokenLogprob, error) {
	return s.logprobs("di_session_logprobs_at", token, top,
		func(p *C.di_session, lp *C.float, n C.uint32_t, ids *C.int32_t, values *C.float) C.di_status {
			return C.di_session_logprobs_at(p, C.uint32_t(seq), C.uint32_t(index), C.int32_t(token), lp, n, ids,
				values)
		})
}

func (s *Session) logprobs(op string, token int32, top int,
	call func(p *C.di_session, lp *C.float, n C.uint32_t, ids *C.int32_t, values *C.float) C.di_status,
) (float32, []TokenLogprob, error) {
	p, err := s.handle()
	if err != nil {
		return 0, nil, err
	}
	defer runtime.KeepAlive(s)
	if top < 0 || top > math.MaxUint32 {
		return 0, nil, &Error{Op: op, Status: ErrInvalidArgument, Message: "top is out of range"}
	}
	if token < NoToken {
		return 0, nil, &Error{Op: op, Status: ErrTokenRange, Message: "the token is outside the vocabulary"}
	}
	lp := C.float(math.NaN())
	var lpp *C.float
	if token != NoToken {
		lpp = &lp
	}
	ids := make([]int32, top)
	values := make([]float32, top)
	var idp *C.int32_t
	var vp *C.float
	if top > 0 {
		idp, vp = (*C.int32_t)(unsafe.Pointer(&ids[0])), (*C.float)(unsafe.Pointer(&values[0]))
	}
	if err := check(op, call(p, lpp, C.uint32_t(top), idp, vp), s.message); err != nil {
		return 0, nil, err
	}
	out := make([]TokenLogprob, top)
	for i := range out {
		out[i] = TokenLogprob{ids[i], values[i]}
	}
	return float32(lp), out, nil
}

func (s *Session) token(op string, call func(p *C.di_session, t *C.int32_t) C.di_status) (int32, error) {
	p, err := s.handle()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(s)
	var t C.int32_t
	err = check(op, call(p, &t), s.message)
	return int32(t), err
}

// GreedyToken is seq's argmax token (ties to the lowest id).
func (s *Session) GreedyToken(seq uint32) (int32, error) {
	return s.token("di_session_greedy_token", func(p *C.di_session, t *C.int32_t) C.di_status {
		return C.di_session_greedy_token(p, C.uint32_t(seq), t)
	})
}

// SampleToken is the token chosen with seq's sampling parameters.
func (s *Session) SampleToken(seq uint32) (int32, error) {
	return s.token("di_session_sample_token", func(p *C.di_session, t *C.int32_t) C.di_status {
		return C.di_session_sample_token(p, C.uint32_t(seq), t)
	})
}

// SetSampling sets seq's sampling parameters; nil restores the ones it started with.
func (s *Session) SetSampling(seq uint32, params *SamplingParams) error {
	p, err := s.handle()
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(s)
	var cp *C.di_sampling_params
	if params != nil {
		c := params.c()
		cp = &c
	}
	return check("di_session_seq_set_sampling", C.di_session_seq_set_sampling(p, C.uint32_t(seq), cp), s.message)
}

// SeqLength is the number of tokens in seq.
func (s *Session) SeqLength(seq uint32) (uint32, error) {
	p, err := s.handle()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(s)
	var n C.uint32_t
	err = check("di_session_seq_length", C.di_session_seq_length(p, C.uint32_t(seq), &n), s.message)
	return uint32(n), err
}

// SeqDigest is the digest of seq's stepped tokens followed by extra (not
// stepped): with the generation's last chosen token, the sequence digest of
// the generation.
func (s *Session) SeqDigest(seq uint32, extra ...int32) (Digest, error) {
	p, err := s.handle()
	if err != nil {
		return Digest{}, err
	}
	defer runtime.KeepAlive(s)
	var d C.di_digest
	if len(extra) == 0 {
		err = check("di_session_seq_digest", C.di_session_seq_digest(p, C.uint32_t(seq), &d), s.message)
	} else {
		err = check("di_session_seq_digest_extra", C.di_session_seq_digest_extra(p, C.uint32_t(seq),
			int32s(extra), C.size_t(len(extra)), &d), s.message)
	}
	return goDigest(&d), err
}

func (s *Session) do(op string, call func(p *C.di_session) C.di_status) error {
	p, err := s.handle()
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(s)
	return check(op, call(p), s.message)
}

// SeqReset empties seq (a generation's unstepped token included).
func (s *Session) SeqReset(seq uint32) error {
	return s.release(seq, s.do("di_session_seq_reset", func(p *C.di_session) C.di_status {
		return C.di_session_seq_reset(p, C.uint32_t(seq))
	}))
}

// SeqTruncate keeps the first length stepped tokens of seq (a generation's
// unstepped token is dropped).
func (s *Session) SeqTruncate(seq, length uint32) error {
	return s.release(seq, s.do("di_session_seq_truncate", func(p *C.di_session) C.di_status {
		return C.di_session_seq_truncate(p, C.uint32_t(seq), C.uint32_t(length))
	}))
}

// SeqCopy makes dst hold the first length stepped tokens of src, KV cache included.
func (s *Session) SeqCopy(src, dst, length uint32) error {
	return s.release(dst, s.do("di_session_seq_copy", func(p *C.di_session) C.di_status {
		return C.di_session_seq_copy(p, C.uint32_t(src), C.uint32_t(dst), C.uint32_t(length))
	}))
}

// release: after a successful reset, truncate or copy, seq continues no
// generation: its unstepped token is gone and an earlier Generation stops.
func (s *Session) release(seq uint32, err error) error {
	if err == nil {
		delete(s.pending, seq)
		s.owner[seq]++
	}
	return err
}

// claim: a new generation of seq; the earlier one stops. Returns its ticket.
func (s *Session) claim(seq uint32) uint64 {
	s.owner[seq]++
	return s.owner[seq]
}
