/*
 * detinfer_verify.h — the pieces of `detinfer verify` shared by its files:
 * the prompt list (built-in, near-tie search, file), the fresh-process axis
 * (a child process that prints traces), and the test-only fault hook.
 */
#ifndef DETINFER_VERIFY_H
#define DETINFER_VERIFY_H

#include <stddef.h>
#include <stdint.h>

#include <detinfer.h>

#include "cli_commands.h"
#include "cli_digest.h"
#include "cli_model.h"
#include "cli_options.h"
#include "cli_progress.h"
#include "cli_random.h"
#include "cli_text.h"
#include "detinfer_engine.h"

typedef struct dt_prompt_set {
    dt_prompt *p;
    uint32_t n, cap;
    int text;       /* 1: the built-in prompts are text (the model has a tokenizer) */
    char note[256]; /* how the list was made, for the report */
} dt_prompt_set;

void dt_prompts_free(dt_prompt_set *set);
/* The built-in list: text prompts (some of them confusable on purpose) when
 * the model has a tokenizer, else token-id prompts of a few lengths, each
 * at most max_len tokens. */
di_status dt_prompts_builtin(const di_model *model, uint32_t max_len, uint64_t seed, dt_prompt_set *set,
                             char *err, size_t err_size);
/* One prompt per line; '#' starts a comment line; "tokens: 1,2,3" gives ids,
 * anything else is text (\n, \t and \\ escapes), tokenized with BOS. */
di_status dt_prompts_file(const di_model *model, const char *path, dt_prompt_set *set, char *err,
                          size_t err_size);
/* Adds the `keep` prompts, among `candidates` random token-id prompts, whose
 * next-token top-2 logit gap is smallest: near ties found by search. */
di_status dt_prompts_near_ties(const di_model *model, const dt_session_opts *opts, uint32_t candidates,
                               uint32_t keep, uint64_t seed, dt_prompt_set *set, char *err, size_t err_size);

/* Adds n_sampled sampled requests: the first prompts again (in turn), each
 * with one of three parameter sets (temperature, filters, penalties) and a
 * seed of its own derived from seed. */
di_status dt_prompts_add_sampled(dt_prompt_set *set, uint32_t n_sampled, uint64_t seed, char *err,
                                 size_t err_size);

/* TEST ONLY. DETINFER_TEST_PERTURB=SLOT:POS perturbs batched runs (batch
 * size > 1) in that slot at that sequence position; =child:POS perturbs
 * the fresh processes at that position. Unset: nothing is enabled. Returns 0
 * and fills err when the variable is malformed. */
int dt_perturb_from_env(dt_perturb *batched, dt_perturb *child, char *err, size_t err_size);

/* Runs the prompts in a fresh process (this executable's hidden
 * `__verify-child` subcommand, alone in batch 1) and hands each trace it
 * prints to done. */
di_status dt_child_traces(const char *model_path, uint32_t max_new, const dt_session_opts *so,
                          const dt_prompt *prompts, uint32_t n_prompts, dt_done_fn done, void *ctx, char *err,
                          size_t err_size);

#endif /* DETINFER_VERIFY_H */
