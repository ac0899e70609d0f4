//! Grammars: constrained generation (docs/STRUCTURED.md).
use std::ptr::{self, NonNull};
use std::sync::Arc;

use crate::{check, sized, sys, Digest, ErrBuf, Result, Session};

struct Handle(NonNull<sys::di_grammar>);

// A di_grammar is immutable: any number of threads may use one at once.
unsafe impl Send for Handle {}
unsafe impl Sync for Handle {}

impl Drop for Handle {
    fn drop(&mut self) {
        unsafe { sys::di_grammar_free(self.0.as_ptr()) }
    }
}

/// A compiled grammar, from GBNF text or a JSON Schema. Cheap to clone (the
/// clones share one compiled grammar); a session keeps its own reference, so
/// dropping it after `Session::set_grammar` is fine.
#[derive(Clone)]
pub struct Grammar {
    inner: Arc<Handle>,
}

impl Grammar {
    fn compile(op: &'static str, text: &str,
               call: unsafe extern "C" fn(*const std::os::raw::c_char, usize, u32, *mut *mut sys::di_grammar,
                                          *mut std::os::raw::c_char, usize) -> sys::di_status)
               -> Result<Grammar> {
        let mut p = ptr::null_mut();
        let mut eb = ErrBuf::new();
        check(op, unsafe { call(text.as_ptr() as *const _, text.len(), 0, &mut p, eb.ptr(), 512) },
              || eb.message())?;
        Ok(Grammar { inner: Arc::new(Handle(NonNull::new(p).expect("a grammar call gave DI_OK and NULL"))) })
    }

    /// GBNF (llama.cpp's format; rule root starts). `Status::Grammar` names
    /// the line and column of a mistake.
    pub fn from_gbnf(text: &str) -> Result<Grammar> {
        Grammar::compile("di_grammar_from_gbnf", text, sys::di_grammar_from_gbnf)
    }

    /// A JSON Schema given as its JSON text: the grammar of the JSON texts it
    /// allows, with no whitespace. `Status::Unsupported` names a keyword
    /// outside the subset and its JSON pointer.
    pub fn from_json_schema(schema: &str) -> Result<Grammar> {
        Grammar::compile("di_grammar_from_json_schema", schema, sys::di_grammar_from_json_schema)
    }

    pub(crate) fn raw(&self) -> *const sys::di_grammar {
        self.inner.0.as_ptr()
    }

    /// Its GBNF text (a schema's: the text it was converted to).
    pub fn gbnf(&self) -> Result<String> {
        let bytes = sized("di_grammar_gbnf", |buf, cap, n| unsafe { sys::di_grammar_gbnf(self.raw(), buf, cap, n) },
                          String::new)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// XXH3-128 of its GBNF text.
    pub fn digest(&self) -> Result<Digest> {
        let mut d = sys::di_digest::default();
        check("di_grammar_digest", unsafe { sys::di_grammar_digest(self.raw(), &mut d) }, String::new)?;
        Ok(d.into())
    }
}

/// di_session_seq_grammar_state's flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GrammarState(pub u32);

impl GrammarState {
    /// The sequence has a grammar.
    pub const ACTIVE: u32 = sys::DI_GRAMMAR_ACTIVE;
    /// Its text is complete: an end token is allowed.
    pub const CAN_END: u32 = sys::DI_GRAMMAR_CAN_END;
    /// Complete, and only an end token may follow.
    pub const MUST_END: u32 = sys::DI_GRAMMAR_MUST_END;
    /// An end token was stepped: no token is allowed.
    pub const ENDED: u32 = sys::DI_GRAMMAR_ENDED;

    pub fn has(self, flag: u32) -> bool {
        self.0 & flag != 0
    }
}

impl Session<'_> {
    /// seq's grammar (None: none) from its length on: the tokens already in
    /// it are not constrained; greedy_token and sample_token then choose only
    /// tokens it allows. `end_tokens`: besides the model's EOS, the tokens
    /// that end it (a chat's end of turn).
    pub fn set_grammar(&mut self, seq: u32, grammar: Option<&Grammar>, end_tokens: &[i32]) -> Result<()> {
        let g = grammar.map_or(ptr::null(), |g| g.raw());
        let st = unsafe {
            sys::di_session_seq_set_grammar(self.raw(), seq, g, end_tokens.as_ptr(), end_tokens.len())
        };
        self.check("di_session_seq_set_grammar", st)
    }

    /// The state of seq's grammar (0 without one).
    pub fn grammar_state(&mut self, seq: u32) -> Result<GrammarState> {
        let mut f = 0u32;
        let st = unsafe { sys::di_session_seq_grammar_state(self.raw(), seq, &mut f) };
        self.check("di_session_seq_grammar_state", st)?;
        Ok(GrammarState(f))
    }

    /// The tokens seq's grammar allows next (every token without one).
    pub fn allowed_tokens(&mut self, seq: u32) -> Result<Vec<i32>> {
        let n = (self.model().n_vocab() + 31) / 32;
        let mut words = vec![0u32; n];
        let st = unsafe { sys::di_session_seq_grammar_allowed(self.raw(), seq, words.as_mut_ptr(), n) };
        self.check("di_session_seq_grammar_allowed", st)?;
        Ok((0..n * 32).filter(|t| words[t / 32] >> (t % 32) & 1 == 1).map(|t| t as i32).collect())
    }
}
