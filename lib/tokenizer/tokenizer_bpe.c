/*
 * tokenizer_bpe.c — the byte-level BPE tokenizer (tokenizer.ggml.model
 * "gpt2"), as llama.cpp's llm_tokenizer_bpe_session does it:
 *
 *   1. the pre-tokenizer named by tokenizer.ggml.pre cuts the text into
 *      words with one or more regular expressions (each later one cuts the
 *      pieces of the one before; text between matches is a piece too);
 *   2. each word's bytes become the GPT-2 "byte as a printable character"
 *      alphabet;
 *   3. (llama3 family) a word that is a whole token stays one token;
 *   4. otherwise BPE: one symbol per character, and repeatedly the adjacent
 *      pair with the lowest merge rank is merged (ties: the leftmost);
 *   5. each final symbol is its token, or else each of its bytes that is a
 *      one-byte token (the others are dropped, as in llama.cpp).
 *
 * The regular expressions are llama.cpp's, run by PCRE2 with UTF and UCP so
 * that \p{L}, \p{N} come from PCRE2's Unicode tables. llama.cpp's \s is the
 * Unicode White_Space property (its unicode_set_whitespace); PCRE2's \s also
 * takes U+180E, so the patterns say \p{White_Space} where llama.cpp says \s.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/errors.h"
#include "lib/base/growable.h"
#include "lib/base/utf8.h"
#include "lib/tokenizer/tokenizer_internal.h"

#define MAX_REGEX 4

/* ---- the pre-tokenizers -------------------------------------------------- */

#define WS "\\p{White_Space}"
#define NOT_WS "\\P{White_Space}"
#define CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"

/* GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S) */
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|" WS "+(?!" NOT_WS ")"
/* Llama 3 and Qwen 2 differ only in how many digits make a word. */
#define RE_LLAMA3_LIKE(digits)                                                                      \
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}" digits "| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*|" \
    WS "*[\\r\\n]+|" WS "+(?!" NOT_WS ")|" WS "+"

enum pre_set { PRE_DEFAULT, PRE_GPT2, PRE_LLAMA3, PRE_QWEN2, PRE_STARCODER };

static const struct {
    const char *re[MAX_REGEX];
} pre_sets[] = {
    [PRE_DEFAULT] = {{"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}},
    [PRE_GPT2] = {{RE_GPT2}},
    [PRE_LLAMA3] = {{RE_LLAMA3_LIKE("{1,3}")}},
    [PRE_QWEN2] = {{RE_LLAMA3_LIKE("")}},
    [PRE_STARCODER] = {{"\\p{N}", RE_GPT2}},
};

/* tokenizer.ggml.pre names, mapped as llama.cpp's llama_vocab::impl::load
 * maps them, with the flags it sets for each. */
static const struct {
    const char *name;
    enum pre_set set;
    unsigned char ignore_merges, add_bos, clean_spaces;
} pre_names[] = {
    {"default", PRE_DEFAULT, 0, 0, 1},
    {"llama3", PRE_LLAMA3, 1, 1, 1},     {"llama-v3", PRE_LLAMA3, 1, 1, 1},
    {"llama-bpe", PRE_LLAMA3, 1, 1, 1},  {"falcon3", PRE_LLAMA3, 1, 1, 1},
    {"falcon-h1", PRE_LLAMA3, 1, 1, 1},  {"pixtral", PRE_LLAMA3, 1, 1, 1},
    {"midm-2.0", PRE_LLAMA3, 1, 1, 1},   {"lfm2", PRE_LLAMA3, 1, 1, 1},
    {"jina-v5-nano", PRE_LLAMA3, 1, 1, 1},
    {"dbrx", PRE_LLAMA3, 0, 0, 1},       {"smaug-bpe", PRE_LLAMA3, 0, 0, 1},
    {"gpt-2", PRE_GPT2, 0, 0, 1},        {"phi-2", PRE_GPT2, 0, 0, 1},
    {"jina-es", PRE_GPT2, 0, 0, 1},      {"jina-de", PRE_GPT2, 0, 0, 1},
    {"gigachat", PRE_GPT2, 0, 0, 1},     {"jina-v2-es", PRE_GPT2, 0, 0, 1},
    {"jina-v2-de", PRE_GPT2, 0, 0, 1},   {"a.x-4.0", PRE_GPT2, 0, 0, 1},
    {"mellum", PRE_GPT2, 0, 0, 1},       {"modern-bert", PRE_GPT2, 0, 0, 1},
    {"mpt", PRE_GPT2, 0, 0, 1},          {"olmo", PRE_GPT2, 0, 0, 1},
    {"exaone4", PRE_GPT2, 0, 0, 1},
    {"qwen2", PRE_QWEN2, 0, 0, 0},       {"deepseek-r1-qwen", PRE_QWEN2, 0, 0, 0},
    {"kormo", PRE_QWEN2, 0, 0, 0},       {"f2llmv2", PRE_QWEN2, 0, 0, 0},
    {"megrez", PRE_QWEN2, 0, 0, 1},      {"stablelm2", PRE_QWEN2, 0, 0, 1},
    {"starcoder", PRE_STARCODER, 0, 0, 1}, {"refact", PRE_STARCODER, 0, 0, 1},
    {"command-r", PRE_STARCODER, 0, 0, 0}, {"smollm", PRE_STARCODER, 0, 0, 0},
    {"codeshell", PRE_STARCODER, 0, 0, 1}, {"exaone", PRE_STARCODER, 0, 0, 1},
    {"minerva-7b", PRE_STARCODER, 0, 0, 1}, {"mellum2", PRE_STARCODER, 0, 0, 1},
};

struct di_bpe_pre {
    pcre2_code *re[MAX_REGEX];
    int n_re;
};

/* ---- GPT-2 bytes <-> printable characters ---------------------------------
 * Bytes that are printable Latin-1 stand for themselves; the other 68, in
 * order, for U+0100.. U+0143. */

uint32_t di_bpe_byte_to_cpt(uint8_t b)
{
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)
        return b;
    if (b <= 0x20)
        return 0x100 + b;
    if (b <= 0xA0)
        return 0x100 + 33 + (b - 0x7F);
    return 0x100 + 67; /* 0xAD */
}

int di_bpe_cpt_to_byte(uint32_t cpt)
{
    if ((cpt >= 0x21 && cpt <= 0x7E) || (cpt >= 0xA1 && cpt <= 0xAC) || (cpt >= 0xAE && cpt <= 0xFF))
        return (int)cpt;
    if (cpt >= 0x100 && cpt <= 0x120)
        return (int)(cpt - 0x100);
    if (cpt >= 0x121 && cpt <= 0x142)
        return (int)(0x7F + cpt - 0x121);
    if (cpt == 0x143)
        return 0xAD;
    return -1;
}


/* One codepoint of a token's text the way llama.cpp's unicode_cpt_from_utf8
 * reads it (no overlong or range checks); an invalid byte reads as U+FFFD
 * and counts one byte. */
static uint32_t read_cpt_lenient(const unsigned char *s, size_t n, size_t *used)
{
    unsigned c = s[0];
    size_t len = c < 0x80 ? 1 : !(c & 0x40) ? 0 : !(c & 0x20) ? 2 : !(c & 0x10) ? 3 : !(c & 0x08) ? 4 : 0;
    if (len == 0 || len > n) {
        *used = 1;
        return 0xFFFD;
    }
    uint32_t cpt = len == 1 ? c : c & (0x7F >> len);
    for (size_t k = 1; k < len; k++) {
        if ((s[k] & 0xC0) != 0x80) {
            *used = 1;
            return 0xFFFD;
        }
        cpt = (cpt << 6) | (s[k] & 0x3F);
    }
    *used = len;
    return cpt;
}

static int grow(char **buf, size_t *n, size_t *cap, size_t more)
{
    return di_grow(buf, 1, *n, cap, more, 64);
}

int di_bpe_decode_piece(const char *text, size_t len, char **buf, size_t *n, size_t *cap)
{
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < len;) {
        size_t used;
        uint32_t cpt = read_cpt_lenient(s + i, len - i, &used);
        int byte = di_bpe_cpt_to_byte(cpt);
        i += used;
        if (byte >= 0) {
            if (!grow(buf, n, cap, 1))
                return 0;
            (*buf)[(*n)++] = (char)byte;
            continue;
        }
        /* llama.cpp's llama_decode_text: "[UNK_BYTE_0x<utf8 hex><whole token>]" */
        char utf8[4], hex[9];
        size_t k = cpt <= 0x10FFFF ? di_utf8_encode(cpt, utf8) : 0;
        for (size_t j = 0; j < k; j++)
            snprintf(hex + 2 * j, 3, "%02x", (unsigned char)utf8[j]);
        if (!grow(buf, n, cap, 12 + 2 * k + len + 1))
            return 0;
        memcpy(*buf + *n, "[UNK_BYTE_0x", 12);
        memcpy(*buf + *n + 12, hex, 2 * k);
        memcpy(*buf + *n + 12 + 2 * k, text, len);
        (*buf)[*n + 12 + 2 * k + len] = ']';
        *n += 12 + 2 * k + len + 1;
    }
    return 1;
}

/* ---- loading ------------------------------------------------------------- */

static uint64_t merge_hash(const char *l, size_t ln, const char *r, size_t rn)
{
    /* FNV-1a of "l r", computed in three steps (same as di_tok_hash of it) */
    uint64_t h = UINT64_C(14695981039346656037);
    for (size_t i = 0; i < ln; i++)
        h = (h ^ (unsigned char)l[i]) * UINT64_C(1099511628211);
    h = (h ^ (unsigned char)' ') * UINT64_C(1099511628211);
    for (size_t i = 0; i < rn; i++)
        h = (h ^ (unsigned char)r[i]) * UINT64_C(1099511628211);
    return h;
}

/* Rank of the merge (l, r), or -1. */
static int64_t merge_rank(const di_tokenizer *t, const char *l, size_t ln, const char *r, size_t rn)
{
    const di_tok_table *tab = &t->merge_rank;
    for (uint64_t i = merge_hash(l, ln, r, rn) & tab->mask;; i = (i + 1) & tab->mask) {
        uint32_t slot = tab->slots[i];
        if (slot == 0)
            return -1;
        const di_bpe_merge *m = &t->merges[slot - 1];
        if (m->left_len == ln && m->right_len == rn && memcmp(m->left, l, ln) == 0 &&
            memcmp(m->right, r, rn) == 0)
            return (int64_t)(slot - 1);
    }
}

static di_status load_merges(di_tokenizer *t, const di_gguf *g, char *err, size_t es)
{
    const di_gguf_kv *kv = di_gguf_find_kv(g, "tokenizer.ggml.merges");
    if (!kv)
        return di_error(err, es, DI_ERR_MODEL, "tokenizer.ggml.merges is missing (needed by gpt2)");
    if (kv->type != DI_GGUF_ARRAY || kv->v.arr.type != DI_GGUF_STRING)
        return di_error(err, es, DI_ERR_MODEL, "tokenizer.ggml.merges must be an array of strings");
    if (kv->v.arr.count >= UINT32_MAX / 2)
        return di_error(err, es, DI_ERR_MODEL, "tokenizer.ggml.merges has %llu entries",
                        (unsigned long long)kv->v.arr.count);
    uint32_t n = (uint32_t)kv->v.arr.count;
    t->merges = calloc(n ? n : 1, sizeof *t->merges);
    uint64_t size = 16;
    while (size < 2 * (uint64_t)n)
        size *= 2;
    t->merge_rank.slots = calloc((size_t)size, sizeof *t->merge_rank.slots);
    t->merge_rank.mask = (uint32_t)(size - 1);
    if (!t->merges || !t->merge_rank.slots)
        return di_error(err, es, DI_ERR_OUT_OF_MEMORY, "out of memory for %u merges", n);
    const uint8_t *p = kv->v.arr.data; /* the format layer checked every length */
    for (uint32_t i = 0; i < n; i++) {
        uint64_t len = 0;
        for (int k = 0; k < 8; k++)
            len |= (uint64_t)p[k] << (8 * k);
        const char *s = (const char *)p + 8;
        p += 8 + len;
        /* split at the first space after the first byte, as llama.cpp does */
        const char *sp = len > 1 ? memchr(s + 1, ' ', (size_t)len - 1) : NULL;
        if (!sp || sp + 1 == s + len || len > UINT32_MAX)
            return di_error(err, es, DI_ERR_MODEL, "merge %u '%.*s' is not two parts 'left right'",
                            i, (int)(len < 64 ? len : 64), s);
        di_bpe_merge m = {s, sp + 1, (uint32_t)(sp - s), (uint32_t)(s + len - sp - 1)};
        t->merges[t->n_merges++] = m;
        /* a pair seen before keeps its first (lower) rank */
        for (uint64_t h = merge_hash(m.left, m.left_len, m.right, m.right_len) & t->merge_rank.mask;;
             h = (h + 1) & t->merge_rank.mask) {
            uint32_t slot = t->merge_rank.slots[h];
            if (slot == 0) {
                t->merge_rank.slots[h] = i + 1;
                break;
            }
            const di_bpe_merge *q = &t->merges[slot - 1];
            if (q->left_len == m.left_len && q->right_len == m.right_len &&
                memcmp(q->left, m.left, m.left_len) == 0 && memcmp(q->right, m.right, m.right_len) == 0)
                break;
        }
    }
    return DI_OK;
}

static di_status compile_pre(di_tokenizer *t, enum pre_set set, char *err, size_t es)
{
    t->pre = calloc(1, sizeof *t->pre);
    if (!t->pre)
        return di_error(err, es, DI_ERR_OUT_OF_MEMORY, "out of memory for the pre-tokenizer");
    for (int i = 0; i < MAX_REGEX && pre_sets[set].re[i]; i++) {
        int code;
        PCRE2_SIZE at;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)pre_sets[set].re[i], PCRE2_ZERO_TERMINATED,
                                       PCRE2_UTF | PCRE2_UCP, &code, &at, NULL);
        if (!re) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(code, msg, sizeof msg);
            return di_error(err, es, DI_ERR_INTERNAL, "pre-tokenizer regex %d does not compile at %zu: %s",
                            i, (size_t)at, (const char *)msg);
        }
        t->pre->re[t->pre->n_re++] = re;
    }
    return DI_OK;
}

di_status di_bpe_load(di_tokenizer *t, const di_gguf *g, char *err, size_t es)
{
    const di_gguf_kv *kv = di_gguf_find_kv(g, "tokenizer.ggml.pre");
    if (kv && kv->type != DI_GGUF_STRING)
        return di_error(err, es, DI_ERR_MODEL, "tokenizer.ggml.pre must be a string (has type %u)",
                        kv->type);
    /* llama.cpp: missing or empty means "default" */
    const char *want = kv && kv->v.str.len > 0 ? kv->v.str.ptr : "default";
    size_t want_len = kv && kv->v.str.len > 0 ? (size_t)kv->v.str.len : strlen("default");
    size_t k = 0, n_names = sizeof pre_names / sizeof pre_names[0];
    while (k < n_names && !(strlen(pre_names[k].name) == want_len &&
                            memcmp(pre_names[k].name, want, want_len) == 0))
        k++;
    if (k == n_names) {
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(want_len < 63 ? want_len : 63), want);
        t->kind = DI_TOK_KIND_NONE;
        snprintf(t->reason, sizeof t->reason,
                 "pre-tokenizer '%s' (tokenizer.ggml.pre) is not supported (supported: default, "
                 "llama3/llama-bpe, qwen2, gpt-2, smollm/starcoder and their llama.cpp aliases)",
                 name);
        return DI_OK;
    }
    t->ignore_merges = pre_names[k].ignore_merges;
    t->add_bos = pre_names[k].add_bos;
    t->clean_spaces = pre_names[k].clean_spaces;
    di_status st = load_merges(t, g, err, es);
    return st ? st : compile_pre(t, pre_names[k].set, err, es);
}

void di_bpe_free(di_tokenizer *t)
{
    if (t->pre)
        for (int i = 0; i < t->pre->n_re; i++)
            pcre2_code_free(t->pre->re[i]);
    free(t->pre);
    free(t->merges);
    free(t->merge_rank.slots);
    t->pre = NULL;
    t->merges = NULL;
    t->merge_rank.slots = NULL;
}

/* ---- pre-tokenizing ------------------------------------------------------ */

typedef struct span {
    size_t off, len;
} span;

typedef struct span_vec {
    span *v;
    size_t n, cap;
} span_vec;

static int span_push(span_vec *s, size_t off, size_t len)
{
    if (!DI_GROW(s->v, s->n, s->cap, 1, 32))
        return 0;
    s->v[s->n++] = (span){off, len};
    return 1;
}

/* Cuts every piece of *in with one regex, as llama.cpp's
 * unicode_regex_split_stl: each piece is matched on its own (lookaheads see
 * its end), and the text between matches stays a piece. */
static di_status split(const pcre2_code *re, const char *text, const span_vec *in, span_vec *out,
                       pcre2_match_data *md, char *err, size_t es)
{
    out->n = 0;
    for (size_t i = 0; i < in->n; i++) {
        const char *s = text + in->v[i].off;
        size_t len = in->v[i].len, pos = 0, last = 0;
        while (pos < len) {
            int rc = pcre2_match(re, (PCRE2_SPTR)s, len, pos, PCRE2_NO_UTF_CHECK, md, NULL);
            if (rc == PCRE2_ERROR_NOMATCH)
                break;
            if (rc < 0) {
                PCRE2_UCHAR msg[256];
                pcre2_get_error_message(rc, msg, sizeof msg);
                return di_error(err, es, rc == PCRE2_ERROR_NOMEMORY ? DI_ERR_OUT_OF_MEMORY : DI_ERR_INTERNAL,
                                "pre-tokenizer regex failed: %s", (const char *)msg);
            }
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            size_t start = ov[0], end = ov[1];
            if (end == start) { /* an empty match cuts nothing; step one character */
                pos = start + di_utf8_len((unsigned char)s[start]);
                continue;
            }
            if ((start > last && !span_push(out, in->v[i].off + last, start - last)) ||
                !span_push(out, in->v[i].off + start, end - start))
                return di_error(err, es, DI_ERR_OUT_OF_MEMORY, "out of memory pre-tokenizing");
            last = pos = end;
        }
        if (last < len && !span_push(out, in->v[i].off + last, len - last))
            return di_error(err, es, DI_ERR_OUT_OF_MEMORY, "out of memory pre-tokenizing");
    }
    return DI_OK;
}

/* ---- BPE on one word ----------------------------------------------------- */

typedef struct scratch {
    char *word;          /* the byte-mapped word */
    size_t word_cap;
    di_tok_symbol *sym;
    size_t sym_cap;
    di_bigram_heap h;
} scratch;

/* A pair merges when "left right" is a merge; its rank orders it. */
static int bpe_pair(const di_tokenizer *t, const char *w, const di_tok_symbol *sym, int32_t left,
                    int32_t right, di_bigram *b)
{
    int64_t rank = merge_rank(t, w + sym[left].off, sym[left].n, w + sym[right].off, sym[right].n);
    if (rank < 0)
        return 0;
    b->rank = (uint32_t)rank;
    return 1;
}

static int emit(const di_tokenizer *t, const char *s, size_t n, di_tok_vec *out)
{
    int32_t id = di_tok_find(t, s, n);
    if (id >= 0)
        return di_tok_vec_push(out, id);
    for (size_t k = 0; k < n; k++) { /* bytes that are one-byte tokens; the rest vanish */
        int32_t b = di_tok_find(t, s + k, 1);
        if (b >= 0 && !di_tok_vec_push(out, b))
            return 0;
    }
    return 1;
}

static int encode_word(const di_tokenizer *t, const char *text, size_t len, scratch *sc,
                       di_tok_vec *out)
{
    if (len > (SIZE_MAX - 1) / 2 || len > INT32_MAX / 2)
        return 0;
    if (!DI_GROW(sc->word, 0, sc->word_cap, 2 * len, 2 * len))
        return 0;
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += di_utf8_encode(di_bpe_byte_to_cpt((uint8_t)text[i]), sc->word + n);
    const char *w = sc->word;
    if (t->ignore_merges && di_tok_find(t, w, n) >= 0)
        return emit(t, w, n, out);

    if (!DI_GROW(sc->sym, 0, sc->sym_cap, len, len))
        return 0;
    di_tok_symbol *sym = sc->sym;
    const int32_t count = di_tok_merge(t, w, n, sym, &sc->h, bpe_pair);
    if (count < 0)
        return 0;
    for (int32_t i = count > 0 ? 0 : -1; i >= 0; i = sym[i].next)
        if (!emit(t, w + sym[i].off, sym[i].n, out))
            return 0;
    return 1;
}

di_status di_bpe_encode(const di_tokenizer *t, const char *text, size_t len, di_tok_vec *out,
                        char *err, size_t err_size)
{
    span_vec a = {0}, b = {0};
    scratch sc = {0};
    di_status st = DI_OK;
    pcre2_match_data *md = pcre2_match_data_create(4, NULL);
    if (!md || !span_push(&a, 0, len)) {
        st = di_error(err, err_size, DI_ERR_OUT_OF_MEMORY, "out of memory pre-tokenizing");
        goto done;
    }
    for (int i = 0; i < t->pre->n_re && !st; i++) {
        st = split(t->pre->re[i], text, &a, &b, md, err, err_size);
        span_vec swap = a;
        a = b;
        b = swap;
    }
    for (size_t i = 0; i < a.n && !st; i++)
        if (!encode_word(t, text + a.v[i].off, a.v[i].len, &sc, out))
            st = di_error(err, err_size, DI_ERR_OUT_OF_MEMORY, "out of memory tokenizing %zu bytes",
                          len);
done:
    pcre2_match_data_free(md);
    free(a.v);
    free(b.v);
    free(sc.word);
    free(sc.sym);
    free(sc.h.v);
    return st;
}
