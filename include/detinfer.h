/*
 * detinfer.h — the whole public contract of libdetinfer.
 *
 * libdetinfer runs a large language model stored in a GGUF file and promises
 * that the logits of every position, and the greedy token chosen from them,
 * are bitwise identical for a given model file, numerics profile and token
 * sequence, whatever else happens around that sequence: batch size and
 * composition, chunking of the prompt, thread count. docs/DETERMINISM.md
 * states the evaluation order that makes this true.
 *
 * Every logits row carries an XXH3-128 digest of its little-endian float32
 * bytes, and every sequence a digest of its int32 token ids, so two
 * deployments compare 32 hex characters instead of arguing.
 *
 * If a function, type or macro does not appear in this file, it is not part
 * of the published API.
 *
 * ---------------------------------------------------------------------------
 * Contents: the sections below, in order (each opens with "---- Name")
 *   Version                 release, ABI and numerics numbers; build info
 *   Status codes            di_status, di_status_name
 *   Handles                 the opaque types every section uses
 *   Model                   loading a GGUF file; its facts, metadata and
 *                           special tokens
 *   Tokenizer and chat      text to tokens and back; chat templates
 *   Configuration           di_config and its keys
 *   Session and steps       di_session, the batch step, logits, greedy token
 *   Sequences               length, digest, reset, truncate, copy
 *   Grammars                structured output: di_grammar, per-sequence grammars
 *   Sampling and logprobs   di_sampling_params, sampling, log-probabilities
 *   Speculative decoding    drafts verified in one step, bit for bit
 *   Digests                 di_digest; the digests of floats and token ids
 *   CPU paths and backends  di_cpu_path, di_backend, di_profile; what runs a
 *                           session
 *
 * Versions
 *   A declaration marked "(since 1.N)" came with the symbol version node
 *   DETINFER_1.N of lib/detinfer.map, which is the authority (docs/ABI.md);
 *   the unmarked ones are DETINFER_1.0. A program that calls a function needs
 *   a library with its node.
 *
 * Handles, ownership and lifetimes
 *   di_model    immutable weights of one GGUF file (memory-mapped). Created by
 *               di_model_load, freed by di_model_free. It must outlive every
 *               session created from it.
 *   di_config   a bag of settings. Created by di_config_create, freed by
 *               di_config_free. A session copies the settings it needs at
 *               creation; the config may be changed or freed afterwards.
 *   di_session  up to N sequences, each with its own KV cache and token
 *               history, plus the per-sequence results of the last step.
 *               Created by di_session_create, freed by di_session_free.
 *   di_grammar  a compiled grammar, immutable (since 1.5). Created by
 *               di_grammar_from_gbnf or di_grammar_from_json_schema, freed by
 *               di_grammar_free; a session that uses it keeps its own
 *               reference.
 *   di_drafter  a draft model's session for speculative decoding (since 1.6).
 *               Created by di_drafter_create, freed by di_drafter_free; both
 *               models must outlive it.
 *   Every *_free accepts NULL and does nothing.
 *
 * Thread safety
 *   - di_model: after di_model_load returns, every call taking a
 *     `const di_model *` may be made from any number of threads at once, and
 *     any number of sessions (in any threads) may share one model.
 *   - di_config and di_session: one thread at a time per handle. Different
 *     handles may be used concurrently from different threads.
 *   - Functions without a handle (version, status names, digests) are
 *     thread-safe.
 *
 * Errors
 *   Every fallible call returns a di_status. DI_OK is 0; the other codes are
 *   numbered and are never renumbered or reused. di_status_name() names a
 *   code. A handle keeps a human-readable message with the detail of its
 *   last failure (di_config_errmsg, di_session_errmsg). Calls that create a
 *   handle take an optional caller buffer (errbuf, errbuf_size) that receives
 *   the message when creation fails; the buffer is always NUL-terminated when
 *   errbuf_size > 0. The library never calls exit() or abort() and never
 *   prints.
 *
 * Numbers
 *   Token ids are int32_t. Sequence ids are uint32_t in [0, max_sequences).
 * ---------------------------------------------------------------------------
 */
#ifndef DETINFER_H
#define DETINFER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Version -------------------------------------------------------------
 * The release number lives here and only here; the Makefile reads it.
 * DI_ABI_VERSION is the SONAME major (libdetinfer.so.1): it changes only when
 * a published function or type changes incompatibly, never with a release.
 * Compare DI_VERSION_NUMBER (the header you compiled with) against
 * di_version_number() (the library you loaded). */
#define DI_VERSION_MAJOR 0
#define DI_VERSION_MINOR 4
#define DI_VERSION_PATCH 0
#define DI_VERSION_NUMBER (DI_VERSION_MAJOR * 10000 + DI_VERSION_MINOR * 100 + DI_VERSION_PATCH)
#define DI_VERSION_STRING "0.4.0"
#define DI_ABI_VERSION 1
/* The numerics version: it changes when, and only when, a release changes
 * the digest of any result on purpose (a new order of operations, a new
 * function in kernels/common/numerics.h), with a CHANGELOG entry that says which results
 * change. Equal numerics versions give equal digests (docs/DETERMINISM.md,
 * "Digests across releases"); di_build_info() names the library's. */
#define DI_NUMERICS_VERSION 1
/* The integer profile's own numerics version (DI_PROFILE_INTEGER: its
 * products, quantization of activations and scales), under the same rule:
 * a digest of the integer profile compares only with one of the same
 * integer numerics version, never with a portable one. */
#define DI_INTEGER_NUMERICS_VERSION 1

#if defined(DI_BUILDING_LIBRARY) && defined(__GNUC__)
#define DI_API __attribute__((visibility("default")))
#else
#define DI_API
#endif

DI_API uint32_t di_version_number(void);   /* DI_VERSION_NUMBER of the library */
DI_API const char *di_version_string(void); /* DI_VERSION_STRING of the library */

/* Compiler, flags and numerics contract the library was built with, as one
 * static line of text (for environment fingerprints and bug reports). */
DI_API const char *di_build_info(void);

/* ---- Status codes (numbered; never renumbered or reused) ----------------- */
typedef enum di_status {
    DI_OK = 0,
    DI_ERR_INVALID_ARGUMENT = 1,    /* NULL pointer, value out of range */
    DI_ERR_OUT_OF_MEMORY = 2,
    DI_ERR_IO = 3,                  /* file cannot be opened, read or mapped */
    DI_ERR_FORMAT = 4,              /* the file is not valid GGUF v3 */
    DI_ERR_UNSUPPORTED = 5,         /* valid, but an architecture, tensor type,
                                       backend or profile this build lacks */
    DI_ERR_MODEL = 6,               /* metadata or tensors missing or inconsistent */
    DI_ERR_SAMPLING_REFUSED = 7,    /* session creation: DI_CONFIG_DO_SAMPLE and
                                       DI_CONFIG_TEMPERATURE disagree */
    DI_ERR_TOKEN_RANGE = 8,         /* a token id outside [0, n_vocab) */
    DI_ERR_CONTEXT_FULL = 9,        /* a sequence would exceed the context length */
    DI_ERR_SEQUENCE = 10,           /* sequence id out of range, repeated in one
                                       step, or an entry with no tokens */
    DI_ERR_STATE = 11,              /* call in the wrong order, e.g. logits of a
                                       sequence that has no step yet */
    DI_ERR_BACKEND_UNAVAILABLE = 12,/* backend not built in, or no device found */
    DI_ERR_THREAD = 13,             /* a worker thread could not be started */
    DI_ERR_UNKNOWN_KEY = 14,        /* configuration or model key unknown, or read
                                       or written with the wrong type */
    DI_ERR_INTERNAL = 15,           /* a bug in libdetinfer; please report it */
    DI_ERR_BUFFER_TOO_SMALL = 16,   /* the caller's buffer is too small; the call
                                       reports the size it needs */
    DI_ERR_TEXT = 17,               /* text is not valid UTF-8 */
    DI_ERR_GRAMMAR = 18,            /* a grammar text or JSON schema is malformed
                                       (the message names the line and column,
                                       or the schema node's JSON pointer), or a
                                       grammar's automaton passed one of its
                                       bounds */
    DI_ERR_GRAMMAR_REJECTED = 19    /* a token the sequence's grammar does not
                                       allow was stepped, or the grammar allows
                                       no token to choose */
} di_status;

/* The name of a status code ("DI_ERR_FORMAT"), or "DI_STATUS_UNKNOWN".
 * The returned string is static. */
DI_API const char *di_status_name(di_status status);

/* ---- Handles --------------------------------------------------------------
 * Opaque: their layout is private (see "Handles, ownership and lifetimes"
 * above). di_digest is a value of 16 bytes, defined under Digests. */
typedef struct di_model di_model;
typedef struct di_config di_config;
typedef struct di_session di_session;
typedef struct di_grammar di_grammar; /* (since 1.5) */
typedef struct di_drafter di_drafter; /* (since 1.6) */
typedef struct di_digest di_digest;

/* ---- Model ----------------------------------------------------------------
 * Loads a GGUF v3 file. The file is untrusted input: every count, length,
 * dimension and offset is checked, and a bad file gives DI_ERR_FORMAT (bad
 * bytes), DI_ERR_MODEL (missing or mis-shaped tensors, bad hyperparameters)
 * or DI_ERR_UNSUPPORTED (architecture or tensor type not in this build).
 * Supported: architectures "llama", "qwen2", "qwen3", "gemma3", "gemma2",
 * "phi3"; tensor types F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL,
 * Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS (docs/MODELS.md).
 * On failure *out is set to NULL and errbuf (if given) holds the detail. */
DI_API di_status di_model_load(const char *path, di_model **out, char *errbuf, size_t errbuf_size);
DI_API void di_model_free(di_model *model);

/* Integer facts about a loaded model (numbered; never renumbered). */
typedef enum di_model_key {
    DI_MODEL_N_VOCAB = 1,
    DI_MODEL_N_CTX_TRAIN = 2,  /* context length the model was trained with */
    DI_MODEL_N_EMBD = 3,
    DI_MODEL_N_LAYER = 4,
    DI_MODEL_N_HEAD = 5,
    DI_MODEL_N_HEAD_KV = 6,
    DI_MODEL_N_FF = 7,
    DI_MODEL_N_PARAMS = 8,     /* number of weights in all tensors */
    DI_MODEL_FILE_SIZE = 9,    /* bytes */
    DI_MODEL_BYTES_PER_TOKEN = 10 /* bytes a decode step reads from the file: its
                                     size less the rows of an untied token
                                     embedding table beyond the one looked up */
} di_model_key;

/* DI_ERR_UNKNOWN_KEY for an unknown key; DI_ERR_INVALID_ARGUMENT for NULL. */
DI_API di_status di_model_get_int(const di_model *model, di_model_key key, int64_t *out);
/* general.architecture of the file ("llama", "qwen2", "gemma3", ...); valid for
 * the model's life. */
DI_API const char *di_model_architecture(const di_model *model);

/* (since 1.2) A string value of the file's metadata by key ("general.name",
 * "tokenizer.chat_template"), with di_model_detokenize's buffer rules (the
 * value may hold NUL bytes: *text_len counts them). DI_ERR_UNKNOWN_KEY, with
 * *text_len 0, when the key is absent or its value is not a string. */
DI_API di_status di_model_meta_string(const di_model *model, const char *key, char *text,
                                      size_t capacity, size_t *text_len);

/* Special tokens (numbered; never renumbered). */
typedef enum di_special_token {
    DI_TOKEN_BOS = 1,
    DI_TOKEN_EOS = 2
} di_special_token;
/* The id of a special token: the file's, or llama.cpp's default for the
 * tokenizer kind (1/2 for "llama", 11 for "gpt2") when inside the
 * vocabulary; DI_ERR_UNSUPPORTED when there is neither. */
DI_API di_status di_model_special_token(const di_model *model, di_special_token which, int32_t *token);

/* (since 1.2) The id of the token whose text is exactly text_len bytes of text
 * (any kind of token: "<end_of_turn>", "<|eot_id|>", "hello").
 * DI_ERR_TOKEN_RANGE when no token has that text; DI_ERR_UNSUPPORTED without a
 * tokenizer. */
DI_API di_status di_model_token_lookup(const di_model *model, const char *text, size_t text_len,
                                       int32_t *token);

/* ---- Tokenizer and chat ---------------------------------------------------
 * Built at load time from the file's tokenizer.ggml.* metadata: "llama"
 * (SentencePiece-style: scores, byte fallback, the U+2581 space marker) or
 * "gpt2" (byte-level BPE: merges, and the pre-tokenizer named by
 * tokenizer.ggml.pre: llama3, qwen2, default/gpt-2). A model whose file has
 * no tokenizer, another kind, or an unknown pre-tokenizer still loads; these
 * calls then give DI_ERR_UNSUPPORTED. Token ids match llama.cpp's tokenizer
 * with parse_special=false: the text of control tokens (<bos>, <s>) is not
 * parsed as those tokens, while user-defined tokens are matched in the text
 * (DI_TOKENIZE_PARSE_SPECIAL, below, parses control tokens too).
 * docs/TOKENIZER.md states the details. Like every call on a const model
 * these are thread-safe. errbuf (optional) receives the detail of a failure. */

/* Flags of di_model_tokenize (bits; never renumbered). */
#define DI_TOKENIZE_ADD_BOS 0x1u /* add the special tokens the file asks for:
                                    BOS when add_bos_token is set (default true
                                    for "llama" and llama3-family files), EOS
                                    when add_eos_token is set */
#define DI_TOKENIZE_PARSE_SPECIAL 0x2u /* (since 1.2) the text of control and
                                          unknown tokens in the text
                                          ("<start_of_turn>", "<|im_start|>")
                                          gives those tokens too, as llama.cpp's
                                          parse_special=true. Only for text the
                                          caller wrote whole: never for text
                                          holding anything a user wrote, a
                                          di_chat_format prompt included (its
                                          messages could forge turns); a chat
                                          goes through di_chat_tokenize */

/* Encodes text_len bytes of UTF-8 into token ids. When capacity is too small
 * (tokens may be NULL with capacity 0) it gives DI_ERR_BUFFER_TOO_SMALL and
 * *n_tokens is the count needed. Invalid UTF-8 gives DI_ERR_TEXT. */
DI_API di_status di_model_tokenize(const di_model *model, const char *text, size_t text_len,
                                   uint32_t flags, int32_t *tokens, size_t capacity,
                                   size_t *n_tokens, char *errbuf, size_t errbuf_size);
/* Decodes token ids into UTF-8 text (control, unknown and unused tokens such
 * as BOS and EOS give no text; leading-space rules as llama.cpp's, see
 * docs/TOKENIZER.md). Writes *text_len bytes and a NUL when capacity > *text_len;
 * otherwise DI_ERR_BUFFER_TOO_SMALL with *text_len the length needed (without
 * the NUL). A token outside [0, n_vocab) gives DI_ERR_TOKEN_RANGE. */
DI_API di_status di_model_detokenize(const di_model *model, const int32_t *tokens, size_t n_tokens,
                                     char *text, size_t capacity, size_t *text_len, char *errbuf,
                                     size_t errbuf_size);
/* The text of one token as it appears inside decoded text (byte tokens give
 * their byte; control tokens give ""), with the same buffer rules. */
DI_API di_status di_model_token_piece(const di_model *model, int32_t token, char *text,
                                      size_t capacity, size_t *text_len);

/* (since 1.2) The name of the built-in chat template that the file's
 * tokenizer.chat_template is recognised as by llama.cpp's rules ("gemma",
 * "chatml", "llama3", ...: docs/CHAT.md lists them), or NULL when the file
 * has none (base models such as Gemma 3 270M) or it is not recognised as a
 * built-in one. A static string, to pass to di_chat_format. */
DI_API const char *di_model_chat_template(const di_model *model);

/* (since 1.2) Formats n_messages messages (roles[i]: "system", "user" or
 * "assistant"; in the chatml and llama3 templates also "tool", a tool's
 * answer, and "tool_call", a call right after the assistant message that made
 * it, its content the function's name, a newline and the arguments' JSON text:
 * docs/CHAT.md, "Tool turns"; other templates refuse those two; contents[i]:
 * NUL-terminated UTF-8; both arrays may be NULL when n_messages is 0) with the
 * built-in chat template `template_name` into prompt text, byte for byte the
 * text llama.cpp's llama_chat_apply_template gives. With add_assistant != 0 it
 * ends with the opening of the assistant's turn (the [INST] templates open it
 * after every user message, so the flag changes nothing there). Buffer rules
 * as di_model_detokenize. DI_ERR_UNSUPPORTED for an unknown template name,
 * DI_ERR_INVALID_ARGUMENT for an unknown role or an order the template cannot
 * express (gemma: a system message with no user message after it, which
 * llama.cpp would drop), DI_ERR_TEXT for invalid UTF-8; errbuf (optional)
 * receives the detail, naming the message. The text is for display and
 * comparison: to run it, call di_chat_tokenize, which gives its tokens with
 * the template's markers as control tokens and every message as plain text.
 * Tokenizing this text with DI_TOKENIZE_PARSE_SPECIAL would turn marker text
 * inside a message ("<end_of_turn>") into control tokens, so that a user could
 * forge turns. Needs no model; thread-safe. */
DI_API di_status di_chat_format(const char *template_name, const char *const *roles,
                                const char *const *contents, size_t n_messages, int add_assistant,
                                char *text, size_t capacity, size_t *text_len, char *errbuf,
                                size_t errbuf_size);

/* (since 1.4) The tokens of a chat: the messages formatted as di_chat_format
 * formats them, then tokenized so that exactly the template's own markers
 * ("<start_of_turn>", "<|im_end|>") become control tokens, while the content
 * of every message is plain text whatever it holds: a message that says
 * "<end_of_turn>" gives the tokens of those characters, as di_model_tokenize
 * without DI_TOKENIZE_PARSE_SPECIAL gives them. (For messages without such
 * text the ids are those of the formatted text tokenized with
 * DI_TOKENIZE_PARSE_SPECIAL, llama.cpp's chat prompt.) flags: 0 or
 * DI_TOKENIZE_ADD_BOS (the model's BOS first, when its file asks for one); any
 * other bit is DI_ERR_INVALID_ARGUMENT. Buffer rules, errors and errbuf as
 * di_chat_format and di_model_tokenize: DI_ERR_BUFFER_TOO_SMALL sets *n_tokens
 * to the count needed. Thread-safe. */
DI_API di_status di_chat_tokenize(const di_model *model, const char *template_name, const char *const *roles,
                                  const char *const *contents, size_t n_messages, int add_assistant,
                                  uint32_t flags, int32_t *tokens, size_t capacity, size_t *n_tokens,
                                  char *errbuf, size_t errbuf_size);

/* (since 1.4) The text of the token that ends a turn in the built-in chat
 * template `template_name` ("<end_of_turn>" for gemma, "<|im_end|>" for
 * chatml, "<|eot_id|>" for llama3, "<|end|>" for phi3, "</s>" for the [INST]
 * templates: docs/CHAT.md), to look up with di_model_token_lookup and stop
 * generation at; NULL for an unknown name. A static string; thread-safe. */
DI_API const char *di_chat_turn_end(const char *template_name);

/* ---- Configuration --------------------------------------------------------
 * Settings are enum-keyed (numbered; never renumbered). Each key has a type:
 * integer keys are set with di_config_set_int, float keys with
 * di_config_set_float; the wrong one gives DI_ERR_UNKNOWN_KEY. A value that
 * is out of range gives DI_ERR_INVALID_ARGUMENT and leaves the setting as it
 * was. Defaults are listed beside each key.
 * The values of DI_CONFIG_BACKEND, DI_CONFIG_PROFILE and DI_CONFIG_CPU_PATH
 * are under "CPU paths and backends", at the end. */
typedef enum di_config_key {
    DI_CONFIG_THREADS = 1,          /* int, 1..256; default 1. Results do not
                                       depend on it. */
    DI_CONFIG_MAX_SEQUENCES = 2,    /* int, 1..4096; default 1 */
    DI_CONFIG_CONTEXT_LENGTH = 3,   /* int, 0..(1<<24); 0 (default) means the
                                       model's training context, capped at 4096.
                                       The most tokens a sequence may hold: a
                                       limit, not a reservation (see "Memory"
                                       at di_session_create). Longer than the
                                       model's training context
                                       (DI_MODEL_N_CTX_TRAIN), session creation
                                       gives DI_ERR_INVALID_ARGUMENT unless
                                       DI_CONFIG_ALLOW_LONG_CONTEXT is 1. */
    DI_CONFIG_BACKEND = 4,          /* int, a di_backend; default DI_BACKEND_CPU */
    DI_CONFIG_PROFILE = 5,          /* int, a di_profile; default DI_PROFILE_PORTABLE */
    /* The sampling keys: the di_sampling_params every sequence of a session
     * created with this config starts with (the other fields at their
     * defaults); di_session_seq_set_sampling changes them per sequence. The
     * values follow di_sampling_params' rules. do_sample and temperature must
     * agree (both 0, or do_sample 1 with temperature > 0), else
     * di_session_create gives DI_ERR_SAMPLING_REFUSED. */
    DI_CONFIG_TEMPERATURE = 6,      /* float, >= 0; default 0 (greedy) */
    DI_CONFIG_DO_SAMPLE = 7,        /* int, 0 or 1; default 0 */
    DI_CONFIG_TOP_P = 8,            /* float, (0, 1]; default 1 (no cut) */
    DI_CONFIG_TOP_K = 9,            /* int, 0..INT32_MAX; default 0 (no cut) */
    DI_CONFIG_REPETITION_PENALTY = 10, /* float, > 0; default 1 (none) */
    DI_CONFIG_SEED = 11,            /* int, any (its 64 bits are the seed); default 0 */
    DI_CONFIG_CPU_PATH = 12,        /* int, a di_cpu_path; default DI_CPU_PATH_AUTO.
                                       Every path gives the same bits; this
                                       only chooses the instructions. */
    DI_CONFIG_DEVICE = 13,          /* int, 0..255: the CUDA device ordinal;
                                       default 0 */
    DI_CONFIG_ALLOW_LONG_CONTEXT = 14 /* int, 0 or 1; default 0. 1 accepts a
                                       DI_CONFIG_CONTEXT_LENGTH beyond the
                                       model's training context: positions the
                                       model never saw in training, whose
                                       results are deterministic but whose
                                       quality the model does not promise. */
} di_config_key;

DI_API di_status di_config_create(di_config **out);
DI_API void di_config_free(di_config *config);
DI_API di_status di_config_set_int(di_config *config, di_config_key key, int64_t value);
DI_API di_status di_config_set_float(di_config *config, di_config_key key, double value);
DI_API di_status di_config_get_int(const di_config *config, di_config_key key, int64_t *out);
DI_API di_status di_config_get_float(const di_config *config, di_config_key key, double *out);
/* Detail of the last failed call on this config; "" when none. Valid until
 * the next call on the config. */
DI_API const char *di_config_errmsg(const di_config *config);

/* ---- Session and steps ----------------------------------------------------
 * config may be NULL (all defaults). The session copies what it needs from
 * config and keeps a pointer to model, which must outlive it.
 *
 * Memory. On the CPU backend a session reserves at creation only what does
 * not depend on the context length: the activations and scratch of one slice
 * of 64 rows, a logits buffer, and one small record per sequence. What
 * depends on lengths grows during di_session_step, and only with the
 * sequences that are stepped:
 *   - each sequence's KV cache and token history, for the positions it holds,
 *     doubling from 64 positions up to the context length (for a model of
 *     n_layer layers and n_head_kv x head_dim key width, a position takes
 *     2 x n_layer x n_head_kv x head_dim x 4 bytes of cache);
 *   - the RoPE tables and attention scratch, for the longest sequence so far;
 *   - the logits of a DI_STEP_ALL_LOGITS step, for its rows.
 * A sequence emptied by di_session_seq_reset (or truncated to 0) frees its
 * cache; a longer truncation keeps it; di_session_seq_copy grows dst. Growth
 * never changes a result's bits. When memory runs out during growth the step
 * (or copy) gives DI_ERR_OUT_OF_MEMORY and, being all or nothing, changes no
 * sequence. The CUDA backend reserves its device KV caches for
 * max_sequences x context_length positions (and the RoPE tables of every
 * position) at creation. di_session_kv_bytes reports the KV cache held. */
DI_API di_status di_session_create(const di_model *model, const di_config *config,
                                   di_session **out, char *errbuf, size_t errbuf_size);
DI_API void di_session_free(di_session *session);
/* Detail of the last failed call on this session; "" when none. Valid until
 * the next call on the session. */
DI_API const char *di_session_errmsg(const di_session *session);

/* Step flags (bits; never renumbered). */
#define DI_STEP_ALL_LOGITS 0x1u /* keep the logits of every position of the
                                   step, not only the last one per sequence */

/* One step advances n_entries sequences at once. Entry i appends
 * n_tokens[i] >= 1 tokens to sequence seq_ids[i]; the tokens of all entries
 * are concatenated in entry order in `tokens`. A sequence may appear at most
 * once per step. Entries may be prompt chunks or single decode tokens in any
 * mix; nothing one sequence computes depends on the other entries.
 *
 * The step is all or nothing: every entry is checked before any work, and on
 * any error no sequence changes. On success each stepped sequence has, until
 * its next step (or reset, truncate, copy onto it):
 *   - the logits of its last position, their digest and the greedy token
 *     (di_session_logits, di_session_greedy_token);
 *   - with DI_STEP_ALL_LOGITS, the logits of each position it appended in
 *     this step (di_session_logits_at), valid until the next step of the
 *     session.
 * The greedy token is not appended: feed it to the next step to continue.
 * Only a device failure during the computation (CUDA backend: a CUDA error,
 * reported as DI_ERR_INTERNAL or DI_ERR_OUT_OF_MEMORY with the device's
 * message) can stop a step half done; the stepped sequences are then
 * undefined and must be reset. */
DI_API di_status di_session_step(di_session *session, uint32_t n_entries, const uint32_t *seq_ids,
                                 const uint32_t *n_tokens, const int32_t *tokens, uint32_t flags);

/* Logits of the last position of sequence seq's last step: *logits points to
 * n_vocab floats owned by the session (see di_session_step for how long they
 * stay valid); *digest (optional) receives their digest. A NaN logit is
 * always the quiet NaN with bits 0x7fc00000, whatever produced it. DI_ERR_STATE when
 * the sequence has no step since creation or its last reset. */
DI_API di_status di_session_logits(di_session *session, uint32_t seq, const float **logits,
                                   di_digest *digest);
/* Logits of position `index` (0-based within what seq appended in the
 * session's last step, which must have used DI_STEP_ALL_LOGITS). */
DI_API di_status di_session_logits_at(di_session *session, uint32_t seq, uint32_t index,
                                      const float **logits, di_digest *digest);
/* The greedy token of seq's last position: the lowest token id among those
 * with the largest logit (NaN logits are never chosen; a row of only NaN
 * gives token 0). It ignores the sequence's sampling parameters (see
 * di_session_sample_token). With a grammar (di_session_seq_set_grammar) it
 * chooses among the tokens the grammar allows only; a program that never
 * sets a grammar sees no change. */
DI_API di_status di_session_greedy_token(di_session *session, uint32_t seq, int32_t *token);

/* (since 1.3) Bytes of KV cache (the keys and values of every layer) the
 * session holds now, in *bytes: on the CPU backend the sum over its sequences,
 * which grows as they grow and falls when they are reset (see "Memory" above);
 * on the CUDA backend the device caches reserved at creation. */
DI_API di_status di_session_kv_bytes(di_session *session, uint64_t *bytes);

/* ---- Sequences -------------------------------------------------------- */
/* Number of tokens in sequence seq (its KV cache length). */
DI_API di_status di_session_seq_length(di_session *session, uint32_t seq, uint32_t *length);
/* Digest of every token id appended to seq so far, in order (an empty
 * sequence has the digest of zero bytes). */
DI_API di_status di_session_seq_digest(di_session *session, uint32_t seq, di_digest *digest);
/* Empties sequence seq. */
DI_API di_status di_session_seq_reset(di_session *session, uint32_t seq);
/* Keeps the first `length` tokens of seq (length <= current length). */
DI_API di_status di_session_seq_truncate(di_session *session, uint32_t seq, uint32_t length);
/* Makes dst hold the first `length` tokens of src, KV cache included, so a
 * shared prefix is computed once (prefix reuse). dst != src. */
DI_API di_status di_session_seq_copy(di_session *session, uint32_t src, uint32_t dst,
                                     uint32_t length);

/* (since 1.2) The sequence digest of a generation is the digest of its
 * prompt's token ids followed by every generated token id, as little-endian
 * int32: what di_digest_tokens gives for that list. A generation usually
 * stops without stepping its last chosen token, so di_session_seq_digest (the
 * tokens stepped so far) lacks it; this call digests seq's tokens followed by
 * n_extra tokens not stepped (extra may be NULL when n_extra is 0). The
 * detinfer command, the server, the bindings and the docs all report this one
 * digest. */
DI_API di_status di_session_seq_digest_extra(di_session *session, uint32_t seq,
                                             const int32_t *extra, size_t n_extra,
                                             di_digest *digest);

/* ---- Grammars -------------------------------------------------------------
 * (since 1.5) A grammar constrains what a sequence may generate: a text in
 * GBNF (llama.cpp's grammar format) or a JSON Schema (the subset of OpenAI's
 * strict mode), both described in docs/STRUCTURED.md. Once a sequence has a
 * grammar, di_session_greedy_token and di_session_sample_token choose only
 * among the tokens it allows next: the mask comes first, then the sampling
 * order (docs/DETERMINISM.md, "Grammars"), so the token depends only on the
 * model, the tokens, the parameters, the seed and the grammar. A token's text
 * is its piece (di_model_token_piece), read as UTF-8; tokens without text (or
 * holding a NUL byte) are never allowed, except the end tokens, allowed
 * exactly when the grammar's text is complete. */

/* (since 1.5) Compiles text_len bytes of GBNF (rule "root" is the start).
 * flags: 0 (any other bit is DI_ERR_INVALID_ARGUMENT). Errors: DI_ERR_GRAMMAR
 * with "line L, column C: what" in errbuf (an undefined rule, an unbalanced
 * bracket, left recursion, which is refused, ...), DI_ERR_OUT_OF_MEMORY. The
 * text is untrusted: its size and the grammar it makes are bounded
 * (docs/STRUCTURED.md). On failure *out is NULL. A grammar is immutable: any
 * number of threads and sessions may use one at once. Thread-safe. */
DI_API di_status di_grammar_from_gbnf(const char *text, size_t text_len, uint32_t flags,
                                      di_grammar **out, char *errbuf, size_t errbuf_size);
/* (since 1.5) Compiles a JSON Schema (schema_len bytes of JSON) into the
 * grammar of the JSON texts it allows, with no whitespace between tokens.
 * flags: 0. Errors: DI_ERR_GRAMMAR (malformed JSON, with line and column; a
 * malformed schema or one no value satisfies, such as an empty enum or a $ref
 * to nothing, naming the node's JSON pointer), DI_ERR_UNSUPPORTED
 * ("unsupported keyword X at /path", for anything outside the subset),
 * DI_ERR_OUT_OF_MEMORY. {"type": "object"} is any JSON object. Thread-safe. */
DI_API di_status di_grammar_from_json_schema(const char *schema, size_t schema_len, uint32_t flags,
                                             di_grammar **out, char *errbuf, size_t errbuf_size);
/* (since 1.5) Releases the caller's handle; a session that uses the grammar
 * keeps its own reference, so the grammar may be freed right after
 * di_session_seq_set_grammar. */
DI_API void di_grammar_free(di_grammar *grammar);
/* (since 1.5) The grammar's GBNF text (for a JSON schema, the text it was
 * converted to), with di_model_detokenize's buffer rules. */
DI_API di_status di_grammar_gbnf(const di_grammar *grammar, char *text, size_t capacity, size_t *text_len);
/* (since 1.5) XXH3-128 of that GBNF text: equal digests, equal grammars. */
DI_API di_status di_grammar_digest(const di_grammar *grammar, di_digest *digest);

/* (since 1.5) Gives seq the grammar (NULL: none). It starts at the sequence's
 * length now: the tokens already in the sequence (the prompt) are not
 * constrained; each token stepped after must be allowed. The end tokens are
 * the model's end of sequence (when it has one) and the n_end_tokens of
 * end_tokens (the chat template's end of turn: di_chat_turn_end), at most 8;
 * stepping one ends the grammar's text, after which no token is allowed. The
 * grammar belongs to the sequence, as its sampling parameters do, with these
 * rules:
 *   - a step with a token it does not allow gives DI_ERR_GRAMMAR_REJECTED
 *     naming the entry and the token, and changes nothing (all or nothing);
 *   - di_session_seq_truncate to a length at or past the start restores the
 *     grammar's state at that length (the state of every position is kept);
 *     truncating before the start, or di_session_seq_reset, drops it;
 *   - di_session_seq_copy onto seq drops seq's grammar, and never brings the
 *     source's: set it again after the copy;
 *   - setting another grammar (or the same) starts it again at the length.
 * The session keeps each grammar's automaton and allowed-token sets while a
 * sequence uses it (and a few after), so sequences and requests that share
 * a grammar share that work. DI_ERR_UNSUPPORTED for a model without a
 * tokenizer; DI_ERR_TOKEN_RANGE for an end token outside the vocabulary. */
DI_API di_status di_session_seq_set_grammar(di_session *session, uint32_t seq, const di_grammar *grammar,
                                            const int32_t *end_tokens, size_t n_end_tokens);

/* (since 1.5) Flags of di_session_seq_grammar_state (bits; never
 * renumbered). */
#define DI_GRAMMAR_ACTIVE 0x1u   /* the sequence has a grammar */
#define DI_GRAMMAR_CAN_END 0x2u  /* the text since its start is complete: an end token is allowed */
#define DI_GRAMMAR_MUST_END 0x4u /* complete, and no further text is allowed: only an end token */
#define DI_GRAMMAR_ENDED 0x8u    /* an end token was stepped: no token is allowed */

/* (since 1.5) The state of seq's grammar after its tokens so far, as
 * DI_GRAMMAR_* flags (0 without a grammar). */
DI_API di_status di_session_seq_grammar_state(di_session *session, uint32_t seq, uint32_t *flags);

/* (since 1.5) The tokens seq's grammar allows next, as a bit set: token t is
 * bit t % 32 of words[t / 32]; n_words must be at least (n_vocab + 31) / 32.
 * Every token without a grammar. */
DI_API di_status di_session_seq_grammar_allowed(di_session *session, uint32_t seq, uint32_t *words,
                                                size_t n_words);

/* ---- Sampling and logprobs ------------------------------------------------
 * (since 1.2) Each sequence has its own sampling parameters; a service sets
 * them per request. The token chosen for position t depends only on the model,
 * the sequence's tokens before t, the parameters and the seed: never on the
 * batch, the slot, the step count, the thread count, the CPU path or the
 * device. docs/DETERMINISM.md states the canonical sampling order and the
 * random number rule (Philox4x32-10 keyed by the seed and t):
 *   1. penalties over the window (each id in it once, with its count):
 *      l = l > 0 ? l / repetition_penalty : l * repetition_penalty, then
 *      l -= count * frequency_penalty + presence_penalty;
 *   2. temperature 0: the argmax of those logits, ties to the lowest id, and
 *      nothing below; otherwise z = l / temperature;
 *   3. candidates (every non-NaN token) in the order z descending, id
 *      ascending; top_k keeps the first top_k;
 *   4. softmax with the library's exp and canonical sums;
 *   5. top_p keeps the shortest prefix of the order whose probabilities sum
 *      to >= top_p; min_p then drops p < min_p * (the first's p);
 *   6. inverse CDF over the kept candidates in order with the uniform number
 *      u = (Philox4x32-10(counter {t, 0, 0, 0}, key seed) word 0 >> 8) * 2^-24.
 *
 * The struct's first field is its size, so that later releases can add
 * fields at the end: set it with di_sampling_params_init, then change the
 * fields you need. */
typedef struct di_sampling_params {
    uint32_t size;               /* sizeof(di_sampling_params) when the caller was built */
    float temperature;           /* >= 0; 0 (default): greedy, argmax with ties to the
                                    lowest id (after penalties), no random number */
    int32_t top_k;               /* >= 0; 0 (default): no cut */
    float top_p;                 /* (0, 1]; 1 (default): no cut */
    float min_p;                 /* [0, 1]; 0 (default): no cut */
    float repetition_penalty;    /* > 0; 1 (default): none */
    float presence_penalty;      /* finite; 0 (default): none */
    float frequency_penalty;     /* finite; 0 (default): none */
    uint32_t penalty_window;     /* penalties look at the sequence's last N tokens;
                                    default 64; 0: the whole sequence */
    uint64_t seed;               /* default 0 */
} di_sampling_params;

/* (since 1.2) Sets *params to the defaults above (greedy) and its size
 * field. */
DI_API di_status di_sampling_params_init(di_sampling_params *params);
/* (since 1.2) Sets seq's parameters (copied). NULL restores the ones the
 * sequence started with (the defaults, or the config's sampling keys). They
 * stay until set again: reset, truncate and copy leave them alone (a copy's
 * destination keeps its own). A bad value (NaN or infinite, a value outside
 * the ranges above, size smaller than this struct or a later struct's unknown
 * fields set) gives DI_ERR_INVALID_ARGUMENT with a message naming the
 * parameter and the value, and changes nothing. */
DI_API di_status di_session_seq_set_sampling(di_session *session, uint32_t seq,
                                             const di_sampling_params *params);
/* (since 1.2) The token chosen for seq's next position t (its length) from the
 * logits of its last step with its parameters: with the defaults, exactly
 * di_session_greedy_token. The token is not appended: feed it to the next
 * step. Calling it twice without a step gives the same token. DI_ERR_STATE
 * when the sequence has no logits (no step since creation, reset, truncate or
 * copy). With a grammar (di_session_seq_set_grammar) the tokens it does not
 * allow are removed first, then the order above runs on the rest; a program
 * that never sets a grammar sees no change. */
DI_API di_status di_session_sample_token(di_session *session, uint32_t seq, int32_t *token);

/* (since 1.3) Log-probabilities of the model's own distribution at the last
 * position of seq's last step: the log-softmax of di_session_logits
 * (temperature 1, no penalty and no filter, whatever the sequence's sampling
 * parameters), with the library's own exp and log in the canonical order, so
 * equal logits give equal bits on every machine. With token >= 0,
 * *token_logprob receives that token's (token_logprob may be NULL when token <
 * 0). The n_top most likely tokens, ordered by (log-probability descending, id
 * ascending), go to top_tokens[0..n_top) and top_logprobs[0..n_top) (both may
 * be NULL when n_top is 0); n_top must not exceed the vocabulary. DI_ERR_STATE
 * when the sequence has no logits (as di_session_sample_token),
 * DI_ERR_TOKEN_RANGE for a token outside the vocabulary. */
DI_API di_status di_session_logprobs(di_session *session, uint32_t seq, int32_t token,
                                     float *token_logprob, uint32_t n_top, int32_t *top_tokens,
                                     float *top_logprobs);
/* (since 1.6) di_session_logprobs of position `index` of seq's last step
 * (0-based within what seq appended in it; the session's last step must have
 * used DI_STEP_ALL_LOGITS, as for di_session_logits_at): the log-softmax of
 * di_session_logits_at's row, with the same rules and the same bits as
 * di_session_logprobs would give had the sequence been stepped up to that
 * position alone. A prompt's log-probabilities come from one prefill: token
 * i + 1 of the prompt given tokens 0..i is position i's logprob of token
 * i + 1. DI_ERR_STATE when the last step was not an all-logits step of seq,
 * DI_ERR_INVALID_ARGUMENT for an index outside what it appended. */
DI_API di_status di_session_logprobs_at(di_session *session, uint32_t seq, uint32_t index, int32_t token,
                                        float *token_logprob, uint32_t n_top, int32_t *top_tokens,
                                        float *top_logprobs);

/* ---- Speculative decoding ---------------------------------------------------
 * (since 1.6) Several tokens per step with exactly the output of decoding one
 * at a time. A sequence whose next token t0 decoding has chosen (di_session_
 * sample_token, or di_session_greedy_token with the default parameters) is
 * stepped with t0 and k draft tokens d1..dk in one entry (k + 1 tokens) of a
 * DI_STEP_ALL_LOGITS step, beside other sequences' ordinary entries; then
 * di_session_seq_accept_draft resolves it.
 *
 * The contract: the tokens accepted, the token returned in *next, the
 * logits (and their digests) of every position and the sequence afterwards
 * (its length, KV cache, token history, which the penalties read, and its
 * grammar's state) are exactly those of stepping t0, d1, ... one token at a
 * time and choosing with di_session_sample_token after each, for greedy and
 * seeded sampling, with every sampling parameter and with a grammar. This
 * holds because a position's logits have the same bits in a chunk as alone,
 * and a choice depends only on those logits, the tokens before it, the
 * position (the seed's counter) and the grammar's state there
 * (docs/DETERMINISM.md, "Speculative decoding"). Only the speed changes. */
#define DI_DRAFT_MAX 32      /* draft tokens di_session_seq_draft_lookup gives at most */
#define DI_DRAFT_MAX_NGRAM 8 /* the longest key it matches */
/* The draft length and key length the tools and the bindings use unless told
 * (measured, docs/PERFORMANCE.md "Speculative decoding"): a step of 1 + k
 * tokens costs more than a step of one, so long drafts that are mostly
 * rejected cost more than they save. */
#define DI_DRAFT_DEFAULT 3
#define DI_DRAFT_NGRAM_DEFAULT 3

/* (since 1.6) Resolves a draft: seq's entry in the session's last step
 * (which used DI_STEP_ALL_LOGITS) appended at least n_draft + 1 tokens, its
 * last n_draft being the draft. Walks the draft: at each position the token
 * di_session_sample_token would choose there (the sequence's parameters,
 * grammar and seed); while it equals the next draft token that token is
 * accepted. *n_accepted gets the number accepted (0..n_draft) and *next the
 * token chosen after them (at the first draft token that differed, or after
 * the whole draft). The sequence is then truncated to end after the accepted
 * ones, and its results (di_session_logits, _greedy_token, _sample_token,
 * _logprobs) are those of that position: di_session_sample_token gives *next
 * again; until the next step, di_session_logits_at and di_session_logprobs_at
 * give the rows of the entry's positions kept (index 0 .. appended - n_draft
 * + *n_accepted - 1), the last being that position. Feed *next (and a new
 * draft) to the next step. n_draft 0 is an
 * ordinary step resolved the same way. When a grammar allows nothing at a
 * position (it ended), the tokens before it are accepted as above and the
 * call returns DI_ERR_GRAMMAR_REJECTED with *next = -1, as
 * di_session_sample_token does there. DI_ERR_STATE when the last step was
 * not an all-logits step of seq, DI_ERR_INVALID_ARGUMENT for a draft longer
 * than the entry allows; on those errors nothing changes. */
DI_API di_status di_session_seq_accept_draft(di_session *session, uint32_t seq, uint32_t n_draft,
                                             uint32_t *n_accepted, int32_t *next);

/* (since 1.6) A prompt-lookup draft for seq: the history is seq's tokens
 * followed by `next` (the token about to be stepped); the longest key of at
 * most `ngram` (1..DI_DRAFT_MAX_NGRAM) tokens that ends the history and also
 * occurs earlier, at its latest earlier place, gives the tokens that
 * followed it there: up to max_draft (0..DI_DRAFT_MAX) of them into draft,
 * their count into *n_draft (0: no match). The draft is cut to fit the
 * context with next, and, with a grammar, before the first token the grammar
 * would refuse after next (a step with it would be refused). A function of
 * the history and the grammar only; it changes nothing. */
DI_API di_status di_session_seq_draft_lookup(di_session *session, uint32_t seq, int32_t next, uint32_t ngram,
                                             uint32_t max_draft, int32_t *draft, uint32_t *n_draft);

/* (since 1.6) A draft model: a second, smaller model with the same vocabulary
 * (every token id with the same text; DI_ERR_MODEL naming the first that
 * differs, or the sizes), run in a session of its own created with config
 * (its threads, profile and context; max_sequences at least the sequence ids
 * it will draft for). The draft model and model must outlive it. */
DI_API di_status di_drafter_create(const di_model *model, const di_model *draft, const di_config *config,
                                   di_drafter **out, char *errbuf, size_t errbuf_size);
DI_API void di_drafter_free(di_drafter *drafter);
/* (since 1.6) Detail of the drafter's last failed call; "" when none. */
DI_API const char *di_drafter_errmsg(const di_drafter *drafter);
/* (since 1.6) A draft for sequence seq of session (a session of the model the
 * drafter was created for), to follow `next`: up to max_draft
 * (0..DI_DRAFT_MAX) tokens the draft model chooses greedily after seq's
 * tokens and next, into draft, their count into *n_draft; cut to fit both
 * contexts and, with a grammar, before the first token it would refuse. The
 * drafter's sequence seq keeps the history it shares with the last call, so
 * each call steps only what is new. It changes nothing in session. */
DI_API di_status di_drafter_propose(di_drafter *drafter, di_session *session, uint32_t seq, int32_t next,
                                    uint32_t max_draft, int32_t *draft, uint32_t *n_draft);

/* ---- Digests --------------------------------------------------------------
 * An XXH3-128 digest in canonical (big-endian) byte order: the same 32 hex
 * characters `xxh128sum` prints for the same bytes. The struct is two words
 * of bytes and will never grow. */
struct di_digest {
    uint8_t bytes[16];
};

#define DI_DIGEST_HEX_SIZE 33 /* 32 hex characters and the NUL */

/* Writes 32 lowercase hex characters and a NUL into out. */
DI_API di_status di_digest_format(const di_digest *digest, char out[DI_DIGEST_HEX_SIZE]);
/* 1 when the two digests are equal, 0 otherwise (0 if either is NULL). */
DI_API int di_digest_equal(const di_digest *a, const di_digest *b);
/* The digest of n float32 values as little-endian bytes: what the library
 * reports for a logits row. Lets a caller check a row it stored. */
DI_API di_status di_digest_floats(const float *values, size_t n, di_digest *out);
/* The digest of n token ids as little-endian int32: what the library reports
 * for a sequence. */
DI_API di_status di_digest_tokens(const int32_t *tokens, size_t n, di_digest *out);

/* ---- CPU paths and backends -----------------------------------------------
 * What computes a session's results: the backend (DI_CONFIG_BACKEND), its
 * numerics profile (DI_CONFIG_PROFILE) and, on the CPU backend, the kernel
 * path (DI_CONFIG_CPU_PATH). */

/* CPU kernel paths. AUTO takes the environment variable DETINFER_CPU_PATH
 * (scalar, avx2 or avx512) when it is set, else the widest path this CPU
 * runs. Forcing a path the CPU lacks makes session creation fail with
 * DI_ERR_UNSUPPORTED. */
typedef enum di_cpu_path {
    DI_CPU_PATH_AUTO = 0,
    DI_CPU_PATH_SCALAR = 1,         /* portable C, the reference */
    DI_CPU_PATH_AVX2 = 2,           /* AVX2 + FMA + F16C */
    DI_CPU_PATH_AVX512 = 3          /* AVX-512 F/BW/VL/DQ */
} di_cpu_path;

typedef enum di_backend {
    DI_BACKEND_CPU = 1,
    DI_BACKEND_CUDA = 2             /* loaded on demand (libdetinfer-cuda.so.1);
                                       without it, a driver or a device, session
                                       creation gives DI_ERR_BACKEND_UNAVAILABLE */
} di_backend;

typedef enum di_profile {
    DI_PROFILE_PORTABLE = 1,        /* one canonical order on every backend */
    DI_PROFILE_DEVICE = 2,          /* vendor libraries (CUDA only); the CPU
                                       backend gives DI_ERR_UNSUPPORTED */
    DI_PROFILE_INTEGER = 3          /* every quantized weight type's product
                                       as exact integer block sums of int8
                                       weight codes and int8 activation codes
                                       per 32 values (docs/DETERMINISM.md
                                       "The integer profile"); F32/F16/BF16
                                       weights keep the portable product;
                                       deterministic on every axis, the same
                                       bits on the CPU and CUDA backends,
                                       other bits than PORTABLE, errors near
                                       1e-2 */
} di_profile;

/* (since 1.3) The CPU path a session created with DI_CONFIG_CPU_PATH =
 * requested would run on this machine, in *path: for DI_CPU_PATH_AUTO, what a
 * default session takes (DETINFER_CPU_PATH included). DI_ERR_UNSUPPORTED when
 * this CPU or build cannot run the path asked for, DI_ERR_INVALID_ARGUMENT for
 * an unknown value (of requested or of DETINFER_CPU_PATH); errbuf (optional)
 * receives the detail. Thread-safe. */
DI_API di_status di_cpu_path_resolve(di_cpu_path requested, di_cpu_path *path, char *errbuf,
                                     size_t errbuf_size);

/* (since 1.3) "auto", "scalar", "avx2" or "avx512" (the DETINFER_CPU_PATH
 * spellings); "unknown" for any other value. A static string. */
DI_API const char *di_cpu_path_name(di_cpu_path path);

/* (since 1.1) One line naming what computes this session's results, for logs
 * and fingerprints, e.g. "backend=cpu path=avx512 threads=2". A CUDA session
 * adds the profile, GPU, SM count and library versions its results depend on.
 * Owned by the session; valid until it is freed. */
DI_API const char *di_session_backend_info(const di_session *session);

#ifdef __cplusplus
}
#endif

#endif /* DETINFER_H */
