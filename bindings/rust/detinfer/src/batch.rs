//! Continuous batching over one session's sequences (the Python package's
//! detinfer._batch, in Rust): jobs generated together, every active sequence
//! advanced one token per batched step, a finished job's sequence taken by
//! the next job. Batch invariance makes each job's tokens and digests equal
//! to its run alone; the tests check exactly that.
use std::collections::HashSet;

use crate::{Digest, Error, Logprobs, Result, SamplingParams, Session};

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
}

struct Slot {
    index: usize,
    feed: Vec<i32>,
    out: Outcome,
}

/// Generates `jobs` on sequences 0..slots of `s`, which must be empty and are
/// left empty; one outcome per job, in order.
pub(crate) fn run(s: &mut Session, slots: usize, jobs: &[Job]) -> Vec<Outcome> {
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
                                logprobs: Vec::new() };
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
        step(s, jobs, &mut active, &mut outs);
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

/// One batched step of every active sequence, then one token each. A step
/// that fails changes nothing (all or nothing): the sequences are then
/// stepped alone, so the error goes to the job that caused it.
fn step(s: &mut Session, jobs: &[Job], active: &mut [Option<Slot>], outs: &mut [Option<Outcome>]) {
    let feeds: Vec<(u32, Vec<i32>)> =
        active.iter().enumerate().filter_map(|(seq, a)| a.as_ref().map(|sl| (seq as u32, sl.feed.clone()))).collect();
    let entries: Vec<(u32, &[i32])> = feeds.iter().map(|(seq, f)| (*seq, f.as_slice())).collect();
    let mut stepped = Vec::new();
    if s.step_raw(&entries, false).is_ok() {
        stepped = entries.iter().map(|e| e.0 as usize).collect();
    } else {
        for e in &entries {
            match s.step_raw(&[*e], false) {
                Ok(()) => stepped.push(e.0 as usize),
                Err(err) => finish(s, jobs, active, outs, e.0 as usize, Some(err)),
            }
        }
    }
    for seq in stepped {
        let index = active[seq].as_ref().expect("a stepped sequence").index;
        let job = &jobs[index];
        match choose(s, seq as u32, job) {
            Err(e) => finish(s, jobs, active, outs, seq, Some(e)),
            Ok((token, digest, lp)) => {
                let slot = active[seq].as_mut().expect("a stepped sequence");
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
                    finish(s, jobs, active, outs, seq, None);
                }
            }
        }
    }
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
    use crate::Model;
    use std::path::PathBuf;

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
