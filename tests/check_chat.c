/*
 * check_chat.c — chat templates (di_chat_format, di_model_chat_template),
 * metadata strings (di_model_meta_string), token lookup by text
 * (di_model_token_lookup) and tokenizing with DI_TOKENIZE_PARSE_SPECIAL.
 *
 * Expected texts come from two independent places: strings written out by
 * hand from the templates' Jinja definitions (gemma, chatml, llama3), and
 * goldens recorded from llama.cpp's llama_chat_apply_template
 * (tests/data/chat_goldens, tests/tools/record_chat_goldens.py).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_template.h"
#include "detinfer.h"
#include "gguf.h"
#include "test_util.h"

#define ERRBUF_SIZE 512

/* Formats with the public call; the text is malloc'd. Fails the test unless
 * the call gives want. */
static char *format(const char *tpl, const char *const *roles, const char *const *contents,
                    size_t n, int add_ass, di_status want, char *err)
{
    size_t need = 0, len = 0;
    di_status st = di_chat_format(tpl, roles, contents, n, add_ass, NULL, 0, &need, err,
                                  ERRBUF_SIZE);
    if (want != DI_OK) {
        ck_assert_msg(st == want, "%s: got %s, want %s (%s)", tpl, di_status_name(st),
                      di_status_name(want), err);
        return NULL;
    }
    ck_assert_msg(st == DI_ERR_BUFFER_TOO_SMALL, "%s: sizing call gave %s (%s)", tpl,
                  di_status_name(st), err);
    char *text = malloc(need + 1);
    ck_assert_ptr_nonnull(text);
    st = di_chat_format(tpl, roles, contents, n, add_ass, text, need + 1, &len, err, ERRBUF_SIZE);
    ck_assert_msg(st == DI_OK, "%s: %s (%s)", tpl, di_status_name(st), err);
    ck_assert_uint_eq(len, need);
    ck_assert_uint_eq(strlen(text), len);
    return text;
}

static void expect_format(const char *tpl, const char *const *roles, const char *const *contents,
                          size_t n, int add_ass, const char *want)
{
    char err[ERRBUF_SIZE];
    char *got = format(tpl, roles, contents, n, add_ass, DI_OK, err);
    ck_assert_msg(strcmp(got, want) == 0, "%s:\n got: [%s]\nwant: [%s]", tpl, got, want);
    free(got);
}

/* ---- texts checked by hand against the Jinja templates ------------------- */

static const char *const r_sys_user[] = {"system", "user"};
static const char *const c_sys_user[] = {"You are terse.", "Hi!"};
static const char *const r_turns[] = {"user", "assistant", "user"};
static const char *const c_turns[] = {"What is 2+2?", "4", "And 3+3?"};

START_TEST(test_chatml_by_hand)
{
    /* Qwen2.5: {{ '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
     * and add_generation_prompt: '<|im_start|>assistant\n' */
    expect_format("chatml", r_sys_user, c_sys_user, 2, 1,
                  "<|im_start|>system\nYou are terse.<|im_end|>\n"
                  "<|im_start|>user\nHi!<|im_end|>\n"
                  "<|im_start|>assistant\n");
    expect_format("chatml", r_turns, c_turns, 3, 0,
                  "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
                  "<|im_start|>assistant\n4<|im_end|>\n"
                  "<|im_start|>user\nAnd 3+3?<|im_end|>\n");
    /* contents are kept as they are, spaces included */
    static const char *const r[] = {"user"};
    static const char *const c[] = {"  padded \n"};
    expect_format("chatml", r, c, 1, 1,
                  "<|im_start|>user\n  padded \n<|im_end|>\n<|im_start|>assistant\n");
    expect_format("chatml", NULL, NULL, 0, 1, "<|im_start|>assistant\n");
    expect_format("chatml", NULL, NULL, 0, 0, "");
}
END_TEST

START_TEST(test_gemma_by_hand)
{
    /* Gemma 3: the system text opens the first user turn followed by "\n\n";
     * role "assistant" is "model"; contents are trimmed. */
    expect_format("gemma", r_sys_user, c_sys_user, 2, 1,
                  "<start_of_turn>user\nYou are terse.\n\nHi!<end_of_turn>\n"
                  "<start_of_turn>model\n");
    expect_format("gemma", r_turns, c_turns, 3, 1,
                  "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n"
                  "<start_of_turn>model\n4<end_of_turn>\n"
                  "<start_of_turn>user\nAnd 3+3?<end_of_turn>\n"
                  "<start_of_turn>model\n");
    static const char *const r[] = {"user"};
    static const char *const c[] = {" \t trimmed\n\n"};
    expect_format("gemma", r, c, 1, 0, "<start_of_turn>user\ntrimmed<end_of_turn>\n");
}
END_TEST

START_TEST(test_llama3_by_hand)
{
    /* Llama 3: '<|start_header_id|>' + role + '<|end_header_id|>\n\n' + content | trim
     * + '<|eot_id|>'; the generation prompt opens the assistant header. (The Jinja
     * template also writes bos_token first; llama.cpp leaves that to tokenizing.) */
    expect_format("llama3", r_sys_user, c_sys_user, 2, 1,
                  "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\n");
    expect_format("llama3", r_turns, c_turns, 3, 0,
                  "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\n4<|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\nAnd 3+3?<|eot_id|>");
}
END_TEST

/* ---- errors and the buffer rules ------------------------------------------ */

START_TEST(test_format_errors)
{
    char err[ERRBUF_SIZE], buf[256];
    size_t len;
    static const char *const user[] = {"user"};
    static const char *const hi[] = {"hi"};

    /* unknown template: DI_ERR_UNSUPPORTED naming it and the built-in ones */
    format("no-such-template", user, hi, 1, 1, DI_ERR_UNSUPPORTED, err);
    ck_assert_msg(strstr(err, "no-such-template") && strstr(err, "gemma") && strstr(err, "chatml"),
                  "message: %s", err);
    /* known to llama.cpp, not built in */
    format("phi4", user, hi, 1, 1, DI_ERR_UNSUPPORTED, err);
    format("", user, hi, 1, 1, DI_ERR_UNSUPPORTED, err);

    /* unknown roles */
    static const char *const bad_roles[][1] = {{"tool"}, {"User"}, {""}, {"model"}, {"\xff"}};
    for (size_t i = 0; i < sizeof bad_roles / sizeof bad_roles[0]; i++) {
        format("chatml", bad_roles[i], hi, 1, 1, DI_ERR_INVALID_ARGUMENT, err);
        ck_assert_msg(strstr(err, "unknown role") && strstr(err, "message 0"), "message: %s", err);
    }
    static const char *const roles2[] = {"user", "robot"};
    static const char *const c2[] = {"a", "b"};
    format("llama3", roles2, c2, 2, 1, DI_ERR_INVALID_ARGUMENT, err);
    ck_assert_msg(strstr(err, "message 1") && strstr(err, "robot"), "message: %s", err);

    /* invalid UTF-8 in a content */
    static const char *const bad_text[] = {"caf\xc3", "\xc0\x80", "\xed\xa0\x80", "ok\x80"};
    for (size_t i = 0; i < sizeof bad_text / sizeof bad_text[0]; i++) {
        const char *c[] = {bad_text[i]};
        format("gemma", user, c, 1, 1, DI_ERR_TEXT, err);
        ck_assert_msg(strstr(err, "UTF-8") && strstr(err, "message 0"), "message: %s", err);
    }

    /* gemma has no system turn: a system message with nothing after it would be lost */
    static const char *const sys_only[] = {"system"};
    static const char *const sys_text[] = {"Be brief."};
    format("gemma", sys_only, sys_text, 1, 1, DI_ERR_INVALID_ARGUMENT, err);
    ck_assert_msg(strstr(err, "system"), "message: %s", err);
    static const char *const r3[] = {"user", "assistant", "system"};
    static const char *const c3[] = {"a", "b", "late system"};
    format("gemma", r3, c3, 3, 1, DI_ERR_INVALID_ARGUMENT, err);
    /* ...while an empty one loses nothing */
    static const char *const blank[] = {" \n"};
    expect_format("gemma", sys_only, blank, 1, 1, "<start_of_turn>model\n");

    /* NULL arguments */
    ck_assert_int_eq(di_chat_format(NULL, user, hi, 1, 1, buf, sizeof buf, &len, err, sizeof err),
                     DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_chat_format("chatml", NULL, hi, 1, 1, buf, sizeof buf, &len, err, sizeof err),
                     DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_chat_format("chatml", user, NULL, 1, 1, buf, sizeof buf, &len, err, sizeof err),
                     DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_chat_format("chatml", user, hi, 1, 1, NULL, 8, &len, err, sizeof err),
                     DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_chat_format("chatml", user, hi, 1, 1, buf, sizeof buf, NULL, err, sizeof err),
                     DI_ERR_INVALID_ARGUMENT);
    static const char *const null_role[] = {NULL};
    static const char *const null_text[] = {NULL};
    ck_assert_int_eq(di_chat_format("chatml", null_role, hi, 1, 1, buf, sizeof buf, &len, err,
                                    sizeof err), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_chat_format("chatml", user, null_text, 1, 1, buf, sizeof buf, &len, err,
                                    sizeof err), DI_ERR_INVALID_ARGUMENT);
    /* errbuf is optional */
    ck_assert_int_eq(di_chat_format("nope", user, hi, 1, 1, buf, sizeof buf, &len, NULL, 0),
                     DI_ERR_UNSUPPORTED);
    ck_assert_int_eq(di_chat_format("chatml", user, hi, 1, 1, buf, sizeof buf, &len, NULL, 0), DI_OK);
}
END_TEST

START_TEST(test_format_buffer_rules)
{
    static const char *const user[] = {"user"};
    static const char *const hi[] = {"hi"};
    const char *want = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n";
    size_t n = strlen(want), len = 0;
    char buf[128], err[ERRBUF_SIZE];
    ck_assert_int_eq(di_chat_format("chatml", user, hi, 1, 1, NULL, 0, &len, err, sizeof err),
                     DI_ERR_BUFFER_TOO_SMALL);
    ck_assert_uint_eq(len, n);
    memset(buf, 'x', sizeof buf);
    ck_assert_int_eq(di_chat_format("chatml", user, hi, 1, 1, buf, n, &len, err, sizeof err),
                     DI_ERR_BUFFER_TOO_SMALL); /* no room for the NUL */
    ck_assert_uint_eq(len, n);
    ck_assert_int_eq(buf[0], '\0');
    ck_assert_msg(strstr(err, "bytes"), "message: %s", err);
    memset(buf, 'x', sizeof buf);
    ck_assert_int_eq(di_chat_format("chatml", user, hi, 1, 1, buf, n + 1, &len, err, sizeof err),
                     DI_OK);
    ck_assert_uint_eq(len, n);
    ck_assert_str_eq(buf, want);
    /* an empty result fits a buffer of one byte */
    ck_assert_int_eq(di_chat_format("chatml", NULL, NULL, 0, 0, buf, 1, &len, err, sizeof err), DI_OK);
    ck_assert_uint_eq(len, 0);
    ck_assert_int_eq(buf[0], '\0');
    ck_assert_int_eq(di_chat_format("chatml", NULL, NULL, 0, 0, NULL, 0, &len, err, sizeof err),
                     DI_ERR_BUFFER_TOO_SMALL);
}
END_TEST

/* ---- recognition of template texts ------------------------------------------ */

START_TEST(test_detect_names_and_needles)
{
    /* a template name stands for itself, as in llama.cpp */
    ck_assert_str_eq(di_chat_detect("gemma", 5), "gemma");
    ck_assert_str_eq(di_chat_detect("chatml", 6), "chatml");
    ck_assert_str_eq(di_chat_detect("llama3", 6), "llama3");
    ck_assert_ptr_null(di_chat_detect("phi4", 4));      /* known, not built in */
    ck_assert_ptr_null(di_chat_detect("", 0));
    ck_assert_ptr_null(di_chat_detect("{{ messages }}", 14));
    ck_assert_ptr_null(di_chat_detect(NULL, 0));
    /* the marker substrings, in llama.cpp's order */
    const char *t = "{{ '<start_of_turn>' + role }}";
    ck_assert_str_eq(di_chat_detect(t, strlen(t)), "gemma");
    t = "{{ '<|im_start|>' }} ... <start_of_turn>"; /* chatml is tested first */
    ck_assert_str_eq(di_chat_detect(t, strlen(t)), "chatml");
    t = "<|im_start|><|im_sep|>"; /* phi4: not built in, and not chatml either */
    ck_assert_ptr_null(di_chat_detect(t, strlen(t)));
    t = "<|start_header_id|>x<|end_header_id|>";
    ck_assert_str_eq(di_chat_detect(t, strlen(t)), "llama3");
    t = "<|start_header_id|> only";
    ck_assert_ptr_null(di_chat_detect(t, strlen(t)));
    /* the text ends at a NUL, as llama.cpp reads a C string */
    ck_assert_ptr_null(di_chat_detect("x\0<start_of_turn>", 17));
    ck_assert_str_eq(di_chat_detect("gemma\0xyz", 9), "gemma");
}
END_TEST

/* A file of the repository (DI_TEST_ROOT), whole, NUL-terminated; *len its size. */
static char *read_repo_file(const char *rel, size_t *len)
{
    const char *root = getenv("DI_TEST_ROOT");
    ck_assert_msg(root != NULL, "DI_TEST_ROOT is not set (run the suite with make check)");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)size + 1);
    ck_assert_ptr_nonnull(text);
    ck_assert_uint_eq(fread(text, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    text[size] = '\0';
    if (len)
        *len = (size_t)size;
    return text;
}

/* The real templates of tests/data/chat_templates (README.md there names the
 * sources) and what llama.cpp's llm_chat_detect_template makes of them,
 * worked out by hand from its rules (the chat goldens confirm each against
 * llama.cpp itself). NULL: llama.cpp takes it for a template not built in. */
static const struct {
    const char *stem;
    const char *want;
} template_files[] = {
    {"google-gemma-3-270m-it", "gemma"},
    {"google-gemma-2-2b-it", "gemma"},
    {"Qwen-Qwen2.5-7B-Instruct", "chatml"},
    {"Qwen-Qwen3-0.6B", "chatml"},
    {"Qwen-QwQ-32B", "chatml"},
    {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "chatml"},
    {"meta-llama-Llama-3.1-8B-Instruct", "llama3"},
    {"meta-llama-Llama-3.2-3B-Instruct", "llama3"},
    {"meta-llama-Llama-3.3-70B-Instruct", "llama3"},
    {"microsoft-Phi-3.5-mini-instruct", "phi3"},
    {"mistralai-Mistral-Nemo-Instruct-2407", "mistral-v3-tekken"},
    {"CohereForAI-c4ai-command-r-plus-tool_use", NULL}, /* command-r */
    {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", NULL}, /* deepseek3 */
    {"ibm-granite-granite-3.3-2B-Instruct", NULL},      /* granite */
    {"openai-gpt-oss-120b", NULL},
};
#define N_TEMPLATE_FILES ((int)(sizeof template_files / sizeof template_files[0]))

/* The same text in a GGUF (make_tokenizer_models.py writes chat-STEM.gguf):
 * read back whole by di_model_meta_string and recognised. */
START_TEST(test_recognise_template_files)
{
    const char *stem = template_files[_i].stem, *want = template_files[_i].want;
    char rel[512], name[512];
    snprintf(rel, sizeof rel, "tests/data/chat_templates/%s.jinja", stem);
    snprintf(name, sizeof name, "chat-%s", stem);
    size_t n;
    char *text = read_repo_file(rel, &n);
    const char *got = di_chat_detect(text, n);
    ck_assert_msg(want ? got && strcmp(got, want) == 0 : got == NULL, "%s: recognised as %s, want %s",
                  stem, got ? got : "NULL", want ? want : "NULL");

    di_model *m = tu_load(name);
    size_t len = 0;
    ck_assert_int_eq(di_model_meta_string(m, "tokenizer.chat_template", NULL, 0, &len),
                     DI_ERR_BUFFER_TOO_SMALL);
    ck_assert_uint_eq(len, n);
    char *meta = malloc(len + 1);
    ck_assert_int_eq(di_model_meta_string(m, "tokenizer.chat_template", meta, len + 1, &len), DI_OK);
    ck_assert_msg(memcmp(meta, text, n) == 0, "%s: the template read back differs", stem);
    got = di_model_chat_template(m);
    ck_assert_msg(want ? got && strcmp(got, want) == 0 : got == NULL,
                  "%s (GGUF): recognised as %s, want %s", stem, got ? got : "NULL", want ? want : "NULL");
    free(meta);
    free(text);
    di_model_free(m);
}
END_TEST

/* ---- metadata strings and token lookup ---------------------------------------- */

START_TEST(test_meta_string)
{
    di_model *m = tu_load("tok_spm");
    char buf[64];
    size_t len = 99;
    ck_assert_int_eq(di_model_meta_string(m, "general.name", buf, sizeof buf, &len), DI_OK);
    ck_assert_str_eq(buf, "tok_spm"); /* make_tokenizer_models.py names each model */
    ck_assert_uint_eq(len, 7);
    ck_assert_int_eq(di_model_meta_string(m, "general.architecture", buf, sizeof buf, &len), DI_OK);
    ck_assert_str_eq(buf, "llama");
    ck_assert_int_eq(di_model_meta_string(m, "tokenizer.ggml.model", buf, sizeof buf, &len), DI_OK);
    ck_assert_str_eq(buf, "llama");
    /* buffer rules as di_model_detokenize */
    ck_assert_int_eq(di_model_meta_string(m, "general.name", NULL, 0, &len), DI_ERR_BUFFER_TOO_SMALL);
    ck_assert_uint_eq(len, 7);
    memset(buf, 'x', sizeof buf);
    ck_assert_int_eq(di_model_meta_string(m, "general.name", buf, 7, &len), DI_ERR_BUFFER_TOO_SMALL);
    ck_assert_uint_eq(len, 7);
    ck_assert_int_eq(buf[0], '\0');
    ck_assert_int_eq(di_model_meta_string(m, "general.name", buf, 8, &len), DI_OK);
    ck_assert_str_eq(buf, "tok_spm");
    /* absent, or not a string: an integer, a bool, an array */
    const char *not_strings[] = {"no.such.key", "", "llama.context_length", "tokenizer.ggml.add_bos_token",
                                 "tokenizer.ggml.tokens", "general.name.x", "general.nam"};
    for (size_t i = 0; i < sizeof not_strings / sizeof not_strings[0]; i++) {
        len = 99;
        ck_assert_msg(di_model_meta_string(m, not_strings[i], buf, sizeof buf, &len) ==
                      DI_ERR_UNKNOWN_KEY, "%s", not_strings[i]);
        ck_assert_uint_eq(len, 0);
    }
    ck_assert_int_eq(di_model_meta_string(NULL, "general.name", buf, sizeof buf, &len),
                     DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_model_meta_string(m, NULL, buf, sizeof buf, &len), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_model_meta_string(m, "general.name", NULL, 8, &len), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_model_meta_string(m, "general.name", buf, 8, NULL), DI_ERR_INVALID_ARGUMENT);
    /* no template in this file */
    ck_assert_ptr_null(di_model_chat_template(m));
    ck_assert_ptr_null(di_model_chat_template(NULL));
    di_model_free(m);
}
END_TEST

/* Every token's text, read from the file by the format layer, looks up to
 * that token (the vocabularies have no duplicates). */
START_TEST(test_token_lookup_every_token)
{
    static const char *const names[] = {"tok_spm", "tok_bpe_llama3"};
    const char *name = names[_i];
    di_model *m = tu_load(name);
    FILE *f = fopen(tu_model_path(name, ".gguf"), "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *bytes = malloc((size_t)size);
    ck_assert_uint_eq(fread(bytes, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    di_gguf g;
    char err[ERRBUF_SIZE];
    ck_assert_int_eq(di_gguf_parse(bytes, (size_t)size, &g, err, sizeof err), DI_OK);
    const di_gguf_kv *kv = di_gguf_find_kv(&g, "tokenizer.ggml.tokens");
    ck_assert_ptr_nonnull(kv);
    const uint8_t *p = kv->v.arr.data;
    int checked = 0;
    for (uint64_t i = 0; i < kv->v.arr.count; i++) {
        uint64_t len = 0;
        for (int b = 0; b < 8; b++)
            len |= (uint64_t)p[b] << (8 * b);
        int32_t id = -5;
        if (len > 0) { /* an empty token has no text to look up */
            ck_assert_msg(di_model_token_lookup(m, (const char *)p + 8, (size_t)len, &id) == DI_OK,
                          "%s: token %llu '%.*s' not found", name, (unsigned long long)i, (int)len,
                          (const char *)p + 8);
            ck_assert_int_eq(id, (int32_t)i);
            checked++;
        }
        p += 8 + len;
    }
    ck_assert_int_gt(checked, 500);
    di_gguf_release(&g);
    free(bytes);
    di_model_free(m);
}
END_TEST

START_TEST(test_token_lookup_cases)
{
    di_model *m = tu_load("tok_spm");
    int32_t id = 0;
    ck_assert_int_eq(di_model_token_lookup(m, "<s>", 3, &id), DI_OK);
    ck_assert_int_eq(id, 1);
    ck_assert_int_eq(di_model_token_lookup(m, "</s>", 4, &id), DI_OK);
    ck_assert_int_eq(id, 2);
    ck_assert_int_eq(di_model_token_lookup(m, "<0x41>", 6, &id), DI_OK);
    ck_assert_int_eq(id, 3 + 0x41);
    ck_assert_int_eq(di_model_token_lookup(m, "<end_of_turn>", 13, &id), DI_OK);
    ck_assert_int_eq(id, 264);
    /* text_len counts: a prefix is another text */
    ck_assert_int_eq(di_model_token_lookup(m, "<end_of_turn>", 5, &id), DI_ERR_TOKEN_RANGE);
    ck_assert_int_eq(id, -1);
    ck_assert_int_eq(di_model_token_lookup(m, "<nope>", 6, &id), DI_ERR_TOKEN_RANGE);
    ck_assert_int_eq(di_model_token_lookup(m, "", 0, &id), DI_ERR_TOKEN_RANGE);
    ck_assert_int_eq(di_model_token_lookup(m, NULL, 0, &id), DI_ERR_TOKEN_RANGE);
    ck_assert_int_eq(di_model_token_lookup(m, NULL, 3, &id), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_model_token_lookup(m, "<s>", 3, NULL), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_model_token_lookup(NULL, "<s>", 3, &id), DI_ERR_INVALID_ARGUMENT);
    di_model_free(m);
    /* a model without a tokenizer */
    m = tu_tiny_model();
    ck_assert_int_eq(di_model_token_lookup(m, "a", 1, &id), DI_ERR_UNSUPPORTED);
    di_model_free(m);
}
END_TEST

/* ---- tokenizing with PARSE_SPECIAL ------------------------------------------------ */

static size_t tokenize(const di_model *m, const char *text, uint32_t flags, int32_t *ids, size_t cap)
{
    size_t n = 0;
    char err[ERRBUF_SIZE];
    di_status st = di_model_tokenize(m, text, strlen(text), flags, ids, cap, &n, err, sizeof err);
    ck_assert_msg(st == DI_OK, "%s: %s", di_status_name(st), err);
    return n;
}

START_TEST(test_parse_special_basics)
{
    di_model *m = tu_load("tok_spm_noprefix");
    int32_t a[64], b[64];
    /* control tokens: text without the flag, the tokens with it */
    size_t n = tokenize(m, "<s>hi</s>", DI_TOKENIZE_PARSE_SPECIAL, a, 64);
    ck_assert_uint_ge(n, 3);
    ck_assert_int_eq(a[0], 1);
    ck_assert_int_eq(a[n - 1], 2);
    size_t k = tokenize(m, "hi", 0, b, 64);
    ck_assert_uint_eq(n, k + 2);
    ck_assert_mem_eq(a + 1, b, k * sizeof *b);
    n = tokenize(m, "<s>hi</s>", 0, a, 64);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(a[i] != 1 && a[i] != 2, "control token %d parsed without the flag", a[i]);
    /* control-by-name (<end_of_turn>) and user-defined (<tool>) tokens */
    n = tokenize(m, "<end_of_turn><tool><ctrl>", DI_TOKENIZE_PARSE_SPECIAL, a, 64);
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(a[0], 264);
    ck_assert_int_eq(a[1], 259);
    ck_assert_int_eq(a[2], 263);
    /* with ADD_BOS as well: BOS, then the parsed tokens, then EOS (add_eos_token) */
    n = tokenize(m, "<ctrl>", DI_TOKENIZE_PARSE_SPECIAL | DI_TOKENIZE_ADD_BOS, a, 64);
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(a[0], 1);
    ck_assert_int_eq(a[1], 263);
    ck_assert_int_eq(a[2], 2);
    /* unknown flags are still refused */
    char err[ERRBUF_SIZE];
    ck_assert_int_eq(di_model_tokenize(m, "a", 1, 0x4, a, 64, &n, err, sizeof err),
                     DI_ERR_INVALID_ARGUMENT);
    di_model_free(m);
}
END_TEST

Suite *chat_suite(void)
{
    Suite *s = suite_create("chat");
    TCase *tc = tcase_create("format");
    tcase_add_test(tc, test_chatml_by_hand);
    tcase_add_test(tc, test_gemma_by_hand);
    tcase_add_test(tc, test_llama3_by_hand);
    tcase_add_test(tc, test_format_errors);
    tcase_add_test(tc, test_format_buffer_rules);
    tcase_add_test(tc, test_detect_names_and_needles);
    suite_add_tcase(s, tc);
    tc = tcase_create("model");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_meta_string);
    tcase_add_loop_test(tc, test_recognise_template_files, 0, N_TEMPLATE_FILES);
    tcase_add_loop_test(tc, test_token_lookup_every_token, 0, 2);
    tcase_add_test(tc, test_token_lookup_cases);
    tcase_add_test(tc, test_parse_special_basics);
    suite_add_tcase(s, tc);
    return s;
}
