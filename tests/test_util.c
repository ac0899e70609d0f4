/*
 * test_util.c — see test_util.h.
 */
#include "test_util.h"

#include "gguf_builder.h"

#include <ctype.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_ops.h"

const char *tu_models[TU_MAX_MODELS];

int tu_n_models(void)
{
    static int n = -1;
    static char names[TU_MAX_MODELS][64];
    if (n >= 0)
        return n;
    const char *dir = getenv("DI_TEST_MODELS");
    char path[4096], line[256];
    snprintf(path, sizeof path, "%s/models.txt", dir ? dir : "(DI_TEST_MODELS unset)");
    FILE *f = dir ? fopen(path, "r") : NULL;
    n = 0;
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '\0')
            continue;
        if (n == TU_MAX_MODELS || strlen(line) >= sizeof names[0]) {
            n = 0; /* reported below, as a list that cannot be read */
            break;
        }
        snprintf(names[n], sizeof names[n], "%s", line);
        tu_models[n] = names[n];
        n++;
    }
    if (f)
        fclose(f);
    if (n == 0) {
        fprintf(stderr, "test_util: no generated models read from %s\n", path);
        tu_models[0] = "(no models.txt in DI_TEST_MODELS: run the suites with make check)";
        n = 1;
    }
    return n;
}

const char *tu_model_path(const char *name, const char *ext)
{
    static char path[4096];
    const char *dir = getenv("DI_TEST_MODELS");
    ck_assert_msg(dir != NULL, "DI_TEST_MODELS is not set (run the suite with make check)");
    snprintf(path, sizeof path, "%s/%s%s", dir, name, ext);
    return path;
}

void tu_tool_path(char *out, size_t n)
{
    const char *tool = getenv("DI_TEST_TOOL"), *example = getenv("DI_TEST_EXAMPLE");
    if (tool && *tool) {
        snprintf(out, n, "%s", tool);
        return;
    }
    ck_assert_msg(example != NULL, "neither DI_TEST_TOOL nor DI_TEST_EXAMPLE is set (run the suite with make check)");
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", example);
    snprintf(out, n, "%s/../tools/detinfer", dirname(copy)); /* BUILD/examples/.. */
}

di_model *tu_load(const char *name)
{
    char err[512];
    di_model *m = NULL;
    di_status st = di_model_load(tu_model_path(name, ".gguf"), &m, err, sizeof err);
    ck_assert_msg(st == DI_OK, "loading %s: %s: %s", name, di_status_name(st), err);
    return m;
}

di_model *tu_tiny_model(void)
{
    char dir[4096], path[4200], err[512] = "";
    gb_model m;
    gb_llama_params p = gb_llama_defaults();
    gb_model_llama(&m, &p);
    ck_assert_int_eq(gb_tmpdir(dir, sizeof dir), 0);
    gb_path(path, sizeof path, dir, "tiny.gguf");
    int written = gb_model_write(&m, path, NULL);
    gb_model_free(&m);
    di_model *model = NULL;
    di_status st = written == 0 ? di_model_load(path, &model, err, sizeof err) : DI_ERR_IO;
    gb_rmdir(dir); /* the mapping stays valid */
    ck_assert_msg(st == DI_OK, "tiny model: %s: %s", di_status_name(st), err);
    return model;
}

di_session *tu_session(const di_model *m, int threads, int max_seq, int ctx)
{
    return tu_session_on(m, threads, max_seq, ctx, DI_CPU_PATH_AUTO);
}

di_session *tu_session_on(const di_model *m, int threads, int max_seq, int ctx, di_cpu_path path)
{
    di_config *c = NULL;
    di_session *s = NULL;
    char err[512];
    ck_assert_int_eq(di_config_create(&c), DI_OK);
    ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_THREADS, threads), DI_OK);
    ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_MAX_SEQUENCES, max_seq), DI_OK);
    ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_CONTEXT_LENGTH, ctx), DI_OK);
    /* the suites run the small models past their training context on purpose */
    ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_ALLOW_LONG_CONTEXT, 1), DI_OK);
    ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_CPU_PATH, path), DI_OK);
    /* DI_TEST_BACKEND=cuda (tests/gpu/run.sh) runs the suites on the GPU,
     * DI_TEST_PROFILE=device (or integer) in that profile. */
    const char *backend = getenv("DI_TEST_BACKEND"), *profile = getenv("DI_TEST_PROFILE");
    if (backend && !strcmp(backend, "cuda"))
        ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_BACKEND, DI_BACKEND_CUDA), DI_OK);
    if (profile && !strcmp(profile, "device"))
        ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_PROFILE, DI_PROFILE_DEVICE), DI_OK);
    if (profile && !strcmp(profile, "integer"))
        ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_PROFILE, DI_PROFILE_INTEGER), DI_OK);
    di_status st = di_session_create(m, c, &s, err, sizeof err);
    ck_assert_msg(st == DI_OK, "session: %s: %s", di_status_name(st), err);
    di_config_free(c);
    return s;
}

uint32_t tu_read_prompt(const char *name, int32_t *tokens, uint32_t max)
{
    FILE *f = fopen(tu_model_path(name, ".tokens"), "r");
    ck_assert_msg(f != NULL, "cannot open the prompt of %s", name);
    uint32_t n = 0;
    int v;
    while (n < max && fscanf(f, "%d", &v) == 1)
        tokens[n++] = v;
    fclose(f);
    ck_assert_uint_gt(n, 0);
    return n;
}

static uint32_t read_u32_le(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

tu_ref *tu_read_ref(const char *name)
{
    FILE *f = fopen(tu_model_path(name, ".ref"), "rb");
    ck_assert_msg(f != NULL, "cannot open the reference of %s", name);
    unsigned char head[16];
    ck_assert_int_eq(fread(head, 1, 16, f), 16);
    ck_assert_msg(memcmp(head, "DIREF001", 8) == 0, "bad reference magic");
    tu_ref *r = calloc(1, sizeof *r);
    r->n_tokens = read_u32_le(head + 8);
    r->n_vocab = read_u32_le(head + 12);
    r->tokens = malloc(r->n_tokens * sizeof *r->tokens);
    r->logits = malloc((size_t)r->n_tokens * r->n_vocab * sizeof *r->logits);
    /* the file is little-endian, as is every machine this suite runs on */
    ck_assert_int_eq(fread(r->tokens, sizeof *r->tokens, r->n_tokens, f), r->n_tokens);
    ck_assert_int_eq(fread(r->logits, sizeof *r->logits, (size_t)r->n_tokens * r->n_vocab, f),
                     (size_t)r->n_tokens * r->n_vocab);
    fclose(f);
    return r;
}

void tu_free_ref(tu_ref *r)
{
    if (!r)
        return;
    free(r->tokens);
    free(r->logits);
    free(r);
}

void tu_step(di_session *s, uint32_t seq, const int32_t *tokens, uint32_t n, uint32_t flags)
{
    di_status st = di_session_step(s, 1, &seq, &n, tokens, flags);
    ck_assert_msg(st == DI_OK, "step: %s: %s", di_status_name(st), di_session_errmsg(s));
}

uint32_t tu_decode(di_session *s, const int32_t *prompt, uint32_t n_prompt, uint32_t n_gen, uint32_t k,
                   int32_t *tokens, di_digest *digests)
{
    const uint32_t seq = 0;
    tu_step(s, seq, prompt, n_prompt, 0);
    digests[0] = tu_last_digest(s, seq);
    ck_assert_int_eq(di_session_sample_token(s, seq, &tokens[0]), DI_OK);
    uint32_t n = 1, accepted_total = 0;
    int32_t feed[1 + DI_DRAFT_MAX];
    while (n < n_gen) {
        uint32_t n_draft = 0, accepted = 0;
        feed[0] = tokens[n - 1];
        if (k > 0)
            ck_assert_int_eq(di_session_seq_draft_lookup(s, seq, feed[0], 3, k, feed + 1, &n_draft), DI_OK);
        tu_step(s, seq, feed, n_draft + 1, k > 0 ? DI_STEP_ALL_LOGITS : 0);
        di_digest rows[1 + DI_DRAFT_MAX];
        for (uint32_t i = 0; k > 0 && i <= n_draft; i++)
            ck_assert_int_eq(di_session_logits_at(s, seq, i, &(const float *){NULL}, &rows[i]), DI_OK);
        int32_t next;
        if (k > 0) {
            ck_assert_int_eq(di_session_seq_accept_draft(s, seq, n_draft, &accepted, &next), DI_OK);
        } else {
            rows[0] = tu_last_digest(s, seq);
            ck_assert_int_eq(di_session_sample_token(s, seq, &next), DI_OK);
        }
        accepted_total += accepted;
        for (uint32_t i = 0; i < accepted && n < n_gen; i++) {
            digests[n] = rows[i];
            tokens[n++] = feed[1 + i];
        }
        if (n < n_gen) {
            digests[n] = rows[accepted];
            tokens[n++] = next;
        }
    }
    return accepted_total;
}

di_digest tu_last_digest(di_session *s, uint32_t seq)
{
    const float *logits;
    di_digest d;
    ck_assert_int_eq(di_session_logits(s, seq, &logits, &d), DI_OK);
    return d;
}

void tu_prompt_digests(di_session *s, uint32_t seq, const int32_t *tokens, uint32_t n,
                       const uint32_t *chunks, uint32_t n_chunks, di_digest *out)
{
    uint32_t done = 0;
    for (uint32_t c = 0; done < n; c++) {
        uint32_t len = chunks ? chunks[c % n_chunks] : n;
        if (len > n - done)
            len = n - done;
        tu_step(s, seq, tokens + done, len, DI_STEP_ALL_LOGITS);
        for (uint32_t i = 0; i < len; i++) {
            const float *row;
            ck_assert_int_eq(di_session_logits_at(s, seq, i, &row, &out[done + i]), DI_OK);
        }
        done += len;
    }
}

void tu_assert_digest_eq(const di_digest *want, const di_digest *got, const char *what, int index)
{
    if (di_digest_equal(want, got))
        return;
    char a[DI_DIGEST_HEX_SIZE], b[DI_DIGEST_HEX_SIZE];
    di_digest_format(want, a);
    di_digest_format(got, b);
    ck_abort_msg("%s [%d]: digest %s != %s", what, index, b, a);
}

uint64_t tu_rand(uint64_t *state)
{
    /* splitmix64 */
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int tu_cpu_path_available(di_cpu_path path)
{
    return di_cpu_ops_for(path) != NULL;
}

/* The file at DI_TEST_ROOT/rel as one line: newlines and C comment margins
 * (" * ") become single spaces. */
char *tu_read_doc_flat(const char *rel)
{
    const char *root = getenv("DI_TEST_ROOT");
    ck_assert_msg(root != NULL, "DI_TEST_ROOT is not set");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    const long size = ftell(f);
    ck_assert_int_eq(fseek(f, 0, SEEK_SET), 0);
    char *text = malloc((size_t)size + 1);
    ck_assert_ptr_nonnull(text);
    ck_assert_uint_eq(fread(text, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    size_t n = 0;
    for (long i = 0; i < size; i++) {
        if (text[i] != '\n') {
            text[n++] = text[i];
            continue;
        }
        text[n++] = ' ';
        while (i + 1 < size && (text[i + 1] == ' ' || text[i + 1] == '*'))
            i++;
    }
    text[n] = '\0';
    return text;
}

int tu_mentions(const char *text, const char *needle)
{
    size_t n = strlen(needle);
    for (const char *p = text; *p; p++) {
        size_t i = 0;
        while (i < n && p[i] && tolower((unsigned char)p[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == n)
            return 1;
    }
    return n == 0;
}
