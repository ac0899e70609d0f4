/*
 * tokenizer.h — text to token ids and back, from a GGUF's tokenizer.ggml.*
 * metadata (uses the format layer only). Immutable once built, so a shared
 * model can tokenize from many threads at once.
 */
#ifndef DI_TOKENIZER_H
#define DI_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>
#include "detinfer.h"
#include "gguf.h"

typedef struct di_tokenizer di_tokenizer;

/* Builds the tokenizer the file describes. A file without tokenizer metadata,
 * or with a kind this build lacks, still gives DI_OK and a tokenizer whose
 * calls answer DI_ERR_UNSUPPORTED with the reason. Malformed metadata (wrong
 * types, a vocabulary size other than n_vocab, bad merges) gives DI_ERR_MODEL.
 * The tokenizer may point into the mapped file, which outlives it. */
di_status di_tokenizer_load(const di_gguf *g, uint32_t n_vocab, di_tokenizer **out, char *err,
                            size_t err_size);
void di_tokenizer_free(di_tokenizer *t);

#endif /* DI_TOKENIZER_H */
