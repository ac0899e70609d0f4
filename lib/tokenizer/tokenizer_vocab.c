/*
 * tokenizer_vocab.c — the vocabulary of a GGUF file (tokenizer.ggml.*): its
 * pieces, the piece->id table, llama.cpp's by-name attribute fixes, the
 * special tokens, and the helpers the encoders and the decoder share.
 *
 * The reference is llama.cpp (src/llama-vocab.cpp); docs/TOKENIZER.md lists
 * each rule and where it comes from. The dispatcher is tokenizer_encode.c,
 * the encoders of the two kinds tokenizer_spm.c and tokenizer_bpe.c, the
 * decoder tokenizer_decode.c, the loader that assembles them tokenizer_load.c.
 *
 * Everything here is built once at load and read-only afterwards, so a
 * shared model tokenizes from any number of threads; each call allocates
 * its own scratch memory.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/errors.h"
#include "lib/base/growable.h"
#include "lib/base/hex.h"
#include "lib/tokenizer/tokenizer_internal.h"

#define HASH_SEED UINT64_C(14695981039346656037)
#define HASH_PRIME UINT64_C(1099511628211)

/* ---- small shared helpers ------------------------------------------------ */

uint64_t di_tok_hash(const char *s, size_t n)
{
    uint64_t h = HASH_SEED;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * HASH_PRIME;
    return h;
}

int di_tok_vec_push(di_tok_vec *vec, int32_t id)
{
    if (!DI_GROW(vec->v, vec->n, vec->cap, 1, 64))
        return 0;
    vec->v[vec->n++] = id;
    return 1;
}

int32_t di_tok_find(const di_tokenizer *t, const char *s, size_t n)
{
    const di_tok_table *tab = &t->by_text;
    for (uint64_t i = di_tok_hash(s, n) & tab->mask;; i = (i + 1) & tab->mask) {
        uint32_t slot = tab->slots[i];
        if (slot == 0)
            return -1;
        const di_tok_piece *p = &t->pieces[slot - 1];
        if (p->len == n && memcmp(p->text, s, n) == 0)
            return (int32_t)(slot - 1);
    }
}

/* ---- reading metadata ---------------------------------------------------- */

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A boolean key; absent leaves *out as it is (the kind's default). */
static di_status read_bool(const di_gguf *g, const char *key, int *out, char *err, size_t es)
{
    const di_gguf_kv *kv = di_gguf_find_kv(g, key);
    if (!kv)
        return DI_OK;
    if (kv->type != DI_GGUF_BOOL)
        return di_error(err, es, DI_ERR_MODEL, "%s must be a bool (has type %u)", key, kv->type);
    *out = kv->v.u64 != 0;
    return DI_OK;
}

/* A token id key, checked against the vocabulary; *present says if given. */
static di_status read_id(const di_gguf *g, const char *key, uint32_t n_vocab, int32_t *out,
                         int *present, char *err, size_t es)
{
    const di_gguf_kv *kv = di_gguf_find_kv(g, key);
    if (present)
        *present = kv != NULL;
    if (!kv)
        return DI_OK;
    if (!di_gguf_kv_is_integer(kv))
        return di_error(err, es, DI_ERR_MODEL, "%s must be an integer (has type %u)", key, kv->type);
    if ((di_gguf_kv_is_signed(kv) && kv->v.i64 < 0) || kv->v.u64 >= n_vocab)
        return di_error(err, es, DI_ERR_MODEL, "%s = %lld is outside the vocabulary [0, %u)", key,
                        di_gguf_kv_is_signed(kv) ? (long long)kv->v.i64 : (long long)kv->v.u64, n_vocab);
    *out = (int32_t)kv->v.u64;
    return DI_OK;
}

/* An array key of one element type with at least n elements; NULL if absent. */
static di_status find_array(const di_gguf *g, const char *key, uint32_t type1, uint32_t type2,
                            uint64_t n, const di_gguf_kv **out, char *err, size_t es)
{
    const di_gguf_kv *kv = di_gguf_find_kv(g, key);
    *out = NULL;
    if (!kv)
        return DI_OK;
    if (kv->type != DI_GGUF_ARRAY || (kv->v.arr.type != type1 && kv->v.arr.type != type2))
        return di_error(err, es, DI_ERR_MODEL, "%s has the wrong type (%u, element type %u)", key,
                        kv->type, kv->type == DI_GGUF_ARRAY ? kv->v.arr.type : 0u);
    if (kv->v.arr.count < n)
        return di_error(err, es, DI_ERR_MODEL, "%s has %llu elements, fewer than the %llu tokens", key,
                        (unsigned long long)kv->v.arr.count, (unsigned long long)n);
    *out = kv;
    return DI_OK;
}

/* ---- the vocabulary ------------------------------------------------------ */

static uint32_t attr_of_type(int32_t type)
{
    switch (type) {
    case 1: return DI_TOK_NORMAL;
    case 2: return DI_TOK_UNKNOWN;
    case 3: return DI_TOK_CONTROL;
    case 4: return DI_TOK_USER_DEFINED;
    case 5: return DI_TOK_UNUSED;
    case 6: return DI_TOK_BYTE;
    default: return DI_TOK_UNDEFINED;
    }
}

static di_status table_alloc(di_tok_table *tab, uint64_t n)
{
    uint64_t size = 16;
    while (size < 2 * n) /* load factor at most one half */
        size *= 2;
    tab->slots = calloc((size_t)size, sizeof *tab->slots);
    tab->mask = (uint32_t)(size - 1);
    return tab->slots ? DI_OK : DI_ERR_OUT_OF_MEMORY;
}

/* Inserts token id; a text seen before gives its earlier id in *dup. */
static int table_insert(di_tokenizer *t, uint32_t id, int32_t *dup)
{
    di_tok_table *tab = &t->by_text;
    const di_tok_piece *p = &t->pieces[id];
    for (uint64_t i = di_tok_hash(p->text, p->len) & tab->mask;; i = (i + 1) & tab->mask) {
        uint32_t slot = tab->slots[i];
        if (slot == 0) {
            tab->slots[i] = id + 1;
            return 1;
        }
        const di_tok_piece *q = &t->pieces[slot - 1];
        if (q->len == p->len && memcmp(q->text, p->text, p->len) == 0) {
            *dup = (int32_t)(slot - 1);
            return 0;
        }
    }
}

/* llama.cpp names an empty token "[EMPTY_<id>]"; the names live in one block. */
static di_status name_empty_tokens(di_tokenizer *t, char *err, size_t es)
{
    size_t n_empty = 0;
    for (uint32_t i = 0; i < t->n_vocab; i++)
        n_empty += t->pieces[i].len == 0;
    if (n_empty == 0)
        return DI_OK;
    t->names = malloc(n_empty * 20);
    if (!t->names)
        return di_error(err, es, DI_ERR_OUT_OF_MEMORY, "out of memory naming empty tokens");
    char *w = t->names;
    for (uint32_t i = 0; i < t->n_vocab; i++) {
        if (t->pieces[i].len != 0)
            continue;
        int len = snprintf(w, 20, "[EMPTY_%u]", i);
        t->pieces[i].text = w;
        t->pieces[i].len = (uint32_t)len;
        w += 20;
    }
    return DI_OK;
}

static di_status load_pieces(di_tokenizer *t, const di_gguf *g, uint32_t n_vocab, char *err,
                             size_t es)
{
    const di_gguf_kv *tokens, *scores, *types;
    di_status st = find_array(g, "tokenizer.ggml.tokens", DI_GGUF_STRING, DI_GGUF_STRING, 0, &tokens,
                              err, es);
    if (st)
        return st;
    if (!tokens)
        return di_error(err, es, DI_ERR_MODEL, "tokenizer.ggml.tokens is missing");
    if (tokens->v.arr.count != n_vocab)
        return di_error(err, es, DI_ERR_MODEL,
                        "tokenizer.ggml.tokens has %llu tokens but the model has n_vocab = %u",
                        (unsigned long long)tokens->v.arr.count, n_vocab);
    if ((st = find_array(g, "tokenizer.ggml.scores", DI_GGUF_FLOAT32, DI_GGUF_INT32, n_vocab,
                         &scores, err, es)) ||
        (st = find_array(g, "tokenizer.ggml.token_type", DI_GGUF_INT32, DI_GGUF_INT32, n_vocab,
                         &types, err, es)))
        return st;

    t->n_vocab = n_vocab;
    t->pieces = calloc(n_vocab ? n_vocab : 1, sizeof *t->pieces);
    if (!t->pieces)
        return di_error(err, es, DI_ERR_OUT_OF_MEMORY, "out of memory for %u tokens", n_vocab);
    const uint8_t *p = tokens->v.arr.data; /* the format layer checked every length */
    for (uint32_t i = 0; i < n_vocab; i++) {
        uint64_t len = le64(p);
        if (len > UINT32_MAX)
            return di_error(err, es, DI_ERR_MODEL, "token %u is %llu bytes long", i,
                            (unsigned long long)len);
        di_tok_piece *piece = &t->pieces[i];
        piece->text = (const char *)p + 8;
        piece->len = (uint32_t)len;
        p += 8 + len;
        piece->attr = types ? attr_of_type((int32_t)le32(types->v.arr.data + 4 * (size_t)i))
                            : DI_TOK_NORMAL;
        if (scores) {
            uint32_t bits = le32(scores->v.arr.data + 4 * (size_t)i);
            if (scores->v.arr.type == DI_GGUF_INT32) {
                piece->score = (float)(int32_t)bits;
            } else {
                memcpy(&piece->score, &bits, sizeof bits);
                if (isnan(piece->score))
                    return di_error(err, es, DI_ERR_MODEL, "tokenizer.ggml.scores[%u] is NaN", i);
            }
        }
        if (piece->attr & DI_TOK_BYTE) {
            /* the byte tokens of SentencePiece vocabularies: "<0xHH>" */
            int hi = len == 6 ? di_hex_digit(piece->text[3]) : -1;
            int lo = len == 6 ? di_hex_digit(piece->text[4]) : -1;
            if (hi < 0 || lo < 0 || memcmp(piece->text, "<0x", 3) != 0 || piece->text[5] != '>')
                return di_error(err, es, DI_ERR_MODEL, "byte token %u is '%.*s', not <0xHH>", i,
                                (int)len, piece->text);
            piece->byte = (uint8_t)(hi * 16 + lo);
        }
    }
    if ((st = name_empty_tokens(t, err, es)))
        return st;
    if (table_alloc(&t->by_text, n_vocab))
        return di_error(err, es, DI_ERR_OUT_OF_MEMORY, "out of memory for the token table");
    for (uint32_t i = 0; i < n_vocab; i++) {
        int32_t dup;
        if (!table_insert(t, i, &dup))
            /* llama.cpp aborts on such a file (id_to_token.size() == token_to_id.size()) */
            return di_error(err, es, DI_ERR_MODEL, "token %u '%.*s' repeats token %d", i,
                            (int)t->pieces[i].len, t->pieces[i].text, dup);
    }
    return DI_OK;
}

/* ---- llama.cpp's by-name attribute fixes ---------------------------------
 * llama.cpp overrides the file's token types for some well-known texts (its
 * load(): the EOG list, FIM tokens, gpt-oss and Gemma/PLaMo markers). They
 * change which tokens give text when decoding and which are matched first
 * when encoding, so they are repeated here. */

static int32_t find_z(const di_tokenizer *t, const char *z)
{
    return di_tok_find(t, z, strlen(z));
}

static void add_control(di_tokenizer *t, const char *const *names)
{
    for (; *names; names++) {
        int32_t id = find_z(t, *names);
        if (id >= 0)
            t->pieces[id].attr |= DI_TOK_CONTROL;
    }
}

static di_status apply_name_fixes(di_tokenizer *t, const di_gguf *g, char *err, size_t es)
{
    /* end-of-generation texts (a superset of llama.cpp's EOT and EOM lists) */
    static const char *const eog[] = {
        "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
        "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>",
        "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>",
        "<|tool_response>", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
        "[e~[", NULL};
    /* fill-in-the-middle texts, used only when the file does not name the id */
    static const struct {
        const char *keys[2];
        const char *names[9];
    } fim[] = {
        {{"tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id"},
         {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>",
          "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", NULL}},
        {{"tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id"},
         {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81hole\xef\xbd\x9c>",
          "<SUF>", "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", NULL}},
        {{"tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id"},
         {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>",
          "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", NULL}},
        {{"tokenizer.ggml.fim_pad_token_id", NULL},
         {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL}},
        {{"tokenizer.ggml.fim_rep_token_id", NULL},
         {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL}},
        {{"tokenizer.ggml.fim_sep_token_id", NULL}, {"<|file_sep|>", NULL}},
    };
    for (size_t i = 0; i < sizeof fim / sizeof fim[0]; i++) {
        int named = 0;
        for (int k = 0; k < 2 && fim[i].keys[k]; k++) {
            int32_t id = -1;
            int present;
            di_status st = read_id(g, fim[i].keys[k], t->n_vocab, &id, &present, err, es);
            if (st)
                return st;
            named |= present;
        }
        if (!named)
            add_control(t, fim[i].names);
    }
    add_control(t, eog);

    /* gpt-oss: these always render */
    static const char *const rendered[] = {"<|channel|>", "<|message|>", "<|start|>",
                                           "<|constrain|>", NULL};
    for (const char *const *z = rendered; *z; z++) {
        int32_t id = find_z(t, *z);
        if (id >= 0)
            t->pieces[id].attr = DI_TOK_USER_DEFINED;
    }
    /* o200k_harmony and solar-open: "<|end|>" is not an end of generation */
    int32_t end = find_z(t, "<|end|>");
    int has_call = find_z(t, "<|call|>") >= 0 || find_z(t, "<|calls|>") >= 0;
    if (end >= 0 && has_call && (find_z(t, "<|return|>") >= 0 || find_z(t, "<|flush|>") >= 0))
        t->pieces[end].attr = DI_TOK_USER_DEFINED;
    /* Gemma 4 and PLaMo 2: "</s>" is a normal token */
    int32_t s = find_z(t, "</s>");
    int plamo_eos = t->eos >= 0 && t->pieces[t->eos].len == 13 &&
                    memcmp(t->pieces[t->eos].text, "<|plamo:eos|>", 13) == 0;
    if (s >= 0 && (find_z(t, "<|tool_response>") >= 0 || plamo_eos))
        t->pieces[s].attr = DI_TOK_NORMAL;
    return DI_OK;
}

/* llama.cpp's cache_special_tokens: the ids of control, user-defined and
 * unknown tokens, longest text first (ties by id; llama.cpp's std::sort
 * leaves their order unspecified). */
static int cmp_longest_first(const void *a, const void *b, void *pieces)
{
    const di_tok_piece *p = pieces;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (p[x].len != p[y].len)
        return p[x].len > p[y].len ? -1 : 1;
    return (x > y) - (x < y);
}

#define SPECIAL_ATTRS (DI_TOK_CONTROL | DI_TOK_USER_DEFINED | DI_TOK_UNKNOWN)

static di_status collect_special(di_tokenizer *t, char *err, size_t es)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < t->n_vocab; i++)
        n += (t->pieces[i].attr & SPECIAL_ATTRS) != 0;
    if (n == 0)
        return DI_OK;
    t->special = malloc(n * sizeof *t->special);
    if (!t->special)
        return di_error(err, es, DI_ERR_OUT_OF_MEMORY, "out of memory for special tokens");
    for (uint32_t i = 0; i < t->n_vocab; i++)
        if (t->pieces[i].attr & SPECIAL_ATTRS)
            t->special[t->n_special++] = (int32_t)i;
    qsort_r(t->special, n, sizeof *t->special, cmp_longest_first, t->pieces);
    return DI_OK;
}

/* SentencePiece byte fallback: "<0xHH>", else the byte as a one-byte token. */
static void find_byte_tokens(di_tokenizer *t)
{
    static const char hex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; b++) {
        char name[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
        char raw = (char)b;
        int32_t id = di_tok_find(t, name, sizeof name);
        t->byte_token[b] = id >= 0 ? id : di_tok_find(t, &raw, 1);
    }
}

/* Phase 1 of a load (tokenizer_load.c): the pieces, and llama.cpp's defaults
 * for the kind, before the BPE pre-tokenizer's and the file's keys. */
di_status di_vocab_load(di_tokenizer *t, const di_gguf *g, uint32_t n_vocab, char *err, size_t es)
{
    di_status st = load_pieces(t, g, n_vocab, err, es);
    if (st)
        return st;
    int32_t default_bos, default_eos;
    if (t->kind == DI_TOK_KIND_SPM) {
        t->add_bos = 1;
        t->add_space_prefix = 1;
        default_bos = 1;
        default_eos = 2;
    } else {
        t->clean_spaces = 1;
        default_bos = 11;
        default_eos = 11;
    }
    t->bos = default_bos < (int32_t)n_vocab ? default_bos : -1;
    t->eos = default_eos < (int32_t)n_vocab ? default_eos : -1;
    return DI_OK;
}

/* Phase 3: the file's keys over the defaults, the by-name fixes and the
 * special tokens. */
di_status di_vocab_finish(di_tokenizer *t, const di_gguf *g, uint32_t n_vocab, char *err, size_t es)
{
    di_status st;
    int32_t unk = -1;
    if ((st = read_bool(g, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix, err, es)) ||
        (st = read_id(g, "tokenizer.ggml.bos_token_id", n_vocab, &t->bos, NULL, err, es)) ||
        (st = read_id(g, "tokenizer.ggml.eos_token_id", n_vocab, &t->eos, NULL, err, es)) ||
        (st = read_id(g, "tokenizer.ggml.unknown_token_id", n_vocab, &unk, NULL, err, es)) ||
        (st = read_bool(g, "tokenizer.ggml.add_bos_token", &t->add_bos, err, es)) ||
        (st = read_bool(g, "tokenizer.ggml.add_eos_token", &t->add_eos, err, es)))
        return st;
    if (t->add_bos && t->bos < 0)
        return di_error(err, es, DI_ERR_MODEL, "add_bos_token is set but there is no BOS token");
    if (t->add_eos && t->eos < 0)
        return di_error(err, es, DI_ERR_MODEL, "add_eos_token is set but there is no EOS token");
    if ((st = apply_name_fixes(t, g, err, es)) || (st = collect_special(t, err, es)))
        return st;
    if (t->kind == DI_TOK_KIND_SPM)
        find_byte_tokens(t);
    return DI_OK;
}

void di_vocab_free(di_tokenizer *t)
{
    free(t->pieces);
    free(t->by_text.slots);
    free(t->names);
    free(t->special);
    t->pieces = NULL;
    t->by_text.slots = NULL;
    t->names = NULL;
    t->special = NULL;
    t->n_vocab = t->n_special = 0;
    t->bos = t->eos = -1;
}

/* ---- what the layers above read ------------------------------------------ */

di_status di_tokenizer_ready(const di_tokenizer *t, char *err, size_t err_size)
{
    if (t->kind == DI_TOK_KIND_NONE)
        return di_error(err, err_size, DI_ERR_UNSUPPORTED, "%s", t->reason);
    return DI_OK;
}

int32_t di_tokenizer_bos(const di_tokenizer *t)
{
    return t->bos;
}

int32_t di_tokenizer_eos(const di_tokenizer *t)
{
    return t->eos;
}
