/*
 * fuzz_request.c — libFuzzer harness for the server's request path
 * (tools/serve/serve_request.c): a raw body becomes a parsed, checked
 * request, then the response JSON it would produce, with no model step.
 *
 * An input is byte 0 (bit 0: the chat endpoint, else completions; bit 1: the
 * chatml template, which has tool turns, else gemma; bit 2: /v1/responses,
 * whatever bit 0 says) and the body. The model
 * is DI_FUZZ_MODEL (a generated one with a tokenizer: make fuzz passes
 * tok_chat_markers.gguf, whose context is 64).
 *
 * Checked promises (a broken one traps, which libFuzzer reports):
 *   - a refused body gets a 400 or 413 with an error JSON that parses back,
 *     its message non-empty;
 *   - an accepted one has 1..context prompt ids, each in [0, n_vocab);
 *     1 <= max_tokens <= the cap, and prompt + max_tokens - 1 <= context;
 *   - 1 <= n <= --max-n, with n computed choices when sampled, 1 when greedy;
 *   - its response JSON, each choice's first and last stream chunks, and the
 *     usage chunk parse back as objects.
 *
 * Build and run: make fuzz (tests/fuzz/README.md).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve/serve.h"

#define CHECK(cond)           \
    do {                      \
        if (!(cond))          \
            __builtin_trap(); \
    } while (0)

static sv_server server;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    const char *path = getenv("DI_FUZZ_MODEL");
    char err[256];
    if (!path || di_model_load(path, &server.model, err, sizeof err) != DI_OK)
        __builtin_trap(); /* the harness needs its model */
    server.n_vocab = 0;
    di_model_get_int(server.model, DI_MODEL_N_VOCAB, &server.n_vocab);
    server.context = 64;
    server.cfg.max_tokens = 63;
    server.cfg.max_tokens_default = 16;
    server.cfg.max_n = 8;
    server.cfg.max_prompts = 4;
    server.cfg.max_body = 1 << 20;
    server.cfg.model_name = "fuzz";
    server.cfg.profile = DI_PROFILE_PORTABLE;
    server.chat_template = "gemma";
    di_sampling_params p;
    server.sampling_available = di_sampling_params_init(&p) == DI_OK;
    memset(server.model_digest, '0', sizeof server.model_digest - 1);
    snprintf(server.backend_info, sizeof server.backend_info, "fuzz");
    return 0;
}

static void check_json_object(char *text)
{
    CHECK(text != NULL);
    json_error_t jerr;
    json_t *v = json_loads(text, JSON_ALLOW_NUL, &jerr);
    CHECK(v != NULL && json_is_object(v));
    json_decref(v);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const sv_kind kind = (data[0] & 1) ? SV_CHAT : SV_COMPLETION;
    server.chat_template = (data[0] & 2) ? "chatml" : "gemma";
    const char *body = (const char *)data + 1;
    const size_t len = size - 1;
    sv_request *r = NULL;
    sv_error e;
    memset(&e, 0, sizeof e);
    if ((data[0] & 4) ? sv_responses_parse(&server, body, len, &r, &e)
                      : sv_request_parse(&server, kind, body, len, &r, &e)) {
        CHECK(r == NULL);
        CHECK(e.status == 400 || e.status == 413);
        CHECK(e.message[0] != '\0');
        check_json_object(sv_error_json(&e));
        return 0;
    }
    CHECK(r != NULL);
    CHECK(r->n_prompts >= 1 && r->n_prompts <= (uint32_t)server.cfg.max_prompts);
    CHECK(r->max_tokens >= (r->echo ? 0u : 1u) && r->max_tokens <= (uint32_t)server.cfg.max_tokens);
    for (uint32_t p = 0; p < r->n_prompts; p++) {
        const sv_prompt *q = &r->prompts[p];
        CHECK(q->n >= 1 && q->n <= (uint32_t)server.context);
        for (uint32_t i = 0; i < q->n; i++)
            CHECK(q->ids[i] >= 0 && q->ids[i] < server.n_vocab);
        CHECK(q->n + r->max_tokens - 1 <= (uint32_t)server.context);
    }
    CHECK(r->n >= 1 && r->n <= (uint32_t)server.cfg.max_n &&
          r->n_computed == r->n_prompts * (r->sampled ? r->n : 1));
    /* as if every choice finished at once, with no token */
    for (uint32_t i = 0; i < r->n_computed; i++) {
        r->choices[i].state = SV_DONE;
        r->choices[i].finish_reason = "length";
    }
    check_json_object(sv_response_json(&server, r));
    if (r->responses) { /* its Response, and its whole stream of events at once */
        CHECK(r->kind == SV_CHAT && r->n_computed == 1);
        check_json_object(sv_responses_json(&server, r));
        sv_responses_stream st;
        memset(&st, 0, sizeof st);
        char *events = sv_responses_events(&server, r, &st);
        CHECK(events != NULL && st.closed && !strncmp(events, "event: response.created\n", 24));
        free(events);
    }
    for (uint32_t i = 0; i < sv_response_choices(r); i++) {
        check_json_object(sv_chunk_json(&server, r, i, "", 0, 0, 0, NULL, 1));
        check_json_object(sv_chunk_json(&server, r, i, "", 0, 0, 0, "length", 0));
    }
    check_json_object(sv_usage_chunk_json(&server, r));
    sv_request_free(r);
    return 0;
}
