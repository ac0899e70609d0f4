/*
 * serve_metrics.c — what /metrics reports, in Prometheus' text format:
 * requests by endpoint and status, tokens in and out, queue depth, the
 * engine's step batch size and latency histograms, and the fingerprint as
 * the labels of detinfer_info.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "serve/serve.h"

#define MAX_REQUEST_SERIES 64

static const double batch_buckets[] = {1, 2, 4, 8, 16, 32, 64, 128};
static const double latency_buckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10};
#define N_BATCH (sizeof batch_buckets / sizeof *batch_buckets)
#define N_LATENCY (sizeof latency_buckets / sizeof *latency_buckets)

typedef struct histogram {
    const double *bounds;
    size_t n;
    uint64_t counts[16]; /* cumulative at output time; per bucket here, +Inf last */
    double sum;
    uint64_t total;
} histogram;

struct sv_metrics {
    pthread_mutex_t lock;
    struct {
        const char *endpoint;
        int status;
        uint64_t count;
    } requests[MAX_REQUEST_SERIES];
    int n_requests;
    uint64_t prompt_tokens, completion_tokens, steps, step_tokens, prefix_tokens;
    histogram batch, latency;
};

int sv_metrics_create(sv_server *srv)
{
    sv_metrics *m = calloc(1, sizeof *m);
    if (!m)
        return -1;
    pthread_mutex_init(&m->lock, NULL);
    m->batch = (histogram){.bounds = batch_buckets, .n = N_BATCH};
    m->latency = (histogram){.bounds = latency_buckets, .n = N_LATENCY};
    srv->metrics = m;
    return 0;
}

void sv_metrics_free(sv_server *srv)
{
    if (!srv->metrics)
        return;
    pthread_mutex_destroy(&srv->metrics->lock);
    free(srv->metrics);
    srv->metrics = NULL;
}

/* endpoint is a static string (the route table's). */
void sv_metrics_request(sv_server *srv, const char *endpoint, int status)
{
    sv_metrics *m = srv->metrics;
    pthread_mutex_lock(&m->lock);
    int i = 0;
    while (i < m->n_requests && !(m->requests[i].endpoint == endpoint && m->requests[i].status == status))
        i++;
    if (i == m->n_requests && i < MAX_REQUEST_SERIES) {
        m->requests[i].endpoint = endpoint;
        m->requests[i].status = status;
        m->n_requests++;
    }
    if (i < m->n_requests)
        m->requests[i].count++;
    pthread_mutex_unlock(&m->lock);
}

void sv_metrics_tokens(sv_server *srv, uint64_t prompt, uint64_t completion)
{
    sv_metrics *m = srv->metrics;
    pthread_mutex_lock(&m->lock);
    m->prompt_tokens += prompt;
    m->completion_tokens += completion;
    pthread_mutex_unlock(&m->lock);
}

void sv_metrics_prefix(sv_server *srv, uint32_t tokens)
{
    sv_metrics *m = srv->metrics;
    pthread_mutex_lock(&m->lock);
    m->prefix_tokens += tokens;
    pthread_mutex_unlock(&m->lock);
}

static void observe(histogram *h, double v)
{
    size_t i = 0;
    while (i < h->n && v > h->bounds[i])
        i++;
    h->counts[i]++;
    h->sum += v;
    h->total++;
}

void sv_metrics_step(sv_server *srv, uint32_t batch_sequences, uint32_t batch_tokens, double seconds)
{
    sv_metrics *m = srv->metrics;
    pthread_mutex_lock(&m->lock);
    m->steps++;
    m->step_tokens += batch_tokens;
    observe(&m->batch, batch_sequences);
    observe(&m->latency, seconds);
    pthread_mutex_unlock(&m->lock);
}

typedef struct buf {
    char *p;
    size_t len, cap;
    int failed;
} buf;

static void put(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(buf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = b->failed ? 0 : vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (b->failed || n < 0)
            return;
        if (b->p && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap ? b->cap * 2 : 4096) + (size_t)n;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->failed = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
}

/* Label values: backslash, quote and newline escaped. */
static void put_label(buf *b, const char *v)
{
    for (; *v; v++)
        put(b, "%s%c", (*v == '\\' || *v == '"') ? "\\" : "", *v == '\n' ? 'n' : *v);
}

static void put_histogram(buf *b, const char *name, const char *help, const histogram *h)
{
    put(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (size_t i = 0; i < h->n; i++) {
        cum += h->counts[i];
        put(b, "%s_bucket{le=\"%g\"} %llu\n", name, h->bounds[i], (unsigned long long)cum);
    }
    put(b, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.9g\n%s_count %llu\n", name, (unsigned long long)h->total, name,
        h->sum, name, (unsigned long long)h->total);
}

char *sv_metrics_text(sv_server *srv, int queued, int running)
{
    sv_metrics *m = srv->metrics;
    buf b = {0};
    pthread_mutex_lock(&m->lock);
    put(&b, "# HELP detinfer_info The fingerprint of this server's results.\n# TYPE detinfer_info gauge\n");
    put(&b, "detinfer_info{version=\"");
    put_label(&b, di_version_string());
    put(&b, "\",backend=\"");
    put_label(&b, srv->backend_info);
    put(&b, "\",model_digest=\"%s\",model=\"", srv->model_digest);
    put_label(&b, srv->cfg.model_name);
    put(&b, "\"} 1\n");
    put(&b, "# HELP detinfer_requests_total HTTP requests by endpoint and status.\n"
            "# TYPE detinfer_requests_total counter\n");
    for (int i = 0; i < m->n_requests; i++)
        put(&b, "detinfer_requests_total{endpoint=\"%s\",status=\"%d\"} %llu\n", m->requests[i].endpoint,
            m->requests[i].status, (unsigned long long)m->requests[i].count);
    put(&b, "# HELP detinfer_prompt_tokens_total Prompt tokens of finished requests.\n"
            "# TYPE detinfer_prompt_tokens_total counter\ndetinfer_prompt_tokens_total %llu\n",
        (unsigned long long)m->prompt_tokens);
    put(&b, "# HELP detinfer_completion_tokens_total Generated tokens of finished requests.\n"
            "# TYPE detinfer_completion_tokens_total counter\ndetinfer_completion_tokens_total %llu\n",
        (unsigned long long)m->completion_tokens);
    put(&b, "# HELP detinfer_queue_depth Requests waiting for a sequence slot.\n"
            "# TYPE detinfer_queue_depth gauge\ndetinfer_queue_depth %d\n",
        queued);
    put(&b, "# HELP detinfer_running_requests Requests holding a sequence slot.\n"
            "# TYPE detinfer_running_requests gauge\ndetinfer_running_requests %d\n",
        running);
    put(&b, "# HELP detinfer_steps_total Engine steps.\n# TYPE detinfer_steps_total counter\n"
            "detinfer_steps_total %llu\n",
        (unsigned long long)m->steps);
    put(&b, "# HELP detinfer_step_tokens_total Tokens computed by engine steps.\n"
            "# TYPE detinfer_step_tokens_total counter\ndetinfer_step_tokens_total %llu\n",
        (unsigned long long)m->step_tokens);
    put(&b, "# HELP detinfer_prefix_reused_tokens_total Prompt tokens copied from a cached prefix, not computed.\n"
            "# TYPE detinfer_prefix_reused_tokens_total counter\ndetinfer_prefix_reused_tokens_total %llu\n",
        (unsigned long long)m->prefix_tokens);
    put_histogram(&b, "detinfer_step_batch_sequences", "Sequences per engine step.", &m->batch);
    put_histogram(&b, "detinfer_step_seconds", "Duration of an engine step.", &m->latency);
    pthread_mutex_unlock(&m->lock);
    if (b.failed) {
        free(b.p);
        return NULL;
    }
    return b.p;
}
