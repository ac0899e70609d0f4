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
}

type batchSlot struct {
	index int
	feed  []int32
	out   batchOutcome
}

// runBatch generates jobs on sequences 0..slots-1 of s, which must be empty
// and are left empty; one outcome per job, in order.
func runBatch(s *Session, slots int, jobs []batchJob) []batchOutcome {
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
			stepBatch(s, jobs, active, finish)
		}
	}
	return outs
}

// stepBatch: one batched step of every active sequence, then one token
// each. A step that fails changes nothing (all or nothing): the sequences
// are then stepped alone, so the error goes to the job that caused it.
func stepBatch(s *Session, jobs []batchJob, active []*batchSlot, finish func(int, error)) {
	var entries []Entry
	for seq, sl := range active {
		if sl != nil {
			entries = append(entries, Entry{uint32(seq), sl.feed})
		}
	}
	var stepped []int
	if err := s.step(entries, 0); err == nil {
		for _, e := range entries {
			stepped = append(stepped, int(e.Seq))
		}
	} else {
		for _, e := range entries {
			if err := s.step([]Entry{e}, 0); err != nil {
				finish(int(e.Seq), err)
			} else {
				stepped = append(stepped, int(e.Seq))
			}
		}
	}
	for _, seq := range stepped {
		sl := active[seq]
		job := &jobs[sl.index]
		token, digest, lp, err := chooseToken(s, uint32(seq), job)
		if err != nil {
			finish(seq, err)
			continue
		}
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
		if sl.out.finish != "" {
			finish(seq, nil)
		}
	}
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
