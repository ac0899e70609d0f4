/*
 * verify_report.c — the text report of `detinfer verify`: the
 * table of axes x result, the near ties with held/DIFFERS per axis, the
 * first divergence, the verdict. For verify --url: each failed or
 * differing response, the table of requests, the verdict.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verify/verify_state.h"
#include "verify/verify_url.h"

const char *verify_status_word(row_status s)
{
    return s == ROW_OK ? "ok" : s == ROW_MISMATCH ? "MISMATCH" : s == ROW_SKIPPED ? "skipped" : "ERROR";
}

void verify_chunk_text(uint32_t chunk, char *buf, size_t n)
{
    if (chunk)
        snprintf(buf, n, "%u", chunk);
    else
        snprintf(buf, n, "whole");
}

static void print_table(const verify *v)
{
    printf("%-8s %-11s %5s %7s %5s %8s %11s %8s  %s\n", "axis", "value", "batch", "threads", "chunk", "requests",
           "logits-rows", "seconds", "result");
    for (uint32_t i = 0; i < v->n_rows; i++) {
        const vrow *r = &v->rows[i];
        char chunk[16];
        verify_chunk_text(r->chunk, chunk, sizeof chunk);
        printf("%-8s %-11s %5u %7ld %5s %8llu %11llu %8.2f  %s", r->axis, r->value, r->batch, r->threads, chunk,
               (unsigned long long)r->requests, (unsigned long long)r->rows, r->seconds, verify_status_word(r->status));
        if (r->status == ROW_MISMATCH)
            printf(" (%llu of %llu requests differ)", (unsigned long long)r->differing,
                   (unsigned long long)r->requests);
        if (r->detail[0])
            printf(": %s", r->detail);
        putchar('\n');
    }
}

static void print_prompt_label(const vf_prompt *p, int width)
{
    char buf[64];
    size_t limit = width < 40 ? (size_t)width : 40;
    size_t n = strlen(p->label) < limit ? strlen(p->label) : limit;
    while (n > 0 && n < strlen(p->label) && ((unsigned char)p->label[n] & 0xc0) == 0x80)
        n--; /* do not cut a UTF-8 sequence */
    int at = 0;
    for (size_t i = 0; i < n && at < (int)sizeof buf - 2; i++)
        buf[at++] = p->label[i] == '\n' || p->label[i] == '\t' ? ' ' : p->label[i];
    buf[at] = '\0';
    printf("%-*s", width, buf);
}

const char *verify_tie_word(const verify *v, uint32_t tie, uint32_t row)
{
    const tie_result *res = &v->tie_results[(size_t)tie * MAX_ROWS + row];
    if (res->runs)
        return res->held ? "held" : "DIFFERS";
    return v->rows[row].status == ROW_SKIPPED ? "skipped" : "error";
}

/* One word for a near tie over every run of one axis: DIFFERS if any run
 * differed, else error if one failed, else held if one held, else skipped. */
static const char *axis_word(const verify *v, uint32_t tie, const char *axis)
{
    int differs = 0, error = 0, held = 0;
    for (uint32_t r = 0; r < v->n_rows; r++) {
        if (strcmp(v->rows[r].axis, axis))
            continue;
        const char *w = verify_tie_word(v, tie, r);
        differs |= !strcmp(w, "DIFFERS");
        error |= !strcmp(w, "error");
        held |= !strcmp(w, "held");
    }
    return differs ? "DIFFERS" : error ? "error" : held ? "held" : "skipped";
}

/* The axes in the plan's order, each once. */
static uint32_t axis_names(const verify *v, const char **names)
{
    uint32_t n = 0;
    for (uint32_t r = 0; r < v->n_rows; r++) {
        uint32_t k = 0;
        while (k < n && strcmp(names[k], v->rows[r].axis))
            k++;
        if (k == n)
            names[n++] = v->rows[r].axis;
    }
    return n;
}

static void print_ties(const verify *v)
{
    const vf_near_ties *t = &v->ties;
    if (v->o.near_ties == 0)
        return;
    double seconds = 0;
    for (uint32_t r = 0; r < v->n_rows; r++)
        seconds += v->rows[r].tie_seconds;
    printf("\nnear ties: the %u smallest top-1/top-2 logit gaps (in ulp: the float32 values above the\n"
           "runner-up up to the top logit) among %llu positions of %u prompts and their greedy\n"
           "continuations of %u tokens, teacher-forced (%.1f s); each re-run on every axis (%.1f s):\n"
           "held = the same token and logits digest as there\n",
           t->n, (unsigned long long)t->positions, t->n_sources, t->continuation, t->seconds, seconds);
    const char *names[MAX_ROWS];
    uint32_t n_axes = axis_names(v, names);
    printf("%3s %-28s %8s %9s %7s %7s", "#", "prompt", "position", "gap-ulp", "top-1", "top-2");
    for (uint32_t a = 0; a < n_axes; a++)
        printf(" %-8s", names[a]);
    putchar('\n');
    for (uint32_t k = 0; k < t->n; k++) {
        const vf_near_tie *nt = &t->t[k];
        char label[32];
        snprintf(label, sizeof label, "%u ", nt->source);
        printf("%3u %s", k + 1, label);
        print_prompt_label(&v->search.p[nt->source], 28 - (int)strlen(label));
        printf(" %8u %9llu %7d %7d", nt->position, (unsigned long long)nt->gap_ulps, nt->top1, nt->top2);
        for (uint32_t a = 0; a < n_axes; a++)
            printf(" %-8s", axis_word(v, k, names[a]));
        putchar('\n');
    }
    for (uint32_t k = 0; k < t->n; k++)
        for (uint32_t r = 0; r < v->n_rows; r++) {
            const tie_result *res = &v->tie_results[(size_t)k * MAX_ROWS + r];
            if (!res->runs || res->held)
                continue;
            char want[DI_DIGEST_HEX_SIZE], got[DI_DIGEST_HEX_SIZE];
            cli_hex(&t->t[k].digest, want);
            cli_hex(&res->digest, got);
            printf("near tie %u DIFFERS on %s %s: token %d (reference %d), logits digest %s (reference %s)\n",
                   k + 1, v->rows[r].axis, v->rows[r].value, res->token, t->t[k].top1, got, want);
        }
}

static void print_mismatch(const verify *v)
{
    const mismatch *m = &v->first;
    const vrow *r = &v->rows[m->row];
    const vf_prompt *p = &v->prompts.p[m->prompt];
    char chunk[16], want[DI_DIGEST_HEX_SIZE], got[DI_DIGEST_HEX_SIZE];
    verify_chunk_text(r->chunk, chunk, sizeof chunk);
    printf("\nfirst divergence: %s %s (batch %u, %ld thread%s, chunk %s, backend %s%s), request %u in slot %u\n",
           r->axis, r->value, r->batch, r->threads, r->threads == 1 ? "" : "s", chunk, cli_backend_name(r->backend),
           r->fresh ? ", fresh process" : "", m->request, m->slot);
    printf("  prompt %u ", m->prompt);
    cli_print_quoted(stdout, p->label, strlen(p->label));
    if (m->pos < v->ref[m->prompt].n_pos) {
        cli_hex(&m->want, want);
        cli_hex(&m->got, got);
        if (m->choice >= 0)
            printf(", position %u (where generated token %lld of %ld was chosen)\n", m->pos,
                   (long long)m->choice + 1, v->o.max_new);
        else
            printf(", position %u (inside the prompt of %u tokens)\n", m->pos, p->n);
        printf("  logits digest: reference %s, this run %s\n", want, got);
        if (m->choice >= 0)
            printf("  greedy token:  reference %d, this run %d\n", m->want_token, m->got_token);
    } else {
        printf(": every logits row equal, but the sequence digests differ\n");
    }
    cli_hex(&m->want_sequence, want);
    cli_hex(&m->got_sequence, got);
    printf("  sequence digest: reference %s, this run %s\n", want, got);
}

void verify_print_text(const verify *v)
{
    printf("detinfer verify: %s (%s, vocabulary %lld), libdetinfer %s\n", v->o.model,
           di_model_architecture(v->model), (long long)v->n_vocab, di_version_string());
    printf("reference: backend %s, profile %s (numerics %d), alone (batch 1), %ld thread%s, whole prompt in one "
           "step (%.2f s)\n",
           cli_backend_name(v->o.backend), cli_profile_name(v->o.profile), cli_profile_numerics(v->o.profile),
           v->o.threads[0],
           v->o.threads[0] == 1 ? "" : "s", v->ref_seconds);
    printf("prompts: %s; %ld new tokens each\n\n", v->prompts.note, v->o.max_new);
    print_table(v);
    print_ties(v);
    uint64_t requests, rows;
    uint32_t bad;
    if (verify_verdict(v, &requests, &rows, &bad)) {
        printf("\nPASS: %llu requests, %llu logits rows, every digest equal to the reference\n",
               (unsigned long long)requests, (unsigned long long)rows);
        return;
    }
    if (v->first.set)
        print_mismatch(v);
    uint32_t ties = verify_ties_differing(v);
    printf("\nFAIL: %u of %u runs differ or failed%s (%llu requests, %llu logits rows)\n", bad, v->n_rows,
           ties ? ", near ties differ" : "", (unsigned long long)requests, (unsigned long long)rows);
}

/* ---- verify --url ------------------------------------------------------------ */

/* Each response that failed or differs from its reference, in the order sent. */
static void print_url_problems(const vu *v)
{
    for (uint32_t i = 0; i < v->n_probes; i++) {
        const vu_probe *p = &v->p[i];
        const vu_outcome *ref = p->reference;
        for (uint32_t r = 0; r < p->reps; r++) {
            const vu_outcome *o = &p->got[r];
            if (!o->ok) {
                printf("FAILED %s, request %u of %u: %s\n", p->label, r + 1, p->reps, o->error);
                continue;
            }
            long pos = o->difference;
            if (pos < 0)
                continue;
            printf("MISMATCH %s, request %u of %u, generated position %ld (sequence position %ld):\n", p->label,
                   r + 1, p->reps, pos, pos + (long)p->n_prompt);
            if ((uint32_t)pos < o->n && (uint32_t)pos < ref->n)
                printf("  token %d logits %s, reference (%s) token %d logits %s\n", o->tokens[pos], o->digests[pos],
                       p->ref_source, ref->tokens[pos], ref->digests[pos]);
            printf("  sequence %s (%u tokens), reference %s (%u tokens)\n", o->sequence, o->n, ref->sequence, ref->n);
        }
    }
}

void vu_print_report(const vu *v, double seconds)
{
    print_url_problems(v);
    printf("\n%-48s %-9s %8s %8s  %-15s %s\n", "request", "kind", "sent", "matched", "reference", "result");
    uint32_t traffic = 0, traffic_ok = 0, total = 0, ok = 0;
    for (uint32_t i = 0; i < v->n_probes; i++) {
        const vu_probe *p = &v->p[i];
        total += p->reps;
        ok += p->matched;
        if (!strcmp(p->kind, "traffic")) {
            traffic += p->reps;
            traffic_ok += p->matched;
            continue;
        }
        printf("%-48s %-9s %8u %8u  %-15s %s\n", p->label, p->kind, p->reps, p->matched, p->ref_source,
               p->matched == p->reps ? "OK" : "MISMATCH");
    }
    if (traffic)
        printf("%-48s %-9s %8u %8u  %-15s %s\n", "other traffic (varied lengths, each once)", "traffic", traffic,
               traffic_ok, v->model ? "local library" : "itself", traffic_ok == traffic ? "OK" : "MISMATCH");
    printf("\n%u requests in %.1f s, %ld at once: %u matched, %u did not. %s\n", total, seconds, v->o.concurrency, ok,
           total - ok, ok == total ? "OK: every response equals its reference." : "FAILED.");
}
