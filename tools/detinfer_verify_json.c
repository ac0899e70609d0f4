/*
 * detinfer_verify_json.c — the report of `detinfer verify --json`: one
 * object with the prompts, the axes, the near ties and the first mismatch.
 */
#include <stdlib.h>

#include "cli_json.h"
#include "detinfer_verify_state.h"

static json_t *prompt_json(const verify *v, uint32_t i)
{
    const dt_prompt *p = &v->prompts.p[i];
    json_t *o = json_pack("{s:I, s:s, s:o}", "index", (json_int_t)i, "kind",
                          p->text ? "text" : p->search_gap >= 0 ? "near-tie" : "tokens", "text", dt_json_text(p->text));
    if (p->sampling.size)
        o = dt_json_set(o, "sampling",
                        dt_json_set(dt_json_sampling(&p->sampling), "seed", json_integer((json_int_t)p->sampling.seed)));
    if (p->search_gap >= 0)
        o = dt_json_set(o, "search_gap", dt_json_real(p->search_gap));
    o = dt_json_set(o, "tokens", dt_json_tokens(p->tokens, p->n));
    o = dt_json_set(o, "generated", dt_json_tokens(v->ref[i].tokens, v->ref[i].max_new));
    return dt_json_set(o, "sequence_digest", dt_json_digest(&v->ref[i].sequence));
}

static json_t *row_json(const vrow *r)
{
    return json_pack("{s:s, s:s, s:I, s:I, s:I, s:s, s:b, s:I, s:I, s:I, s:o, s:s, s:o}", "axis", r->axis, "value",
                     r->value, "batch", (json_int_t)r->batch, "threads", (json_int_t)r->threads, "chunk",
                     (json_int_t)r->chunk, "backend", dt_backend_name(r->backend), "fresh_process", r->fresh,
                     "requests", (json_int_t)r->requests, "logits_rows", (json_int_t)r->rows, "differing_requests",
                     (json_int_t)r->differing, "seconds", dt_json_real(r->seconds), "result",
                     r->status == ROW_OK         ? "ok"
                     : r->status == ROW_MISMATCH ? "mismatch"
                     : r->status == ROW_SKIPPED  ? "skipped"
                                                 : "error",
                     "detail", dt_json_text(r->detail[0] ? r->detail : NULL));
}

static json_t *ties_json(const verify *v)
{
    tie *t;
    uint32_t n = verify_smallest_gaps(v, &t);
    json_t *a = t ? json_array() : NULL;
    for (uint32_t i = 0; i < n; i++) {
        const dt_trace *r = &v->ref[t[i].prompt];
        const tie_count *tc = &v->ties[(size_t)t[i].prompt * v->o.max_new + t[i].choice];
        a = dt_json_push(
            a, json_pack("{s:I, s:I, s:I, s:I, s:I, s:o, s:I, s:I, s:I, s:b}", "prompt", (json_int_t)t[i].prompt,
                         "position", (json_int_t)(r->n_prompt - 1 + t[i].choice), "generated_index",
                         (json_int_t)t[i].choice, "token", (json_int_t)r->tokens[t[i].choice], "runner_up",
                         (json_int_t)r->runner_up[t[i].choice], "gap", dt_json_real(t[i].gap), "gap_ulps",
                         (json_int_t)dt_ulp_distance(r->best_logit[t[i].choice], r->second_logit[t[i].choice]),
                         "runs_reached", (json_int_t)tc->reached, "runs_held", (json_int_t)tc->held, "held",
                         tc->held == tc->reached));
    }
    free(t);
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
        o = dt_json_set(o, "reference_digest", dt_json_digest(&m->want));
        o = dt_json_set(o, "digest", dt_json_digest(&m->got));
    }
    if (m->choice >= 0) {
        o = dt_json_set(o, "reference_token", json_integer(m->want_token));
        o = dt_json_set(o, "token", json_integer(m->got_token));
    }
    o = dt_json_set(o, "reference_sequence_digest", dt_json_digest(&m->want_sequence));
    return dt_json_set(o, "sequence_digest", dt_json_digest(&m->got_sequence));
}

int verify_print_json(const verify *v)
{
    uint64_t requests, rows;
    uint32_t bad;
    int pass = verify_verdict(v, &requests, &rows, &bad);
    json_t *prompts = json_array(), *axes = json_array();
    for (uint32_t i = 0; i < v->prompts.n; i++)
        prompts = dt_json_push(prompts, prompt_json(v, i));
    for (uint32_t i = 0; i < v->n_rows; i++)
        axes = dt_json_push(axes, row_json(&v->rows[i]));
    json_t *reference = json_pack("{s:s, s:s, s:I, s:o}", "backend", dt_backend_name(v->o.backend), "profile",
                                  dt_profile_name(v->o.profile), "threads", (json_int_t)v->o.threads[0], "seconds",
                                  dt_json_real(v->ref_seconds));
    json_t *root = json_pack(
        "{s:s, s:s, s:s, s:o, s:o, s:I, s:o, s:I, s:I, s:I, s:o, s:o, s:o, s:o, s:o, s:I, s:I, s:s}", "command",
        "verify", "library_version", di_version_string(), "build_info", di_build_info(), "model",
        dt_json_text(v->o.model), "architecture", dt_json_text(di_model_architecture(v->model)), "n_vocab",
        (json_int_t)v->n_vocab, "reference", reference, "max_new", (json_int_t)v->o.max_new, "reps",
        (json_int_t)v->o.reps, "seed", (json_int_t)v->o.seed, "prompt_source", dt_json_text(v->prompts.note),
        "prompts", prompts, "axes", axes, "near_ties", ties_json(v), "first_mismatch", mismatch_json(v),
        "requests", (json_int_t)requests, "logits_rows", (json_int_t)rows, "result", pass ? "pass" : "fail");
    return dt_json_emit(&dt_verify_command, root, stdout);
}
