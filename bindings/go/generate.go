package detinfer

import (
	"errors"
	"fmt"
)

// Generated is one generated token: its id, its text piece ("" for a model
// without a tokenizer) and the digest of the logits row it was chosen from.
type Generated struct {
	Token  int32
	Piece  string
	Digest Digest
}

// Generation steps a prompt and then one token per step:
//
//	g := session.Generate(0, prompt, 16, true)
//	for g.Next() {
//		t := g.Token()
//	}
//	if err := g.Err(); err != nil { ... }
//	digest, err := g.SequenceDigest()
type Generation struct {
	s            *Session
	seq          uint32
	feed         []int32
	maxNew       int
	eos          int32
	hasEOS       bool
	ticket       uint64
	tokens       []int32
	cur          Generated
	err          error
	done         bool
	grammar      *Grammar
	StoppedAtEOS bool // stopped at the end-of-sequence token
}

// GenerateOptions: StopAtEOS stops after the EOS token; Sampling, when not
// nil, sets the sequence's sampling parameters first. Tokens are chosen with
// the sequence's parameters (di_session_sample_token): greedy unless set.
// Grammar, when not nil, constrains the generated tokens (not the prompt);
// it needs StopAtEOS, as its text ends at the EOS it then allows. The first
// Next sets it on the sequence (the session then holds its own reference):
// keep it open until then.
type GenerateOptions struct {
	StopAtEOS bool
	Sampling  *SamplingParams
	Grammar   *Grammar
}

// Generate returns the generation of up to maxNew tokens after prompt on seq.
//
// A second Generate on the same sequence continues the first: it steps the
// first one's last chosen token, then prompt (which may be empty), so two
// calls give the tokens and digest of one long generation. SeqReset first to
// start afresh. The earlier Generation stops (Next gives ErrState).
func (s *Session) Generate(seq uint32, prompt []int32, maxNew int, opts GenerateOptions) *Generation {
	g := &Generation{s: s, seq: seq, maxNew: maxNew}
	if t, ok := s.pending[seq]; ok {
		g.feed = append(g.feed, t)
	}
	g.feed = append(g.feed, prompt...)
	g.ticket = s.claim(seq)
	if len(g.feed) == 0 {
		g.err, g.done = errors.New("detinfer: the prompt has no tokens"), true
	} else if opts.Grammar != nil && !opts.StopAtEOS {
		g.err, g.done = errors.New("detinfer: a grammar ends at the end-of-sequence token: set StopAtEOS"), true
	} else if opts.Sampling != nil {
		if err := s.SetSampling(seq, opts.Sampling); err != nil {
			g.err, g.done = err, true
		}
	}
	g.grammar = opts.Grammar
	if opts.StopAtEOS && s.model != nil {
		if eos, err := s.model.SpecialToken(TokenEOS); err == nil {
			g.eos, g.hasEOS = eos, true
		}
	}
	g.done = g.done || maxNew <= 0
	return g
}

// Next generates the next token; false at the end or on an error (Err).
func (g *Generation) Next() bool {
	if g.done {
		return false
	}
	if g.s.owner[g.seq] != g.ticket {
		g.err, g.done = &Error{Op: "Generation.Next", Status: ErrState, Message: fmt.Sprintf("sequence %d was "+
			"reset, truncated, copied over or given a later Generate: this generation cannot go on", g.seq)}, true
		return false
	}
	if err := g.s.step([]Entry{{g.seq, g.feed}}, 0); err != nil {
		g.err, g.done = err, true
		return false
	}
	delete(g.s.pending, g.seq)
	if g.grammar != nil && len(g.tokens) == 0 { // the prompt is in: the grammar starts here
		if err := g.s.SetGrammar(g.seq, g.grammar); err != nil {
			g.err, g.done = err, true
			return false
		}
	}
	digest, err := g.s.LogitsDigest(g.seq)
	var token int32
	if err == nil {
		token, err = g.s.SampleToken(g.seq) // with the default parameters, the greedy token
	}
	if err != nil {
		g.err, g.done = err, true
		return false
	}
	piece, err := g.s.model.TokenPiece(token)
	if err != nil && !errors.Is(err, ErrUnsupported) { // a model without a tokenizer has no pieces
		g.err, g.done = err, true
		return false
	}
	g.s.pending[g.seq] = token
	g.tokens = append(g.tokens, token)
	g.feed = []int32{token}
	g.cur = Generated{token, piece, digest}
	if len(g.tokens) >= g.maxNew {
		g.done = true
	}
	if g.hasEOS && token == g.eos {
		g.StoppedAtEOS, g.done = true, true
	}
	return true
}

// Token is the token Next generated.
func (g *Generation) Token() Generated { return g.cur }

// Err is the error that stopped the generation, if any.
func (g *Generation) Err() error { return g.err }

// Tokens are the generated ids so far.
func (g *Generation) Tokens() []int32 { return g.tokens }

// SequenceDigest is the sequence digest of the generation: the prompt and
// every generated token (the sequence's stepped tokens and the last chosen
// one, never stepped).
func (g *Generation) SequenceDigest() (Digest, error) {
	return g.s.SeqDigest(g.seq, g.feed...)
}

// Length is the number of tokens the sequence digest covers.
func (g *Generation) Length() (int, error) {
	n, err := g.s.SeqLength(g.seq)
	return int(n) + len(g.feed), err
}
