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
