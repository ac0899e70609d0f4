//! `Llm`: a model file and generation of many prompts in one call.
//!
//! ```no_run
//! use detinfer::{GenerateOptions, Llm, LlmOptions, Prompt};
//! let llm = Llm::new("model.gguf", &LlmOptions { threads: 2, ..LlmOptions::default() })?;
//! let prompts = [Prompt::from("The capital of France is"), Prompt::from(vec![2, 818, 5279])];
//! for c in llm.generate(&prompts, &GenerateOptions { max_new: 16, ..GenerateOptions::default() })? {
//!     println!("{} {:?} {:?}", c.digest, c.finish_reason, c.text);
//! }
//! # Ok::<(), detinfer::Error>(())
//! ```
//!
//! Prompts run with continuous batching over a session's sequences; each
//! result is bit for bit the prompt's run alone. `Llm::score` gives the
//! log-probability of every prompt token given the tokens before it.
use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::batch::{self, Job, Speculation};
use crate::{values, Config, ConfigKey, Digest, Drafter, Error, Logprobs, Model, ModelKey, Result, SamplingParams,
            SpecialToken, Status, TokenizeFlags, DRAFT_DEFAULT, DRAFT_MAX, DRAFT_MAX_NGRAM,
            DRAFT_NGRAM_DEFAULT};

/// How `Llm` runs: threads, sequences generated together, numerics profile
/// (`values::PROFILE_*`), context length (0: the model's, capped at 4096).
#[derive(Clone, Debug)]
pub struct LlmOptions {
    pub threads: usize,
    pub max_sequences: usize,
    pub profile: i64,
    pub context_length: usize,
}

impl Default for LlmOptions {
    fn default() -> LlmOptions {
        // the integer profile, as the detinfer tools take it; PROFILE_PORTABLE
        // gives float64-level accuracy (a bare Session keeps the library's
        // default, portable): a digest compares only within one profile
        LlmOptions { threads: 1, max_sequences: 8, profile: values::PROFILE_INTEGER, context_length: 0 }
    }
}

/// A prompt: text (tokenized with BOS as the model asks, special-token text
/// as plain text) or token ids.
#[derive(Clone, Debug, PartialEq)]
pub enum Prompt {
    Text(String),
    Tokens(Vec<i32>),
}

impl From<&str> for Prompt {
    fn from(text: &str) -> Prompt {
        Prompt::Text(text.to_string())
    }
}

impl From<Vec<i32>> for Prompt {
    fn from(tokens: Vec<i32>) -> Prompt {
        Prompt::Tokens(tokens)
    }
}

impl From<&[i32]> for Prompt {
    fn from(tokens: &[i32]) -> Prompt {
        Prompt::Tokens(tokens.to_vec())
    }
}

/// Where speculative decoding's drafts come from (`GenerateOptions::speculate`).
#[derive(Clone, Debug, PartialEq)]
pub enum Speculate {
    /// Prompt lookup over each sequence's own tokens (`detinfer run --speculate ngram`).
    Ngram,
    /// A draft model: a smaller GGUF file of the same vocabulary.
    DraftModel(PathBuf),
}

/// Options of `Llm::generate`. `sampling` applies to every prompt (None:
/// greedy); `per_prompt`, when given, has one entry per prompt. `logprobs:
/// Some(n)` asks for each token's log-probability and the n most likely.
/// `speculate`: verify up to `draft_max` (1..32, default `DI_DRAFT_DEFAULT`, 3) draft tokens a
/// step, from prompt lookup (keys of at most `ngram` tokens, 1..8, default 3)
/// or a draft model, as `detinfer run --speculate` does: the tokens, digests
/// and log-probabilities are bit for bit those without it
/// (`Completion::drafted` and `accepted` say how many drafts ran).
#[derive(Clone, Debug)]
pub struct GenerateOptions {
    pub max_new: usize,
    pub sampling: Option<SamplingParams>,
    pub per_prompt: Option<Vec<Option<SamplingParams>>>,
    pub stop_at_eos: bool,
    pub logits_digests: bool,
    pub logprobs: Option<usize>,
    pub speculate: Option<Speculate>,
    pub draft_max: usize,
    pub ngram: usize,
}

impl Default for GenerateOptions {
    fn default() -> GenerateOptions {
        GenerateOptions { max_new: 32, sampling: None, per_prompt: None, stop_at_eos: true, logits_digests: false,
                          logprobs: None, speculate: None, draft_max: DRAFT_DEFAULT,
                          ngram: DRAFT_NGRAM_DEFAULT }
    }
}

/// Why a generation ended: a stop token (EOS, which ends `tokens`) or `max_new`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishReason {
    Stop,
    Length,
}

/// One prompt's result. `digest`: the sequence digest (prompt and generated
/// ids, as `detinfer run` and the C API report it).
#[derive(Clone, Debug, PartialEq)]
pub struct Completion {
    pub text: String,
    pub tokens: Vec<i32>,
    pub digest: Digest,
    pub finish_reason: FinishReason,
    pub prompt_tokens: Vec<i32>,
    /// Per generated token, the digest of the logits row it was chosen from.
    pub logits_digests: Option<Vec<Digest>>,
    pub logprobs: Option<Vec<Logprobs>>,
    /// With `speculate`: the draft tokens stepped and how many of them decoding
    /// chose (accepted / drafted is the acceptance rate); None without.
    pub drafted: Option<usize>,
    pub accepted: Option<usize>,
}

/// One prompt's log-probabilities (`Llm::score`): `logprobs[i]` is token
/// i's given tokens 0..i, with the `top` most likely tokens at that position;
/// `logprobs[0]` is None (the first token has no prefix). `sum` adds the
/// token log-probabilities in order, in f64.
#[derive(Clone, Debug, PartialEq)]
pub struct PromptScore {
    pub tokens: Vec<i32>,
    pub logprobs: Vec<Option<Logprobs>>,
    pub sum: f64,
}

/// The logits one step of `Llm::score` keeps: an all-logits step holds a row
/// of n_vocab floats per token it appends, so long prompts go in chunks (the
/// bits do not depend on the chunking).
const SCORE_STEP_BYTES: usize = 256 << 20;

/// A model file, loaded once. Each `generate` call runs on a session of its
/// own, so `&Llm` may generate from several threads at once (`Model` is Sync).
pub struct Llm {
    model: Model,
    opts: LlmOptions,
}

const OP: &str = "Llm::generate";

fn refuse(status: Status, message: String) -> Error {
    Error { op: OP, status, message }
}

/// The error, naming prompt i.
fn named(i: usize) -> impl Fn(Error) -> Error {
    move |e: Error| Error { message: format!("prompt {i}: {}", e.message), ..e }
}

impl Llm {
    pub fn new(path: impl AsRef<Path>, opts: &LlmOptions) -> Result<Llm> {
        Ok(Llm { model: Model::load(path)?, opts: opts.clone() })
    }

    pub fn model(&self) -> &Model {
        &self.model
    }

    fn config(&self) -> Result<Config> {
        let mut cfg = Config::new()?;
        cfg.set_int(ConfigKey::Threads, self.opts.threads as i64)?
            .set_int(ConfigKey::MaxSequences, self.opts.max_sequences as i64)?
            .set_int(ConfigKey::Profile, self.opts.profile)?
            .set_int(ConfigKey::ContextLength, self.opts.context_length as i64)?;
        Ok(cfg)
    }

    /// The most tokens a sequence holds (include/detinfer.h,
    /// DI_CONFIG_CONTEXT_LENGTH: 0 is the model's, capped at 4096).
    fn context(&self) -> Result<usize> {
        Ok(match self.opts.context_length {
            0 => (self.model.get_int(ModelKey::NCtxTrain)? as usize).min(4096),
            n => n,
        })
    }

    /// Prompt i's token ids (text tokenized with BOS as the model asks),
    /// checked against the vocabulary.
    fn prompt_ids(&self, op: &'static str, i: usize, p: &Prompt) -> Result<Vec<i32>> {
        let n_vocab = self.model.n_vocab();
        let ids = match p {
            Prompt::Text(t) if t.is_empty() => {
                // not BOS alone: refused, as the tools, the server, Python and Go do
                return Err(Error { op, status: Status::InvalidArgument, message: format!("prompt {i}: the prompt is empty (text \"\")") });
            }
            Prompt::Text(t) => self.model.tokenize(t, TokenizeFlags::ADD_BOS).map_err(named(i))?,
            Prompt::Tokens(ids) => ids.clone(),
        };
        let refuse = |status, message: String| Err(Error { op, status, message: format!("prompt {i}: {message}") });
        if ids.is_empty() {
            return refuse(Status::InvalidArgument, "the prompt has no tokens".to_string());
        }
        if let Some(t) = ids.iter().find(|&&t| t < 0 || t as usize >= n_vocab) {
            return refuse(Status::TokenRange, format!("token {t} is outside the vocabulary (0..{})", n_vocab - 1));
        }
        Ok(ids)
    }

    /// Every prompt and sampling parameter checked before anything runs.
    fn jobs(&self, session: &mut crate::Session, prompts: &[Prompt], opts: &GenerateOptions) -> Result<Vec<Job>> {
        if let Some(per) = &opts.per_prompt {
            if per.len() != prompts.len() {
                return Err(refuse(Status::InvalidArgument,
                                  format!("{} sampling parameters for {} prompts", per.len(), prompts.len())));
            }
        }
        let n_vocab = self.model.n_vocab();
        if matches!(opts.logprobs, Some(n) if n > n_vocab) {
            return Err(refuse(Status::InvalidArgument, format!("logprobs {:?}: at most the vocabulary", opts.logprobs)));
        }
        let mut stop = HashSet::new();
        if opts.stop_at_eos {
            stop.extend(self.model.special_token(SpecialToken::Eos).ok());
        }
        let context = self.context()?;
        let mut jobs = Vec::with_capacity(prompts.len());
        for (i, p) in prompts.iter().enumerate() {
            let ids = self.prompt_ids(OP, i, p)?;
            // the server's rule: the prompt and max_new - 1 generated tokens are
            // stepped (the last one chosen is not); one call is refused whole
            if ids.len() + opts.max_new.saturating_sub(1) > context {
                return Err(refuse(Status::ContextFull, format!("prompt {i}: the prompt's {} tokens and max_new {} exceed the context of {context} tokens",
                                                               ids.len(), opts.max_new)));
            }
            let sampling = match &opts.per_prompt {
                Some(per) => per[i],
                None => opts.sampling,
            };
            if let Some(params) = &sampling {
                // the library's own check, on a free sequence
                let checked = session.set_sampling(0, Some(params));
                session.set_sampling(0, None)?;
                checked.map_err(named(i))?;
            }
            jobs.push(Job { prompt: ids, max_new: opts.max_new, stop: stop.clone(), sampling, logprobs: opts.logprobs });
        }
        Ok(jobs)
    }

    /// One `Completion` per prompt, in order; an error names the prompt.
    pub fn generate(&self, prompts: &[Prompt], opts: &GenerateOptions) -> Result<Vec<Completion>> {
        if !(1..=DRAFT_MAX).contains(&opts.draft_max) || !(1..=DRAFT_MAX_NGRAM).contains(&opts.ngram) {
            return Err(refuse(Status::InvalidArgument, format!(
                "draft_max {}, ngram {}: draft_max 1..{DRAFT_MAX} and ngram 1..{DRAFT_MAX_NGRAM}", opts.draft_max,
                opts.ngram)));
        }
        let draft_model = match &opts.speculate {
            Some(Speculate::DraftModel(path)) => {
                if !path.is_file() {
                    return Err(refuse(Status::InvalidArgument, format!(
                        "speculate: draft model {}: no such file", path.display())));
                }
                Some(Model::load(path)?)
            }
            _ => None,
        };
        let config = self.config()?;
        let drafter = match &draft_model {
            Some(m) => Some(Drafter::new(&self.model, m, Some(&config))?),
            None => None,
        };
        let mut spec = opts.speculate.as_ref().map(|_| Speculation { draft_max: opts.draft_max, ngram: opts.ngram,
                                                                    drafter });
        let mut session = self.model.session(&config)?;
        let jobs = self.jobs(&mut session, prompts, opts)?;
        let outcomes = batch::run(&mut session, self.opts.max_sequences, &jobs, spec.as_mut());
        let mut out = Vec::with_capacity(jobs.len());
        for (i, (job, o)) in jobs.into_iter().zip(outcomes).enumerate() {
            if let Some(e) = o.error {
                return Err(Error { message: format!("prompt {i}: {}", e.message), ..e });
            }
            let text = match self.model.detokenize(&o.tokens) {
                Ok(t) => t,
                Err(e) if e.status == Status::Unsupported => String::new(), // no tokenizer in the file
                Err(e) => return Err(e),
            };
            out.push(Completion {
                text,
                digest: o.digest.expect("a digest without an error"),
                finish_reason: if o.finish == "stop" { FinishReason::Stop } else { FinishReason::Length },
                tokens: o.tokens,
                prompt_tokens: job.prompt,
                logits_digests: opts.logits_digests.then_some(o.logits),
                logprobs: opts.logprobs.map(|_| o.logprobs),
                drafted: opts.speculate.as_ref().map(|_| o.drafted),
                accepted: opts.speculate.as_ref().map(|_| o.accepted),
            });
        }
        Ok(out)
    }
    /// One `PromptScore` per prompt, in order: the log-probability of each
    /// prompt token given the tokens before it (temperature 1, the library's
    /// log-softmax), with the `top` most likely tokens at each position. Each
    /// prompt is one prefill with every position's logits
    /// (`Session::logprobs_at`), prompts batched over a session's sequences:
    /// the bits of stepping the prompt one token at a time with
    /// `Session::logprobs` after each. Every prompt is checked before anything
    /// runs: an empty one, or one longer than the context
    /// (`Status::ContextFull`), is refused, naming the prompt.
    pub fn score(&self, prompts: &[Prompt], top: usize) -> Result<Vec<PromptScore>> {
        const OP: &str = "Llm::score";
        let refuse = |status, message: String| Err(Error { op: OP, status, message });
        if top > self.model.n_vocab() {
            return refuse(Status::InvalidArgument, format!("top {top}: at most the vocabulary"));
        }
        let context = self.context()?;
        let mut ids = Vec::with_capacity(prompts.len());
        for (i, p) in prompts.iter().enumerate() {
            let one = self.prompt_ids(OP, i, p)?;
            if one.len() > context {
                return refuse(Status::ContextFull,
                              format!("prompt {i}: {} tokens, more than the context of {context}", one.len()));
            }
            ids.push(one);
        }
        let rows = (SCORE_STEP_BYTES / (4 * self.model.n_vocab())).max(1);
        let mut session = self.model.session(&self.config()?)?;
        let lps = batch::score(&mut session, self.opts.max_sequences, &ids, top, rows)?;
        Ok(ids.into_iter().zip(lps).map(|(tokens, lps)| {
            let sum = lps.iter().map(|lp| f64::from(lp.token.expect("the token's log-probability"))).sum();
            let logprobs = std::iter::once(None).chain(lps.into_iter().map(Some)).collect();
            PromptScore { tokens, logprobs, sum }
        }).collect())
    }
}
