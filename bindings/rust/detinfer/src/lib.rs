//! Safe Rust binding of libdetinfer: deterministic LLM inference whose logits
//! are bitwise identical across batch, chunking, threads, SIMD path and
//! machine, every output with an XXH3-128 digest.
//!
//! ```no_run
//! let model = detinfer::Model::load("model.gguf")?;
//! let mut session = model.session(&detinfer::Config::new()?)?;
//! let prompt = model.tokenize("hello world", detinfer::TokenizeFlags::ADD_BOS)?;
//! let mut generation = session.generate(0, &prompt, 8, true);
//! for token in &mut generation {
//!     let token = token?;
//!     println!("{} {:?} {}", token.token, token.piece, token.digest);
//! }
//! println!("sequence digest {}", generation.sequence_digest()?);
//! # Ok::<(), detinfer::Error>(())
//! ```
//!
//! Handles free themselves on drop. A `Session` borrows its `Model`, so the
//! compiler keeps the model alive as long as its sessions. `Send`/`Sync`
//! follow the header's thread-safety rules (see each type).

use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::fmt;
use std::marker::PhantomData;
use std::os::raw::c_char;
use std::path::Path;
use std::ptr::{self, NonNull};

pub use detinfer_sys as sys;

mod batch;
mod generate;
mod grammar;
mod llm;
mod speculate;
pub use speculate::{Drafter, DRAFT_DEFAULT, DRAFT_MAX, DRAFT_MAX_NGRAM, DRAFT_NGRAM_DEFAULT};
pub use generate::{Generated, Generation};
pub use grammar::{Grammar, GrammarState};
pub use llm::{Completion, FinishReason, GenerateOptions, Llm, LlmOptions, Prompt, PromptScore, Speculate};

// ---- Errors -------------------------------------------------------------------

/// A di_status other than DI_OK (numbered; never renumbered).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    InvalidArgument,
    OutOfMemory,
    Io,
    Format,
    Unsupported,
    Model,
    SamplingRefused,
    TokenRange,
    ContextFull,
    Sequence,
    State,
    BackendUnavailable,
    Thread,
    UnknownKey,
    Internal,
    BufferTooSmall,
    Text,
    /// A malformed grammar or JSON schema (the message names the place).
    Grammar,
    /// A token the sequence's grammar does not allow.
    GrammarRejected,
    /// A code this binding does not know (from a newer library).
    Other(i32),
}

impl Status {
    /// The status of a C code (not DI_OK).
    pub fn from_code(code: i32) -> Status {
        use Status::*;
        match code {
            1 => InvalidArgument,
            2 => OutOfMemory,
            3 => Io,
            4 => Format,
            5 => Unsupported,
            6 => Model,
            7 => SamplingRefused,
            8 => TokenRange,
            9 => ContextFull,
            10 => Sequence,
            11 => State,
            12 => BackendUnavailable,
            13 => Thread,
            14 => UnknownKey,
            15 => Internal,
            16 => BufferTooSmall,
            17 => Text,
            18 => Grammar,
            19 => GrammarRejected,
            other => Other(other),
        }
    }

    /// The C code.
    pub fn code(self) -> i32 {
        use Status::*;
        match self {
            InvalidArgument => 1,
            OutOfMemory => 2,
            Io => 3,
            Format => 4,
            Unsupported => 5,
            Model => 6,
            SamplingRefused => 7,
            TokenRange => 8,
            ContextFull => 9,
            Sequence => 10,
            State => 11,
            BackendUnavailable => 12,
            Thread => 13,
            UnknownKey => 14,
            Internal => 15,
            BufferTooSmall => 16,
            Text => 17,
            Grammar => 18,
            GrammarRejected => 19,
            Other(code) => code,
        }
    }

    /// The C name ("DI_ERR_FORMAT").
    pub fn name(self) -> &'static str {
        status_name(self.code())
    }
}

/// The C name of any status code ("DI_OK", "DI_ERR_FORMAT", "DI_STATUS_UNKNOWN").
pub fn status_name(code: i32) -> &'static str {
    // static strings owned by the library
    unsafe { CStr::from_ptr(sys::di_status_name(code)) }.to_str().unwrap_or("DI_STATUS_UNKNOWN")
}

/// A failed call: the C function, the status and the library's detail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub op: &'static str,
    pub status: Status,
    pub message: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.op, self.status.name())?;
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

fn check(op: &'static str, status: sys::di_status, message: impl FnOnce() -> String) -> Result<()> {
    if status == sys::DI_OK {
        Ok(())
    } else {
        Err(Error { op, status: Status::from_code(status), message: message() })
    }
}

fn text(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

fn cstring(op: &'static str, s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error { op, status: Status::InvalidArgument, message: format!("{s:?} contains NUL") })
}

struct ErrBuf([c_char; 512]);

impl ErrBuf {
    fn new() -> ErrBuf {
        ErrBuf([0; 512])
    }
    fn ptr(&mut self) -> *mut c_char {
        self.0.as_mut_ptr()
    }
    fn message(&self) -> String {
        text(self.0.as_ptr())
    }
}

/// Runs a call with di_model_detokenize's buffer rules, asking again with the
/// length it needs when the first buffer is too small.
fn sized(op: &'static str, mut call: impl FnMut(*mut c_char, usize, &mut usize) -> sys::di_status,
         message: impl Fn() -> String) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; 256];
    let mut n = 0usize;
    let mut st = call(buf.as_mut_ptr() as *mut c_char, buf.len(), &mut n);
    if st == sys::DI_ERR_BUFFER_TOO_SMALL {
        buf = vec![0u8; n + 1];
        st = call(buf.as_mut_ptr() as *mut c_char, buf.len(), &mut n);
    }
    check(op, st, message)?;
    buf.truncate(n);
    Ok(buf)
}

// ---- Functions without a handle (thread-safe) -----------------------------------

/// The loaded library's version string ("0.4.0").
pub fn version() -> String {
    text(unsafe { sys::di_version_string() })
}

/// The loaded library's MAJOR*10000 + MINOR*100 + PATCH.
pub fn version_number() -> u32 {
    unsafe { sys::di_version_number() }
}

/// Compiler, flags and numerics contract of the library.
pub fn build_info() -> String {
    text(unsafe { sys::di_build_info() })
}

/// An XXH3-128 digest; `Display` gives the 32 hex characters xxh128sum prints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Digest(pub [u8; 16]);

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl From<sys::di_digest> for Digest {
    fn from(d: sys::di_digest) -> Digest {
        Digest(d.bytes)
    }
}

/// The digest of token ids as little-endian int32 (what a sequence reports).
pub fn digest_tokens(tokens: &[i32]) -> Result<Digest> {
    let mut d = sys::di_digest::default();
    check("di_digest_tokens", unsafe { sys::di_digest_tokens(tokens.as_ptr(), tokens.len(), &mut d) }, String::new)?;
    Ok(d.into())
}

/// The digest of float32 values as little-endian bytes (what a logits row reports).
pub fn digest_floats(values: &[f32]) -> Result<Digest> {
    let mut d = sys::di_digest::default();
    check("di_digest_floats", unsafe { sys::di_digest_floats(values.as_ptr(), values.len(), &mut d) }, String::new)?;
    Ok(d.into())
}

/// A chat's roles and contents as C strings (kept alive with their pointers).
struct CMessages {
    _roles: Vec<CString>,
    _contents: Vec<CString>,
    role_ptrs: Vec<*const c_char>,
    content_ptrs: Vec<*const c_char>,
}

impl CMessages {
    fn new(op: &'static str, messages: &[(&str, &str)]) -> Result<CMessages> {
        let roles = messages.iter().map(|m| cstring(op, m.0)).collect::<Result<Vec<_>>>()?;
        let contents = messages.iter().map(|m| cstring(op, m.1)).collect::<Result<Vec<_>>>()?;
        let role_ptrs = roles.iter().map(|s| s.as_ptr()).collect();
        let content_ptrs = contents.iter().map(|s| s.as_ptr()).collect();
        Ok(CMessages { _roles: roles, _contents: contents, role_ptrs, content_ptrs })
    }
}

/// Prompt text of `messages` ((role, content): "system", "user" or
/// "assistant") in the built-in chat template `template` ("gemma", "chatml",
/// ...), to show or compare. To run a chat use `Model::chat_tokenize`: this
/// text must not be tokenized with `TokenizeFlags::PARSE_SPECIAL`, which
/// would turn marker text inside a message ("<end_of_turn>") into control
/// tokens and let a user forge turns.
pub fn chat_format(template: &str, messages: &[(&str, &str)], add_assistant: bool) -> Result<String> {
    const OP: &str = "di_chat_format";
    let name = cstring(OP, template)?;
    let cm = CMessages::new(OP, messages)?;
    let mut eb = ErrBuf::new();
    let eb_ptr = eb.ptr();
    let bytes = sized(OP, |buf, cap, n| unsafe {
        sys::di_chat_format(name.as_ptr(), cm.role_ptrs.as_ptr(), cm.content_ptrs.as_ptr(), messages.len(),
                            add_assistant as i32, buf, cap, n, eb_ptr, 512)
    }, || eb.message())?;
    String::from_utf8(bytes).map_err(|e| Error { op: OP, status: Status::Text, message: e.to_string() })
}

/// The text of the token that ends a turn in the built-in template
/// (`"<end_of_turn>"` for gemma), or None for an unknown name.
pub fn chat_turn_end(template: &str) -> Option<String> {
    let name = CString::new(template).ok()?;
    let p = unsafe { sys::di_chat_turn_end(name.as_ptr()) };
    if p.is_null() {
        return None;
    }
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

// ---- Model ----------------------------------------------------------------------

/// An integer fact about a model (di_model_key).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum ModelKey {
    NVocab = 1,
    NCtxTrain = 2,
    NEmbd = 3,
    NLayer = 4,
    NHead = 5,
    NHeadKv = 6,
    NFf = 7,
    NParams = 8,
    FileSize = 9,
    BytesPerToken = 10,
}

/// di_special_token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum SpecialToken {
    Bos = 1,
    Eos = 2,
}

/// di_model_tokenize's flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TokenizeFlags(pub u32);

impl TokenizeFlags {
    pub const NONE: TokenizeFlags = TokenizeFlags(0);
    /// The special tokens the file asks for (BOS, EOS).
    pub const ADD_BOS: TokenizeFlags = TokenizeFlags(sys::DI_TOKENIZE_ADD_BOS);
    /// "<start_of_turn>" and the like give their tokens.
    pub const PARSE_SPECIAL: TokenizeFlags = TokenizeFlags(sys::DI_TOKENIZE_PARSE_SPECIAL);
}

impl std::ops::BitOr for TokenizeFlags {
    type Output = TokenizeFlags;
    fn bitor(self, o: TokenizeFlags) -> TokenizeFlags {
        TokenizeFlags(self.0 | o.0)
    }
}

/// The immutable weights of one GGUF file (memory-mapped).
pub struct Model {
    ptr: NonNull<sys::di_model>,
    n_vocab: usize,
}

// Send and Sync: the header says every call taking a `const di_model *` may be
// made from any number of threads at once, and any number of sessions in any
// threads may share one model. Every &self method here makes only such calls;
// di_model_free (Drop) needs &mut/ownership, so no call can race with it, and
// nothing ties a model to the thread that loaded it.
unsafe impl Send for Model {}
unsafe impl Sync for Model {}

impl Drop for Model {
    fn drop(&mut self) {
        unsafe { sys::di_model_free(self.ptr.as_ptr()) }
    }
}

impl Model {
    /// Loads a GGUF v3 file; the error says what is wrong with a bad file.
    pub fn load(path: impl AsRef<Path>) -> Result<Model> {
        const OP: &str = "di_model_load";
        use std::os::unix::ffi::OsStrExt; // a path is bytes, whatever their encoding
        let path = path.as_ref();
        let cpath = CString::new(path.as_os_str().as_bytes()).map_err(|_| Error {
            op: OP,
            status: Status::InvalidArgument,
            message: format!("{} contains NUL", path.display()),
        })?;
        let mut p = ptr::null_mut();
        let mut eb = ErrBuf::new();
        check(OP, unsafe { sys::di_model_load(cpath.as_ptr(), &mut p, eb.ptr(), 512) }, || eb.message())?;
        let mut model = Model { ptr: NonNull::new(p).expect("di_model_load gave DI_OK and NULL"), n_vocab: 0 };
        model.n_vocab = model.get_int(ModelKey::NVocab)? as usize;
        Ok(model)
    }

    fn raw(&self) -> *const sys::di_model {
        self.ptr.as_ptr()
    }

    pub fn n_vocab(&self) -> usize {
        self.n_vocab
    }

    pub fn get_int(&self, key: ModelKey) -> Result<i64> {
        let mut v = 0i64;
        check("di_model_get_int", unsafe { sys::di_model_get_int(self.raw(), key as i32, &mut v) },
              || format!("{key:?}"))?;
        Ok(v)
    }

    /// general.architecture ("llama", "qwen2", "gemma3").
    pub fn architecture(&self) -> String {
        text(unsafe { sys::di_model_architecture(self.raw()) })
    }

    /// Token ids of UTF-8 text.
    pub fn tokenize(&self, text: &str, flags: TokenizeFlags) -> Result<Vec<i32>> {
        const OP: &str = "di_model_tokenize";
        let mut eb = ErrBuf::new();
        let mut n = 0usize;
        let p = text.as_ptr() as *const c_char;
        let st = unsafe {
            sys::di_model_tokenize(self.raw(), p, text.len(), flags.0, ptr::null_mut(), 0, &mut n, eb.ptr(), 512)
        };
        if st != sys::DI_ERR_BUFFER_TOO_SMALL {
            check(OP, st, || eb.message())?;
        }
        let mut ids = vec![0i32; n];
        let st = unsafe {
            sys::di_model_tokenize(self.raw(), p, text.len(), flags.0, ids.as_mut_ptr(), ids.len(), &mut n,
                                   eb.ptr(), 512)
        };
        check(OP, st, || eb.message())?;
        ids.truncate(n);
        Ok(ids)
    }

    /// The token ids of a chat in the built-in template `template`: the
    /// template's markers are control tokens and every message is plain
    /// text, whatever it says. `flags`: `NONE` or `ADD_BOS`.
    pub fn chat_tokenize(&self, template: &str, messages: &[(&str, &str)], add_assistant: bool,
                         flags: TokenizeFlags) -> Result<Vec<i32>> {
        const OP: &str = "di_chat_tokenize";
        let name = cstring(OP, template)?;
        let cm = CMessages::new(OP, messages)?;
        let mut eb = ErrBuf::new();
        let call = |ids: &mut [i32], n: &mut usize, eb: *mut c_char| unsafe {
            let p = if ids.is_empty() { ptr::null_mut() } else { ids.as_mut_ptr() };
            sys::di_chat_tokenize(self.raw(), name.as_ptr(), cm.role_ptrs.as_ptr(), cm.content_ptrs.as_ptr(),
                                  messages.len(), add_assistant as i32, flags.0, p, ids.len(), n, eb, 512)
        };
        let mut n = 0usize;
        let st = call(&mut [], &mut n, eb.ptr());
        if st != sys::DI_ERR_BUFFER_TOO_SMALL {
            check(OP, st, || eb.message())?;
        }
        let mut ids = vec![0i32; n];
        let st = call(&mut ids, &mut n, eb.ptr());
        check(OP, st, || eb.message())?;
        ids.truncate(n);
        Ok(ids)
    }

    /// The UTF-8 bytes of token ids (a byte token may be part of a character).
    pub fn detokenize_bytes(&self, tokens: &[i32]) -> Result<Vec<u8>> {
        let mut eb = ErrBuf::new();
        let eb_ptr = eb.ptr();
        sized("di_model_detokenize", |buf, cap, n| unsafe {
            sys::di_model_detokenize(self.raw(), tokens.as_ptr(), tokens.len(), buf, cap, n, eb_ptr, 512)
        }, || eb.message())
    }

    /// The text of token ids (invalid UTF-8 replaced).
    pub fn detokenize(&self, tokens: &[i32]) -> Result<String> {
        Ok(String::from_utf8_lossy(&self.detokenize_bytes(tokens)?).into_owned())
    }

    /// The bytes of one token inside decoded text.
    pub fn token_piece(&self, token: i32) -> Result<Vec<u8>> {
        sized("di_model_token_piece", |buf, cap, n| unsafe {
            sys::di_model_token_piece(self.raw(), token, buf, cap, n)
        }, || format!("token {token}"))
    }

    pub fn special_token(&self, which: SpecialToken) -> Result<i32> {
        let mut t = 0i32;
        check("di_model_special_token", unsafe { sys::di_model_special_token(self.raw(), which as i32, &mut t) },
              || format!("{which:?}"))?;
        Ok(t)
    }

    /// The id of the token whose text is exactly `text`.
    pub fn token_lookup(&self, text: &str) -> Result<i32> {
        let mut t = 0i32;
        let st = unsafe {
            sys::di_model_token_lookup(self.raw(), text.as_ptr() as *const c_char, text.len(), &mut t)
        };
        check("di_model_token_lookup", st, || format!("text {text:?}"))?;
        Ok(t)
    }

    /// A string value of the file's metadata ("general.name").
    pub fn meta_string(&self, key: &str) -> Result<String> {
        const OP: &str = "di_model_meta_string";
        let ckey = cstring(OP, key)?;
        let bytes = sized(OP, |buf, cap, n| unsafe { sys::di_model_meta_string(self.raw(), ckey.as_ptr(), buf, cap, n) },
                          || format!("key {key:?}"))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// The built-in template the file's chat template is recognised as.
    pub fn chat_template(&self) -> Option<String> {
        let p = unsafe { sys::di_model_chat_template(self.raw()) };
        (!p.is_null()).then(|| text(p))
    }

    /// A session on this model; it borrows the model, which outlives it.
    pub fn session(&self, config: &Config) -> Result<Session<'_>> {
        Session::new(self, Some(config))
    }

    /// A session with every default setting.
    pub fn session_default(&self) -> Result<Session<'_>> {
        Session::new(self, None)
    }
}

// ---- Config -----------------------------------------------------------------------

/// A configuration key (di_config_key) with the type of its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum ConfigKey {
    Threads = 1,
    MaxSequences = 2,
    ContextLength = 3,
    Backend = 4,
    Profile = 5,
    Temperature = 6,
    DoSample = 7,
    TopP = 8,
    TopK = 9,
    RepetitionPenalty = 10,
    Seed = 11,
    CpuPath = 12,
    Device = 13,
    AllowLongContext = 14,
}

/// di_backend, di_profile and di_cpu_path values, for ConfigKey::Backend, Profile, CpuPath.
pub mod values {
    pub const BACKEND_CPU: i64 = 1;
    pub const BACKEND_CUDA: i64 = 2;
    pub const PROFILE_PORTABLE: i64 = 1;
    pub const PROFILE_DEVICE: i64 = 2;
    pub const PROFILE_INTEGER: i64 = 3;
    pub const CPU_PATH_AUTO: i64 = 0;
    pub const CPU_PATH_SCALAR: i64 = 1;
    pub const CPU_PATH_AVX2: i64 = 2;
    pub const CPU_PATH_AVX512: i64 = 3;
}

/// A SIMD path of the CPU backend (di_cpu_path). Every path gives the same
/// bits; this only chooses the instructions. Set it with
/// `config.set_int(ConfigKey::CpuPath, path as i64)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum CpuPath {
    Auto = 0,
    Scalar = 1,
    Avx2 = 2,
    Avx512 = 3,
}

impl CpuPath {
    pub fn from_code(code: i32) -> Option<CpuPath> {
        [CpuPath::Auto, CpuPath::Scalar, CpuPath::Avx2, CpuPath::Avx512].into_iter().find(|p| *p as i32 == code)
    }

    /// The DETINFER_CPU_PATH spelling ("auto", "scalar", "avx2", "avx512").
    pub fn name(self) -> &'static str {
        // a static string owned by the library
        unsafe { CStr::from_ptr(sys::di_cpu_path_name(self as i32)) }.to_str().unwrap_or("unknown")
    }

    /// The path a session created with `ConfigKey::CpuPath` = self would run
    /// on this machine: for `Auto`, the one a default session takes
    /// (DETINFER_CPU_PATH included). `Status::Unsupported` when this CPU or
    /// build cannot run the path, `Status::InvalidArgument` when
    /// DETINFER_CPU_PATH names no path. Thread-safe.
    pub fn resolve(self) -> Result<CpuPath> {
        let mut out: sys::di_cpu_path = 0;
        let mut eb = ErrBuf::new();
        let st = unsafe { sys::di_cpu_path_resolve(self as i32, &mut out, eb.ptr(), 512) };
        check("di_cpu_path_resolve", st, || eb.message())?;
        CpuPath::from_code(out).ok_or_else(|| Error {
            op: "di_cpu_path_resolve",
            status: Status::Internal,
            message: format!("the library resolved to CPU path {out}, unknown to this binding"),
        })
    }
}

impl fmt::Display for CpuPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Session settings.
pub struct Config {
    ptr: NonNull<sys::di_config>,
}

// Send, not Sync: a di_config is used by one thread at a time, but it is not
// tied to a thread, so it may move between threads. Not Sync: even a failed
// `get` writes the config's error message, so two threads must not share it.
unsafe impl Send for Config {}

impl Drop for Config {
    fn drop(&mut self) {
        unsafe { sys::di_config_free(self.ptr.as_ptr()) }
    }
}

impl Config {
    pub fn new() -> Result<Config> {
        let mut p = ptr::null_mut();
        check("di_config_create", unsafe { sys::di_config_create(&mut p) }, String::new)?;
        Ok(Config { ptr: NonNull::new(p).expect("di_config_create gave DI_OK and NULL") })
    }

    fn message(&self) -> String {
        text(unsafe { sys::di_config_errmsg(self.ptr.as_ptr()) })
    }

    pub fn set_int(&mut self, key: ConfigKey, value: i64) -> Result<&mut Config> {
        let st = unsafe { sys::di_config_set_int(self.ptr.as_ptr(), key as i32, value) };
        check("di_config_set_int", st, || self.message())?;
        Ok(self)
    }

    pub fn set_float(&mut self, key: ConfigKey, value: f64) -> Result<&mut Config> {
        let st = unsafe { sys::di_config_set_float(self.ptr.as_ptr(), key as i32, value) };
        check("di_config_set_float", st, || self.message())?;
        Ok(self)
    }

    pub fn get_int(&mut self, key: ConfigKey) -> Result<i64> {
        let mut v = 0i64;
        let st = unsafe { sys::di_config_get_int(self.ptr.as_ptr(), key as i32, &mut v) };
        check("di_config_get_int", st, || self.message())?;
        Ok(v)
    }

    pub fn get_float(&mut self, key: ConfigKey) -> Result<f64> {
        let mut v = 0f64;
        let st = unsafe { sys::di_config_get_float(self.ptr.as_ptr(), key as i32, &mut v) };
        check("di_config_get_float", st, || self.message())?;
        Ok(v)
    }
}

// ---- Sampling -----------------------------------------------------------------------

/// di_sampling_params; `Default` is the header's defaults (greedy).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SamplingParams {
    pub temperature: f32,
    pub top_k: i32,
    pub top_p: f32,
    pub min_p: f32,
    pub repetition_penalty: f32,
    pub presence_penalty: f32,
    pub frequency_penalty: f32,
    pub penalty_window: u32,
    pub seed: u64,
}

impl Default for SamplingParams {
    fn default() -> SamplingParams {
        SamplingParams {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            repetition_penalty: 1.0,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            penalty_window: 64,
            seed: 0,
        }
    }
}

impl SamplingParams {
    /// The defaults as the loaded library's di_sampling_params_init sets them.
    pub fn library_defaults() -> Result<SamplingParams> {
        let mut c = std::mem::MaybeUninit::<sys::di_sampling_params>::zeroed();
        check("di_sampling_params_init", unsafe { sys::di_sampling_params_init(c.as_mut_ptr()) }, String::new)?;
        let c = unsafe { c.assume_init() };
        Ok(SamplingParams {
            temperature: c.temperature,
            top_k: c.top_k,
            top_p: c.top_p,
            min_p: c.min_p,
            repetition_penalty: c.repetition_penalty,
            presence_penalty: c.presence_penalty,
            frequency_penalty: c.frequency_penalty,
            penalty_window: c.penalty_window,
            seed: c.seed,
        })
    }

    fn to_sys(self) -> sys::di_sampling_params {
        sys::di_sampling_params {
            size: std::mem::size_of::<sys::di_sampling_params>() as u32,
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repetition_penalty: self.repetition_penalty,
            presence_penalty: self.presence_penalty,
            frequency_penalty: self.frequency_penalty,
            penalty_window: self.penalty_window,
            seed: self.seed,
        }
    }
}

// ---- Log-probabilities ---------------------------------------------------------------

/// Log-probabilities of the model's own distribution at one position (see
/// `Session::logprobs`).
#[derive(Clone, Debug, PartialEq)]
pub struct Logprobs {
    /// The asked-for token's log-probability; None when none was asked.
    pub token: Option<f32>,
    /// The most likely tokens as (id, log-probability), by log-probability
    /// descending, then id ascending.
    pub top: Vec<(i32, f32)>,
}

// ---- Session ------------------------------------------------------------------------

/// Up to max_sequences sequences with their KV caches, on a borrowed model.
pub struct Session<'m> {
    ptr: NonNull<sys::di_session>,
    model: &'m Model,
    /// Per sequence: the last token a generation chose and did not step (the
    /// next `generate` steps it first).
    pending: HashMap<u32, i32>,
    _not_sync: PhantomData<std::cell::Cell<()>>,
}

// Send, not Sync: a di_session is used by one thread at a time but is not
// tied to a thread, so it may move to another (it reads the model, which is
// Sync, from whichever thread uses it; the CUDA backend selects its device on
// every call rather than relying on a thread's current device). Not Sync: every call may write the
// session's error message, so two threads must never use one session at once
// (PhantomData<Cell> keeps the compiler from deriving Sync).
unsafe impl Send for Session<'_> {}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        unsafe { sys::di_session_free(self.ptr.as_ptr()) }
    }
}

impl<'m> Session<'m> {
    fn new(model: &'m Model, config: Option<&Config>) -> Result<Session<'m>> {
        let mut p = ptr::null_mut();
        let mut eb = ErrBuf::new();
        let cfg = config.map_or(ptr::null(), |c| c.ptr.as_ptr() as *const _);
        check("di_session_create", unsafe { sys::di_session_create(model.raw(), cfg, &mut p, eb.ptr(), 512) },
              || eb.message())?;
        Ok(Session { ptr: NonNull::new(p).expect("di_session_create gave DI_OK and NULL"), model,
                     pending: HashMap::new(), _not_sync: PhantomData })
    }

    fn raw(&mut self) -> *mut sys::di_session {
        self.ptr.as_ptr()
    }

    fn check(&self, op: &'static str, st: sys::di_status) -> Result<()> {
        check(op, st, || text(unsafe { sys::di_session_errmsg(self.ptr.as_ptr()) }))
    }

    pub fn model(&self) -> &'m Model {
        self.model
    }

    /// What computes the results ("backend=cpu path=avx2 threads=1").
    pub fn backend_info(&self) -> String {
        text(unsafe { sys::di_session_backend_info(self.ptr.as_ptr()) })
    }

    /// Bytes of KV cache the session holds now: on the CPU backend the sum
    /// over its sequences, which grows as they grow and falls when they are
    /// reset; on the CUDA backend the device caches reserved at creation.
    pub fn kv_bytes(&mut self) -> Result<u64> {
        let mut n = 0u64;
        let st = unsafe { sys::di_session_kv_bytes(self.raw(), &mut n) };
        self.check("di_session_kv_bytes", st)?;
        Ok(n)
    }

    /// One step over several sequences: `(sequence, tokens)` entries. All or
    /// nothing. A sequence whose generation chose a token it has not stepped
    /// is refused (`Status::State`): stepping other tokens would leave that
    /// one out; `generate` continues it, `seq_reset` or `seq_truncate` drops it.
    pub fn step(&mut self, entries: &[(u32, &[i32])], all_logits: bool) -> Result<()> {
        for (seq, _) in entries {
            if let Some(t) = self.pending.get(seq) {
                return Err(Error { op: "di_session_step", status: Status::State, message: format!(
                    "sequence {seq} ends with token {t}, chosen by generate and not stepped: continue with \
                     generate (it steps that token first), or seq_reset or seq_truncate the sequence before step") });
            }
        }
        self.step_raw(entries, all_logits)
    }

    pub(crate) fn step_raw(&mut self, entries: &[(u32, &[i32])], all_logits: bool) -> Result<()> {
        let seqs: Vec<u32> = entries.iter().map(|e| e.0).collect();
        let counts: Vec<u32> = entries.iter().map(|e| e.1.len() as u32).collect();
        let tokens: Vec<i32> = entries.iter().flat_map(|e| e.1.iter().copied()).collect();
        let flags = if all_logits { sys::DI_STEP_ALL_LOGITS } else { 0 };
        let st = unsafe {
            sys::di_session_step(self.raw(), entries.len() as u32, seqs.as_ptr(), counts.as_ptr(), tokens.as_ptr(),
                                 flags)
        };
        self.check("di_session_step", st)
    }

    /// seq's last logits row (owned by the session; the borrow ends before the
    /// next step) and its digest.
    pub fn logits(&mut self, seq: u32) -> Result<(&[f32], Digest)> {
        let mut l = ptr::null();
        let mut d = sys::di_digest::default();
        let st = unsafe { sys::di_session_logits(self.raw(), seq, &mut l, &mut d) };
        self.check("di_session_logits", st)?;
        Ok((unsafe { std::slice::from_raw_parts(l, self.model.n_vocab) }, d.into()))
    }

    /// Position `index` of what seq appended in the last step (with all_logits).
    pub fn logits_at(&mut self, seq: u32, index: u32) -> Result<(&[f32], Digest)> {
        let mut l = ptr::null();
        let mut d = sys::di_digest::default();
        let st = unsafe { sys::di_session_logits_at(self.raw(), seq, index, &mut l, &mut d) };
        self.check("di_session_logits_at", st)?;
        Ok((unsafe { std::slice::from_raw_parts(l, self.model.n_vocab) }, d.into()))
    }

    /// Log-probabilities at the last position of seq's last step: the
    /// log-softmax of its logits at temperature 1, no penalty and no filter
    /// (whatever the sampling parameters), with the library's own exp and log,
    /// so equal logits give equal bits everywhere. `token`: the id whose
    /// log-probability to give; `top`: how many of the most likely tokens to
    /// list (at most the vocabulary). `Status::State` when seq has no logits,
    /// `Status::TokenRange` for a token outside the vocabulary,
    /// `Status::InvalidArgument` for a `top` above the vocabulary.
    pub fn logprobs(&mut self, seq: u32, token: Option<i32>, top: usize) -> Result<Logprobs> {
        self.logprobs_with("di_session_logprobs", token, top, |p, t, lp, n, ids, values| unsafe {
            sys::di_session_logprobs(p, seq, t, lp, n, ids, values)
        })
    }

    /// `logprobs` of position `index` (0-based within what seq appended in the
    /// session's last step, which must have used `all_logits`): the same bits
    /// as `logprobs` after stepping seq up to that position alone. A prompt's
    /// token i + 1 given tokens 0..=i is position i's log-probability of token
    /// i + 1 (`Llm::score` does this). The errors of `logprobs`, and
    /// `Status::State` when the last step was not an all-logits step of seq,
    /// `Status::InvalidArgument` for an index outside it.
    pub fn logprobs_at(&mut self, seq: u32, index: u32, token: Option<i32>, top: usize) -> Result<Logprobs> {
        self.logprobs_with("di_session_logprobs_at", token, top, |p, t, lp, n, ids, values| unsafe {
            sys::di_session_logprobs_at(p, seq, index, t, lp, n, ids, values)
        })
    }

    fn logprobs_with(&mut self, op: &'static str, token: Option<i32>, top: usize,
                     call: impl FnOnce(*mut sys::di_session, i32, *mut f32, u32, *mut i32, *mut f32)
                                       -> sys::di_status) -> Result<Logprobs> {
        if matches!(token, Some(t) if t < 0) {
            return Err(Error { op, status: Status::TokenRange, message: format!("token {} is negative", token.unwrap()) });
        }
        let n_top = u32::try_from(top)
            .map_err(|_| Error { op, status: Status::InvalidArgument, message: format!("top {top} is too large") })?;
        let mut lp = 0f32;
        let mut ids = vec![0i32; top];
        let mut values = vec![0f32; top];
        let (ids_ptr, values_ptr) =
            if top > 0 { (ids.as_mut_ptr(), values.as_mut_ptr()) } else { (ptr::null_mut(), ptr::null_mut()) };
        let lp_ptr = if token.is_some() { &mut lp as *mut f32 } else { ptr::null_mut() };
        let st = call(self.raw(), token.unwrap_or(-1), lp_ptr, n_top, ids_ptr, values_ptr);
        self.check(op, st)?;
        Ok(Logprobs { token: token.map(|_| lp), top: ids.into_iter().zip(values).collect() })
    }

    /// The greedy token of seq's last position (ties to the lowest id).
    pub fn greedy_token(&mut self, seq: u32) -> Result<i32> {
        let mut t = 0i32;
        let st = unsafe { sys::di_session_greedy_token(self.raw(), seq, &mut t) };
        self.check("di_session_greedy_token", st)?;
        Ok(t)
    }

    /// The token chosen with seq's sampling parameters.
    pub fn sample_token(&mut self, seq: u32) -> Result<i32> {
        let mut t = 0i32;
        let st = unsafe { sys::di_session_sample_token(self.raw(), seq, &mut t) };
        self.check("di_session_sample_token", st)?;
        Ok(t)
    }

    /// seq's sampling parameters; None restores the ones it started with.
    pub fn set_sampling(&mut self, seq: u32, params: Option<&SamplingParams>) -> Result<()> {
        let c = params.map(|p| p.to_sys());
        let st = unsafe {
            sys::di_session_seq_set_sampling(self.raw(), seq, c.as_ref().map_or(ptr::null(), |c| c as *const _))
        };
        self.check("di_session_seq_set_sampling", st)
    }

    pub fn seq_length(&mut self, seq: u32) -> Result<u32> {
        let mut n = 0u32;
        let st = unsafe { sys::di_session_seq_length(self.raw(), seq, &mut n) };
        self.check("di_session_seq_length", st)?;
        Ok(n)
    }

    /// The digest of seq's stepped tokens followed by `extra` (not stepped):
    /// with a generation's last chosen token, its sequence digest.
    pub fn seq_digest(&mut self, seq: u32, extra: &[i32]) -> Result<Digest> {
        let mut d = sys::di_digest::default();
        let st = unsafe { sys::di_session_seq_digest_extra(self.raw(), seq, extra.as_ptr(), extra.len(), &mut d) };
        self.check("di_session_seq_digest_extra", st)?;
        Ok(d.into())
    }

    /// The digest of seq's stepped tokens alone (di_session_seq_digest).
    pub fn seq_digest_stepped(&mut self, seq: u32) -> Result<Digest> {
        let mut d = sys::di_digest::default();
        let st = unsafe { sys::di_session_seq_digest(self.raw(), seq, &mut d) };
        self.check("di_session_seq_digest", st)?;
        Ok(d.into())
    }

    /// Empties seq (a generation's unstepped token included).
    pub fn seq_reset(&mut self, seq: u32) -> Result<()> {
        let st = unsafe { sys::di_session_seq_reset(self.raw(), seq) };
        self.check("di_session_seq_reset", st)?;
        self.pending.remove(&seq);
        Ok(())
    }

    /// Keeps seq's first `length` stepped tokens (a generation's unstepped
    /// token is dropped).
    pub fn seq_truncate(&mut self, seq: u32, length: u32) -> Result<()> {
        let st = unsafe { sys::di_session_seq_truncate(self.raw(), seq, length) };
        self.check("di_session_seq_truncate", st)?;
        self.pending.remove(&seq);
        Ok(())
    }

    /// dst holds the first `length` stepped tokens of src, KV cache included.
    pub fn seq_copy(&mut self, src: u32, dst: u32, length: u32) -> Result<()> {
        let st = unsafe { sys::di_session_seq_copy(self.raw(), src, dst, length) };
        self.check("di_session_seq_copy", st)?;
        self.pending.remove(&dst);
        Ok(())
    }

    /// Steps `prompt` on seq, then one token per step, chosen with the
    /// sequence's sampling parameters (greedy unless `set_sampling` or the
    /// config's sampling keys say otherwise): an iterator of `Result<Generated>`.
    ///
    /// A second `generate` on the same sequence continues the first: it steps
    /// the first one's last chosen token, then `prompt` (which may be empty),
    /// so two calls give the tokens and digest of one long generation.
    /// `seq_reset` first to start afresh.
    pub fn generate<'s>(&'s mut self, seq: u32, prompt: &[i32], max_new: usize, stop_at_eos: bool)
                        -> Generation<'s, 'm> {
        Generation::new(self, seq, prompt, max_new, stop_at_eos)
    }
}
