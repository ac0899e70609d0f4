/*
 * tokenizer.h — text to token ids and back, from a GGUF's tokenizer.ggml.*
 * metadata (uses the format layer only). Immutable once built, so a shared
 * model can tokenize from many threads at once. What the layers above call;
 * tokenizer_internal.h is what the tokenizer's own files share.
 *
 * Behaviour follows llama.cpp's llama-vocab.cpp (tokenize with
 * parse_special=false or true, llama_detokenize with remove_special=false and
 * unparse_special=false); docs/TOKENIZER.md lists what is matched.
 */
#ifndef DI_TOKENIZER_H
#define DI_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>
#include "detinfer.h"
#include "lib/format/gguf.h"

typedef struct di_tokenizer di_tokenizer;

/* Builds the tokenizer the file describes. A file without tokenizer metadata,
 * or with a kind this build lacks, still gives DI_OK and a tokenizer whose
 * calls answer DI_ERR_UNSUPPORTED with the reason. Malformed metadata (wrong
 * types, a vocabulary size other than n_vocab, bad merges) gives DI_ERR_MODEL.
 * The tokenizer may point into the mapped file, which outlives it. */
di_status di_tokenizer_load(const di_gguf *g, uint32_t n_vocab, di_tokenizer **out, char *err,
                            size_t err_size);
void di_tokenizer_free(di_tokenizer *t);

/* DI_OK when t encodes and decodes; DI_ERR_UNSUPPORTED with the reason (no
 * tokenizer in the file, or a kind this build lacks) otherwise. */
di_status di_tokenizer_ready(const di_tokenizer *t, char *err, size_t err_size);

/* The BOS and EOS token ids; -1 when the vocabulary has none. */
int32_t di_tokenizer_bos(const di_tokenizer *t);
int32_t di_tokenizer_eos(const di_tokenizer *t);

/* The id of the token whose text is the n bytes at s; -1 when none is. */
int32_t di_tok_find(const di_tokenizer *t, const char *s, size_t n);

/* A growable array of token ids (free v when done). */
typedef struct di_tok_vec {
    int32_t *v;
    size_t n, cap;
} di_tok_vec;

/* Appends the ids of text (DI_TOKENIZE_* flags) to out. */
di_status di_tokenizer_encode(const di_tokenizer *t, const char *text, size_t text_len,
                              uint32_t flags, di_tok_vec *out, char *err, size_t err_size);

/* A stretch of a text: bytes [off, off + len). */
typedef struct di_text_span {
    size_t off, len;
} di_text_span;

/* di_tokenizer_encode, except that no special token is parsed whose bytes
 * meet one of the n_plain spans (in increasing order, not overlapping):
 * their text is plain text, whatever it holds. With DI_TOKENIZE_PARSE_SPECIAL
 * and the spans of a chat's message contents, the template's own markers
 * become their tokens and nothing a message says does (di_chat_tokenize). */
di_status di_tokenizer_encode_spans(const di_tokenizer *t, const char *text, size_t text_len,
                                    uint32_t flags, const di_text_span *plain, size_t n_plain,
                                    di_tok_vec *out, char *err, size_t err_size);
/* Decoded text in a malloc'd buffer (*text, *len; NUL-terminated). */
di_status di_tokenizer_decode(const di_tokenizer *t, const int32_t *tokens, size_t n_tokens,
                              char **text, size_t *len, char *err, size_t err_size);
/* The text of one token (llama.cpp's token_to_piece with special=false, no
 * leading space removed) in a malloc'd buffer, NUL-terminated. */
di_status di_tokenizer_piece(const di_tokenizer *t, int32_t token, char **text, size_t *len,
                             char *err, size_t err_size);

#endif /* DI_TOKENIZER_H */
