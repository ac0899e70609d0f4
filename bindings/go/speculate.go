package detinfer

// #include <stdlib.h>
// #include <detinfer.h>
import "C"

import (
	"runtime"
	"unsafe"
)

// Speculative decoding (DETINFER_1.6): several tokens per step with exactly
// the output of decoding one at a time (include/detinfer.h, "Speculative
// decoding"; docs/DETERMINISM.md).

const (
	DraftMax      = C.DI_DRAFT_MAX       // draft tokens a lookup or a drafter gives at most
	DraftMaxNgram = C.DI_DRAFT_MAX_NGRAM // the longest key a lookup matches
	// DraftDefault and DraftNgramDefault: the lengths used unless told (measured)
	DraftDefault      = C.DI_DRAFT_DEFAULT
	DraftNgramDefault = C.DI_DRAFT_NGRAM_DEFAULT
)

// LogitsDigestAt is the digest of position index of what seq appended in the
// last step (which used StepAllLogits), without copying the row.
func (s *Session) LogitsDigestAt(seq, index uint32) (Digest, error) {
	p, err := s.handle()
	if err != nil {
		return Digest{}, err
	}
	defer runtime.KeepAlive(s)
	var l *C.float
	var d C.di_digest
	err = check("di_session_logits_at", C.di_session_logits_at(p, C.uint32_t(seq), C.uint32_t(index), &l, &d),
		s.message)
	return goDigest(&d), err
}

// DraftLookup is a prompt-lookup draft for seq to follow next (the token
// about to be stepped): the tokens that followed the longest key of at most
// ngram (1..DraftMaxNgram) tokens ending seq's tokens and next, at its latest
// earlier place; at most maxDraft (0..DraftMax). It changes nothing.
func (s *Session) DraftLookup(seq uint32, next int32, ngram, maxDraft int) ([]int32, error) {
	p, err := s.handle()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(s)
	if maxDraft < 0 || maxDraft > DraftMax || ngram < 0 || ngram > DraftMaxNgram {
		return nil, &Error{Op: "di_session_seq_draft_lookup", Status: ErrInvalidArgument,
			Message: "ngram 1..8 and maxDraft 0..32"}
	}
	draft := make([]int32, DraftMax)
	var n C.uint32_t
	err = check("di_session_seq_draft_lookup", C.di_session_seq_draft_lookup(p, C.uint32_t(seq), C.int32_t(next),
		C.uint32_t(ngram), C.uint32_t(maxDraft), (*C.int32_t)(unsafe.Pointer(&draft[0])), &n), s.message)
	if err != nil {
		return nil, err
	}
	return draft[:n], nil
}

// AcceptDraft resolves a draft: seq's entry in the last step (StepAllLogits)
// was the chosen token followed by nDraft draft tokens. It gives how many of
// them decoding would have chosen, in order, and the token it chooses after
// them; seq is left ending after the accepted ones, SampleToken gives next
// again and LogitsDigestAt(seq, 0..accepted) gives the rows they were chosen
// from (the last is next's). Where a grammar allows nothing (it ended) the
// error is ErrGrammarRejected, with accepted still set.
func (s *Session) AcceptDraft(seq uint32, nDraft int) (accepted int, next int32, err error) {
	p, err := s.handle()
	if err != nil {
		return 0, 0, err
	}
	defer runtime.KeepAlive(s)
	if nDraft < 0 || nDraft > DraftMax {
		return 0, 0, &Error{Op: "di_session_seq_accept_draft", Status: ErrInvalidArgument, Message: "nDraft 0..32"}
	}
	var a C.uint32_t
	var t C.int32_t
	err = check("di_session_seq_accept_draft", C.di_session_seq_accept_draft(p, C.uint32_t(seq), C.uint32_t(nDraft),
		&a, &t), s.message)
	return int(a), int32(t), err
}

// Drafter is a draft model for speculative decoding: a smaller model with
// the model's vocabulary, run in a session of its own. Both models must
// outlive it. Not safe for concurrent use.
type Drafter struct {
	p            *C.di_drafter
	model, draft *Model
}

// NewDrafter runs draft as the drafter of model's sessions, in a session
// made with config (threads, profile, context; MaxSequences at least the
// sequence ids it drafts for); config may be nil. A draft model of another
// vocabulary is refused with ErrModel, naming the first token that differs.
func NewDrafter(model, draft *Model, config *Config) (*Drafter, error) {
	mp, err := model.handle()
	if err != nil {
		return nil, err
	}
	dp, err := draft.handle()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(model)
	defer runtime.KeepAlive(draft)
	var cp *C.di_config
	if config != nil {
		if cp, err = config.handle(); err != nil {
			return nil, err
		}
		defer runtime.KeepAlive(config)
	}
	var p *C.di_drafter
	var eb errbuf
	if err := check("di_drafter_create", C.di_drafter_create(mp, dp, cp, &p, eb.ptr(), eb.size()),
		eb.text()); err != nil {
		return nil, err
	}
	d := &Drafter{p: p, model: model, draft: draft}
	runtime.SetFinalizer(d, (*Drafter).Close)
	return d, nil
}

// Close frees the drafter. Idempotent.
func (d *Drafter) Close() error {
	if d.p != nil {
		C.di_drafter_free(d.p)
		d.p = nil
		runtime.SetFinalizer(d, nil)
	}
	return nil
}

// Propose is a draft for seq of s (a session of the drafter's model) to
// follow next: up to maxDraft (0..DraftMax) tokens the draft model chooses
// greedily. It changes nothing in s.
func (d *Drafter) Propose(s *Session, seq uint32, next int32, maxDraft int) ([]int32, error) {
	if d == nil || d.p == nil {
		return nil, ErrClosed
	}
	p, err := s.handle()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(s)
	defer runtime.KeepAlive(d)
	if maxDraft < 0 || maxDraft > DraftMax {
		return nil, &Error{Op: "di_drafter_propose", Status: ErrInvalidArgument, Message: "maxDraft 0..32"}
	}
	draft := make([]int32, DraftMax)
	var n C.uint32_t
	err = check("di_drafter_propose", C.di_drafter_propose(d.p, p, C.uint32_t(seq), C.int32_t(next),
		C.uint32_t(maxDraft), (*C.int32_t)(unsafe.Pointer(&draft[0])), &n),
		func() string { return C.GoString(C.di_drafter_errmsg(d.p)) })
	if err != nil {
		return nil, err
	}
	return draft[:n], nil
}
