//! Greedy generation with digests through libdetinfer's C API, from Rust.
//!
//!     cargo run -- MODEL.gguf "The capital of France is" [MAX_NEW]
//!     cargo run -- MODEL.gguf tokens:1,17,42 [MAX_NEW]     (a model without a tokenizer)
//!
//! Prints each generated token with the digest of the logits row it was chosen
//! from, then the sequence digest (prompt and generated tokens): the same lines as examples/generate.c
//! for the same tokens. Only the public API of include/detinfer.h is declared.

use std::ffi::{c_char, c_int, CStr, CString};
use std::ptr;

#[repr(C)]
struct Digest {
    bytes: [u8; 16],
}

enum Model {}
enum Config {}
enum Session {}

const DI_OK: c_int = 0;
const DI_CONFIG_THREADS: c_int = 1;
const DI_CONFIG_CONTEXT_LENGTH: c_int = 3;
const DI_TOKENIZE_ADD_BOS: u32 = 1;

#[link(name = "detinfer")]
extern "C" {
    fn di_status_name(status: c_int) -> *const c_char;
    fn di_version_string() -> *const c_char;
    fn di_model_load(path: *const c_char, out: *mut *mut Model, err: *mut c_char, n: usize) -> c_int;
    fn di_model_free(m: *mut Model);
    fn di_model_tokenize(m: *const Model, text: *const c_char, len: usize, flags: u32, tokens: *mut i32,
                         cap: usize, n: *mut usize, err: *mut c_char, errn: usize) -> c_int;
    fn di_model_detokenize(m: *const Model, tokens: *const i32, n: usize, text: *mut c_char, cap: usize,
                           len: *mut usize, err: *mut c_char, errn: usize) -> c_int;
    fn di_config_create(out: *mut *mut Config) -> c_int;
    fn di_config_free(c: *mut Config);
    fn di_config_set_int(c: *mut Config, key: c_int, value: i64) -> c_int;
    fn di_session_create(m: *const Model, c: *const Config, out: *mut *mut Session, err: *mut c_char,
                         n: usize) -> c_int;
    fn di_session_free(s: *mut Session);
    fn di_session_errmsg(s: *const Session) -> *const c_char;
    fn di_session_step(s: *mut Session, n: u32, seqs: *const u32, counts: *const u32, tokens: *const i32,
                       flags: u32) -> c_int;
    fn di_session_logits(s: *mut Session, seq: u32, logits: *mut *const f32, digest: *mut Digest) -> c_int;
    fn di_session_greedy_token(s: *mut Session, seq: u32, token: *mut i32) -> c_int;
    fn di_session_seq_length(s: *mut Session, seq: u32, length: *mut u32) -> c_int;
    fn di_session_seq_digest_extra(s: *mut Session, seq: u32, extra: *const i32, n_extra: usize,
                                   digest: *mut Digest) -> c_int;
}

fn hex(d: &Digest) -> String {
    d.bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn check(what: &str, status: c_int, detail: &str) -> Result<(), String> {
    if status == DI_OK {
        return Ok(());
    }
    let name = unsafe { CStr::from_ptr(di_status_name(status)) }.to_string_lossy();
    Err(format!("{what}: {name}: {detail}"))
}

fn message(buf: &[c_char]) -> String {
    unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned()
}

fn run(path: &str, prompt: &str, max_new: usize) -> Result<(), String> {
    let mut err = [0 as c_char; 512];
    let mut model: *mut Model = ptr::null_mut();
    let cpath = CString::new(path).map_err(|e| e.to_string())?;
    let st = unsafe { di_model_load(cpath.as_ptr(), &mut model, err.as_mut_ptr(), err.len()) };
    check("loading the model", st, &message(&err))?;

    let result = prompt_tokens(model, prompt).and_then(|tokens| generate(model, &tokens, max_new));
    unsafe { di_model_free(model) };
    result
}

/// The prompt's token ids: "tokens:1,2,3" as given, otherwise the tokenizer's.
fn prompt_tokens(model: *mut Model, prompt: &str) -> Result<Vec<i32>, String> {
    if let Some(list) = prompt.strip_prefix("tokens:") {
        return list.split(',').map(|t| t.trim().parse::<i32>().map_err(|e| format!("{t:?}: {e}"))).collect();
    }
    let mut err = [0 as c_char; 512];
    let mut tokens = vec![0i32; prompt.len() + 8];
    let mut n = 0usize;
    let st = unsafe {
        di_model_tokenize(model, prompt.as_ptr() as *const c_char, prompt.len(), DI_TOKENIZE_ADD_BOS,
                          tokens.as_mut_ptr(), tokens.len(), &mut n, err.as_mut_ptr(), err.len())
    };
    check("tokenizing", st, &message(&err))?;
    tokens.truncate(n);
    Ok(tokens)
}

fn generate(model: *mut Model, prompt: &[i32], max_new: usize) -> Result<(), String> {
    let mut err = [0 as c_char; 512];
    let mut config: *mut Config = ptr::null_mut();
    let mut session: *mut Session = ptr::null_mut();
    unsafe {
        check("config", di_config_create(&mut config), "out of memory")?;
        di_config_set_int(config, DI_CONFIG_THREADS, 2);
        di_config_set_int(config, DI_CONFIG_CONTEXT_LENGTH, (prompt.len() + max_new + 1) as i64);
        let st = di_session_create(model, config, &mut session, err.as_mut_ptr(), err.len());
        di_config_free(config);
        check("creating the session", st, &message(&err))?;
    }
    let seq = 0u32;
    let mut feed: Vec<i32> = prompt.to_vec();
    let mut generated = Vec::new();
    let mut result = Ok(());
    for step in 0..max_new {
        let count = feed.len() as u32;
        let st = unsafe { di_session_step(session, 1, &seq, &count, feed.as_ptr(), 0) };
        let detail = unsafe { CStr::from_ptr(di_session_errmsg(session)) }.to_string_lossy().into_owned();
        if let Err(e) = check("step", st, &detail) {
            result = Err(e);
            break;
        }
        let mut logits: *const f32 = ptr::null();
        let mut digest = Digest { bytes: [0; 16] };
        let mut next = 0i32;
        unsafe {
            di_session_logits(session, seq, &mut logits, &mut digest);
            di_session_greedy_token(session, seq, &mut next);
        }
        println!("step {step} token {next} logits {}", hex(&digest));
        generated.push(next);
        feed = vec![next];
    }
    if result.is_ok() {
        let mut text = vec![0 as c_char; 4096];
        let mut len = 0usize;
        let mut digest = Digest { bytes: [0; 16] };
        let mut length = 0u32;
        // The sequence digest of the generation: the stepped tokens followed by
        // those never stepped (the last chosen one; the prompt when max_new is 0).
        unsafe {
            di_model_detokenize(model, generated.as_ptr(), generated.len(), text.as_mut_ptr(), text.len(),
                                &mut len, err.as_mut_ptr(), err.len());
            di_session_seq_length(session, seq, &mut length);
            di_session_seq_digest_extra(session, seq, feed.as_ptr(), feed.len(), &mut digest);
        }
        println!("text {:?}", message(&text));
        println!("sequence {} tokens digest {}", length as usize + feed.len(), hex(&digest));
    }
    unsafe { di_session_free(session) };
    result
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: detinfer-example MODEL.gguf (PROMPT | tokens:1,2,3) [MAX_NEW]");
        std::process::exit(2);
    }
    let max_new = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(16);
    let version = unsafe { CStr::from_ptr(di_version_string()) }.to_string_lossy();
    println!("libdetinfer {version}");
    if let Err(e) = run(&args[1], &args[2], max_new) {
        eprintln!("detinfer-example: {e}");
        std::process::exit(1);
    }
}
