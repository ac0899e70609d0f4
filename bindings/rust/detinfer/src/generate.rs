//! Generation as an iterator.
use crate::{Digest, Error, Grammar, Logprobs, Result, Session, SpecialToken, Status};

/// One generated token: its id, its text piece (empty for a model without a
/// tokenizer) and the digest of the logits row it was chosen from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Generated {
    pub token: i32,
    pub piece: String,
    pub digest: Digest,
}

/// The generation of up to `max_new` tokens after a prompt: iterate for
/// `Result<Generated>`; afterwards `sequence_digest` is the digest of the
/// prompt and every generated token.
pub struct Generation<'s, 'm> {
    session: &'s mut Session<'m>,
    seq: u32,
    feed: Vec<i32>,
    tokens: Vec<i32>,
    max_new: usize,
    eos: Option<i32>,
    done: bool,
    stopped_at_eos: bool,
    grammar: Option<Grammar>,
    refused: Option<Error>,
}

impl<'s, 'm> Generation<'s, 'm> {
    pub(crate) fn new(session: &'s mut Session<'m>, seq: u32, prompt: &[i32], max_new: usize, stop_at_eos: bool)
                      -> Generation<'s, 'm> {
        let eos = if stop_at_eos { session.model().special_token(SpecialToken::Eos).ok() } else { None };
        let mut feed: Vec<i32> = session.pending.get(&seq).copied().into_iter().collect();
        feed.extend_from_slice(prompt);
        let refused = feed.is_empty().then(|| Error {
            op: "Session::generate", status: Status::InvalidArgument,
            message: "the prompt has no tokens (and the sequence holds no generation to continue)".into() });
        Generation { session, seq, feed, tokens: Vec::new(), max_new, eos, done: max_new == 0,
                     stopped_at_eos: false, refused, grammar: None }
    }

    /// Constrains the generated tokens (not the prompt) with `grammar`; its
    /// text ends at the EOS it then allows, so the generation must stop at
    /// EOS (`stop_at_eos`), else the first token gives `Status::InvalidArgument`.
    pub fn with_grammar(mut self, grammar: &Grammar) -> Self {
        self.grammar = Some(grammar.clone());
        self
    }

    /// The generated ids so far.
    pub fn tokens(&self) -> &[i32] {
        &self.tokens
    }

    pub fn stopped_at_eos(&self) -> bool {
        self.stopped_at_eos
    }

    /// The sequence digest of the generation: the sequence's stepped tokens
    /// and the last chosen one (never stepped) — the prompt and every
    /// generated token.
    pub fn sequence_digest(&mut self) -> Result<Digest> {
        self.session.seq_digest(self.seq, &self.feed)
    }

    /// `Session::logprobs` at the position the last generated token was
    /// chosen from (`token`: that one, for instance).
    pub fn logprobs(&mut self, token: Option<i32>, top: usize) -> Result<Logprobs> {
        self.session.logprobs(self.seq, token, top)
    }

    /// The number of tokens the sequence digest covers.
    pub fn sequence_length(&mut self) -> Result<usize> {
        Ok(self.session.seq_length(self.seq)? as usize + self.feed.len())
    }

    fn next_token(&mut self) -> Result<Generated> {
        if self.grammar.is_some() && self.eos.is_none() {
            return Err(Error { op: "generate", status: Status::InvalidArgument,
                               message: "a grammar ends at the end-of-sequence token: stop at EOS".into() });
        }
        self.session.step_raw(&[(self.seq, &self.feed)], false)?;
        self.session.pending.remove(&self.seq);
        if let (Some(g), true) = (&self.grammar, self.tokens.is_empty()) {
            self.session.set_grammar(self.seq, Some(g), &[])?; // the prompt is in: it starts here
        }
        let digest = self.session.logits(self.seq)?.1;
        // with the sequence's sampling parameters: greedy unless set
        let token = self.session.sample_token(self.seq)?;
        self.session.pending.insert(self.seq, token);
        let piece = match self.session.model().token_piece(token) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) if e.status == Status::Unsupported => String::new(), // no tokenizer in the file
            Err(e) => return Err(e),
        };
        Ok(Generated { token, piece, digest })
    }
}

impl Iterator for Generation<'_, '_> {
    type Item = Result<Generated>;

    fn next(&mut self) -> Option<Result<Generated>> {
        if let Some(e) = self.refused.take() {
            self.done = true;
            return Some(Err(e));
        }
        if self.done {
            return None;
        }
        let result = self.next_token();
        match &result {
            Ok(g) => {
                self.tokens.push(g.token);
                self.feed = vec![g.token];
                self.stopped_at_eos = self.eos == Some(g.token);
                self.done = self.tokens.len() >= self.max_new || self.stopped_at_eos;
            }
            Err(_) => self.done = true,
        }
        Some(result)
    }
}
