/*
 * verify_prompts.c — the prompts `detinfer verify` checks: the
 * built-in list, prompts read from a file, and sampled copies of them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verify/verify.h"

/* Text prompts for a model with a tokenizer. The last four are confusable
 * on purpose: two answers are about equally likely, so the top-2 logit gap
 * of their first tokens is small. */
static const char *const builtin_text[] = {
    "The capital of France is",
    "Once upon a time, in a small village by the sea,",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "1, 2, 3, 5, 8, 13,",
    "The capital of Australia is",
    "Is 9.11 larger than 9.9? Answer:",
    "Heads or tails? I pick",
    "Pick a random number between 1 and 10:",
};

/* The near-tie search's own starting points, on many subjects, so that the
 * continuations are varied (a model's greedy text soon repeats itself). */
static const char *const search_text[] = {
    "The best way to learn a new language is",
    "In 1969, the first humans",
    "My favourite recipe for a rainy day",
    "The difference between a virus and a bacterium",
    "Dear hiring manager, I am writing to",
    "The stock market fell sharply today after",
    "To install the package, run",
    "She opened the old wooden box and found",
    "The three laws of thermodynamics state",
    "Here is a short poem about autumn:",
    "Q: What is the boiling point of water? A:",
    "import numpy as np\nimport matplotlib.pyplot as plt\n",
    "The main causes of the French Revolution were",
    "Translate to French: I would like a cup of coffee.",
    "Ten tips for better sleep: 1.",
    "SELECT name, COUNT(*) FROM users",
    "The weather tomorrow will be",
    "He looked at the map and realised that",
    "Photosynthesis is the process by which",
    "The quick brown fox",
    "A good password should",
    "Chapter 1. The night the lights went out",
    "The human heart has four chambers:",
    "Once the meeting was over, the team",
};

/* Lengths of the built-in token-id prompts (for models without a tokenizer). */
static const uint32_t builtin_lengths[] = {1, 5, 13, 24};

void vf_prompts_free(vf_prompt_set *set)
{
    for (uint32_t i = 0; i < set->n; i++) {
        free(set->p[i].label);
        free(set->p[i].text);
        free(set->p[i].tokens);
    }
    free(set->p);
    memset(set, 0, sizeof *set);
}

/* "tokens[13] 5,99,1,7,42,8,…": the start of a token-id prompt. */
static char *token_label(const char *prefix, const int32_t *tokens, uint32_t n)
{
    char buf[160];
    int at = snprintf(buf, sizeof buf, "%stokens[%u] ", prefix, n);
    for (uint32_t i = 0; i < n && i < 6 && at < (int)sizeof buf - 16; i++)
        at += snprintf(buf + at, sizeof buf - (size_t)at, "%s%d", i ? "," : "", tokens[i]);
    if (n > 6)
        snprintf(buf + at, sizeof buf - (size_t)at, ",...");
    return strdup(buf);
}

/* Takes ownership of tokens (and of text, which may be NULL). */
static di_status add_prompt(vf_prompt_set *set, char *label, char *text, int32_t *tokens, uint32_t n,
                            char *err, size_t err_size)
{
    if (set->n == set->cap) {
        uint32_t cap = set->cap ? 2 * set->cap : 16;
        vf_prompt *p = realloc(set->p, cap * sizeof *p);
        if (!p)
            goto oom;
        set->p = p;
        set->cap = cap;
    }
    if (!label)
        goto oom;
    set->p[set->n++] = (vf_prompt){label, text, tokens, n, {0}};
    return DI_OK;
oom:
    free(label);
    free(text);
    free(tokens);
    snprintf(err, err_size, "out of memory");
    return DI_ERR_OUT_OF_MEMORY;
}

/* A prompt of len token ids drawn from *rng, below n_vocab. */
static di_status add_random_prompt(vf_prompt_set *set, uint64_t *rng, int64_t n_vocab, uint32_t len, char *err,
                                   size_t err_size)
{
    int32_t *tokens = malloc(len * sizeof *tokens);
    if (!tokens) {
        snprintf(err, err_size, "out of memory");
        return DI_ERR_OUT_OF_MEMORY;
    }
    for (uint32_t i = 0; i < len; i++)
        tokens[i] = (int32_t)(cli_rand(rng) % (uint64_t)n_vocab);
    return add_prompt(set, token_label("", tokens, len), NULL, tokens, len, err, err_size);
}

static di_status add_text(const di_model *model, vf_prompt_set *set, const char *text, char *err,
                          size_t err_size)
{
    int32_t *tokens;
    uint32_t n;
    di_status st = cli_tokenize(model, text, 1, &tokens, &n, err, err_size);
    if (st)
        return st;
    if (n == 0) {
        free(tokens);
        snprintf(err, err_size, "the prompt \"%.40s\" gives no tokens", text);
        return DI_ERR_INVALID_ARGUMENT;
    }
    return add_prompt(set, strdup(text), strdup(text), tokens, n, err, err_size);
}

di_status vf_prompts_builtin(const di_model *model, uint32_t max_len, uint64_t seed, vf_prompt_set *set,
                             char *err, size_t err_size)
{
    int32_t probe[8];
    size_t n_probe = 0;
    di_status st = di_model_tokenize(model, "a", 1, 0, probe, 8, &n_probe, err, err_size);
    if (st == DI_OK) {
        set->text = 1;
        snprintf(set->note, sizeof set->note, "%zu built-in text prompts (4 of them confusable)",
                 sizeof builtin_text / sizeof *builtin_text);
        for (size_t i = 0; i < sizeof builtin_text / sizeof *builtin_text && st == DI_OK; i++)
            st = add_text(model, set, builtin_text[i], err, err_size);
        return st;
    }
    if (st != DI_ERR_UNSUPPORTED)
        return st;
    /* No tokenizer (the generated test models): token ids, a few lengths. */
    int64_t n_vocab = cli_model_int(model, DI_MODEL_N_VOCAB);
    uint64_t rng = seed ^ 0x70726f6d707473ull;
    uint32_t last = 0;
    st = DI_OK;
    for (size_t k = 0; k < sizeof builtin_lengths / sizeof *builtin_lengths && st == DI_OK; k++) {
        uint32_t len = builtin_lengths[k] < max_len ? builtin_lengths[k] : max_len;
        if (len == 0 || len == last)
            continue;
        last = len;
        st = add_random_prompt(set, &rng, n_vocab, len, err, err_size);
    }
    snprintf(set->note, sizeof set->note,
             "%u built-in token-id prompts (the model has no tokenizer)", set->n);
    err[0] = '\0';
    return st;
}

/* In place: \n, \t and \\ become their characters. */
static void unescape(char *s)
{
    char *w = s;
    for (; *s; s++) {
        if (*s == '\\' && (s[1] == 'n' || s[1] == 't' || s[1] == '\\')) {
            s++;
            *w++ = *s == 'n' ? '\n' : *s == 't' ? '\t' : '\\';
        } else {
            *w++ = *s;
        }
    }
    *w = '\0';
}

static di_status file_line(const di_model *model, vf_prompt_set *set, char *line, unsigned lineno, char *err,
                           size_t err_size)
{
    if (!strncmp(line, "tokens:", 7)) {
        int32_t *tokens;
        uint32_t n;
        di_status st = cli_token_list(line + 7, cli_model_int(model, DI_MODEL_N_VOCAB), &tokens, &n);
        if (st)
            snprintf(err, err_size, "line %u: 'tokens:' wants ids in [0, n_vocab) separated by commas", lineno);
        return st ? st : add_prompt(set, token_label("", tokens, n), NULL, tokens, n, err, err_size);
    }
    unescape(line);
    char detail[256] = "";
    di_status st = add_text(model, set, line, detail, sizeof detail);
    if (st == DI_ERR_UNSUPPORTED)
        snprintf(err, err_size, "line %u is text, but the model has no tokenizer (write 'tokens: 1,2,3'): %s",
                 lineno, detail);
    else if (st)
        snprintf(err, err_size, "line %u: %s", lineno, detail);
    return st;
}

di_status vf_prompts_file(const di_model *model, const char *path, vf_prompt_set *set, char *err,
                          size_t err_size)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, err_size, "cannot open the prompt file '%s': %s", path, strerror(errno));
        return DI_ERR_IO;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    unsigned lineno = 0;
    di_status st = DI_OK;
    while (st == DI_OK && (len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (len == 0 || line[0] == '#')
            continue;
        st = file_line(model, set, line, lineno, err, err_size);
    }
    free(line);
    fclose(f);
    if (st == DI_OK && set->n == 0) {
        snprintf(err, err_size, "the prompt file '%s' has no prompts", path);
        st = DI_ERR_INVALID_ARGUMENT;
    }
    snprintf(set->note, sizeof set->note, "%u prompt%s from %s", set->n, set->n == 1 ? "" : "s", path);
    return st;
}

/* The parameter sets of the sampled requests, taken in turn: plain
 * temperature, every filter with a repetition penalty, and a hot one with
 * presence and frequency penalties over the whole sequence. */
static di_sampling_params sampled_params(uint32_t k)
{
    di_sampling_params p;
    di_sampling_params_init(&p);
    switch (k % 3) {
    case 0:
        p.temperature = 0.8f;
        break;
    case 1:
        p.temperature = 1.0f;
        p.top_k = 40;
        p.top_p = 0.95f;
        p.min_p = 0.05f;
        p.repetition_penalty = 1.1f;
        break;
    default:
        p.temperature = 1.5f;
        p.top_p = 0.9f;
        p.presence_penalty = 0.5f;
        p.frequency_penalty = 0.2f;
        p.penalty_window = 0;
        break;
    }
    return p;
}

di_status vf_prompts_add_sampled(vf_prompt_set *set, uint32_t n_sampled, uint64_t seed, char *err,
                                 size_t err_size)
{
    const uint32_t n_base = set->n;
    if (n_sampled == 0 || n_base == 0)
        return DI_OK;
    for (uint32_t k = 0; k < n_sampled; k++) {
        const vf_prompt *base = &set->p[k % n_base];
        di_sampling_params p = sampled_params(k);
        p.seed = seed * 1000003u + k; /* a seed of its own per request */
        char label[200];
        snprintf(label, sizeof label, "sampled t=%g seed=%llu: %s", (double)p.temperature,
                 (unsigned long long)p.seed, base->label);
        int32_t *tokens = malloc(base->n * sizeof *tokens);
        char *text = base->text ? strdup(base->text) : NULL;
        if (tokens)
            memcpy(tokens, base->tokens, base->n * sizeof *tokens);
        const uint32_t n = base->n; /* add_prompt may move set->p */
        di_status st = add_prompt(set, tokens && (text || !base->text) ? strdup(label) : NULL, text, tokens, n,
                                  err, err_size);
        if (st)
            return st;
        set->p[set->n - 1].sampling = p;
    }
    size_t at = strlen(set->note);
    snprintf(set->note + at, sizeof set->note - at, ", and %u of them again sampled (seeded, temperature > 0)",
             n_sampled);
    return DI_OK;
}

di_status vf_prompts_search(const di_model *model, uint32_t max_len, uint32_t count, uint64_t seed,
                            vf_prompt_set *set, char *err, size_t err_size)
{
    int32_t probe[8];
    size_t n_probe = 0;
    di_status st = di_model_tokenize(model, "a", 1, 0, probe, 8, &n_probe, err, err_size);
    if (st == DI_OK) {
        for (size_t i = 0; i < sizeof search_text / sizeof *search_text && st == DI_OK; i++) {
            char *text = strdup(search_text[i]);
            if (!text) {
                snprintf(err, err_size, "out of memory");
                return DI_ERR_OUT_OF_MEMORY;
            }
            unescape(text);
            st = add_text(model, set, text, err, err_size);
            free(text);
            if (st == DI_OK && set->p[set->n - 1].n > max_len) { /* too long for this context: left out */
                set->n--;
                free(set->p[set->n].label);
                free(set->p[set->n].text);
                free(set->p[set->n].tokens);
            }
        }
        return st;
    }
    if (st != DI_ERR_UNSUPPORTED)
        return st;
    err[0] = '\0';
    st = DI_OK;
    int64_t n_vocab = cli_model_int(model, DI_MODEL_N_VOCAB);
    uint64_t rng = seed ^ 0x6e6561722d746965ull;
    for (uint32_t k = 0; k < count && st == DI_OK; k++) {
        uint32_t len = 2 + (uint32_t)(cli_rand(&rng) % 7);
        len = len < max_len ? len : max_len;
        st = add_random_prompt(set, &rng, n_vocab, len, err, err_size);
    }
    return st;
}

di_status vf_prompts_add_copy(vf_prompt_set *set, const vf_prompt *p, char *err, size_t err_size)
{
    int32_t *tokens = malloc(p->n * sizeof *tokens);
    char *text = p->text ? strdup(p->text) : NULL;
    if (tokens)
        memcpy(tokens, p->tokens, p->n * sizeof *tokens);
    const uint32_t n = p->n; /* add_prompt may move set->p, where p may point */
    return add_prompt(set, tokens && (text || !p->text) ? strdup(p->label) : NULL, text, tokens, n, err, err_size);
}
