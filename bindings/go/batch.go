package detinfer

// Continuous batching over one session's sequences (the Python package's
// detinfer._batch, in Go): jobs generated together, every active sequence
// advanced one token per batched step, a finished job's sequence taken by
// the next job. Batch invariance makes each job's tokens and digests equal
// to its run alone; the tests check exactly that.

type batchJob struct {
	prompt   []int32
	maxNew   int
	stop     map[int32]bool
	sampling *SamplingParams // nil: greedy
	logprobs bool
	top      int
}

type batchOutcome struct {
	tokens   []int32
	digest   Digest
	finish   string // "stop", "length"; "" with err
	err      error
	logits   []Digest
	logprobs []TokenLogprobs
	drafted  int // with speculation: draft tokens stepped
	accepted int // and of those, the ones decoding chose
}

// speculation: each decoding step holds a sequence's chosen token and up to
// draftMax draft tokens (prompt lookup with keys of at most ngram tokens, or
// drafter's), verified in one all-logits step (Session.AcceptDraft). The
// output is bit for bit the output without it.
type speculation struct {
	draftMax, ngram int
	drafter         *Drafter
}

// stepEntry: a sequence's tokens in a step, the last nDraft a draft.
type stepEntry struct {
	seq    int
	tokens []int32
	nDraft int
}

type batchSlot struct {
	index int
	feed  []int32
	out   batchOutcome
}

// runBatch generates jobs on sequences 0..slots-1 of s, which must be empty
// and are left empty; one outcome per job, in order.
func runBatch(s *Session, slots int, jobs []batchJob, spec *speculation) []batchOutcome {
	outs := make([]batchOutcome, len(jobs))
	active := make([]*batchSlot, slots) // by sequence; nil: free
	next, running := 0, 0
	finish := func(seq int, err error) {
		sl := active[seq]
		if err != nil {
			outs[sl.index] = batchOutcome{err: err}
		} else {
			sl.out.digest, err = s.SeqDigest(uint32(seq), sl.feed...)
			sl.out.err = err
			outs[sl.index] = sl.out
		}
		_ = s.SeqReset(uint32(seq))
		if jobs[sl.index].sampling != nil {
			_ = s.SetSampling(uint32(seq), nil)
		}
		active[seq] = nil
		running--
	}
	for next < len(jobs) || running > 0 {
		for seq := 0; seq < slots && next < len(jobs); seq++ {
			if active[seq] != nil {
				continue
			}
			job := &jobs[next]
			active[seq] = &batchSlot{index: next, feed: append([]int32(nil), job.prompt...)}
			running++
			next++
			var err error
			if job.sampling != nil {
				err = s.SetSampling(uint32(seq), job.sampling)
			}
			if err != nil || job.maxNew <= 0 {
				active[seq].out.finish = "length"
				finish(seq, err)
			}
		}
		if running > 0 {
			stepBatch(s, jobs, active, finish, spec)
		}
	}
	return outs
}

// stepBatch: one batched step of every active sequence, then one token
// each (or, speculating, the accepted draft tokens and one more). A step that
// fails changes nothing (all or nothing): the sequences are then stepped
// alone, so the error goes to the job that caused it. Speculating, the
// prompts go in a step of their own first, so that the all-logits step of
// the drafts computes no row of a prompt.
func stepBatch(s *Session, jobs []batchJob, active []*batchSlot, finish func(int, error), spec *speculation) {
	var prefill, decode []stepEntry
	for seq, sl := range active {
		if sl != nil && (spec == nil || len(sl.out.tokens) == 0) {
			prefill = append(prefill, stepEntry{seq, sl.feed, 0})
		}
	}
	if len(prefill) > 0 {
		stepEntries(s, jobs, active, finish, prefill, 0)
	}
	if spec == nil {
		return
	}
	drafts := false
	for seq, sl := range active {
		if sl == nil || len(sl.out.tokens) == 0 {
			continue
		}
		room := jobs[sl.index].maxNew - len(sl.out.tokens) - 1
		if room > spec.draftMax {
			room = spec.draftMax
		}
		var draft []int32
		var err error
		if room > 0 && spec.drafter != nil {
			draft, err = spec.drafter.Propose(s, uint32(seq), sl.feed[0], room)
		} else if room > 0 {
			draft, err = s.DraftLookup(uint32(seq), sl.feed[0], spec.ngram, room)
		}
		if err != nil {
			finish(seq, err)
			continue
		}
		drafts = drafts || len(draft) > 0
		decode = append(decode, stepEntry{seq, append(append([]int32(nil), sl.feed...), draft...), len(draft)})
	}
	if len(decode) > 0 {
		var flags StepFlags
		if drafts {
			flags = StepAllLogits
		}
		stepEntries(s, jobs, active, finish, decode, flags)
	}
}

func stepEntries(s *Session, jobs []batchJob, active []*batchSlot, finish func(int, error), entries []stepEntry,
	flags StepFlags) {
	all := make([]Entry, len(entries))
	for i, e := range entries {
		all[i] = Entry{uint32(e.seq), e.tokens}
	}
	var stepped []stepEntry
	if err := s.step(all, flags); err == nil {
		stepped = entries
	} else {
		for i, e := range entries {
			if err := s.step(all[i:i+1], flags); err != nil {
				finish(e.seq, err)
			} else {
				stepped = append(stepped, e)
			}
		}
	}
	for _, e := range stepped {
		seq := e.seq
		sl := active[seq]
		job := &jobs[sl.index]
		if e.nDraft == 0 {
			token, digest, lp, err := chooseToken(s, uint32(seq), job)
			if err != nil {
				finish(seq, err)
				continue
			}
			takeToken(s, job, sl, seq, token, digest, lp, false, finish)
			continue
		}
		accepted, next, err := s.AcceptDraft(uint32(seq), e.nDraft)
		if err != nil {
			finish(seq, err)
			continue
		}
		sl.out.drafted += e.nDraft
		sl.out.accepted += accepted
		chosen := append(append([]int32(nil), e.tokens[1:1+accepted]...), next)
		for i, token := range chosen {
			digest, lp, err := rowOf(s, uint32(seq), job, i, token)
			if err != nil {
				finish(seq, err)
				break
			}
			if takeToken(s, job, sl, seq, token, digest, lp, i < accepted, finish) {
				break
			}
		}
	}
}

// takeToken records one generated token; true when the job ended with it.
// inDraft: the token is an accepted draft token, so the sequence has stepped
// past it; ending there, it is cut back to where decoding leaves it.
func takeToken(s *Session, job *batchJob, sl *batchSlot, seq int, token int32, digest Digest, lp TokenLogprobs,
	inDraft bool, finish func(int, error)) bool {
	sl.out.tokens = append(sl.out.tokens, token)
	sl.out.logits = append(sl.out.logits, digest)
	if job.logprobs {
		sl.out.logprobs = append(sl.out.logprobs, lp)
	}
	sl.feed = []int32{token}
	if job.stop[token] {
		sl.out.finish = "stop"
	} else if len(sl.out.tokens) >= job.maxNew {
		sl.out.finish = "length"
	}
	if sl.out.finish == "" {
		return false
	}
	var err error
	if inDraft {
		err = s.SeqTruncate(uint32(seq), uint32(len(job.prompt)+len(sl.out.tokens)-1))
	}
	finish(seq, err)
	return true
}

// rowOf: the digest of row i of seq's last (all-logits) step and, when the
// job asks, token's log-probabilities there.
func rowOf(s *Session, seq uint32, job *batchJob, i int, token int32) (Digest, TokenLogprobs, error) {
	digest, err := s.LogitsDigestAt(seq, uint32(i))
	if err != nil || !job.logprobs {
		return digest, TokenLogprobs{}, err
	}
	lp, top, err := s.LogprobsAt(seq, uint32(i), token, job.top)
	return digest, TokenLogprobs{Logprob: lp, Top: top}, err
}

// chooseToken: the token of seq's last step (greedy without sampling
// parameters), its logits digest and, when the job asks, its log-probabilities.
func chooseToken(s *Session, seq uint32, job *batchJob) (int32, Digest, TokenLogprobs, error) {
	digest, err := s.LogitsDigest(seq)
	if err != nil {
		return 0, Digest{}, TokenLogprobs{}, err
	}
	var token int32
	if job.sampling != nil {
		token, err = s.SampleToken(seq)
	} else {
		token, err = s.GreedyToken(seq)
	}
	if err != nil || !job.logprobs {
		return token, digest, TokenLogprobs{}, err
	}
	lp, top, err := s.Logprobs(seq, token, job.top)
	return token, digest, TokenLogprobs{Logprob: lp, Top: top}, err
}

// scorePrompts: per prompt, the log-probabilities of tokens 1.. given the
// tokens before each (the top most likely with each), from all-logits steps
// of the prompts on sequences 0..slots-1 of s, which must be empty and are
// left empty. A step appends at most rows tokens over its sequences, so a
// long prompt goes in chunks, a finished prompt's sequence taking the next.
// A prompt's last token is never stepped: no position of the prompt reads
// the logits after it. (The Python package's detinfer._batch.score_prompts.)
func scorePrompts(s *Session, slots int, prompts [][]int32, top, rows int) ([][]*TokenLogprobs, error) {
	out := make([][]*TokenLogprobs, len(prompts))
	type slot struct{ prompt, done int }
	active := make([]*slot, slots) // by sequence; nil: free
	defer func() {                 // also on an error: the sequences are left empty
		for seq, sl := range active {
			if sl != nil {
				_ = s.SeqReset(uint32(seq))
			}
		}
	}()
	next, running := 0, 0
	for next < len(prompts) || running > 0 {
		for seq := 0; seq < slots && next < len(prompts); seq++ {
			if active[seq] == nil {
				active[seq] = &slot{prompt: next}
				next++
				running++
			}
		}
		var entries []Entry
		budget := rows
		for seq, sl := range active {
			if sl == nil {
				continue
			}
			take := len(prompts[sl.prompt]) - 1 - sl.done
			if take > budget {
				take = budget
			}
			if take > 0 {
				entries = append(entries, Entry{uint32(seq), prompts[sl.prompt][sl.done : sl.done+take]})
				budget -= take
			}
		}
		if len(entries) > 0 {
			if err := s.step(entries, StepAllLogits); err != nil {
				return nil, err
			}
		}
		for _, e := range entries {
			sl := active[e.Seq]
			p := prompts[sl.prompt]
			for index := range e.Tokens {
				lp, tops, err := s.LogprobsAt(e.Seq, uint32(index), p[sl.done+index+1], top)
				if err != nil {
					return nil, err
				}
				out[sl.prompt] = append(out[sl.prompt], &TokenLogprobs{Logprob: lp, Top: tops})
			}
			sl.done += len(e.Tokens)
		}
		for seq, sl := range active {
			if sl != nil && sl.done == len(prompts[sl.prompt])-1 {
				if err := s.SeqReset(uint32(seq)); err != nil {
					return nil, err
				}
				active[seq] = nil
				running--
			}
		}
	}
	return out, nil
}
