/*
 * detinfer_verify_report.c — the text report of `detinfer verify`: the
 * table of axes x result, the near ties, the first divergence, the verdict.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "detinfer_verify_state.h"

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

static void print_prompt_label(const dt_prompt *p, int width)
{
    char buf[64];
    size_t n = strlen(p->label) < 40 ? strlen(p->label) : 40;
    while (n > 0 && n < strlen(p->label) && ((unsigned char)p->label[n] & 0xc0) == 0x80)
        n--; /* do not cut a UTF-8 sequence */
    int at = 0;
    for (size_t i = 0; i < n && at < (int)sizeof buf - 2; i++)
        buf[at++] = p->label[i] == '\n' || p->label[i] == '\t' ? ' ' : p->label[i];
    buf[at] = '\0';
    printf("%-*s", width, buf);
}

static void print_ties(const verify *v)
{
    tie *t;
    uint32_t n = verify_smallest_gaps(v, &t);
    if (n == 0) {
        free(t);
        return;
    }
    printf("\nnear ties: the smallest top-2 logit gaps of the reference run, and whether every run\n"
           "that reached them with the same tokens chose the same token\n");
    printf("%-40s %8s %7s %9s %-22s %s\n", "prompt", "position", "token", "runner-up", "gap", "held");
    for (uint32_t i = 0; i < n; i++) {
        const dt_trace *r = &v->ref[t[i].prompt];
        const tie_count *tc = &v->ties[(size_t)t[i].prompt * v->o.max_new + t[i].choice];
        char gap[40];
        snprintf(gap, sizeof gap, "%.3g (%llu ulp)", t[i].gap,
                 (unsigned long long)dt_ulp_distance(r->best_logit[t[i].choice], r->second_logit[t[i].choice]));
        print_prompt_label(&v->prompts.p[t[i].prompt], 40);
        printf(" %8u %7d %9d %-22s %s (%u/%u runs)\n", r->n_prompt - 1 + t[i].choice, r->tokens[t[i].choice],
               r->runner_up[t[i].choice], gap, tc->held == tc->reached ? "yes" : "NO", tc->held, tc->reached);
    }
    free(t);
}

static void print_mismatch(const verify *v)
{
    const mismatch *m = &v->first;
    const vrow *r = &v->rows[m->row];
    const dt_prompt *p = &v->prompts.p[m->prompt];
    char chunk[16], want[DI_DIGEST_HEX_SIZE], got[DI_DIGEST_HEX_SIZE];
    verify_chunk_text(r->chunk, chunk, sizeof chunk);
    printf("\nfirst divergence: %s %s (batch %u, %ld thread%s, chunk %s, backend %s%s), request %u in slot %u\n",
           r->axis, r->value, r->batch, r->threads, r->threads == 1 ? "" : "s", chunk, dt_backend_name(r->backend),
           r->fresh ? ", fresh process" : "", m->request, m->slot);
    printf("  prompt %u ", m->prompt);
    dt_print_quoted(stdout, p->label, strlen(p->label));
    if (m->pos < v->ref[m->prompt].n_pos) {
        dt_hex(&m->want, want);
        dt_hex(&m->got, got);
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
    dt_hex(&m->want_sequence, want);
    dt_hex(&m->got_sequence, got);
    printf("  sequence digest: reference %s, this run %s\n", want, got);
}

void verify_print_text(const verify *v)
{
    printf("detinfer verify: %s (%s, vocabulary %lld), libdetinfer %s\n", v->o.model,
           di_model_architecture(v->model), (long long)v->n_vocab, di_version_string());
    printf("reference: backend %s, profile %s, alone (batch 1), %ld thread%s, whole prompt in one step (%.2f s)\n",
           dt_backend_name(v->o.backend), dt_profile_name(v->o.profile), v->o.threads[0],
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
    printf("\nFAIL: %u of %u runs differ or failed (%llu requests, %llu logits rows)\n", bad, v->n_rows,
           (unsigned long long)requests, (unsigned long long)rows);
}
