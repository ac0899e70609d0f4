/*
 * tokenizer_internal.h — what the three tokenizer files share: the loaded
 * vocabulary, its piece->id hash table, and the entry points of the two
 * kinds. Not part of the public API; the Check suite includes it to test a
 * tokenizer without a loadable model (Gemma 3 is not a supported
 * architecture, but its vocabulary is the reference SentencePiece one).
 *
 * Behaviour follows llama.cpp's llama-vocab.cpp (tokenize with
 * parse_special=false or true, llama_detokenize with remove_special=false and
 * unparse_special=false); docs/TOKENIZER.md lists what is matched.
 */
#ifndef DI_TOKENIZER_INTERNAL_H
#define DI_TOKENIZER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"

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

/* A candidate merge of the symbols left and right (tokenizer_heap.c). */
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

/* A growable array of token ids. */
typedef struct di_tok_vec {
    int32_t *v;
    size_t n, cap;
} di_tok_vec;

int di_tok_vec_push(di_tok_vec *vec, int32_t id); /* 0 when out of memory */

/* ---- shared helpers (tokenizer.c) ---- */
uint64_t di_tok_hash(const char *s, size_t n);
/* Looks a byte string up; -1 when it is not a token. */
int32_t di_tok_find(const di_tokenizer *t, const char *s, size_t n);
/* Length of the UTF-8 sequence a lead byte starts (llama.cpp's rule: by the
 * top four bits, 1 for a continuation byte). Input is validated first. */
size_t di_utf8_len(unsigned char lead);
/* Checks strict UTF-8 (no overlong forms, surrogates, values past U+10FFFF
 * or truncated sequences); on failure *bad_offset is the offending byte. */
int di_utf8_valid(const char *s, size_t n, size_t *bad_offset);

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
di_status di_bpe_load(di_tokenizer *t, const di_gguf *g, char *err, size_t err_size);
void di_bpe_free(di_tokenizer *t);
/* GPT-2 byte<->unicode: the codepoint that stands for byte b, and the byte a
 * codepoint stands for (-1 when none). */
uint32_t di_bpe_byte_to_cpt(uint8_t b);
int di_bpe_cpt_to_byte(uint32_t cpt);
/* Appends the text a NORMAL BPE token decodes to (llama.cpp's
 * llama_decode_text). */
int di_bpe_decode_piece(const char *text, size_t len, char **buf, size_t *n, size_t *cap);

/* ---- the calls behind the public functions (tokenizer.c) ---- */
di_status di_tokenizer_encode(const di_tokenizer *t, const char *text, size_t text_len,
                              uint32_t flags, di_tok_vec *out, char *err, size_t err_size);
/* Decoded text in a malloc'd buffer (*text, *len; NUL-terminated). */
di_status di_tokenizer_decode(const di_tokenizer *t, const int32_t *tokens, size_t n_tokens,
                              char **text, size_t *len, char *err, size_t err_size);

#endif /* DI_TOKENIZER_INTERNAL_H */
