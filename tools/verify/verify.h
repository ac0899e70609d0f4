/*
 * verify.h — the pieces of `detinfer verify` (and verify --url)
 * shared by its files: the prompt list (built-in, file, sampled copies), the
 * near-tie search, the fresh-process axis (a child process that prints
 * traces), and the test-only fault hooks.
 */
#ifndef DETINFER_VERIFY_H
#define DETINFER_VERIFY_H

#include <stddef.h>
#include <stdint.h>

#include <detinfer.h>

#include "cli/cli_commands.h"
#include "cli/cli_digest.h"
#include "cli/cli_model.h"
#include "cli/cli_options.h"
#include "cli/cli_progress.h"
#include "cli/cli_random.h"
#include "cli/cli_text.h"
#include "verify/verify_engine.h"

typedef struct vf_prompt_set {
    vf_prompt *p;
    uint32_t n, cap;
    int text;       /* 1: the built-in prompts are text (the model has a tokenizer) */
    char note[256]; /* how the list was made, for the report */
} vf_prompt_set;

void vf_prompts_free(vf_prompt_set *set);
/* The built-in list: text prompts (some of them confusable on purpose) when
 * the model has a tokenizer, else token-id prompts of a few lengths, each
 * at most max_len tokens. */
di_status vf_prompts_builtin(const di_model *model, uint32_t max_len, uint64_t seed, vf_prompt_set *set,
                             char *err, size_t err_size);
/* One prompt per line; '#' starts a comment line; "tokens: 1,2,3" gives ids,
 * anything else is text (\n, \t and \\ escapes), tokenized with BOS. */
di_status vf_prompts_file(const di_model *model, const char *path, vf_prompt_set *set, char *err,
                          size_t err_size);
/* Adds a copy of p, without its sampling parameters (greedy). */
di_status vf_prompts_add_copy(vf_prompt_set *set, const vf_prompt *p, char *err, size_t err_size);
/* Adds the near-tie search's own starting prompts, each at most max_len
 * tokens: short text prompts on many subjects when the model has a
 * tokenizer, else `count` random token-id prompts of 2 to 8 tokens. */
di_status vf_prompts_search(const di_model *model, uint32_t max_len, uint32_t count, uint64_t seed,
                            vf_prompt_set *set, char *err, size_t err_size);

/* Adds n_sampled sampled requests: the first prompts again (in turn), each
 * with one of three parameter sets (temperature, filters, penalties) and a
 * seed of its own derived from seed. */
di_status vf_prompts_add_sampled(vf_prompt_set *set, uint32_t n_sampled, uint64_t seed, char *err,
                                 size_t err_size);

/* ---- Near ties (verify_ties.c) -------------------------------------
 * A near tie is a position of a greedy continuation where the two largest
 * logits are closest: where the least difference in arithmetic could change
 * the greedy token. The gap is counted in ulp (vf_ulp_distance: how many
 * float32 values lie above the runner-up's logit up to the largest). */
typedef struct vf_near_tie {
    uint32_t source;    /* index into the searched prompts */
    uint32_t position;  /* sequence position; its logits choose token position + 1 */
    int32_t *tokens;    /* the sequence up to position: position + 1 tokens */
    int32_t top1, top2; /* the greedy token (lowest id among equals) and the runner-up */
    float top1_logit, top2_logit;
    uint64_t gap_ulps;
    di_digest digest;   /* of the logits row at position */
} vf_near_tie;

typedef struct vf_near_ties {
    vf_near_tie *t;      /* [n] smallest gap first; equal gaps by source, then position */
    uint32_t n;
    int32_t **sequences; /* [n_sources] prompt + continuation (NULL for a prompt not searched) */
    uint32_t *lengths;   /* [n_sources] */
    uint32_t n_sources, continuation; /* prompts searched, tokens generated after each */
    uint64_t positions;               /* positions searched */
    double seconds;
} vf_near_ties;

/* Generates a greedy continuation of every greedy prompt of prompts[] (each
 * prompt plus continuation at most max_len tokens, the continuation sized so
 * that about `positions` positions are searched in all), runs each sequence
 * teacher-forced in one step with every position's logits
 * (DI_STEP_ALL_LOGITS, alone, whole), and keeps the `keep` positions with
 * the smallest top-1/top-2 gap in ulp (a prefix already kept is not kept
 * twice). The session settings are the reference's. */
di_status vf_near_ties_search(const di_model *model, const cli_session_opts *so, const vf_prompt *prompts,
                              uint32_t n_prompts, uint32_t max_len, uint64_t positions, uint32_t keep,
                              uint64_t seed, vf_near_ties *out, char *err, size_t err_size);
void vf_near_ties_free(vf_near_ties *t);

/* TEST ONLY: what DETINFER_TEST_PERTURB=tie-token:K or tie-digest:K does to
 * the result of near tie K in the batched runs before it is compared: the
 * token replaced by the runner-up, or one bit of the digest flipped. */
typedef enum vf_tie_alter { VF_TIE_ALTER_NONE, VF_TIE_ALTER_TOKEN, VF_TIE_ALTER_DIGEST } vf_tie_alter;

typedef struct vf_test_hooks {
    vf_perturb batched, child; /* SLOT:POS and child:POS */
    vf_tie_alter tie_alter;    /* tie-token:K and tie-digest:K */
    uint32_t tie;
} vf_test_hooks;

/* TEST ONLY. DETINFER_TEST_PERTURB=SLOT:POS perturbs batched runs (batch
 * size > 1) in that slot at that sequence position; =child:POS perturbs
 * the fresh processes at that position; =tie-token:K and =tie-digest:K
 * alter near tie K's result in the batched runs. Unset: nothing is enabled.
 * Returns 0 and fills err when the variable is malformed. */
int vf_test_hooks_from_env(vf_test_hooks *hooks, char *err, size_t err_size);

/* verify --url's usage and options (verify_url.c): `verify --help` prints them too. */
void vu_print_help(FILE *f);

/* Runs the prompts in a fresh process (this executable's hidden
 * `__verify-child` subcommand, alone in batch 1, with last_only as the
 * engine's) and hands each trace it prints to done. */
di_status vf_child_traces(const char *model_path, uint32_t max_new, int last_only, const cli_session_opts *so,
                          const vf_prompt *prompts, uint32_t n_prompts, vf_done_fn done, void *ctx, char *err,
                          size_t err_size);

#endif /* DETINFER_VERIFY_H */
