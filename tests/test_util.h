/*
 * test_util.h — shared helpers of the Check suites: where the generated
 * models are, loading them, reading their float64 references, running
 * prompts and comparing digests.
 */
#ifndef DI_TEST_UTIL_H
#define DI_TEST_UTIL_H

#include <stdint.h>
#include <check.h>

#include "detinfer.h"

/* The generated models: the names in $DI_TEST_MODELS/models.txt, the one
 * list (tests/tools/make_test_models.py writes it), in its order.
 * tu_n_models() reads it on its first call and returns the count; when it
 * cannot, it returns 1 with a name that says why, so every test over the
 * models fails loading it instead of running over none. */
#define TU_MAX_MODELS 128
extern const char *tu_models[TU_MAX_MODELS];
int tu_n_models(void);

/* $DI_TEST_MODELS/<name><ext>; the result lives until the next call. */
const char *tu_model_path(const char *name, const char *ext);
/* The detinfer command: $DI_TEST_TOOL, or tools/detinfer beside the example
 * program ($DI_TEST_EXAMPLE is BUILD/examples/generate), into out[n]. */
void tu_tool_path(char *out, size_t n);
/* Loads a model by name, failing the test on error. */
di_model *tu_load(const char *name);
/* The tiny llama model gguf_builder writes, loaded (its file already removed). */
di_model *tu_tiny_model(void);
/* A session with the given threads, sequences and context (0: default), on
 * the CPU path DETINFER_CPU_PATH names (or the widest). */
di_session *tu_session(const di_model *m, int threads, int max_seq, int ctx);
/* The same on a CPU path forced in the configuration. */
di_session *tu_session_on(const di_model *m, int threads, int max_seq, int ctx, di_cpu_path path);
/* The prompt of a model (NAME.tokens); returns the count. */
uint32_t tu_read_prompt(const char *name, int32_t *tokens, uint32_t max);

/* A float64 reference written by tests/tools/reference.py. */
typedef struct tu_ref {
    uint32_t n_tokens, n_vocab;
    int32_t *tokens;
    double *logits; /* [n_tokens][n_vocab] */
} tu_ref;
tu_ref *tu_read_ref(const char *name);
void tu_free_ref(tu_ref *ref);

/* Steps one entry and fails the test unless it succeeds. */
void tu_step(di_session *s, uint32_t seq, const int32_t *tokens, uint32_t n, uint32_t flags);
/* Decoding of n_gen tokens after the prompt on sequence 0 of s, with its
 * sampling parameters: one token per step (k == 0), or with prompt-lookup
 * drafts of at most k tokens verified in all-logits steps
 * (di_session_seq_accept_draft). The tokens and the digest of the logits
 * each was chosen from; returns the draft tokens accepted. */
uint32_t tu_decode(di_session *s, const int32_t *prompt, uint32_t n_prompt, uint32_t n_gen, uint32_t k,
                   int32_t *tokens, di_digest *digests);
/* Digest of the last logits of seq. */
di_digest tu_last_digest(di_session *s, uint32_t seq);
/* Digests of every position of a prompt fed in the given chunk sizes
 * (chunks == NULL: one chunk) into seq, from its current state. */
void tu_prompt_digests(di_session *s, uint32_t seq, const int32_t *tokens, uint32_t n,
                       const uint32_t *chunks, uint32_t n_chunks, di_digest *out);
/* Fails the test with both digests in hex when they differ. */
void tu_assert_digest_eq(const di_digest *want, const di_digest *got, const char *what, int index);

/* 1 if this CPU and build run the path. */
int tu_cpu_path_available(di_cpu_path path);

/* Small deterministic random numbers for test inputs. */
uint64_t tu_rand(uint64_t *state);

/* The file at DI_TEST_ROOT/rel as one line (malloc'd): newlines and C
 * comment margins (" * ") become single spaces. */
char *tu_read_doc_flat(const char *rel);

/* 1 when needle occurs in text, ignoring ASCII case (every text holds ""). */
int tu_mentions(const char *text, const char *needle);

#endif /* DI_TEST_UTIL_H */
