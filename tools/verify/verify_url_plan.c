/*
 * verify_url_plan.c — the requests of `detinfer verify --url`: the
 * probes (the repeated greedy request, near ties, sampled and
 * JSON-schema requests, other traffic) and their shuffled order, each
 * probe's request body, and its local reference (the request run alone
 * by this library on a fresh sequence, with --model).
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "verify/verify_url.h"

/* The schema of the constrained probes (docs/STRUCTURED.md). */
static const char VERIFY_SCHEMA[] =
    "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":9999},"
    "\"word\":{\"type\":\"string\",\"maxLength\":8},\"ok\":{\"type\":\"boolean\"}},"
    "\"required\":[\"id\",\"word\",\"ok\"],\"additionalProperties\":false}";

void vu_outcome_free(vu_outcome *o)
{
    free(o->tokens);
    free(o->digests);
    memset(o, 0, sizeof *o);
}

int vu_outcome_alloc(vu_outcome *o, uint32_t n)
{
    o->tokens = calloc(n ? n : 1, sizeof *o->tokens);
    o->digests = calloc(n ? n : 1, sizeof *o->digests);
    o->n = n;
    return o->tokens && o->digests ? 0 : -1;
}

char *vu_request_json(const vu_probe *p)
{
    json_t *ids = json_array();
    for (uint32_t i = 0; i < p->n_prompt; i++)
        json_array_append_new(ids, json_integer(p->prompt[i]));
    json_t *root = json_pack("{s:s, s:o, s:i, s:{s:b}}", "model", "verify", "prompt", ids, "max_tokens",
                             (int)p->max_new, "detinfer", "logits_digests", 1);
    if (p->sampled) {
        json_object_set_new(root, "temperature", json_real(p->temperature));
        json_object_set_new(root, "top_p", json_real(p->top_p));
        json_object_set_new(root, "seed", json_integer(p->seed));
    }
    if (p->constrained)
        json_object_set_new(root, "json_schema", json_loads(VERIFY_SCHEMA, 0, NULL));
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return text;
}

/* ---- The plan --------------------------------------------------------------- */

static int32_t *random_prompt(vu *v, uint64_t *rng, uint32_t n)
{
    int32_t *t = malloc(n * sizeof *t);
    for (uint32_t i = 0; t && i < n; i++)
        t[i] = i == 0 && v->bos >= 0 ? (int32_t)v->bos : (int32_t)(cli_rand(rng) % (uint64_t)v->n_vocab);
    return t;
}

static vu_probe *add_probe(vu *v, const char *kind, int32_t *prompt, uint32_t n, uint32_t max_new, uint32_t reps)
{
    vu_probe *p = &v->p[v->n_probes++];
    memset(p, 0, sizeof *p);
    p->kind = kind;
    p->prompt = prompt;
    p->n_prompt = n;
    p->max_new = max_new;
    p->reps = reps;
    p->got = calloc(reps, sizeof *p->got);
    p->ref_source = "first response";
    int at = snprintf(p->label, sizeof p->label, "%s [", kind);
    for (uint32_t i = 0; i < n && at < 36; i++)
        at += snprintf(p->label + at, sizeof p->label - (size_t)at, "%s%d", i ? "," : "", prompt[i]);
    snprintf(p->label + at, sizeof p->label - (size_t)at, "%s]", at >= 36 ? ",..." : "");
    return p->got && prompt ? p : NULL;
}

int vu_plan(vu *v)
{
    uint64_t rng = (uint64_t)v->o.seed * 0x9e3779b97f4a7c15ull + 1;
    uint32_t max_new = (uint32_t)v->o.max_new;
    uint32_t max_prompt = (uint32_t)(v->context - 2 * max_new > 48 ? 48 : v->context - 2 * max_new);
    if (max_prompt < 4) {
        fprintf(stderr, "detinfer verify --url: the server's context (%lld) is too small for --max-new %u\n",
                v->context, max_new);
        return CLI_EXIT_USAGE;
    }
    /* near ties, as `detinfer verify` finds them (needs the model file);
     * each prefix at most max_prompt tokens, so that it fits the server */
    vf_prompt_set sources = {0};
    vf_near_ties ties = {0};
    if (v->model && v->o.ties > 0) {
        char err[256] = "";
        cli_session_opts so = {.backend = DI_BACKEND_CPU, .profile = v->profile,
                              .threads = 1, .max_sequences = 1, .context_length = 0, .device = 0,
                              .cpu_path = DI_CPU_PATH_AUTO};
        di_status st = vf_prompts_builtin(v->model, max_prompt, (uint64_t)v->o.seed, &sources, err, sizeof err);
        if (st == DI_OK)
            st = vf_prompts_search(v->model, max_prompt, 16, (uint64_t)v->o.seed, &sources, err, sizeof err);
        if (st == DI_OK)
            st = vf_near_ties_search(v->model, &so, sources.p, sources.n, max_prompt, 512 * (uint64_t)v->o.ties,
                                     (uint32_t)v->o.ties, (uint64_t)v->o.seed, &ties, err, sizeof err);
        vf_prompts_free(&sources);
        if (st) {
            vf_near_ties_free(&ties);
            return cli_fail(&vu_command, "searching near ties", st, err);
        }
    }
    uint32_t cap = 4 + ties.n + (uint32_t)v->o.traffic;
    v->p = calloc(cap, sizeof *v->p);
    if (!v->p)
        return CLI_EXIT_FAIL;
    uint32_t reps = (uint32_t)v->o.reps, tie_reps = reps / 5 > 2 ? (uint32_t)reps / 5 : 2;
    if (!add_probe(v, "greedy", random_prompt(v, &rng, max_prompt < 12 ? max_prompt : 12), 12 < max_prompt ? 12 : max_prompt,
                   max_new, reps))
        return CLI_EXIT_FAIL;
    for (uint32_t i = 0; i < ties.n; i++) { /* the probe takes the tie's prefix */
        uint32_t n = ties.t[i].position + 1;
        int32_t *t = ties.t[i].tokens;
        ties.t[i].tokens = NULL;
        if (!add_probe(v, "near-tie", t, n, max_new, tie_reps)) {
            vf_near_ties_free(&ties);
            return CLI_EXIT_FAIL;
        }
    }
    vf_near_ties_free(&ties);
    if (v->sampling) {
        vu_probe *p = add_probe(v, "sampled", random_prompt(v, &rng, 8), 8, max_new, reps);
        if (!p)
            return CLI_EXIT_FAIL;
        p->sampled = 1;
        p->temperature = 0.8;
        p->top_p = 0.95;
        p->seed = v->o.seed * 7919 + 17;
        snprintf(p->label, sizeof p->label, "sampled seed %lld [%d,%d,%d,...]", p->seed, p->prompt[0], p->prompt[1],
                 p->prompt[2]);
    }
    for (int sampled = 0; sampled <= v->sampling; sampled++) { /* structured output: a JSON schema */
        vu_probe *p = add_probe(v, "json", random_prompt(v, &rng, 8), 8, max_new, sampled ? reps / 2 : reps);
        if (!p)
            return CLI_EXIT_FAIL;
        p->constrained = 1;
        p->sampled = sampled;
        p->temperature = 0.9;
        p->top_p = 1.0;
        p->seed = v->o.seed * 104729 + 3;
        snprintf(p->label, sizeof p->label, "json schema%s [%d,%d,%d,...]", sampled ? ", sampled" : "", p->prompt[0],
                 p->prompt[1], p->prompt[2]);
    }
    for (long i = 0; i < v->o.traffic; i++) {
        uint32_t n = 1 + (uint32_t)(cli_rand(&rng) % max_prompt);
        uint32_t m = 1 + (uint32_t)(cli_rand(&rng) % (2 * max_new));
        if (!add_probe(v, "traffic", random_prompt(v, &rng, n), n, m, 1))
            return CLI_EXIT_FAIL;
    }
    for (uint32_t i = 0; i < v->n_probes; i++)
        v->n_jobs += v->p[i].reps;
    v->jobs = calloc(v->n_jobs, sizeof *v->jobs);
    if (!v->jobs)
        return CLI_EXIT_FAIL;
    uint32_t k = 0;
    for (uint32_t i = 0; i < v->n_probes; i++)
        for (uint32_t r = 0; r < v->p[i].reps; r++)
            v->jobs[k++] = (vu_job){i, r};
    for (uint32_t i = v->n_jobs; i > 1; i--) { /* shuffled: the checked requests among the traffic */
        uint32_t j = (uint32_t)(cli_rand(&rng) % i);
        vu_job t = v->jobs[i - 1];
        v->jobs[i - 1] = v->jobs[j];
        v->jobs[j] = t;
    }
    return CLI_EXIT_OK;
}

void vu_plan_free(vu *v)
{
    for (uint32_t i = 0; i < v->n_probes; i++) {
        for (uint32_t r = 0; r < v->p[i].reps && v->p[i].got; r++)
            vu_outcome_free(&v->p[i].got[r]);
        free(v->p[i].got);
        vu_outcome_free(&v->p[i].ref);
        free(v->p[i].prompt);
    }
    free(v->p);
    free(v->jobs);
    v->p = NULL;
    v->jobs = NULL;
    v->n_probes = v->n_jobs = 0;
}

/* ---- The local reference: the request alone on a fresh sequence ---------- */

static int local_reference(vu *v, di_session *s, vu_probe *p)
{
    di_grammar *g = NULL;
    di_status st = p->constrained ? di_grammar_from_json_schema(VERIFY_SCHEMA, strlen(VERIFY_SCHEMA), 0, &g, NULL, 0)
                                  : DI_OK;
    if (!st)
        st = di_session_seq_reset(s, 0);
    if (!st && p->sampled) {
        di_sampling_params sp;
        st = di_sampling_params_init(&sp);
        sp.temperature = (float)p->temperature;
        sp.top_p = (float)p->top_p;
        sp.seed = (uint64_t)p->seed;
        if (!st)
            st = di_session_seq_set_sampling(s, 0, &sp);
        if (st == DI_ERR_UNSUPPORTED) {
            di_grammar_free(g);
            return 0; /* this library does not sample: the first response is the reference */
        }
    } else if (!st && v->sampling) {
        st = di_session_seq_set_sampling(s, 0, NULL);
        if (st == DI_ERR_UNSUPPORTED)
            st = DI_OK;
    }
    if (st || vu_outcome_alloc(&p->ref, p->max_new)) {
        di_grammar_free(g);
        return -1;
    }
    int32_t eos = -1;
    if (di_model_special_token(v->model, DI_TOKEN_EOS, &eos) != DI_OK)
        eos = -1;
    const uint32_t seq = 0;
    uint32_t n = p->n_prompt;
    const int32_t *feed = p->prompt;
    p->ref.n = 0;
    for (uint32_t t = 0; t < p->max_new && !st; t++) {
        const float *logits;
        di_digest d;
        int32_t tok;
        st = di_session_step(s, 1, &seq, &n, feed, 0);
        if (!st && t == 0 && g) /* the prompt is in: the grammar starts here, as the server's */
            st = di_session_seq_set_grammar(s, seq, g, NULL, 0);
        if (!st)
            st = di_session_logits(s, seq, &logits, &d);
        if (!st)
            st = p->sampled ? di_session_sample_token(s, seq, &tok) : di_session_greedy_token(s, seq, &tok);
        if (st)
            break;
        cli_hex(&d, p->ref.digests[t]);
        p->ref.tokens[p->ref.n++] = tok;
        if (tok == eos)
            break;
        n = 1;
        feed = &p->ref.tokens[t];
    }
    di_grammar_free(g);
    di_digest seqd;
    if (!st)
        st = di_session_seq_digest_extra(s, seq, &p->ref.tokens[p->ref.n - 1], 1, &seqd);
    if (st) {
        fprintf(stderr, "detinfer verify --url: local reference of %s: %s: %s\n", p->label, di_status_name(st),
                di_session_errmsg(s));
        return -1;
    }
    cli_hex(&seqd, p->ref.sequence);
    p->ref.ok = 1;
    p->ref_source = "local library";
    return 0;
}

int vu_references(vu *v)
{
    if (!v->model)
        return CLI_EXIT_OK;
    di_session *s = NULL;
    char err[512] = "";
    cli_session_opts so = {.backend = DI_BACKEND_CPU, .profile = v->profile, .threads = 1,
                          .max_sequences = 1, .context_length = v->context, .device = 0,
                          .cpu_path = DI_CPU_PATH_AUTO};
    di_status st = cli_open_session(v->model, &so, &s, err, sizeof err);
    if (st)
        return cli_fail(&vu_command, "creating the local session", st, err);
    int rc = CLI_EXIT_OK;
    for (uint32_t i = 0; i < v->n_probes && rc == CLI_EXIT_OK; i++)
        if (local_reference(v, s, &v->p[i]))
            rc = CLI_EXIT_FAIL;
    di_session_free(s);
    return rc;
}
