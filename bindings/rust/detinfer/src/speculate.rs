//! Speculative decoding (DETINFER_1.6): several tokens per step with exactly
//! the output of decoding one at a time (include/detinfer.h, "Speculative
//! decoding"; docs/DETERMINISM.md). `GenerateOptions::speculate` uses these.
use std::marker::PhantomData;
use std::ptr::{self, NonNull};

use crate::{check, sys, text, Config, Digest, ErrBuf, Error, Model, Result, Session, Status};

/// Draft tokens a lookup or a drafter gives at most (DI_DRAFT_MAX).
pub const DRAFT_MAX: usize = sys::DI_DRAFT_MAX as usize;
/// The longest key a lookup matches (DI_DRAFT_MAX_NGRAM).
pub const DRAFT_MAX_NGRAM: usize = sys::DI_DRAFT_MAX_NGRAM as usize;
/// The draft length used unless told (DI_DRAFT_DEFAULT; measured).
pub const DRAFT_DEFAULT: usize = sys::DI_DRAFT_DEFAULT as usize;
/// The key length used unless told (DI_DRAFT_NGRAM_DEFAULT).
pub const DRAFT_NGRAM_DEFAULT: usize = sys::DI_DRAFT_NGRAM_DEFAULT as usize;

impl<'m> Session<'m> {
    /// The digest of position `index` of what seq appended in the last step
    /// (with all_logits), without borrowing the row.
    pub fn logits_digest_at(&mut self, seq: u32, index: u32) -> Result<Digest> {
        Ok(self.logits_at(seq, index)?.1)
    }

    /// A prompt-lookup draft for seq to follow `next` (the token about to be
    /// stepped): the tokens that followed the longest key of at most `ngram`
    /// (1..DRAFT_MAX_NGRAM) tokens ending seq's tokens and `next`, at its
    /// latest earlier place; at most `max_draft` (0..DRAFT_MAX). Changes nothing.
    pub fn draft_lookup(&mut self, seq: u32, next: i32, ngram: usize, max_draft: usize) -> Result<Vec<i32>> {
        const OP: &str = "di_session_seq_draft_lookup";
        if max_draft > DRAFT_MAX || ngram > DRAFT_MAX_NGRAM {
            return Err(Error { op: OP, status: Status::InvalidArgument,
                               message: format!("ngram {ngram}, max_draft {max_draft}: 1..8 and 0..32") });
        }
        let mut draft = vec![0i32; DRAFT_MAX];
        let mut n = 0u32;
        let st = unsafe {
            sys::di_session_seq_draft_lookup(self.raw(), seq, next, ngram as u32, max_draft as u32,
                                             draft.as_mut_ptr(), &mut n)
        };
        self.check(OP, st)?;
        draft.truncate(n as usize);
        Ok(draft)
    }

    /// Resolves a draft: seq's entry in the last step (all_logits) was the
    /// chosen token and `n_draft` draft tokens. Gives how many of them decoding
    /// would have chosen, in order, and the token it chooses after them; seq
    /// is left ending after the accepted ones, `sample_token` gives that token
    /// again and `logits_at(seq, 0..=accepted)` the rows they were chosen from.
    /// Where a grammar allows nothing (it ended): `Status::GrammarRejected`.
    pub fn accept_draft(&mut self, seq: u32, n_draft: usize) -> Result<(usize, i32)> {
        let (mut accepted, mut next) = (0u32, 0i32);
        let st = unsafe { sys::di_session_seq_accept_draft(self.raw(), seq, n_draft as u32, &mut accepted, &mut next) };
        self.check("di_session_seq_accept_draft", st)?;
        Ok((accepted as usize, next))
    }
}

/// A draft model: a smaller model with the vocabulary of the model it drafts
/// for, run in a session of its own. Borrows both models.
pub struct Drafter<'m> {
    ptr: NonNull<sys::di_drafter>,
    _models: PhantomData<&'m Model>,
    _not_sync: PhantomData<std::cell::Cell<()>>,
}

impl Drop for Drafter<'_> {
    fn drop(&mut self) {
        unsafe { sys::di_drafter_free(self.ptr.as_ptr()) }
    }
}

impl<'m> Drafter<'m> {
    /// `draft` as the drafter of `model`'s sessions, in a session made with
    /// `config` (threads, profile, context; max_sequences at least the
    /// sequence ids it drafts for). Another vocabulary: `Status::Model`, naming
    /// the first token that differs.
    pub fn new(model: &'m Model, draft: &'m Model, config: Option<&Config>) -> Result<Drafter<'m>> {
        let mut p = ptr::null_mut();
        let mut eb = ErrBuf::new();
        let cfg = config.map_or(ptr::null(), |c| c.ptr.as_ptr() as *const _);
        check("di_drafter_create", unsafe { sys::di_drafter_create(model.raw(), draft.raw(), cfg, &mut p, eb.ptr(), 512) },
              || eb.message())?;
        Ok(Drafter { ptr: NonNull::new(p).expect("di_drafter_create gave DI_OK and NULL"), _models: PhantomData,
                     _not_sync: PhantomData })
    }

    /// Up to `max_draft` (0..DRAFT_MAX) tokens the draft model chooses
    /// greedily after seq's tokens in `session` and `next`. Changes nothing in
    /// `session`.
    pub fn propose(&mut self, session: &mut Session<'_>, seq: u32, next: i32, max_draft: usize) -> Result<Vec<i32>> {
        const OP: &str = "di_drafter_propose";
        if max_draft > DRAFT_MAX {
            return Err(Error { op: OP, status: Status::InvalidArgument, message: format!("max_draft {max_draft}: 0..32") });
        }
        let mut draft = vec![0i32; DRAFT_MAX];
        let mut n = 0u32;
        let st = unsafe {
            sys::di_drafter_propose(self.ptr.as_ptr(), session.raw(), seq, next, max_draft as u32, draft.as_mut_ptr(),
                                    &mut n)
        };
        check(OP, st, || text(unsafe { sys::di_drafter_errmsg(self.ptr.as_ptr()) }))?;
        draft.truncate(n as usize);
        Ok(draft)
    }
}
