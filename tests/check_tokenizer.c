/*
 * check_tokenizer.c — the tokenizers against llama.cpp.
 *
 * Goldens (tests/data/tokenizer_goldens/NAME.txt, recorded from llama.cpp by
 * tests/tools/record_tokenizer_goldens.py) give, for each test string, the
 * exact token ids llama.cpp's tokenizer returns and the text its
 * llama_detokenize gives back, the ids with parse_special=true (S lines,
 * DI_TOKENIZE_PARSE_SPECIAL), plus the piece of single tokens and the
 * decoding of id sequences. They are checked on the synthetic vocabularies
 * that tests/tools/make_tokenizer_models.py regenerates into
 * $DI_TEST_MODELS, and on the real Gemma 3 file when it is present
 * ($DI_GEMMA_GGUF, or ~/.cache/detinfer/gemma-3-270m-q4_k_m.gguf).
 *
 * Then: decoding random valid UTF-8 gives it back, invalid UTF-8 is refused,
 * the buffer-size protocol, NULLs, ids out of range, a model without a
 * tokenizer, and malformed tokenizer metadata at load.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <iconv.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "detinfer.h"
#include "lib/format/gguf.h"
#include "gguf_builder.h"
#include "lib/base/growable.h"
#include "lib/base/utf8.h"
#include "test_util.h"
#include "lib/tokenizer/tokenizer_internal.h"

#define ERRBUF_SIZE 512

/* The synthetic vocabularies, as make_tokenizer_models.py names them. */
static const char *const synthetic[] = {
    "tok_spm",        "tok_spm_noprefix", "tok_bpe_llama3", "tok_bpe_qwen2",
    "tok_bpe_default", "tok_bpe_gpt2",    "tok_bpe_smollm",
};
#define N_SYNTHETIC ((int)(sizeof synthetic / sizeof synthetic[0]))

/* ---- a tokenizer behind the public API, or (Gemma) the internal one ------- */

typedef struct tok {
    di_model *model;         /* when the model loads */
    void *map;               /* else: the file and its tokenizer alone */
    size_t map_size;
    di_gguf gguf;
    di_tokenizer *tokenizer;
} tok;

static void tok_open_model(tok *k, const char *name)
{
    memset(k, 0, sizeof *k);
    k->model = tu_load(name);
}

/* Only the vocabulary of a file whose model this build may not load. */
static void tok_open_file(tok *k, const char *path)
{
    memset(k, 0, sizeof *k);
    int fd = open(path, O_RDONLY);
    ck_assert_msg(fd >= 0, "cannot open %s", path);
    struct stat st;
    ck_assert_int_eq(fstat(fd, &st), 0);
    k->map_size = (size_t)st.st_size;
    k->map = mmap(NULL, k->map_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    ck_assert_msg(k->map != MAP_FAILED, "cannot map %s", path);
    char err[ERRBUF_SIZE];
    di_status s = di_gguf_parse(k->map, k->map_size, &k->gguf, err, sizeof err);
    ck_assert_msg(s == DI_OK, "%s: %s", path, err);
    const di_gguf_kv *kv = di_gguf_find_kv(&k->gguf, "tokenizer.ggml.tokens");
    ck_assert_ptr_nonnull(kv);
    s = di_tokenizer_load(&k->gguf, (uint32_t)kv->v.arr.count, &k->tokenizer, err, sizeof err);
    ck_assert_msg(s == DI_OK, "%s: tokenizer: %s", path, err);
}

static void tok_close(tok *k)
{
    di_model_free(k->model);
    di_tokenizer_free(k->tokenizer);
    di_gguf_release(&k->gguf);
    if (k->map)
        munmap(k->map, k->map_size);
}

/* Token ids of text into *ids (malloc'd), through the buffer protocol. */
static di_status tok_encode(const tok *k, const char *text, size_t len, uint32_t flags,
                            int32_t **ids, size_t *n, char *err)
{
    *ids = NULL;
    *n = 0;
    if (!k->model) {
        di_tok_vec v = {0};
        di_status s = di_tokenizer_encode(k->tokenizer, text, len, flags, &v, err, ERRBUF_SIZE);
        *ids = v.v;
        *n = v.n;
        return s;
    }
    size_t need = 0;
    di_status s = di_model_tokenize(k->model, text, len, flags, NULL, 0, &need, err, ERRBUF_SIZE);
    if (s != DI_ERR_BUFFER_TOO_SMALL && s != DI_OK)
        return s;
    *ids = malloc((need ? need : 1) * sizeof **ids);
    s = di_model_tokenize(k->model, text, len, flags, *ids, need, n, err, ERRBUF_SIZE);
    ck_assert_msg(s != DI_OK || *n == need, "tokenize gave %zu tokens after asking for %zu", *n,
                  need);
    return s;
}

/* Decoded text into *text (malloc'd, NUL-terminated), through the protocol. */
static di_status tok_decode(const tok *k, const int32_t *ids, size_t n, char **text, size_t *len,
                            char *err)
{
    if (!k->model)
        return di_tokenizer_decode(k->tokenizer, ids, n, text, len, err, ERRBUF_SIZE);
    size_t need = 0;
    *text = NULL;
    di_status s = di_model_detokenize(k->model, ids, n, NULL, 0, &need, err, ERRBUF_SIZE);
    if (s != DI_ERR_BUFFER_TOO_SMALL)
        return s;
    *text = malloc(need + 1);
    s = di_model_detokenize(k->model, ids, n, *text, need + 1, len, err, ERRBUF_SIZE);
    ck_assert_msg(s != DI_OK || *len == need, "detokenize gave %zu bytes after asking for %zu",
                  *len, need);
    return s;
}

/* ---- goldens ------------------------------------------------------------- */

static int hexval(int c)
{
    return c <= '9' ? c - '0' : (c | 32) - 'a' + 10;
}

/* Undoes the recorder's escaping (\\ and \xHH) in place; returns the length. */
static size_t unescape(char *s)
{
    size_t n = 0;
    for (size_t i = 0; s[i];) {
        if (s[i] == '\\' && s[i + 1] == 'x') {
            s[n++] = (char)(hexval(s[i + 2]) * 16 + hexval(s[i + 3]));
            i += 4;
        } else if (s[i] == '\\' && s[i + 1] == '\\') {
            s[n++] = '\\';
            i += 2;
        } else {
            s[n++] = s[i++];
        }
    }
    s[n] = '\0';
    return n;
}

/* Escapes n bytes for a failure message (truncated to fit). */
static const char *show(const char *s, size_t n, char *out, size_t size)
{
    size_t w = 0;
    for (size_t i = 0; i < n && w + 5 < size; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7F && c != '\\')
            out[w++] = (char)c;
        else
            w += (size_t)snprintf(out + w, size - w, "\\x%02x", c);
    }
    out[w] = '\0';
    return out;
}

static size_t parse_ids(char *s, int32_t *ids, size_t max)
{
    size_t n = 0;
    for (char *p = strtok(s, " "); p && n < max; p = strtok(NULL, " "))
        ids[n++] = (int32_t)strtol(p, NULL, 10);
    return n;
}

static size_t split_tabs(char *line, char **fields, size_t max)
{
    size_t n = 0;
    fields[n++] = line;
    for (char *p = line; *p && n < max; p++) {
        if (*p == '\t') {
            *p = '\0';
            fields[n++] = p + 1;
        }
    }
    return n;
}

typedef struct golden_stats {
    int cases, failures;
    char first[4][1024];
} golden_stats;

static void note_failure(golden_stats *gs, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void note_failure(golden_stats *gs, const char *fmt, ...)
{
    if (gs->failures < 4) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(gs->first[gs->failures], sizeof gs->first[0], fmt, ap);
        va_end(ap);
    }
    gs->failures++;
}

static void ids_str(const int32_t *ids, size_t n, char *out, size_t size)
{
    size_t w = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && w + 12 < size; i++)
        w += (size_t)snprintf(out + w, size - w, "%s%d", i ? " " : "", ids[i]);
}

/* One T line: text (add_special) -> ids, and those ids -> text. */
static void check_encode_line(const tok *k, char **f, golden_stats *gs)
{
    static int32_t want[1 << 16];
    int add_special = atoi(f[1]);
    size_t len = unescape(f[2]);
    size_t n_want = parse_ids(f[3], want, sizeof want / sizeof want[0]);
    size_t want_len = unescape(f[4]);
    char err[ERRBUF_SIZE], a[200], b[400], c[400];
    int32_t *ids;
    size_t n;
    di_status s = tok_encode(k, f[2], len, add_special ? DI_TOKENIZE_ADD_BOS : 0, &ids, &n, err);
    gs->cases++;
    if (s != DI_OK) {
        note_failure(gs, "'%s': %s: %s", show(f[2], len, a, sizeof a), di_status_name(s), err);
    } else if (n != n_want || (n && memcmp(ids, want, n * sizeof *ids) != 0)) {
        ids_str(ids, n, b, sizeof b);
        ids_str(want, n_want, c, sizeof c);
        note_failure(gs, "'%s' (add_special %d): ids [%s], llama.cpp [%s]",
                     show(f[2], len, a, sizeof a), add_special, b, c);
    } else {
        char *text;
        size_t text_len;
        s = tok_decode(k, want, n_want, &text, &text_len, err);
        if (s != DI_OK)
            note_failure(gs, "decoding '%s': %s: %s", show(f[2], len, a, sizeof a),
                         di_status_name(s), err);
        else if (text_len != want_len || memcmp(text, f[4], want_len) != 0)
            note_failure(gs, "'%s' decodes to '%s', llama.cpp '%s'", show(f[2], len, a, sizeof a),
                         show(text, text_len, b, sizeof b), show(f[4], want_len, c, sizeof c));
        free(text);
    }
    free(ids);
}

/* One S line: text (add_special) -> ids with DI_TOKENIZE_PARSE_SPECIAL
 * (llama.cpp's parse_special=true). */
static void check_special_line(const tok *k, char **f, golden_stats *gs)
{
    static int32_t want[1 << 16];
    int add_special = atoi(f[1]);
    size_t len = unescape(f[2]);
    size_t n_want = parse_ids(f[3], want, sizeof want / sizeof want[0]);
    char err[ERRBUF_SIZE], a[200], b[400], c[400];
    int32_t *ids;
    size_t n;
    uint32_t flags = DI_TOKENIZE_PARSE_SPECIAL | (add_special ? DI_TOKENIZE_ADD_BOS : 0);
    di_status s = tok_encode(k, f[2], len, flags, &ids, &n, err);
    gs->cases++;
    if (s != DI_OK) {
        note_failure(gs, "'%s' (parse_special): %s: %s", show(f[2], len, a, sizeof a),
                     di_status_name(s), err);
    } else if (n != n_want || (n && memcmp(ids, want, n * sizeof *ids) != 0)) {
        ids_str(ids, n, b, sizeof b);
        ids_str(want, n_want, c, sizeof c);
        note_failure(gs, "'%s' (parse_special, add_special %d): ids [%s], llama.cpp [%s]",
                     show(f[2], len, a, sizeof a), add_special, b, c);
    }
    free(ids);
}

/* A D line (ids -> text) or, with piece set, a P line (one id -> its piece). */
static void check_decode_line(const tok *k, char *ids_field, char *text_field, int piece,
                              golden_stats *gs)
{
    static int32_t ids[1 << 12];
    size_t n = parse_ids(ids_field, ids, sizeof ids / sizeof ids[0]);
    size_t want_len = unescape(text_field);
    char err[ERRBUF_SIZE] = "", a[400], b[400], c[200];
    char *text = NULL;
    size_t len = 0;
    di_status s;
    gs->cases++;
    if (piece && k->model) {
        char buf[4096];
        s = di_model_token_piece(k->model, ids[0], buf, sizeof buf, &len);
        if (s == DI_OK)
            text = strdup(buf);
    } else if (piece) {
        /* llama.cpp's token_to_piece is the decoding of that token alone,
         * without the first-token space strip */
        di_tokenizer t = *k->tokenizer;
        t.add_space_prefix = 0;
        t.clean_spaces = 0;
        s = di_tokenizer_decode(&t, ids, 1, &text, &len, err, ERRBUF_SIZE);
    } else {
        s = tok_decode(k, ids, n, &text, &len, err);
    }
    ids_str(ids, n, c, sizeof c);
    if (s != DI_OK)
        note_failure(gs, "%s [%s]: %s %s", piece ? "piece" : "decode", c, di_status_name(s), err);
    else if (len != want_len || memcmp(text, text_field, len) != 0)
        note_failure(gs, "%s [%s] = '%s', llama.cpp '%s'", piece ? "piece" : "decode", c,
                     show(text, len, a, sizeof a), show(text_field, want_len, b, sizeof b));
    free(text);
}

static const char *golden_path(const char *name)
{
    static char path[4096];
    const char *root = getenv("DI_TEST_ROOT");
    ck_assert_msg(root != NULL, "DI_TEST_ROOT is not set (run the suite with make check)");
    snprintf(path, sizeof path, "%s/tests/data/tokenizer_goldens/%s.txt", root, name);
    return path;
}

static golden_stats run_goldens(const tok *k, const char *name)
{
    golden_stats gs = {0};
    FILE *f = fopen(golden_path(name), "r");
    ck_assert_msg(f != NULL, "cannot open %s", golden_path(name));
    static char line[1 << 20];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '#' || line[0] == '\0')
            continue;
        char *fields[6];
        size_t nf = split_tabs(line, fields, 6);
        if (fields[0][0] == 'T' && nf == 5)
            check_encode_line(k, fields, &gs);
        else if (fields[0][0] == 'S' && nf == 4)
            check_special_line(k, fields, &gs);
        else if ((fields[0][0] == 'P' || fields[0][0] == 'D') && nf == 3)
            check_decode_line(k, fields[1], fields[2], fields[0][0] == 'P', &gs);
        else
            ck_abort_msg("%s: malformed golden line '%.60s'", name, line);
    }
    fclose(f);
    return gs;
}

static void assert_goldens(const golden_stats *gs, const char *name)
{
    ck_assert_msg(gs->cases > 0, "%s: no golden cases", name);
    ck_assert_msg(gs->failures == 0, "%s: %d of %d golden cases differ from llama.cpp:\n  %s\n  %s\n  %s\n  %s",
                  name, gs->failures, gs->cases, gs->first[0], gs->first[1], gs->first[2],
                  gs->first[3]);
}

START_TEST(test_goldens_synthetic)
{
    tok k;
    tok_open_model(&k, synthetic[_i]);
    golden_stats gs = run_goldens(&k, synthetic[_i]);
    assert_goldens(&gs, synthetic[_i]);
    tok_close(&k);
}
END_TEST

/* The size of the Gemma file the goldens were recorded on (their header). */
static long long golden_file_size(const char *name)
{
    FILE *f = fopen(golden_path(name), "r");
    ck_assert_msg(f != NULL, "cannot open %s", golden_path(name));
    char line[512];
    long long size = -1;
    if (fgets(line, sizeof line, f)) {
        const char *p = strstr(line, ".gguf, ");
        if (p)
            size = strtoll(p + 7, NULL, 10);
    }
    fclose(f);
    return size;
}

/* $DI_GEMMA_GGUF, the suite's real model ($DI_TEST_REAL_MODEL), or the cache;
 * NULL (and why in *why) when none is the recorded file. */
static const char *gemma_path(const char **why)
{
    static char path[4096];
    const char *home = getenv("HOME");
    char cached[4096];
    snprintf(cached, sizeof cached, "%s/.cache/detinfer/gemma-3-270m-q4_k_m.gguf", home ? home : "");
    const char *candidates[] = {getenv("DI_GEMMA_GGUF"), getenv("DI_TEST_REAL_MODEL"), cached};
    long long want = golden_file_size("gemma3");
    *why = "no gemma-3-270m-q4_k_m.gguf ($DI_GEMMA_GGUF, $DI_TEST_REAL_MODEL, ~/.cache/detinfer)";
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
        struct stat st;
        if (!candidates[i] || !*candidates[i] || stat(candidates[i], &st) != 0)
            continue;
        if ((long long)st.st_size != want) {
            *why = "the Gemma file found is not the one the goldens were recorded on (size differs)";
            continue;
        }
        snprintf(path, sizeof path, "%s", candidates[i]);
        return path;
    }
    return NULL;
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

START_TEST(test_goldens_gemma3)
{
    const char *why;
    const char *path = gemma_path(&why);
    if (!path) {
        printf("check_tokenizer: SKIP Gemma 3 goldens: %s\n", why);
        fflush(stdout);
        return;
    }
    tok k;
    double t0 = seconds();
    tok_open_file(&k, path);
    double load_s = seconds() - t0;
    /* 262144 pieces: a hash table built once, no quadratic work */
    ck_assert_msg(load_s < 5.0, "loading Gemma's vocabulary took %.2f s", load_s);
    ck_assert_uint_eq(k.tokenizer->n_vocab, 262144);
    golden_stats gs = run_goldens(&k, "gemma3");
    assert_goldens(&gs, "gemma3");
    tok_close(&k);

    /* and through the public API when this build loads the model */
    char err[ERRBUF_SIZE];
    di_model *m = NULL;
    if (di_model_load(path, &m, err, sizeof err) == DI_OK) {
        k = (tok){.model = m};
        gs = run_goldens(&k, "gemma3");
        assert_goldens(&gs, "gemma3 (public API)");
        di_model_free(m);
    } else {
        printf("check_tokenizer: Gemma 3 goldens checked on the vocabulary only (the model does not "
               "load here: %s)\n", err);
        fflush(stdout);
    }
}
END_TEST

/* ---- round trips --------------------------------------------------------- */

/* Appends one random codepoint from a mix of scripts and spaces. */
static size_t random_char(uint64_t *rng, char *out)
{
    static const uint32_t ranges[][2] = {
        {'a', 'z'},     {'A', 'Z'},       {'0', '9'},       {' ', ' '},       {' ', '/'},
        {':', '@'},     {'\n', '\n'},     {'\t', '\t'},     {0xC0, 0xFF},     {0x391, 0x3C9},
        {0x410, 0x44F}, {0x4E00, 0x4E80}, {0x3040, 0x30FF}, {0xAC00, 0xAC40}, {0x1F600, 0x1F64F},
        {0x2000, 0x200B}, {0x0300, 0x036F}, {0x0600, 0x06FF}, {0x0900, 0x097F}, {0xE000, 0xE010},
        {0x10FFF0, 0x10FFFF}, {0x01, 0x1F},
    };
    size_t r = (size_t)(tu_rand(rng) % (sizeof ranges / sizeof ranges[0]));
    uint32_t c = ranges[r][0] + (uint32_t)(tu_rand(rng) % (ranges[r][1] - ranges[r][0] + 1));
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        out[0] = (char)(0xC0 | (c >> 6));
        out[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        out[0] = (char)(0xE0 | (c >> 12));
        out[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        out[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (c >> 18));
    out[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((c >> 6) & 0x3F));
    out[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

/* The vocabularies whose llama.cpp decoding is an exact inverse: no space
 * prefix to strip and no clean-up of spaces before punctuation. */
static const char *const round_trip[] = {"tok_spm_noprefix", "tok_bpe_qwen2", "tok_bpe_smollm"};

/* lib/base/utf8: di_utf8_encode against glibc's iconv (UTF-32LE to UTF-8)
 * for every code point but the surrogates, each result valid by
 * di_utf8_valid; and di_utf8_lead_len against the first bytes those
 * encodings start with (0 for every byte none starts with). */
START_TEST(test_utf8_encoder_and_lead_bytes)
{
    iconv_t cd = iconv_open("UTF-8", "UTF-32LE");
    ck_assert_msg(cd != (iconv_t)-1, "iconv_open: %s", strerror(errno));
    size_t first_len[256] = {0};
    for (uint32_t cpt = 0; cpt <= 0x10FFFF; cpt++) {
        if (cpt >= 0xD800 && cpt <= 0xDFFF)
            continue;
        char mine[4], theirs[8];
        const size_t n = di_utf8_encode(cpt, mine);
        uint8_t in[4] = {(uint8_t)cpt, (uint8_t)(cpt >> 8), (uint8_t)(cpt >> 16), 0};
        char *ip = (char *)in, *op = theirs;
        size_t il = 4, ol = sizeof theirs;
        ck_assert_msg(iconv(cd, &ip, &il, &op, &ol) != (size_t)-1, "iconv U+%04X: %s", cpt, strerror(errno));
        ck_assert_msg(n == sizeof theirs - ol && memcmp(mine, theirs, n) == 0, "U+%04X: %zu bytes, iconv %zu", cpt,
                      n, sizeof theirs - ol);
        size_t bad = 0;
        ck_assert(di_utf8_valid(mine, n, &bad));
        first_len[(uint8_t)mine[0]] = n;
    }
    iconv_close(cd);
    for (unsigned b = 0; b < 256; b++)
        ck_assert_msg(di_utf8_lead_len((unsigned char)b) == first_len[b], "byte %02X: %zu, want %zu", b,
                      di_utf8_lead_len((unsigned char)b), first_len[b]);
}
END_TEST

START_TEST(test_random_utf8_round_trip)
{
    tok k;
    tok_open_model(&k, round_trip[_i]);
    uint64_t rng = 0x5eed0000u + (uint64_t)_i;
    char text[800], err[ERRBUF_SIZE], a[400], b[400];
    for (int iter = 0; iter < 300; iter++) {
        size_t len = 0, want = (size_t)(tu_rand(&rng) % 60);
        for (size_t c = 0; c < want; c++)
            len += random_char(&rng, text + len);
        int32_t *ids;
        size_t n;
        di_status s = tok_encode(&k, text, len, 0, &ids, &n, err);
        ck_assert_msg(s == DI_OK, "%s: %s", di_status_name(s), err);
        char *back;
        size_t back_len;
        s = tok_decode(&k, ids, n, &back, &back_len, err);
        ck_assert_msg(s == DI_OK, "%s: %s", di_status_name(s), err);
        ck_assert_msg(back_len == len && memcmp(back, text, len) == 0, "%s: '%s' came back as '%s'",
                      round_trip[_i], show(text, len, a, sizeof a), show(back, back_len, b, sizeof b));
        free(ids);
        free(back);
    }
    tok_close(&k);
}
END_TEST

/* The same text from several threads at once gives the same ids. */
typedef struct thread_job {
    const di_model *m;
    const char *text;
    size_t n;
    int32_t ids[256];
} thread_job;

static void *tokenize_job(void *arg)
{
    thread_job *j = arg;
    for (int i = 0; i < 200; i++) {
        size_t n = 0;
        if (di_model_tokenize(j->m, j->text, strlen(j->text), DI_TOKENIZE_ADD_BOS, j->ids, 256, &n,
                              NULL, 0) != DI_OK || (j->n && n != j->n))
            return (void *)1;
        j->n = n;
    }
    return NULL;
}

START_TEST(test_tokenize_from_threads)
{
    di_model *m = tu_load(synthetic[_i]);
    const char *text = "Hello, world! It's 2024 \xe2\x80\x94 caf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd <tool>";
    thread_job jobs[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        memset(&jobs[i], 0, sizeof jobs[i]);
        jobs[i].m = m;
        jobs[i].text = text;
        ck_assert_int_eq(pthread_create(&th[i], NULL, tokenize_job, &jobs[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(th[i], &r);
        ck_assert_ptr_null(r);
    }
    for (int i = 1; i < 4; i++) {
        ck_assert_uint_eq(jobs[i].n, jobs[0].n);
        ck_assert_int_eq(memcmp(jobs[i].ids, jobs[0].ids, jobs[0].n * sizeof(int32_t)), 0);
    }
    di_model_free(m);
}
END_TEST

/* ---- refusals ------------------------------------------------------------ */

START_TEST(test_invalid_utf8_is_refused)
{
    static const struct {
        const char *bytes;
        size_t len;
    } bad[] = {
        {"\xc0\x80", 2},             /* overlong NUL */
        {"\xc1\xbf", 2},             /* overlong 0x7F */
        {"\xe0\x80\x80", 3},         /* overlong, three bytes */
        {"\xe0\x9f\xbf", 3},         /* overlong U+07FF */
        {"\xf0\x80\x80\x80", 4},     /* overlong, four bytes */
        {"\xf0\x8f\xbf\xbf", 4},     /* overlong U+FFFF */
        {"\xed\xa0\x80", 3},         /* surrogate U+D800 */
        {"\xed\xbf\xbf", 3},         /* surrogate U+DFFF */
        {"a\xe4\xbd", 3},            /* truncated at the end */
        {"\xf0\x9f\x98 ok", 6},      /* truncated in the middle */
        {"\xc3", 1},                 /* lone lead byte */
        {"\xf4\x90\x80\x80", 4},     /* U+110000 */
        {"\xf5\x80\x80\x80", 4},     /* lead byte past U+10FFFF */
        {"\xf8\x88\x80\x80\x80", 5}, /* five-byte form */
        {"\xff", 1},
        {"\xfe", 1},
        {"\x80", 1},                 /* stray continuation */
        {"ab\xbf", 3},
    };
    for (int m = 0; m < 2; m++) {
        di_model *model = tu_load(m == 0 ? "tok_spm" : "tok_bpe_llama3");
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            int32_t ids[64];
            size_t n = 99;
            char err[ERRBUF_SIZE] = "";
            di_status s = di_model_tokenize(model, bad[i].bytes, bad[i].len, 0, ids, 64, &n, err,
                                            sizeof err);
            ck_assert_msg(s == DI_ERR_TEXT, "case %zu: %s", i, di_status_name(s));
            ck_assert_uint_eq(n, 0);
            ck_assert_msg(strstr(err, "UTF-8") != NULL, "message: %s", err);
        }
        /* the valid extremes pass, NUL included */
        static const char ok[] = "\x00\x7f\xc2\x80\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf\xf0\x90\x80\x80"
                                 "\xf4\x8f\xbf\xbf\xee\x80\x80";
        int32_t ids[128];
        size_t n;
        ck_assert_int_eq(di_model_tokenize(model, ok, sizeof ok - 1, 0, ids, 128, &n, NULL, 0), DI_OK);
        di_model_free(model);
    }
}
END_TEST

START_TEST(test_token_range)
{
    di_model *m = tu_load(synthetic[_i]);
    int64_t n_vocab;
    ck_assert_int_eq(di_model_get_int(m, DI_MODEL_N_VOCAB, &n_vocab), DI_OK);
    const int32_t bad[] = {-1, (int32_t)n_vocab, INT32_MAX, INT32_MIN};
    char text[64], err[ERRBUF_SIZE];
    size_t len;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int32_t ids[3] = {5, bad[i], 6};
        ck_assert_int_eq(di_model_detokenize(m, ids, 3, text, sizeof text, &len, err, sizeof err),
                         DI_ERR_TOKEN_RANGE);
        ck_assert_msg(strstr(err, "position 1") != NULL, "message: %s", err);
        ck_assert_int_eq(di_model_token_piece(m, bad[i], text, sizeof text, &len), DI_ERR_TOKEN_RANGE);
    }
    int32_t last = (int32_t)n_vocab - 1;
    ck_assert_int_eq(di_model_token_piece(m, last, text, sizeof text, &len), DI_OK);
    di_model_free(m);
}
END_TEST

START_TEST(test_buffer_protocol)
{
    di_model *m = tu_load(synthetic[_i]);
    const char *text = "Hello world, caf\xc3\xa9 123";
    size_t need = 0, n = 0;
    char err[ERRBUF_SIZE];
    ck_assert_int_eq(di_model_tokenize(m, text, strlen(text), DI_TOKENIZE_ADD_BOS, NULL, 0, &need,
                                       err, sizeof err), DI_ERR_BUFFER_TOO_SMALL);
    ck_assert_uint_gt(need, 2);
    int32_t ids[64];
    ck_assert_int_eq(di_model_tokenize(m, text, strlen(text), DI_TOKENIZE_ADD_BOS, ids, need - 1, &n,
                                       err, sizeof err), DI_ERR_BUFFER_TOO_SMALL);
    ck_assert_uint_eq(n, need);
    ck_assert_int_eq(di_model_tokenize(m, text, strlen(text), DI_TOKENIZE_ADD_BOS, ids, need, &n, err,
                                       sizeof err), DI_OK);
    ck_assert_uint_eq(n, need);

    size_t len = 0, len2 = 0;
    ck_assert_int_eq(di_model_detokenize(m, ids, n, NULL, 0, &len, err, sizeof err),
                     DI_ERR_BUFFER_TOO_SMALL);
    ck_assert_uint_gt(len, 0);
    char buf[256];
    memset(buf, 'x', sizeof buf);
    ck_assert_int_eq(di_model_detokenize(m, ids, n, buf, len, &len2, err, sizeof err),
                     DI_ERR_BUFFER_TOO_SMALL); /* no room for the NUL */
    ck_assert_uint_eq(len2, len);
    ck_assert_int_eq(buf[0], '\0');
    ck_assert_int_eq(di_model_detokenize(m, ids, n, buf, len + 1, &len2, err, sizeof err), DI_OK);
    ck_assert_uint_eq(len2, len);
    ck_assert_int_eq(buf[len], '\0');
    ck_assert_uint_eq(strlen(buf), len);

    /* a piece: same rules */
    ck_assert_int_eq(di_model_token_piece(m, ids[1], NULL, 0, &len), DI_ERR_BUFFER_TOO_SMALL);
    ck_assert_uint_gt(len, 0);
    ck_assert_int_eq(di_model_token_piece(m, ids[1], buf, len, &len2), DI_ERR_BUFFER_TOO_SMALL);
    ck_assert_int_eq(di_model_token_piece(m, ids[1], buf, len + 1, &len2), DI_OK);
    ck_assert_uint_eq(len2, len);
    ck_assert_int_eq(buf[len], '\0');

    /* nothing in, nothing out (BOS alone with ADD_BOS when the file asks) */
    ck_assert_int_eq(di_model_tokenize(m, NULL, 0, 0, NULL, 0, &n, err, sizeof err), DI_OK);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(di_model_detokenize(m, NULL, 0, buf, 1, &len, err, sizeof err), DI_OK);
    ck_assert_uint_eq(len, 0);
    ck_assert_int_eq(buf[0], '\0');
    di_model_free(m);
}
END_TEST

START_TEST(test_null_arguments)
{
    di_model *m = tu_load("tok_spm");
    int32_t ids[8] = {1, 2, 3};
    size_t n;
    char buf[64], err[ERRBUF_SIZE];
    ck_assert_int_eq(di_model_tokenize(NULL, "a", 1, 0, ids, 8, &n, err, sizeof err), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_model_tokenize(m, NULL, 1, 0, ids, 8, &n, err, sizeof err), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_model_tokenize(m, "a", 1, 0, NULL, 8, &n, err, sizeof err), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_model_tokenize(m, "a", 1, 0, ids, 8, NULL, err, sizeof err), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_model_tokenize(m, "a", 1, 0x80, ids, 8, &n, err, sizeof err), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_model_tokenize(m, "a", 1, 0, ids, 8, &n, NULL, 0), DI_OK);
    ck_assert_int_eq(di_model_detokenize(NULL, ids, 3, buf, 64, &n, err, sizeof err), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_model_detokenize(m, NULL, 3, buf, 64, &n, err, sizeof err), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_model_detokenize(m, ids, 3, NULL, 64, &n, err, sizeof err), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_model_detokenize(m, ids, 3, buf, 64, NULL, err, sizeof err), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_model_token_piece(NULL, 5, buf, 64, &n), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_model_token_piece(m, 5, NULL, 64, &n), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_model_token_piece(m, 5, buf, 64, NULL), DI_ERR_INVALID_ARGUMENT);
    int32_t id;
    ck_assert_int_eq(di_model_special_token(NULL, DI_TOKEN_BOS, &id), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_model_special_token(m, DI_TOKEN_BOS, NULL), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_model_special_token(m, (di_special_token)99, &id), DI_ERR_INVALID_ARGUMENT);
    di_model_free(m);
}
END_TEST

START_TEST(test_special_tokens)
{
    di_model *m = tu_load("tok_spm");
    int32_t bos, eos;
    ck_assert_int_eq(di_model_special_token(m, DI_TOKEN_BOS, &bos), DI_OK);
    ck_assert_int_eq(di_model_special_token(m, DI_TOKEN_EOS, &eos), DI_OK);
    ck_assert_int_eq(bos, 1);
    ck_assert_int_eq(eos, 2);
    /* control tokens give no text; a control token's text in the input is plain text */
    char buf[64];
    size_t len;
    ck_assert_int_eq(di_model_token_piece(m, bos, buf, sizeof buf, &len), DI_OK);
    ck_assert_uint_eq(len, 0);
    int32_t ids[64];
    size_t n;
    ck_assert_int_eq(di_model_tokenize(m, "<s>", 3, 0, ids, 64, &n, NULL, 0), DI_OK);
    ck_assert_uint_gt(n, 1);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_ne(ids[i], bos);
    /* ADD_BOS adds BOS (the file asks for it) and, without add_eos_token, no EOS */
    ck_assert_int_eq(di_model_tokenize(m, "hi", 2, DI_TOKENIZE_ADD_BOS, ids, 64, &n, NULL, 0), DI_OK);
    ck_assert_int_eq(ids[0], bos);
    ck_assert_int_ne(ids[n - 1], eos);
    di_model_free(m);

    m = tu_load("tok_spm_noprefix"); /* add_eos_token true */
    ck_assert_int_eq(di_model_tokenize(m, "hi", 2, DI_TOKENIZE_ADD_BOS, ids, 64, &n, NULL, 0), DI_OK);
    ck_assert_int_eq(ids[0], bos);
    ck_assert_int_eq(ids[n - 1], eos);
    ck_assert_int_eq(di_model_tokenize(m, "hi", 2, 0, ids, 64, &n, NULL, 0), DI_OK);
    ck_assert_int_ne(ids[0], bos);
    ck_assert_int_ne(ids[n - 1], eos);
    di_model_free(m);
}
END_TEST

START_TEST(test_model_without_tokenizer)
{
    di_model *m = tu_load("mha_tied_f32");
    int32_t ids[8] = {1};
    size_t n;
    char buf[64], err[ERRBUF_SIZE] = "";
    ck_assert_int_eq(di_model_tokenize(m, "a", 1, 0, ids, 8, &n, err, sizeof err), DI_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err, "no tokenizer") != NULL, "message: %s", err);
    ck_assert_int_eq(di_model_detokenize(m, ids, 1, buf, 64, &n, err, sizeof err), DI_ERR_UNSUPPORTED);
    ck_assert_int_eq(di_model_token_piece(m, 1, buf, 64, &n), DI_ERR_UNSUPPORTED);
    int32_t id;
    ck_assert_int_eq(di_model_special_token(m, DI_TOKEN_BOS, &id), DI_ERR_UNSUPPORTED);
    di_model_free(m);
}
END_TEST

/* ---- malformed metadata at load ------------------------------------------ */

#define TINY_VOCAB 16 /* gb_llama_defaults().n_vocab */

static void put_tokens(gb_model *m, const char *key, uint32_t n, const char *const *texts)
{
    gb_kv *kv = gb_kv_set_raw(m, key, GB_ARRAY);
    gb_put_u32(&kv->value, GB_STRING);
    gb_put_u64(&kv->value, n);
    for (uint32_t i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "t%u", i);
        gb_put_str(&kv->value, texts && texts[i] ? texts[i] : name);
    }
}

static void put_i32_array(gb_model *m, const char *key, uint32_t n, int32_t v)
{
    gb_kv *kv = gb_kv_set_raw(m, key, GB_ARRAY);
    gb_put_u32(&kv->value, GB_INT32);
    gb_put_u64(&kv->value, n);
    for (uint32_t i = 0; i < n; i++)
        gb_put_u32(&kv->value, (uint32_t)v);
}

/* A tiny llama model with a valid 16-token SPM vocabulary. */
static void spm_model(gb_model *m)
{
    gb_llama_params p = gb_llama_defaults();
    gb_model_llama(m, &p);
    gb_kv_set_str(m, "tokenizer.ggml.model", "llama");
    put_tokens(m, "tokenizer.ggml.tokens", TINY_VOCAB, NULL);
    gb_kv *kv = gb_kv_set_raw(m, "tokenizer.ggml.scores", GB_ARRAY);
    gb_put_u32(&kv->value, GB_FLOAT32);
    gb_put_u64(&kv->value, TINY_VOCAB);
    for (int i = 0; i < TINY_VOCAB; i++)
        gb_put_f32(&kv->value, -(float)i);
    put_i32_array(m, "tokenizer.ggml.token_type", TINY_VOCAB, 1);
    gb_kv_set_u32(m, "tokenizer.ggml.bos_token_id", 1);
    gb_kv_set_u32(m, "tokenizer.ggml.eos_token_id", 2);
    gb_put_u8(&gb_kv_set_raw(m, "tokenizer.ggml.add_space_prefix", GB_BOOL)->value, 0);
}

static void bpe_model(gb_model *m)
{
    spm_model(m);
    gb_kv_set_str(m, "tokenizer.ggml.model", "gpt2");
    gb_kv_set_str(m, "tokenizer.ggml.pre", "qwen2");
    static const char *const merges[] = {"t 1", "t1 0"};
    gb_kv *kv = gb_kv_set_raw(m, "tokenizer.ggml.merges", GB_ARRAY);
    gb_put_u32(&kv->value, GB_STRING);
    gb_put_u64(&kv->value, 2);
    for (int i = 0; i < 2; i++)
        gb_put_str(&kv->value, merges[i]);
}

/* Loads m; returns the status and the message. */
static di_status load_built(const gb_model *m, char *err, di_model **out)
{
    char dir[4096], path[4200];
    ck_assert_int_eq(gb_tmpdir(dir, sizeof dir), 0);
    gb_path(path, sizeof path, dir, "tok.gguf");
    ck_assert_int_eq(gb_model_write(m, path, NULL), 0);
    di_model *model = NULL;
    err[0] = '\0';
    di_status s = di_model_load(path, &model, err, ERRBUF_SIZE);
    gb_rmdir(dir);
    if (out)
        *out = model;
    else
        di_model_free(model);
    return s;
}

static void expect_model_error(gb_model *m, const char *needle)
{
    char err[ERRBUF_SIZE];
    di_status s = load_built(m, err, NULL);
    gb_model_free(m);
    ck_assert_msg(s == DI_ERR_MODEL, "want DI_ERR_MODEL mentioning '%s', got %s: %s", needle,
                  di_status_name(s), err);
    ck_assert_msg(strstr(err, needle) != NULL, "message '%s' does not mention '%s'", err, needle);
}

START_TEST(test_valid_tiny_vocabularies_load)
{
    gb_model m;
    char err[ERRBUF_SIZE];
    di_model *model;
    for (int kind = 0; kind < 2; kind++) {
        kind == 0 ? spm_model(&m) : bpe_model(&m);
        ck_assert_msg(load_built(&m, err, &model) == DI_OK, "%s", err);
        gb_model_free(&m);
        int32_t ids[16];
        size_t n;
        ck_assert_int_eq(di_model_tokenize(model, "t1", 2, 0, ids, 16, &n, err, sizeof err), DI_OK);
        di_model_free(model);
    }
}
END_TEST

START_TEST(test_malformed_metadata)
{
    gb_model m;
    spm_model(&m);
    put_tokens(&m, "tokenizer.ggml.tokens", TINY_VOCAB - 1, NULL);
    expect_model_error(&m, "n_vocab");

    spm_model(&m);
    put_i32_array(&m, "tokenizer.ggml.tokens", TINY_VOCAB, 7);
    expect_model_error(&m, "tokenizer.ggml.tokens");

    spm_model(&m);
    gb_kv_remove(&m, "tokenizer.ggml.tokens");
    expect_model_error(&m, "tokenizer.ggml.tokens");

    spm_model(&m);
    put_tokens(&m, "tokenizer.ggml.scores", TINY_VOCAB, NULL);
    expect_model_error(&m, "tokenizer.ggml.scores");

    spm_model(&m);
    put_i32_array(&m, "tokenizer.ggml.token_type", TINY_VOCAB - 3, 1);
    expect_model_error(&m, "tokenizer.ggml.token_type");

    spm_model(&m);
    gb_kv_set_u32(&m, "tokenizer.ggml.bos_token_id", TINY_VOCAB);
    expect_model_error(&m, "bos_token_id");

    spm_model(&m);
    gb_kv_set_i32(&m, "tokenizer.ggml.eos_token_id", -1);
    expect_model_error(&m, "eos_token_id");

    spm_model(&m);
    gb_kv_set_str(&m, "tokenizer.ggml.bos_token_id", "1");
    expect_model_error(&m, "bos_token_id");

    spm_model(&m);
    gb_kv_set_u32(&m, "tokenizer.ggml.add_bos_token", 1);
    expect_model_error(&m, "add_bos_token");

    spm_model(&m);
    gb_kv_set_u32(&m, "tokenizer.ggml.model", 1);
    expect_model_error(&m, "tokenizer.ggml.model");

    spm_model(&m); /* llama.cpp aborts on repeated tokens */
    static const char *const dup[TINY_VOCAB] = {[3] = "same", [9] = "same"};
    put_tokens(&m, "tokenizer.ggml.tokens", TINY_VOCAB, dup);
    expect_model_error(&m, "repeats");

    spm_model(&m);
    static const char *const bad_byte[TINY_VOCAB] = {[4] = "<0xZZ>"};
    put_tokens(&m, "tokenizer.ggml.tokens", TINY_VOCAB, bad_byte);
    put_i32_array(&m, "tokenizer.ggml.token_type", TINY_VOCAB, 6);
    expect_model_error(&m, "<0xHH>");

    spm_model(&m);
    gb_kv *kv = gb_kv_set_raw(&m, "tokenizer.ggml.scores", GB_ARRAY);
    gb_put_u32(&kv->value, GB_FLOAT32);
    gb_put_u64(&kv->value, TINY_VOCAB);
    for (int i = 0; i < TINY_VOCAB; i++)
        gb_put_u32(&kv->value, 0x7fc00000u); /* NaN */
    expect_model_error(&m, "NaN");

    bpe_model(&m);
    gb_kv_remove(&m, "tokenizer.ggml.merges");
    expect_model_error(&m, "merges");

    bpe_model(&m);
    put_i32_array(&m, "tokenizer.ggml.merges", 2, 0);
    expect_model_error(&m, "merges");

    bpe_model(&m);
    static const char *const bad_merge[2] = {"t1", "t 1"};
    put_tokens(&m, "tokenizer.ggml.merges", 2, bad_merge);
    expect_model_error(&m, "merge 0");

    bpe_model(&m);
    gb_kv_set_u32(&m, "tokenizer.ggml.pre", 3);
    expect_model_error(&m, "tokenizer.ggml.pre");
}
END_TEST

/* Kinds and pre-tokenizers this build lacks still load; the calls say why. */
START_TEST(test_unsupported_kinds_load)
{
    static const struct {
        const char *model, *pre, *needle;
    } cases[] = {
        {"bert", NULL, "'bert'"},
        {"t5", NULL, "'t5'"},
        {"none", NULL, "no vocabulary"},
        {"gpt2", "no-such-pre", "'no-such-pre'"},
        {"gpt2", "gpt2", "'gpt2'"}, /* llama.cpp's name is "gpt-2" */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gb_model m;
        bpe_model(&m);
        gb_kv_set_str(&m, "tokenizer.ggml.model", cases[i].model);
        if (cases[i].pre)
            gb_kv_set_str(&m, "tokenizer.ggml.pre", cases[i].pre);
        char err[ERRBUF_SIZE];
        di_model *model;
        di_status s = load_built(&m, err, &model);
        gb_model_free(&m);
        ck_assert_msg(s == DI_OK, "%s: %s", cases[i].model, err);
        int32_t ids[8];
        size_t n;
        s = di_model_tokenize(model, "a", 1, 0, ids, 8, &n, err, sizeof err);
        ck_assert_int_eq(s, DI_ERR_UNSUPPORTED);
        ck_assert_msg(strstr(err, cases[i].needle) != NULL, "message '%s' lacks '%s'", err,
                      cases[i].needle);
        di_model_free(model);
    }
}
END_TEST

/* A 262144-token vocabulary (Gemma's size) loads fast: no quadratic step. */
START_TEST(test_large_vocabulary_loads_fast)
{
    enum { N = 262144 };
    gb_model m;
    gb_model_init(&m);
    gb_kv_set_str(&m, "tokenizer.ggml.model", "llama");
    put_tokens(&m, "tokenizer.ggml.tokens", N, NULL);
    put_i32_array(&m, "tokenizer.ggml.token_type", N, 1);
    gb_put_u8(&gb_kv_set_raw(&m, "tokenizer.ggml.add_space_prefix", GB_BOOL)->value, 0);
    gb_buf bytes;
    gb_buf_init(&bytes);
    gb_model_serialize(&m, &bytes, NULL);
    gb_model_free(&m);
    di_gguf g;
    char err[ERRBUF_SIZE];
    ck_assert_int_eq(di_gguf_parse(bytes.data, bytes.len, &g, err, sizeof err), DI_OK);
    di_tokenizer *t = NULL;
    double t0 = seconds();
    ck_assert_int_eq(di_tokenizer_load(&g, N, &t, err, sizeof err), DI_OK);
    double dt = seconds() - t0;
    ck_assert_msg(dt < 2.0, "loading %d tokens took %.2f s", N, dt);
    di_tok_vec v = {0};
    ck_assert_int_eq(di_tokenizer_encode(t, "t262143", 7, 0, &v, err, sizeof err), DI_OK);
    free(v.v);
    di_tokenizer_free(t);
    di_gguf_release(&g);
    gb_buf_free(&bytes);
}
END_TEST

/* lib/base/growable.h, the step behind every token, fragment and text
 * buffer: capacities double from the first one, items survive growth, and a
 * size past SIZE_MAX is refused with the array left as it was. */
START_TEST(test_growable_arrays)
{
    int32_t *v = NULL;
    size_t n = 0, cap = 0;
    for (int32_t i = 0; i < 1000; i++) {
        ck_assert(DI_GROW(v, n, cap, 1, 64));
        v[n++] = i * 7;
    }
    ck_assert_uint_eq(cap, 1024); /* 64, 128, ..., 1024 */
    for (int32_t i = 0; i < 1000; i++)
        ck_assert_int_eq(v[i], i * 7);
    ck_assert(DI_GROW(v, n, cap, 24, 64)); /* fits: no change */
    ck_assert_uint_eq(cap, 1024);
    ck_assert(DI_GROW(v, n, cap, 3000, 64)); /* several doublings at once */
    ck_assert_uint_eq(cap, 4096);
    int32_t *before = v;
    ck_assert(!DI_GROW(v, n, cap, SIZE_MAX - 10, 64));
    ck_assert(!DI_GROW(v, n, cap, SIZE_MAX / 8, 64)); /* the count fits, its bytes do not */
    ck_assert_ptr_eq(v, before);
    ck_assert_uint_eq(cap, 4096);
    ck_assert_int_eq(v[999], 999 * 7);
    free(v);
}
END_TEST

Suite *tokenizer_suite(void)
{
    Suite *s = suite_create("tokenizer");

    TCase *tc = tcase_create("goldens");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_goldens_synthetic, 0, N_SYNTHETIC);
    tcase_add_test(tc, test_goldens_gemma3);
    suite_add_tcase(s, tc);

    tc = tcase_create("round_trip");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_random_utf8_round_trip, 0,
                        (int)(sizeof round_trip / sizeof round_trip[0]));
    tcase_add_loop_test(tc, test_tokenize_from_threads, 0, N_SYNTHETIC);
    suite_add_tcase(s, tc);

    tc = tcase_create("api");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_invalid_utf8_is_refused);
    tcase_add_test(tc, test_utf8_encoder_and_lead_bytes);
    tcase_add_loop_test(tc, test_token_range, 0, N_SYNTHETIC);
    tcase_add_loop_test(tc, test_buffer_protocol, 0, N_SYNTHETIC);
    tcase_add_test(tc, test_null_arguments);
    tcase_add_test(tc, test_special_tokens);
    tcase_add_test(tc, test_model_without_tokenizer);
    tcase_add_test(tc, test_growable_arrays);
    suite_add_tcase(s, tc);

    tc = tcase_create("load");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_valid_tiny_vocabularies_load);
    tcase_add_test(tc, test_malformed_metadata);
    tcase_add_test(tc, test_unsupported_kinds_load);
    tcase_add_test(tc, test_large_vocabulary_loads_fast);
    suite_add_tcase(s, tc);
    return s;
}
