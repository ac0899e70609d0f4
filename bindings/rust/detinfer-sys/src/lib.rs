//! Raw declarations of libdetinfer's C API, one for one with
//! include/detinfer.h (the whole contract: read it for ownership, lifetimes,
//! thread safety and every status). The safe wrapper is the `detinfer` crate.
#![allow(non_camel_case_types)]
#![no_std]

use core::ffi::{c_char, c_double, c_int};

/// Opaque handles.
#[repr(C)]
pub struct di_model {
    _private: [u8; 0],
}
#[repr(C)]
pub struct di_config {
    _private: [u8; 0],
}
#[repr(C)]
pub struct di_session {
    _private: [u8; 0],
}
#[repr(C)]
pub struct di_grammar {
    _private: [u8; 0],
}
#[repr(C)]
pub struct di_drafter {
    _private: [u8; 0],
}

/// C enums are passed as int; their values are numbered and never renumbered.
pub type di_status = c_int;
pub type di_model_key = c_int;
pub type di_special_token = c_int;
pub type di_config_key = c_int;
pub type di_cpu_path = c_int;
pub type di_backend = c_int;
pub type di_profile = c_int;

pub const DI_VERSION_MAJOR: u32 = 0;
pub const DI_VERSION_MINOR: u32 = 4;
pub const DI_VERSION_PATCH: u32 = 0;
pub const DI_VERSION_NUMBER: u32 = DI_VERSION_MAJOR * 10000 + DI_VERSION_MINOR * 100 + DI_VERSION_PATCH;
pub const DI_ABI_VERSION: u32 = 1;

pub const DI_OK: di_status = 0;
pub const DI_ERR_INVALID_ARGUMENT: di_status = 1;
pub const DI_ERR_OUT_OF_MEMORY: di_status = 2;
pub const DI_ERR_IO: di_status = 3;
pub const DI_ERR_FORMAT: di_status = 4;
pub const DI_ERR_UNSUPPORTED: di_status = 5;
pub const DI_ERR_MODEL: di_status = 6;
pub const DI_ERR_SAMPLING_REFUSED: di_status = 7;
pub const DI_ERR_TOKEN_RANGE: di_status = 8;
pub const DI_ERR_CONTEXT_FULL: di_status = 9;
pub const DI_ERR_SEQUENCE: di_status = 10;
pub const DI_ERR_STATE: di_status = 11;
pub const DI_ERR_BACKEND_UNAVAILABLE: di_status = 12;
pub const DI_ERR_THREAD: di_status = 13;
pub const DI_ERR_UNKNOWN_KEY: di_status = 14;
pub const DI_ERR_INTERNAL: di_status = 15;
pub const DI_ERR_BUFFER_TOO_SMALL: di_status = 16;
pub const DI_ERR_TEXT: di_status = 17;
pub const DI_ERR_GRAMMAR: di_status = 18;
pub const DI_ERR_GRAMMAR_REJECTED: di_status = 19;

pub const DI_GRAMMAR_ACTIVE: u32 = 0x1;
pub const DI_GRAMMAR_CAN_END: u32 = 0x2;
pub const DI_GRAMMAR_MUST_END: u32 = 0x4;
pub const DI_GRAMMAR_ENDED: u32 = 0x8;

pub const DI_MODEL_N_VOCAB: di_model_key = 1;
pub const DI_MODEL_N_CTX_TRAIN: di_model_key = 2;
pub const DI_MODEL_N_EMBD: di_model_key = 3;
pub const DI_MODEL_N_LAYER: di_model_key = 4;
pub const DI_MODEL_N_HEAD: di_model_key = 5;
pub const DI_MODEL_N_HEAD_KV: di_model_key = 6;
pub const DI_MODEL_N_FF: di_model_key = 7;
pub const DI_MODEL_N_PARAMS: di_model_key = 8;
pub const DI_MODEL_FILE_SIZE: di_model_key = 9;
pub const DI_MODEL_BYTES_PER_TOKEN: di_model_key = 10;

pub const DI_TOKENIZE_ADD_BOS: u32 = 0x1;
pub const DI_TOKENIZE_PARSE_SPECIAL: u32 = 0x2;

pub const DI_TOKEN_BOS: di_special_token = 1;
pub const DI_TOKEN_EOS: di_special_token = 2;

pub const DI_CONFIG_THREADS: di_config_key = 1;
pub const DI_CONFIG_MAX_SEQUENCES: di_config_key = 2;
pub const DI_CONFIG_CONTEXT_LENGTH: di_config_key = 3;
pub const DI_CONFIG_BACKEND: di_config_key = 4;
pub const DI_CONFIG_PROFILE: di_config_key = 5;
pub const DI_CONFIG_TEMPERATURE: di_config_key = 6;
pub const DI_CONFIG_DO_SAMPLE: di_config_key = 7;
pub const DI_CONFIG_TOP_P: di_config_key = 8;
pub const DI_CONFIG_TOP_K: di_config_key = 9;
pub const DI_CONFIG_REPETITION_PENALTY: di_config_key = 10;
pub const DI_CONFIG_SEED: di_config_key = 11;
pub const DI_CONFIG_CPU_PATH: di_config_key = 12;
pub const DI_CONFIG_DEVICE: di_config_key = 13;
pub const DI_CONFIG_ALLOW_LONG_CONTEXT: di_config_key = 14;

pub const DI_CPU_PATH_AUTO: di_cpu_path = 0;
pub const DI_CPU_PATH_SCALAR: di_cpu_path = 1;
pub const DI_CPU_PATH_AVX2: di_cpu_path = 2;
pub const DI_CPU_PATH_AVX512: di_cpu_path = 3;

pub const DI_BACKEND_CPU: di_backend = 1;
pub const DI_BACKEND_CUDA: di_backend = 2;

pub const DI_PROFILE_PORTABLE: di_profile = 1;
pub const DI_PROFILE_DEVICE: di_profile = 2;
pub const DI_PROFILE_INTEGER: di_profile = 3;

pub const DI_STEP_ALL_LOGITS: u32 = 0x1;

pub const DI_DRAFT_MAX: u32 = 32;
pub const DI_DRAFT_MAX_NGRAM: u32 = 8;
pub const DI_DRAFT_DEFAULT: u32 = 3;
pub const DI_DRAFT_NGRAM_DEFAULT: u32 = 3;

/// XXH3-128 in canonical (big-endian) byte order; never grows.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct di_digest {
    pub bytes: [u8; 16],
}

pub const DI_DIGEST_HEX_SIZE: usize = 33;

/// Size-first: set with di_sampling_params_init, or fill every field and set
/// `size` to `size_of::<di_sampling_params>()`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct di_sampling_params {
    pub size: u32,
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

extern "C" {
    pub fn di_status_name(status: di_status) -> *const c_char;
    pub fn di_version_number() -> u32;
    pub fn di_version_string() -> *const c_char;
    pub fn di_build_info() -> *const c_char;

    pub fn di_digest_format(digest: *const di_digest, out: *mut c_char) -> di_status;
    pub fn di_digest_equal(a: *const di_digest, b: *const di_digest) -> c_int;
    pub fn di_digest_floats(values: *const f32, n: usize, out: *mut di_digest) -> di_status;
    pub fn di_digest_tokens(tokens: *const i32, n: usize, out: *mut di_digest) -> di_status;

    pub fn di_model_load(path: *const c_char, out: *mut *mut di_model, errbuf: *mut c_char,
                         errbuf_size: usize) -> di_status;
    pub fn di_model_free(model: *mut di_model);
    pub fn di_model_get_int(model: *const di_model, key: di_model_key, out: *mut i64) -> di_status;
    pub fn di_model_architecture(model: *const di_model) -> *const c_char;

    pub fn di_model_tokenize(model: *const di_model, text: *const c_char, text_len: usize, flags: u32,
                             tokens: *mut i32, capacity: usize, n_tokens: *mut usize, errbuf: *mut c_char,
                             errbuf_size: usize) -> di_status;
    pub fn di_model_detokenize(model: *const di_model, tokens: *const i32, n_tokens: usize, text: *mut c_char,
                               capacity: usize, text_len: *mut usize, errbuf: *mut c_char,
                               errbuf_size: usize) -> di_status;
    pub fn di_model_token_piece(model: *const di_model, token: i32, text: *mut c_char, capacity: usize,
                                text_len: *mut usize) -> di_status;
    pub fn di_model_special_token(model: *const di_model, which: di_special_token, token: *mut i32) -> di_status;

    pub fn di_config_create(out: *mut *mut di_config) -> di_status;
    pub fn di_config_free(config: *mut di_config);
    pub fn di_config_set_int(config: *mut di_config, key: di_config_key, value: i64) -> di_status;
    pub fn di_config_set_float(config: *mut di_config, key: di_config_key, value: c_double) -> di_status;
    pub fn di_config_get_int(config: *const di_config, key: di_config_key, out: *mut i64) -> di_status;
    pub fn di_config_get_float(config: *const di_config, key: di_config_key, out: *mut c_double) -> di_status;
    pub fn di_config_errmsg(config: *const di_config) -> *const c_char;

    pub fn di_session_create(model: *const di_model, config: *const di_config, out: *mut *mut di_session,
                             errbuf: *mut c_char, errbuf_size: usize) -> di_status;
    pub fn di_session_free(session: *mut di_session);
    pub fn di_session_errmsg(session: *const di_session) -> *const c_char;
    pub fn di_session_backend_info(session: *const di_session) -> *const c_char;
    pub fn di_session_step(session: *mut di_session, n_entries: u32, seq_ids: *const u32, n_tokens: *const u32,
                           tokens: *const i32, flags: u32) -> di_status;
    pub fn di_session_logits(session: *mut di_session, seq: u32, logits: *mut *const f32,
                             digest: *mut di_digest) -> di_status;
    pub fn di_session_logits_at(session: *mut di_session, seq: u32, index: u32, logits: *mut *const f32,
                                digest: *mut di_digest) -> di_status;
    pub fn di_session_greedy_token(session: *mut di_session, seq: u32, token: *mut i32) -> di_status;
    pub fn di_session_seq_length(session: *mut di_session, seq: u32, length: *mut u32) -> di_status;
    pub fn di_session_seq_digest(session: *mut di_session, seq: u32, digest: *mut di_digest) -> di_status;
    pub fn di_session_seq_reset(session: *mut di_session, seq: u32) -> di_status;
    pub fn di_session_seq_truncate(session: *mut di_session, seq: u32, length: u32) -> di_status;
    pub fn di_session_seq_copy(session: *mut di_session, src: u32, dst: u32, length: u32) -> di_status;

    // DETINFER_1.2
    pub fn di_session_seq_digest_extra(session: *mut di_session, seq: u32, extra: *const i32, n_extra: usize,
                                       digest: *mut di_digest) -> di_status;
    pub fn di_sampling_params_init(params: *mut di_sampling_params) -> di_status;
    pub fn di_session_seq_set_sampling(session: *mut di_session, seq: u32,
                                       params: *const di_sampling_params) -> di_status;
    pub fn di_session_sample_token(session: *mut di_session, seq: u32, token: *mut i32) -> di_status;
    pub fn di_model_token_lookup(model: *const di_model, text: *const c_char, text_len: usize,
                                 token: *mut i32) -> di_status;
    pub fn di_model_meta_string(model: *const di_model, key: *const c_char, text: *mut c_char, capacity: usize,
                                text_len: *mut usize) -> di_status;
    pub fn di_model_chat_template(model: *const di_model) -> *const c_char;
    pub fn di_chat_format(template_name: *const c_char, roles: *const *const c_char,
                          contents: *const *const c_char, n_messages: usize, add_assistant: c_int,
                          text: *mut c_char, capacity: usize, text_len: *mut usize, errbuf: *mut c_char,
                          errbuf_size: usize) -> di_status;

    // DETINFER_1.3
    pub fn di_cpu_path_resolve(requested: di_cpu_path, path: *mut di_cpu_path, errbuf: *mut c_char,
                               errbuf_size: usize) -> di_status;
    pub fn di_cpu_path_name(path: di_cpu_path) -> *const c_char;
    pub fn di_session_kv_bytes(session: *mut di_session, bytes: *mut u64) -> di_status;
    pub fn di_session_logprobs(session: *mut di_session, seq: u32, token: i32, token_logprob: *mut f32, n_top: u32,
                               top_tokens: *mut i32, top_logprobs: *mut f32) -> di_status;

    // DETINFER_1.4
    pub fn di_chat_tokenize(model: *const di_model, template_name: *const c_char, roles: *const *const c_char,
                            contents: *const *const c_char, n_messages: usize, add_assistant: c_int, flags: u32,
                            tokens: *mut i32, capacity: usize, n_tokens: *mut usize, errbuf: *mut c_char,
                            errbuf_size: usize) -> di_status;
    pub fn di_chat_turn_end(template_name: *const c_char) -> *const c_char;

    // DETINFER_1.5
    pub fn di_grammar_from_gbnf(text: *const c_char, text_len: usize, flags: u32, out: *mut *mut di_grammar,
                                errbuf: *mut c_char, errbuf_size: usize) -> di_status;
    pub fn di_grammar_from_json_schema(schema: *const c_char, schema_len: usize, flags: u32,
                                       out: *mut *mut di_grammar, errbuf: *mut c_char, errbuf_size: usize)
                                       -> di_status;
    pub fn di_grammar_free(grammar: *mut di_grammar);
    pub fn di_grammar_gbnf(grammar: *const di_grammar, text: *mut c_char, capacity: usize, text_len: *mut usize)
                           -> di_status;
    pub fn di_grammar_digest(grammar: *const di_grammar, digest: *mut di_digest) -> di_status;
    pub fn di_session_seq_set_grammar(session: *mut di_session, seq: u32, grammar: *const di_grammar,
                                      end_tokens: *const i32, n_end_tokens: usize) -> di_status;
    pub fn di_session_seq_grammar_state(session: *mut di_session, seq: u32, flags: *mut u32) -> di_status;
    pub fn di_session_seq_grammar_allowed(session: *mut di_session, seq: u32, words: *mut u32, n_words: usize)
                                          -> di_status;

    // DETINFER_1.6
    pub fn di_session_logprobs_at(session: *mut di_session, seq: u32, index: u32, token: i32,
                                  token_logprob: *mut f32, n_top: u32, top_tokens: *mut i32,
                                  top_logprobs: *mut f32) -> di_status;
    pub fn di_session_seq_accept_draft(session: *mut di_session, seq: u32, n_draft: u32, n_accepted: *mut u32,
                                       next: *mut i32) -> di_status;
    pub fn di_session_seq_draft_lookup(session: *mut di_session, seq: u32, next: i32, ngram: u32, max_draft: u32,
                                       draft: *mut i32, n_draft: *mut u32) -> di_status;
    pub fn di_drafter_create(model: *const di_model, draft: *const di_model, config: *const di_config,
                             out: *mut *mut di_drafter, errbuf: *mut c_char, errbuf_size: usize) -> di_status;
    pub fn di_drafter_free(drafter: *mut di_drafter);
    pub fn di_drafter_errmsg(drafter: *const di_drafter) -> *const c_char;
    pub fn di_drafter_propose(drafter: *mut di_drafter, session: *mut di_session, seq: u32, next: i32,
                              max_draft: u32, draft: *mut i32, n_draft: *mut u32) -> di_status;
}
