/*
 * tokenizer_internal.h — what the tokenizer's files share: the loaded
 * vocabulary and its piece->id hash table (tokenizer_vocab.c), the bigram
 * merge loop (tokenizer_merge.c), and the entry points of the two kinds
 * (tokenizer_spm.c, tokenizer_bpe.c) that the dispatcher
 * (tokenizer_encode.c) and the decoder (tokenizer_decode.c) call. Not for
 * the layers above (they use tokenizer.h); the Check suite includes it to
 * test a tokenizer without a loadable model (Gemma 3 is not a supported
 * architecture, but its vocabulary is the reference SentencePiece one).
 */
#ifndef DI_TOKENIZER_INTERNAL_H
#define DI_TOKENIZER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "lib/tokenizer/tokenizer.h"
#include "lib/base/utf8.h"

/* Token attributes (bits, as llama.cpp's llama_token_attr), from the file's
 * token_type (1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused,
 * 6 byte, anything else undefined) plus llama.cpp's by-name fixes. */
enum {
    DI_TOK_UNDEFINED = 1u << 0,
    DI_TOK_UNKNOWN = 1u << 1,
    DI_TOK_UNUSED = 1u << 2,
    DI_TOK_NORMAL = 1u << 3,
    DI_TOK_CONTROL = 1u << 4,
    DI_TOK_USER_DEFINED = 1u << 5,
    DI_TOK_BYTE = 1u << 6,
};

typedef enum di_tok_kind {
    DI_TOK_KIND_NONE = 0, /* no tokenizer, or one this build lacks: see reason */
    DI_TOK_KIND_SPM = 1,  /* tokenizer.ggml.model "llama" */
    DI_TOK_KIND_BPE = 2   /* tokenizer.ggml.model "gpt2" */
} di_tok_kind;

typedef struct di_tok_piece {
    const char *text;   /* into the mapped file, or into di_tokenizer.names */
    uint32_t len;
    uint32_t attr;      /* DI_TOK_* bits */
    float score;        /* SPM merge priority */
    uint8_t byte;       /* the byte of a DI_TOK_BYTE token */
} di_tok_piece;

/* Open-addressing table of byte strings -> index (FNV-1a, linear probing). */
typedef struct di_tok_table {
    uint32_t *slots;    /* index + 1; 0 is empty */
    uint32_t mask;      /* slot count - 1 (a power of two) */
} di_tok_table;

/* One BPE merge "left right", rank = its position in the merges array. */
typedef struct di_bpe_merge {
    const char *left, *right;
    uint32_t left_len, right_len;
} di_bpe_merge;

struct di_bpe_pre; /* tokenizer_bpe.c: compiled pre-tokenizer regexes */

/* A candidate merge of the symbols left and right (tokenizer_merge.c). */
typedef struct di_bigram {
    int32_t left, right;
    float score;   /* SPM: the merged piece's score (higher first); BPE: 0 */
    uint32_t rank; /* BPE: the merge's rank (lower first); SPM: 0 */
    uint32_t size; /* bytes of the merged text, to spot stale entries */
} di_bigram;

typedef struct di_bigram_heap {
    di_bigram *v;
    size_t n, cap;
} di_bigram_heap;

/* 0 when out of memory. */
int di_bigram_push(di_bigram_heap *h, di_bigram x);
/* The first pair in merge order; h must not be empty. */
di_bigram di_bigram_pop(di_bigram_heap *h);

/* A stretch of the text in the merge loop, linked to its neighbours. */
typedef struct di_tok_symbol {
    int32_t prev, next; /* neighbours in the chain, -1 at the ends */
    uint32_t off, n;    /* bytes of the text; n == 0 once merged away */
} di_tok_symbol;

/* Whether the symbols left and right of s may merge: 1 with the pair's
 * score (SPM) or rank (BPE) set in *b, 0 when they may not. */
typedef int (*di_tok_pair_fn)(const di_tokenizer *t, const char *s, const di_tok_symbol *sym,
                              int32_t left, int32_t right, di_bigram *b);

/*
 * The bigram merge loop of both kinds (llama.cpp's SPM and BPE sessions):
 * the n bytes of s start as one symbol per UTF-8 character in sym[] (room
 * for n symbols); every adjacent pair `pair` accepts waits in h (emptied
 * first), and the first pair in merge order is merged, its new neighbours
 * queued, until none is left. A pair whose symbols changed since it was
 * queued is recognised by its size and skipped. Returns the number of
 * initial symbols (when > 0 the chain starts at sym[0]), or -1 when out of
 * memory. n must be at most INT32_MAX.
 */
int32_t di_tok_merge(const di_tokenizer *t, const char *s, size_t n, di_tok_symbol *sym,
                     di_bigram_heap *h, di_tok_pair_fn pair);

struct di_tokenizer {
    di_tok_kind kind;
    char reason[256];          /* why calls give DI_ERR_UNSUPPORTED (kind NONE) */

    uint32_t n_vocab;
    di_tok_piece *pieces;      /* [n_vocab] */
    di_tok_table by_text;      /* piece text -> token id */
    char *names;               /* "[EMPTY_<id>]" texts of empty tokens */

    int32_t bos, eos;          /* -1 when none */
    int add_bos, add_eos;      /* what DI_TOKENIZE_ADD_BOS adds */
    int add_space_prefix;      /* SPM: leading space; decode: strip it again */
    int clean_spaces;          /* decode: llama.cpp's clean_up_tokenization_spaces */

    int32_t *special;          /* control, user-defined and unknown ids, longest
                                  text first: what encoding matches in the text */
    uint32_t n_special;

    int32_t byte_token[256];   /* SPM byte fallback: <0xXX> or the byte itself; -1 */

    /* BPE */
    di_bpe_merge *merges;
    uint32_t n_merges;
    di_tok_table merge_rank;   /* "left right" -> rank (first occurrence wins) */
    int ignore_merges;         /* a whole pre-token that is a token is kept */
    struct di_bpe_pre *pre;
};

/* The longest text one call encodes (its escaped SPM form, three bytes per
 * space, must index with 32 bits). */
#define DI_TOK_MAX_TEXT (512u << 20)

int di_tok_vec_push(di_tok_vec *vec, int32_t id); /* 0 when out of memory */

/* ---- shared helpers (tokenizer_vocab.c; di_tok_find: tokenizer.h) ---- */
uint64_t di_tok_hash(const char *s, size_t n);

/* ---- the kinds ---- */
/* Encodes one fragment of plain text (no user-defined token inside) and
 * appends the ids. prefix_space: SPM adds the leading space marker. */
di_status di_spm_encode(const di_tokenizer *t, const char *text, size_t len, int prefix_space,
                        di_tok_vec *out, char *err, size_t err_size);
di_status di_bpe_encode(const di_tokenizer *t, const char *text, size_t len, di_tok_vec *out,
                        char *err, size_t err_size);

/* BPE set-up and tear-down: merges, the pre-tokenizer named by
 * tokenizer.ggml.pre (an unknown name turns the tokenizer into kind NONE with
 * the reason), and llama.cpp's per-pre-tokenizer defaults. */
/* The vocabulary's load in two phases around the BPE part, and its release
 * (tokenizer_vocab.c; tokenizer_load.c calls them in order). */
di_status di_vocab_load(di_tokenizer *t, const di_gguf *g, uint32_t n_vocab, char *err, size_t err_size);
di_status di_vocab_finish(di_tokenizer *t, const di_gguf *g, uint32_t n_vocab, char *err,
                          size_t err_size);
void di_vocab_free(di_tokenizer *t);
di_status di_bpe_load(di_tokenizer *t, const di_gguf *g, char *err, size_t err_size);
void di_bpe_free(di_tokenizer *t);
/* GPT-2 byte<->unicode: the codepoint that stands for byte b, and the byte a
 * codepoint stands for (-1 when none). */
uint32_t di_bpe_byte_to_cpt(uint8_t b);
int di_bpe_cpt_to_byte(uint32_t cpt);
/* Appends the text a NORMAL BPE token decodes to (llama.cpp's
 * llama_decode_text). */
int di_bpe_decode_piece(const char *text, size_t len, char **buf, size_t *n, size_t *cap);

#endif /* DI_TOKENIZER_INTERNAL_H */
