//! Continuous batching over one session's sequences (the Python package's
//! detinfer._batch, in Rust): jobs generated together, every active sequence
//! advanced one token per batched step, a finished job's sequence taken by
//! the next job. Batch invariance makes each job's tokens and digests equal
//! to its run alone; the tests check exactly that.
use std::collections::HashSet;

use crate::{Digest, Drafter, Error, Logprobs, Result, SamplingParams, Session};

pub(crate) struct Job {
    pub prompt: Vec<i32>,
    pub max_new: usize,
    pub stop: HashSet<i32>,
    pub sampling: Option<SamplingParams>, // None: greedy
    pub logprobs: Option<usize>,
}

/// "stop" (a stop token), "length" (max_new), or the error that ended the job.
pub(crate) struct Outcome {
    pub tokens: Vec<i32>,
    pub digest: Option<Digest>,
    pub finish: &'static str,
    pub error: Option<Error>,
    pub logits: Vec<Digest>,
    pub logprobs: Vec<Logprobs>,
    /// With speculation: the draft tokens stepped, and those decoding chose.
    pub drafted: usize,
    pub accepted: usize,
}

/// Speculative decoding: each decoding step holds a sequence's chosen token
/// and up to `draft_max` draft tokens (prompt lookup with keys of at most
/// `ngram` tokens, or `drafter`'s), verified in one all-logits step
/// (`Session::accept_draft`). The output is bit for bit the output without it.
pub(crate) struct Speculation<'d> {
    pub draft_max: usize,
    pub ngram: usize,
    pub drafter: Option<Drafter<'d>>,
}

struct Slot {
    index: usize,
    feed: Vec<i32>,
    out: Outcome,
}

/// Generates `jobs` on sequences 0..slots of `s`, which must be empty and are
/// left empty; one outcome per job, in order.
pub(crate) fn run(s: &mut Session, slots: usize, jobs: &[Job], mut spec: Option<&mut Speculation<'_>>)
                  -> Vec<Outcome> {
    let mut outs: Vec<Option<Outcome>> = (0..jobs.len()).map(|_| None).collect();
    let mut active: Vec<Option<Slot>> = (0..slots).map(|_| None).collect();
    let mut next = 0;
    loop {
        for seq in 0..slots {
            if active[seq].is_some() || next == jobs.len() {
                continue;
            }
            let job = &jobs[next];
            let out = Outcome { tokens: Vec::new(), digest: None, finish: "length", error: None, logits: Vec::new(),
                                logprobs: Vec::new(), drafted: 0, accepted: 0 };
            active[seq] = Some(Slot { index: next, feed: job.prompt.clone(), out });
            next += 1;
            let err = match &job.sampling {
                Some(p) => s.set_sampling(seq as u32, Some(p)).err(),
                None => None,
            };
            if err.is_some() || job.max_new == 0 {
                finish(s, jobs, &mut active, &mut outs, seq, err);
            }
        }
        if active.iter().all(Option::is_none) {
            break;
        }
        step(s, jobs, &mut active, &mut outs, spec.as_deref_mut());
    }
    outs.into_iter().map(|o| o.expect("every job finished")).collect()
}

fn finish(s: &mut Session, jobs: &[Job], active: &mut [Option<Slot>], outs: &mut [Option<Outcome>], seq: usize,
          error: Option<Error>) {
    let mut slot = active[seq].take().expect("an active sequence");
    match error {
        Some(e) => slot.out.error = Some(e),
        None => match s.seq_digest(seq as u32, &slot.feed) {
            Ok(d) => slot.out.digest = Some(d),
            Err(e) => slot.out.error = Some(e),
        },
    }
    let _ = s.seq_reset(seq as u32);
    if jobs[slot.index].sampling.is_some() {
        let _ = s.set_sampling(seq as u32, None);
    }
    outs[slot.index] = Some(slot.out);
}

/// One batched step of every active sequence, then one token each (or,
/// speculating, the accepted draft tokens and one more). A step that fails
/// changes nothing (all or nothing): the sequences are then stepped alone, so
/// the error goes to the job that caused it. Speculating, the prompts go in a
/// step of their own first, so that the all-logits step of the drafts
/// computes no row of a prompt.
fn step(s: &mut Session, jobs: &[Job], active: &mut [Option<Slot>], outs: &mut [Option<Outcome>],
        spec: Option<&mut Speculation<'_>>) {
    let prefill: Vec<(u32, Vec<i32>, usize)> = active.iter().enumerate()
        .filter_map(|(seq, a)| a.as_ref().filter(|sl| spec.is_none() || sl.out.tokens.is_empty())
            .map(|sl| (seq as u32, sl.feed.clone(), 0)))
        .collect();
    if !prefill.is_empty() {
        step_entries(s, jobs, active, outs, &prefill, false);
    }
    let Some(spec) = spec else { return };
    let mut decode = Vec::new();
    for seq in 0..active.len() {
        let Some(sl) = active[seq].as_ref() else { continue };
        if sl.out.tokens.is_empty() {
            continue;
        }
        let room = jobs[sl.index].max_new.saturating_sub(sl.out.tokens.len() + 1).min(spec.draft_max);
        let next = sl.feed[0];
        let draft = if room == 0 {
            Ok(Vec::new())
        } else if let Some(d) = spec.drafter.as_mut() {
            d.propose(s, seq as u32, next, room)
        } else {
            s.draft_lookup(seq as u32, next, spec.ngram, room)
        };
        match draft {
            Err(e) => finish(s, jobs, active, outs, seq, Some(e)),
            Ok(draft) => {
                let n = draft.len();
                let mut feed = vec![next];
                feed.extend(draft);
                decode.push((seq as u32, feed, n));
            }
        }
    }
    if !decode.is_empty() {
        let all_logits = decode.iter().any(|e| e.2 > 0);
        step_entries(s, jobs, active, outs, &decode, all_logits);
    }
}

fn step_entries(s: &mut Session, jobs: &[Job], active: &mut [Option<Slot>], outs: &mut [Option<Outcome>],
                feeds: &[(u32, Vec<i32>, usize)], all_logits: bool) {
    let entries: Vec<(u32, &[i32])> = feeds.iter().map(|(seq, f, _)| (*seq, f.as_slice())).collect();
    let mut stepped = Vec::new();
    if s.step_raw(&entries, all_logits).is_ok() {
        stepped = feeds.iter().collect();
    } else {
        for (e, f) in entries.iter().zip(feeds) {
            match s.step_raw(&[*e], all_logits) {
                Ok(()) => stepped.push(f),
                Err(err) => finish(s, jobs, active, outs, e.0 as usize, Some(err)),
            }
        }
    }
    for (seq, fed, n_draft) in stepped {
        let seq = *seq as usize;
        let index = active[seq].as_ref().expect("a stepped sequence").index;
        let job = &jobs[index];
        if *n_draft == 0 {
            match choose(s, seq as u32, job) {
                Err(e) => finish(s, jobs, active, outs, seq, Some(e)),
                Ok((token, digest, lp)) => {
                    take(s, jobs, active, outs, seq, token, digest, lp, false);
                }
            }
            continue;
        }
        let (accepted, next) = match s.accept_draft(seq as u32, *n_draft) {
            Ok(r) => r,
            Err(e) => {
                finish(s, jobs, active, outs, seq, Some(e));
                continue;
            }
        };
        let slot = active[seq].as_mut().expect("a stepped sequence");
        slot.out.drafted += n_draft;
        slot.out.accepted += accepted;
        let chosen: Vec<i32> = fed[1..1 + accepted].iter().copied().chain([next]).collect();
        for (i, &token) in chosen.iter().enumerate() {
            match row(s, seq as u32, job, i, token) {
                Err(e) => {
                    finish(s, jobs, active, outs, seq, Some(e));
                    break;
                }
                Ok((digest, lp)) => {
                    if take(s, jobs, active, outs, seq, token, digest, lp, i < accepted) {
                        break;
                    }
                }
            }
        }
    }
}

/// Records one generated token; true when the job ended with it. `in_draft`:
/// the token is an accepted draft token, so the sequence has stepped past it;
/// ending there, it is cut back to where decoding leaves it.
#[allow(clippy::too_many_arguments)]
fn take(s: &mut Session, jobs: &[Job], active: &mut [Option<Slot>], outs: &mut [Option<Outcome>], seq: usize,
        token: i32, digest: Digest, lp: Option<Logprobs>, in_draft: bool) -> bool {
    let slot = active[seq].as_mut().expect("a stepped sequence");
    let job = &jobs[slot.index];
    slot.out.tokens.push(token);
    slot.out.logits.push(digest);
    slot.out.logprobs.extend(lp);
    slot.feed = vec![token];
    let done = if job.stop.contains(&token) {
        slot.out.finish = "stop";
        true
    } else {
        slot.out.tokens.len() >= job.max_new
    };
    if done {
        let n = (job.prompt.len() + slot.out.tokens.len() - 1) as u32;
        let err = if in_draft { s.seq_truncate(seq as u32, n).err() } else { None };
        finish(s, jobs, active, outs, seq, err);
    }
    done
}

/// The digest of row i of seq's last (all-logits) step and, when the job
/// asks, token's log-probabilities there.
fn row(s: &mut Session, seq: u32, job: &Job, i: usize, token: i32) -> Result<(Digest, Option<Logprobs>)> {
    let digest = s.logits_digest_at(seq, i as u32)?;
    let lp = match job.logprobs {
        Some(top) => Some(s.logprobs_at(seq, i as u32, Some(token), top)?),
        None => None,
    };
    Ok((digest, lp))
}

/// The token of seq's last step (greedy without sampling parameters), its
/// logits digest and, when the job asks, its log-probabilities.
fn choose(s: &mut Session, seq: u32, job: &Job) -> Result<(i32, Digest, Option<Logprobs>)> {
    let digest = s.logits(seq)?.1;
    let token = if job.sampling.is_some() { s.sample_token(seq)? } else { s.greedy_token(seq)? };
    let lp = match job.logprobs {
        Some(top) => Some(s.logprobs(seq, Some(token), top)?),
        None => None,
    };
    Ok((token, digest, lp))
}

/// Per prompt, the log-probabilities of tokens 1.. given the tokens before
/// each (the `top` most likely with each), from all-logits steps of the
/// prompts on sequences 0..slots of `s`, which must be empty and are left
/// empty when it succeeds. A step appends at most `rows` tokens over its
/// sequences, so a long prompt goes in chunks, a finished prompt's sequence
/// taking the next. A prompt's last token is never stepped: no position of
/// the prompt reads the logits after it. (detinfer._batch.score_prompts.)
pub(crate) fn score(s: &mut Session, slots: usize, prompts: &[Vec<i32>], top: usize, rows: usize)
                    -> Result<Vec<Vec<Logprobs>>> {
    let mut out: Vec<Vec<Logprobs>> = prompts.iter().map(|_| Vec::new()).collect();
    let mut active: Vec<Option<(usize, usize)>> = vec![None; slots]; // by sequence: (prompt, tokens stepped)
    let mut next = 0;
    loop {
        for a in active.iter_mut().filter(|a| a.is_none()) {
            if next < prompts.len() {
                *a = Some((next, 0));
                next += 1;
            }
        }
        if active.iter().all(Option::is_none) {
            return Ok(out);
        }
        let mut entries: Vec<(u32, &[i32])> = Vec::new();
        let mut budget = rows;
        for (seq, &(i, done)) in active.iter().enumerate().filter_map(|(seq, a)| a.as_ref().map(|a| (seq, a))) {
            let take = (prompts[i].len() - 1 - done).min(budget);
            if take > 0 {
                entries.push((seq as u32, &prompts[i][done..done + take]));
                budget -= take;
            }
        }
        if !entries.is_empty() {
            s.step_raw(&entries, true)?;
        }
        for &(seq, chunk) in &entries {
            let (i, done) = active[seq as usize].expect("a stepped sequence");
            for index in 0..chunk.len() {
                out[i].push(s.logprobs_at(seq, index as u32, Some(prompts[i][done + index + 1]), top)?);
            }
            active[seq as usize] = Some((i, done + chunk.len()));
        }
        for (seq, a) in active.iter_mut().enumerate() {
            if matches!(*a, Some((i, done)) if done == prompts[i].len() - 1) {
                s.seq_reset(seq as u32)?;
                *a = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Model, DRAFT_DEFAULT, DRAFT_NGRAM_DEFAULT};
    use std::path::PathBuf;

    /// Every token of the plain output as a stop token (a chat's end of turn,
    /// as a job takes it): speculating, some end inside an accepted draft,
    /// where the sequence must be cut back (the digest says so).
    #[test]
    fn a_stop_token_inside_an_accepted_draft() {
        let models = std::env::var_os("DI_TEST_MODELS").map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../build/models"));
        let model = Model::load(models.join("gqa_untied_q8_0.gguf")).unwrap();
        let mut s = model.session_default().unwrap();
        let prompt = vec![1, 5, 9, 2, 33, 7, 5, 9, 2, 33, 7, 5, 9, 2];
        let job = |stop: Option<i32>| super::Job { prompt: prompt.clone(), max_new: 40, stop: stop.into_iter().collect(),
                                                   sampling: None, logprobs: None };
        let full = super::run(&mut s, 1, &[job(None)], None).remove(0).tokens;
        let mut inside = 0;
        for &stop in &full {
            let a = super::run(&mut s, 1, &[job(Some(stop))], None).remove(0);
            let mut spec = super::Speculation { draft_max: DRAFT_DEFAULT, ngram: DRAFT_NGRAM_DEFAULT, drafter: None };
            let b = super::run(&mut s, 1, &[job(Some(stop))], Some(&mut spec)).remove(0);
            assert!(a.error.is_none() && b.error.is_none());
            assert_eq!((&a.tokens, a.digest, a.finish, &a.logits), (&b.tokens, b.digest, b.finish, &b.logits), "stop {stop}");
            inside += (b.accepted > 0 && a.finish == "stop") as usize;
        }
        assert!(inside > 0, "no run ended with drafts accepted");
    }

    /// `score` in steps of 2 tokens gives the bits of steps that take each
    /// prompt whole (tests/score.rs checks those against one token at a time).
    #[test]
    fn score_in_chunks_gives_the_same_bits() {
        let models = std::env::var_os("DI_TEST_MODELS").map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../build/models"));
        let model = Model::load(models.join("gqa_untied_q8_0.gguf")).unwrap();
        let mut cfg = crate::Config::new().unwrap();
        cfg.set_int(crate::ConfigKey::MaxSequences, 3).unwrap();
        let mut s = model.session(&cfg).unwrap();
        let prompts = vec![vec![1, 17, 42, 8, 8, 8, 8, 8], vec![5, 9, 2, 33, 7, 99], vec![44], vec![1, 2, 3, 4, 5]];
        let whole = super::score(&mut s, 3, &prompts, 3, 1000).unwrap();
        let chunked = super::score(&mut s, 3, &prompts, 3, 2).unwrap();
        type Bits = (u32, Vec<(i32, u32)>); // a Logprobs as the bits of its floats
        let bits = |v: &Vec<Vec<crate::Logprobs>>| -> Vec<Vec<Bits>> {
            v.iter().map(|p| p.iter().map(|lp| {
                (lp.token.unwrap().to_bits(), lp.top.iter().map(|&(t, x)| (t, x.to_bits())).collect())
            }).collect()).collect()
        };
        assert_eq!(bits(&chunked), bits(&whole));
        assert_eq!(whole.iter().map(Vec::len).collect::<Vec<_>>(), [7, 5, 0, 4]);
        assert!((0..3).all(|seq| s.seq_length(seq).unwrap() == 0)); // left empty
    }
}
