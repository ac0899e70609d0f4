/*
 * verify_json.c — the report of `detinfer verify --json`: one
 * object with the prompts, the axes, the near-tie search and the near ties
 * (per axis: result, token, digest), and the first mismatch.
 */
#include <stdlib.h>
#include <string.h>

#include "cli/cli_json.h"
#include "verify/verify_state.h"

static json_t *prompt_json(const verify *v, uint32_t i)
{
    const vf_prompt *p = &v->prompts.p[i];
    json_t *o = json_pack("{s:I, s:s, s:o}", "index", (json_int_t)i, "kind", p->text ? "text" : "tokens", "text",
                          cli_json_text(p->text));
    if (p->sampling.size) {
        json_t *seed = json_integer((json_int_t)p->sampling.seed);
        o = cli_json_set(o, "sampling", cli_json_set(cli_json_sampling(&p->sampling), "seed", seed));
    }
    o = cli_json_set(o, "tokens", cli_json_tokens(p->tokens, p->n));
    o = cli_json_set(o, "generated", cli_json_tokens(v->ref[i].tokens, v->ref[i].max_new));
    return cli_json_set(o, "sequence_digest", cli_json_digest(&v->ref[i].sequence));
}

static json_t *row_json(const vrow *r)
{
    return json_pack("{s:s, s:s, s:I, s:I, s:I, s:s, s:b, s:I, s:I, s:I, s:o, s:s, s:o}", "axis", r->axis, "value",
                     r->value, "batch", (json_int_t)r->batch, "threads", (json_int_t)r->threads, "chunk",
                     (json_int_t)r->chunk, "backend", cli_backend_name(r->backend), "fresh_process", r->fresh,
                     "requests", (json_int_t)r->requests, "logits_rows", (json_int_t)r->rows, "differing_requests",
                     (json_int_t)r->differing, "seconds", cli_json_real(r->seconds), "result",
                     r->status == ROW_OK         ? "ok"
                     : r->status == ROW_MISMATCH ? "mismatch"
                     : r->status == ROW_SKIPPED  ? "skipped"
                                                 : "error",
                     "detail", cli_json_text(r->detail[0] ? r->detail : NULL));
}

/* The search: its starting prompts, their continuations, what it covered. */
static json_t *search_json(const verify *v)
{
    const vf_near_ties *t = &v->ties;
    json_t *sources = json_array();
    for (uint32_t i = 0; i < t->n_sources; i++) {
        const vf_prompt *p = &v->search.p[i];
        json_t *o = json_pack("{s:I, s:o, s:o}", "index", (json_int_t)i, "text", cli_json_text(p->text), "tokens",
                              cli_json_tokens(p->tokens, p->n));
        if (t->sequences[i])
            o = cli_json_set(o, "continuation", cli_json_tokens(t->sequences[i] + p->n, t->lengths[i] - p->n));
        sources = cli_json_push(sources, o);
    }
    return json_pack("{s:I, s:I, s:I, s:I, s:o, s:o}", "near_ties", (json_int_t)v->o.near_ties,
                     "positions_searched", (json_int_t)t->positions, "continuation_tokens",
                     (json_int_t)t->continuation, "chunk_tail", (json_int_t)TIE_CHUNK_TAIL, "seconds",
                     cli_json_real(t->seconds), "sources", sources);
}

static const char *tie_result_word(const verify *v, uint32_t tie, uint32_t row)
{
    const char *w = verify_tie_word(v, tie, row);
    return !strcmp(w, "DIFFERS") ? "differs" : w;
}

static json_t *ties_json(const verify *v)
{
    json_t *a = json_array();
    for (uint32_t k = 0; k < v->ties.n; k++) {
        const vf_near_tie *t = &v->ties.t[k];
        json_t *axes = json_array();
        int held = 1;
        for (uint32_t r = 0; r < v->n_rows; r++) {
            const tie_result *res = &v->tie_results[(size_t)k * MAX_ROWS + r];
            json_t *o = json_pack("{s:s, s:s, s:s}", "axis", v->rows[r].axis, "value", v->rows[r].value, "result",
                                  tie_result_word(v, k, r));
            if (res->runs) {
                o = cli_json_set(o, "token", json_integer(res->token));
                o = cli_json_set(o, "digest", cli_json_digest(&res->digest));
                held &= res->held;
            }
            axes = cli_json_push(axes, o);
        }
        a = cli_json_push(
            a, json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o, s:o, s:b, s:o}", "rank", (json_int_t)k + 1,
                         "source", (json_int_t)t->source, "position", (json_int_t)t->position, "gap_ulps",
                         (json_int_t)t->gap_ulps, "top1", (json_int_t)t->top1, "top2", (json_int_t)t->top2,
                         "top1_logit", cli_json_real(t->top1_logit), "top2_logit", cli_json_real(t->top2_logit),
                         "digest", cli_json_digest(&t->digest), "held", held, "axes", axes));
    }
    return a;
}

static json_t *mismatch_json(const verify *v)
{
    const mismatch *m = &v->first;
    if (!m->set)
        return json_null();
    const vrow *r = &v->rows[m->row];
    json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:o}", "axis", r->axis, "value", r->value, "request",
                          (json_int_t)m->request, "slot", (json_int_t)m->slot, "prompt", (json_int_t)m->prompt,
                          "position", (json_int_t)m->pos, "generated_index",
                          m->choice >= 0 ? json_integer(m->choice) : json_null());
    if (m->pos < v->ref[m->prompt].n_pos) {
        o = cli_json_set(o, "reference_digest", cli_json_digest(&m->want));
        o = cli_json_set(o, "digest", cli_json_digest(&m->got));
    }
    if (m->choice >= 0) {
        o = cli_json_set(o, "reference_token", json_integer(m->want_token));
        o = cli_json_set(o, "token", json_integer(m->got_token));
    }
    o = cli_json_set(o, "reference_sequence_digest", cli_json_digest(&m->want_sequence));
    return cli_json_set(o, "sequence_digest", cli_json_digest(&m->got_sequence));
}

int verify_print_json(const verify *v)
{
    uint64_t requests, rows;
    uint32_t bad;
    int pass = verify_verdict(v, &requests, &rows, &bad);
    json_t *prompts = json_array(), *axes = json_array();
    for (uint32_t i = 0; i < v->prompts.n; i++)
        prompts = cli_json_push(prompts, prompt_json(v, i));
    for (uint32_t i = 0; i < v->n_rows; i++)
        axes = cli_json_push(axes, row_json(&v->rows[i]));
    json_t *reference = json_pack("{s:s, s:s, s:i, s:I, s:o}", "backend", cli_backend_name(v->o.backend), "profile",
                                  cli_profile_name(v->o.profile), "numerics", cli_profile_numerics(v->o.profile),
                                  "threads", (json_int_t)v->o.threads[0], "seconds",
                                  cli_json_real(v->ref_seconds));
    json_t *root = json_pack(
        "{s:s, s:s, s:s, s:o, s:o, s:I, s:o, s:I, s:I, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:I, s:I, s:s}", "command",
        "verify", "library_version", di_version_string(), "build_info", di_build_info(), "model",
        cli_json_text(v->o.model), "architecture", cli_json_text(di_model_architecture(v->model)), "n_vocab",
        (json_int_t)v->n_vocab, "reference", reference, "max_new", (json_int_t)v->o.max_new, "reps",
        (json_int_t)v->o.reps, "seed", (json_int_t)v->o.seed, "prompt_source", cli_json_text(v->prompts.note),
        "prompts", prompts, "axes", axes, "near_tie_search", search_json(v), "near_ties", ties_json(v),
        "first_mismatch", mismatch_json(v),
        "requests", (json_int_t)requests, "logits_rows", (json_int_t)rows, "result", pass ? "pass" : "fail");
    return cli_json_emit(&vf_command, root, stdout);
}
