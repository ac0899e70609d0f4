/*
 * chat_template.c — the built-in chat templates: recognising a GGUF's
 * tokenizer.chat_template text, and formatting messages into prompt text.
 *
 * The reference is llama.cpp (src/llama-chat.cpp): recognition follows its
 * llm_chat_detect_template (an exact template name, else substrings of the
 * Jinja text tested in a fixed order), and each formatter gives exactly what
 * its llm_chat_apply_template gives. docs/CHAT.md lists the templates.
 *
 * One table holds every template: its name, the substrings that recognise it
 * and its formatter. Rows without a formatter are templates llama.cpp knows
 * but this library does not build in; they stay in the table so that a text
 * llama.cpp takes for one of them is not taken for a later row.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/tokenizer/chat_template.h"
#include "detinfer.h"
#include "lib/base/errors.h"
#include "lib/base/growable.h"
#include "lib/base/json_quote.h"
#include "lib/base/utf8.h"

/* ---- messages and the output text ---------------------------------------- */

/* A tool's answer, and a call the assistant made ("tool_call": its content
 * is NAME, a newline, then the arguments as the JSON text the template
 * shows, right after the assistant message that carries it). Only the
 * templates with tool_turns set in the table take these two. */
typedef enum chat_role { ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT, ROLE_TOOL, ROLE_TOOL_CALL, N_ROLES } chat_role;

static const char *const role_names[N_ROLES] = {"system", "user", "assistant", "tool", "tool_call"};

typedef struct chat_message {
    chat_role role;
    const char *text;
    size_t len;
} chat_message;

/* The formatted text, and the spans of it that are message contents (for
 * di_chat_tokenize: no control token is parsed in them). */
typedef struct out_text {
    char *p;
    size_t n, cap;
    int oom;
    di_text_span *content;
    size_t n_content, cap_content;
} out_text;

static void put(out_text *o, const char *s, size_t n)
{
    if (o->oom || n == 0)
        return;
    if (!DI_GROW(o->p, o->n, o->cap, n, 256)) {
        o->oom = 1;
        return;
    }
    memcpy(o->p + o->n, s, n);
    o->n += n;
}

static void put_z(out_text *o, const char *z)
{
    put(o, z, strlen(z));
}

/* Message text: written as it is, and its span recorded. */
static void put_message_text(out_text *o, const char *s, size_t n)
{
    if (o->oom || n == 0)
        return;
    if (!DI_GROW(o->content, o->n_content, o->cap_content, 1, 16)) {
        o->oom = 1;
        return;
    }
    o->content[o->n_content++] = (di_text_span){o->n, n};
    put(o, s, n);
}

static void put_content(out_text *o, const chat_message *m)
{
    put_message_text(o, m->text, m->len);
}

/* llama.cpp's trim(): isspace in the C locale, so ASCII whitespace only. */
static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

static void put_trimmed(out_text *o, const char *s, size_t n)
{
    size_t start = 0, end = n;
    while (start < end && is_space(s[start]))
        start++;
    while (end > start && is_space(s[end - 1]))
        end--;
    put_message_text(o, s + start, end - start);
}

/* ---- the formatters -------------------------------------------------------
 * Each writes what llama.cpp's llm_chat_apply_template writes for the same
 * messages; roles are already checked to be system, user or assistant. */

struct chat_template;
typedef di_status (*chat_formatter)(const struct chat_template *tpl, const chat_message *m,
                                    size_t n, int add_ass, out_text *o, char *err, size_t es);

/* Variants of one formatter (bits of chat_template.variant). */
enum {
    LLAMA2_SYS = 1u << 0,      /* a system message gets <<SYS>> */
    LLAMA2_BOS = 1u << 1,      /* <s> before each later [INST] */
    LLAMA2_STRIP = 1u << 2,    /* contents trimmed */
    MISTRAL_V1 = 1u << 3,      /* a space before [INST] and [/INST] */
    MISTRAL_TEKKEN = 1u << 4,  /* no space after [INST] (v3) / anywhere (v7) */
    MISTRAL_TRIM = 1u << 5,    /* v3: assistant contents trimmed */
    ROLE_TAGS_ENDOFTEXT = 1u << 6, /* zephyr: turns end with <|endoftext|>, not <|end|> */
};

/* Which texts a row looks at (besides its substrings). */
typedef enum chat_scope {
    ANY_TEXT,   /* every text */
    INST_TEXT,  /* only a text that starts with "mistral" or holds "[INST]" */
    NAME_ONLY   /* none: the template is only ever named */
} chat_scope;

typedef struct chat_template {
    const char *name;              /* llama.cpp's name, the one callers pass */
    chat_scope scope;
    const char *all[3];            /* every one of these substrings is in the text */
    const char *any[2];            /* and, when given, at least one of these */
    chat_formatter format;         /* NULL: not built in */
    unsigned variant;
    const char *turn_end;          /* the text of the token that ends a turn (built-in rows) */
    int tool_turns;                /* 1: the formatter writes the tool and tool_call roles */
} chat_template;

/* The tool calls that follow message i (its "tool_call" messages). */
static size_t tool_calls_after(const chat_message *m, size_t n, size_t i)
{
    size_t k = 0;
    while (i + 1 + k < n && m[i + 1 + k].role == ROLE_TOOL_CALL)
        k++;
    return k;
}

/* A call's name and arguments (read_messages checked the newline). */
static void call_parts(const chat_message *c, const char **name, size_t *name_len, const char **args,
                       size_t *args_len)
{
    const char *nl = memchr(c->text, '\n', c->len);
    *name = c->text, *name_len = (size_t)(nl - c->text);
    *args = nl + 1, *args_len = c->len - *name_len - 1;
}

/* {"name": "NAME", "KEY": ARGS}: a call as Qwen 2.5's and Llama 3.1's
 * templates write it (the name as it is, the arguments as JSON). */
static void put_call_json(out_text *o, const chat_message *c, const char *key)
{
    const char *name, *args;
    size_t name_len, args_len;
    call_parts(c, &name, &name_len, &args, &args_len);
    put_z(o, "{\"name\": \"");
    put_message_text(o, name, name_len);
    put_z(o, "\", \"");
    put_z(o, key);
    put_z(o, "\": ");
    put_message_text(o, args, args_len);
    put_z(o, "}");
}

/* ChatML, with Qwen 2.5's tool turns (the Hermes layout): an assistant's
 * calls as <tool_call> blocks in its turn, consecutive tool answers as
 * <tool_response> blocks of one user turn. */
static di_status format_chatml(const chat_template *tpl, const chat_message *m, size_t n,
                               int add_ass, out_text *o, char *err, size_t es)
{
    (void)tpl, (void)err, (void)es;
    for (size_t i = 0; i < n; i++) {
        const size_t calls = tool_calls_after(m, n, i);
        if (m[i].role == ROLE_TOOL_CALL)
            continue; /* written with its assistant message */
        if (m[i].role == ROLE_TOOL) {
            if (i == 0 || m[i - 1].role != ROLE_TOOL)
                put_z(o, "<|im_start|>user");
            put_z(o, "\n<tool_response>\n");
            put_content(o, &m[i]);
            put_z(o, "\n</tool_response>");
            if (i + 1 == n || m[i + 1].role != ROLE_TOOL)
                put_z(o, "<|im_end|>\n");
            continue;
        }
        put_z(o, "<|im_start|>");
        put_z(o, role_names[m[i].role]);
        if (calls) {
            if (m[i].len) {
                put_z(o, "\n");
                put_content(o, &m[i]);
            }
            for (size_t k = 1; k <= calls; k++) {
                put_z(o, "\n<tool_call>\n");
                put_call_json(o, &m[i + k], "arguments");
                put_z(o, "\n</tool_call>");
            }
        } else {
            put_z(o, "\n");
            put_content(o, &m[i]);
        }
        put_z(o, "<|im_end|>\n");
    }
    if (add_ass)
        put_z(o, "<|im_start|>assistant\n");
    return DI_OK;
}

/* A JSON string of the text, as Python's json.dumps(ensure_ascii=False)
 * writes it (the `tojson` of the templates' reference rendering): '"', '\\'
 * and control characters escaped, everything else as it is. Message text. */
static void put_json_string(out_text *o, const char *s, size_t n)
{
    char *q = n < SIZE_MAX / 8 ? malloc(DI_JSON_QUOTED_MAX(n)) : NULL;
    if (!q) {
        o->oom = 1;
        return;
    }
    put_message_text(o, q, di_json_quote(s, n, q));
    free(q);
}

/* Llama 3.x, with Llama 3.1's tool turns: a tool's answer in the ipython
 * role as a JSON string, an assistant's call as {"name", "parameters"}.
 * That template takes one call per assistant message and drops any text
 * beside it: both are refused here rather than lost. */
static di_status format_llama3(const chat_template *tpl, const chat_message *m, size_t n,
                               int add_ass, out_text *o, char *err, size_t es)
{
    (void)tpl;
    for (size_t i = 0; i < n; i++) {
        const size_t calls = tool_calls_after(m, n, i);
        if (m[i].role == ROLE_TOOL_CALL)
            continue; /* written with its assistant message */
        if (calls > 1 || (calls && m[i].len))
            return di_error(err, es, DI_ERR_INVALID_ARGUMENT,
                            "message %zu: the llama3 template takes one tool call per assistant message and "
                            "no text beside it (this one has %zu call(s)%s)", i, calls,
                            m[i].len ? " and text" : "");
        put_z(o, "<|start_header_id|>");
        put_z(o, m[i].role == ROLE_TOOL ? "ipython" : role_names[m[i].role]);
        put_z(o, "<|end_header_id|>\n\n");
        if (calls)
            put_call_json(o, &m[i + 1], "parameters");
        else if (m[i].role == ROLE_TOOL)
            put_json_string(o, m[i].text, m[i].len);
        else
            put_trimmed(o, m[i].text, m[i].len);
        put_z(o, "<|eot_id|>");
    }
    if (add_ass)
        put_z(o, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    return DI_OK;
}

/* Gemma has no system turn: system texts (trimmed, joined with nothing) open
 * the next user turn; the assistant's role is "model". */
static di_status format_gemma(const chat_template *tpl, const chat_message *m, size_t n,
                              int add_ass, out_text *o, char *err, size_t es)
{
    (void)tpl;
    size_t pending = SIZE_MAX; /* the first system message not yet written */
    for (size_t i = 0; i < n; i++) {
        if (m[i].role == ROLE_SYSTEM) {
            if (pending == SIZE_MAX)
                pending = i;
            continue;
        }
        int model = m[i].role == ROLE_ASSISTANT;
        put_z(o, model ? "<start_of_turn>model\n" : "<start_of_turn>user\n");
        if (!model && pending != SIZE_MAX) {
            size_t before = o->n;
            for (size_t k = pending; k < i; k++)
                if (m[k].role == ROLE_SYSTEM)
                    put_trimmed(o, m[k].text, m[k].len);
            if (o->n > before) /* llama.cpp: only a non-empty system prompt */
                put_z(o, "\n\n");
            pending = SIZE_MAX;
        }
        put_trimmed(o, m[i].text, m[i].len);
        put_z(o, "<end_of_turn>\n");
    }
    if (pending != SIZE_MAX) {
        /* llama.cpp drops it silently; refuse rather than lose the text */
        for (size_t k = pending; k < n; k++) {
            size_t start = 0, len = m[k].len;
            while (start < len && is_space(m[k].text[start]))
                start++;
            if (m[k].role == ROLE_SYSTEM && start < len)
                return di_error(err, es, DI_ERR_INVALID_ARGUMENT,
                                "message %zu: the gemma template has no system turn; a system "
                                "message must be followed by a user message", k);
        }
    }
    if (add_ass)
        put_z(o, "<start_of_turn>model\n");
    return DI_OK;
}

/* Phi-3 and Zephyr: "<|role|>\n" content and an end-of-turn tag, which
 * alone tells them apart. */
static di_status format_role_tags(const chat_template *tpl, const chat_message *m, size_t n,
                                  int add_ass, out_text *o, char *err, size_t es)
{
    (void)err, (void)es;
    const char *turn_end = (tpl->variant & ROLE_TAGS_ENDOFTEXT) ? "<|endoftext|>\n" : "<|end|>\n";
    for (size_t i = 0; i < n; i++) {
        put_z(o, "<|");
        put_z(o, role_names[m[i].role]);
        put_z(o, "|>\n");
        put_content(o, &m[i]);
        put_z(o, turn_end);
    }
    if (add_ass)
        put_z(o, "<|assistant|>\n");
    return DI_OK;
}

/* Llama 2 and its variants. The assistant's turn opens after each user
 * message ("[/INST]"), so add_ass changes nothing (as in llama.cpp). */
static di_status format_llama2(const chat_template *tpl, const chat_message *m, size_t n,
                               int add_ass, out_text *o, char *err, size_t es)
{
    (void)add_ass, (void)err, (void)es;
    unsigned v = tpl->variant;
    int inside_turn = 1;
    put_z(o, "[INST] ");
    for (size_t i = 0; i < n; i++) {
        if (!inside_turn) {
            inside_turn = 1;
            put_z(o, (v & LLAMA2_BOS) ? "<s>[INST] " : "[INST] ");
        }
        if (m[i].role == ROLE_SYSTEM)
            put_z(o, (v & LLAMA2_SYS) ? "<<SYS>>\n" : "");
        if (v & LLAMA2_STRIP)
            put_trimmed(o, m[i].text, m[i].len);
        else
            put_content(o, &m[i]);
        switch (m[i].role) {
        case ROLE_SYSTEM: put_z(o, (v & LLAMA2_SYS) ? "\n<</SYS>>\n\n" : "\n"); break;
        case ROLE_USER: put_z(o, " [/INST]"); break;
        case ROLE_ASSISTANT:
            put_z(o, "</s>");
            inside_turn = 0;
            break;
        default: break; /* no tool turns in this template: refused before */
        }
    }
    return DI_OK;
}

/* Mistral v1, v3 and v3-tekken (add_ass changes nothing, as in llama.cpp). */
static di_status format_mistral(const chat_template *tpl, const chat_message *m, size_t n,
                                int add_ass, out_text *o, char *err, size_t es)
{
    (void)add_ass, (void)err, (void)es;
    unsigned v = tpl->variant;
    const char *lead = (v & MISTRAL_V1) ? " " : "";
    const char *trail = (v & MISTRAL_TEKKEN) ? "" : " ";
    int inside_turn = 0;
    for (size_t i = 0; i < n; i++) {
        if (!inside_turn) {
            put_z(o, lead);
            put_z(o, "[INST]");
            put_z(o, trail);
            inside_turn = 1;
        }
        switch (m[i].role) {
        case ROLE_SYSTEM:
            put_content(o, &m[i]);
            put_z(o, "\n\n");
            break;
        case ROLE_USER:
            put_content(o, &m[i]);
            put_z(o, lead);
            put_z(o, "[/INST]");
            break;
        case ROLE_ASSISTANT:
            put_z(o, trail);
            if (v & MISTRAL_TRIM)
                put_trimmed(o, m[i].text, m[i].len);
            else
                put_content(o, &m[i]);
            put_z(o, "</s>");
            inside_turn = 0;
            break;
        default: break; /* no tool turns in this template: refused before */
        }
    }
    return DI_OK;
}

/* Mistral v7 and v7-tekken (add_ass changes nothing, as in llama.cpp). */
static di_status format_mistral_v7(const chat_template *tpl, const chat_message *m, size_t n,
                                   int add_ass, out_text *o, char *err, size_t es)
{
    (void)add_ass, (void)err, (void)es;
    const char *space = (tpl->variant & MISTRAL_TEKKEN) ? "" : " ";
    for (size_t i = 0; i < n; i++) {
        switch (m[i].role) {
        case ROLE_SYSTEM: put_z(o, "[SYSTEM_PROMPT]"); break;
        case ROLE_USER: put_z(o, "[INST]"); break;
        default: break;
        }
        put_z(o, space);
        put_content(o, &m[i]);
        switch (m[i].role) {
        case ROLE_SYSTEM: put_z(o, "[/SYSTEM_PROMPT]"); break;
        case ROLE_USER: put_z(o, "[/INST]"); break;
        case ROLE_ASSISTANT: put_z(o, "</s>"); break;
        default: break;
        }
    }
    return DI_OK;
}

/* ---- the table --------------------------------------------------------------
 * In llama.cpp's detection order, up to the last built-in template (later
 * llama.cpp rows cannot change the answer). A row matches when no earlier
 * row did and its substrings are in the text. */

#define MISTRAL_V1_V3_MARKERS {"' [INST] ' + system_message", "[AVAILABLE_TOOLS]"}

static const chat_template templates[] = {
    {"phi4", ANY_TEXT, {"<|im_start|>", "<|im_sep|>"}, {NULL}, NULL, 0, NULL, 0},
    {"smolvlm", ANY_TEXT, {"<|im_start|>", "<end_of_utterance>"}, {NULL}, NULL, 0, NULL, 0},
    {"chatml", ANY_TEXT, {"<|im_start|>"}, {NULL}, format_chatml, 0, "<|im_end|>", 1},
    {"mistral-v7", INST_TEXT, {"[SYSTEM_PROMPT]"}, {NULL}, format_mistral_v7, 0, "</s>", 0},
    {"mistral-v1", INST_TEXT, {" [INST]"}, MISTRAL_V1_V3_MARKERS, format_mistral, MISTRAL_V1, "</s>", 0},
    {"mistral-v3-tekken", INST_TEXT, {"\"[INST]\""}, MISTRAL_V1_V3_MARKERS, format_mistral,
     MISTRAL_TEKKEN, "</s>", 0},
    {"mistral-v3", INST_TEXT, {NULL}, MISTRAL_V1_V3_MARKERS, format_mistral, MISTRAL_TRIM, "</s>", 0},
    {"llama2-sys-strip", INST_TEXT, {"content.strip()"}, {NULL}, format_llama2,
     LLAMA2_SYS | LLAMA2_STRIP, "</s>", 0},
    {"llama2-sys-bos", INST_TEXT, {"bos_token + '[INST]"}, {NULL}, format_llama2,
     LLAMA2_SYS | LLAMA2_BOS, "</s>", 0},
    {"llama2-sys", INST_TEXT, {"<<SYS>>"}, {NULL}, format_llama2, LLAMA2_SYS, "</s>", 0},
    {"llama2", INST_TEXT, {NULL}, {NULL}, format_llama2, 0, "</s>", 0},
    {"phi3", ANY_TEXT, {"<|assistant|>", "<|end|>"}, {NULL}, format_role_tags, 0, "<|end|>", 0},
    {"chatglm4", ANY_TEXT, {"[gMASK]<sop>"}, {NULL}, NULL, 0, NULL, 0},
    {"exaone-moe", ANY_TEXT, {"<|assistant|>", "<|user|>", "<|tool_declare|>"}, {NULL}, NULL, 0, NULL, 0},
    {"falcon3", ANY_TEXT, {"<|assistant|>", "<|user|>", "</s>"}, {NULL}, NULL, 0, NULL, 0},
    {"glmedge", ANY_TEXT, {"<|assistant|>", "<|user|>"}, {NULL}, NULL, 0, NULL, 0},
    {"glmedge", ANY_TEXT, {"<|{{ item['role'] }}|>", "<|begin_of_image|>"}, {NULL}, NULL, 0, NULL, 0},
    {"zephyr", ANY_TEXT, {"<|user|>", "<|endoftext|>"}, {NULL}, format_role_tags,
     ROLE_TAGS_ENDOFTEXT, "<|endoftext|>", 0},
    {"monarch", ANY_TEXT, {"bos_token + message['role']"}, {NULL}, NULL, 0, NULL, 0},
    {"gemma", ANY_TEXT, {"<start_of_turn>"}, {NULL}, format_gemma, 0, "<end_of_turn>", 0},
    {"orion", ANY_TEXT, {"'\\n\\nAssistant: ' + eos_token"}, {NULL}, NULL, 0, NULL, 0},
    {"openchat", ANY_TEXT, {"GPT4 Correct "}, {NULL}, NULL, 0, NULL, 0},
    {"vicuna-orca", ANY_TEXT, {"USER: ", "ASSISTANT: ", "SYSTEM: "}, {NULL}, NULL, 0, NULL, 0},
    {"vicuna", ANY_TEXT, {"USER: ", "ASSISTANT: "}, {NULL}, NULL, 0, NULL, 0},
    {"deepseek", ANY_TEXT, {"### Instruction:", "<|EOT|>"}, {NULL}, NULL, 0, NULL, 0},
    {"command-r", ANY_TEXT, {"<|START_OF_TURN_TOKEN|>", "<|USER_TOKEN|>"}, {NULL}, NULL, 0, NULL, 0},
    {"llama3", ANY_TEXT, {"<|start_header_id|>", "<|end_header_id|>"}, {NULL}, format_llama3, 0, "<|eot_id|>", 1},
    /* mistral-v7-tekken is only ever named, never detected (as in llama.cpp) */
    {"mistral-v7-tekken", NAME_ONLY, {NULL}, {NULL}, format_mistral_v7, MISTRAL_TEKKEN, "</s>", 0},
};

#define N_TEMPLATES (sizeof templates / sizeof templates[0])

static int contains(const char *text, size_t len, const char *needle)
{
    return memmem(text, len, needle, strlen(needle)) != NULL;
}

static int row_matches(const chat_template *t, const char *text, size_t len, int inst)
{
    if (t->scope == NAME_ONLY || (t->scope == INST_TEXT && !inst))
        return 0;
    for (int i = 0; i < 3 && t->all[i]; i++)
        if (!contains(text, len, t->all[i]))
            return 0;
    if (!t->any[0])
        return 1;
    for (int i = 0; i < 2 && t->any[i]; i++)
        if (contains(text, len, t->any[i]))
            return 1;
    return 0;
}

static const chat_template *find_by_name(const char *name, size_t len)
{
    for (size_t i = 0; i < N_TEMPLATES; i++)
        if (strlen(templates[i].name) == len && memcmp(templates[i].name, name, len) == 0)
            return &templates[i];
    return NULL;
}

const char *di_chat_detect(const char *text, size_t len)
{
    if (!text)
        return NULL;
    /* llama.cpp receives the text as a C string: it ends at a NUL */
    const char *nul = memchr(text, '\0', len);
    if (nul)
        len = (size_t)(nul - text);
    /* llama.cpp first takes the whole text as a template name */
    const chat_template *t = find_by_name(text, len);
    if (!t) {
        int inst = (len >= 7 && memcmp(text, "mistral", 7) == 0) || contains(text, len, "[INST]");
        for (size_t i = 0; i < N_TEMPLATES && !t; i++)
            if (row_matches(&templates[i], text, len, inst))
                t = &templates[i];
    }
    return t && t->format ? t->name : NULL;
}

/* ---- the public calls ------------------------------------------------------- */

static di_status read_messages(const char *const *roles, const char *const *contents, size_t n,
                               chat_message *m, char *err, size_t es)
{
    for (size_t i = 0; i < n; i++) {
        if (!roles[i] || !contents[i])
            return di_error(err, es, DI_ERR_INVALID_ARGUMENT, "message %zu: NULL %s", i,
                            roles[i] ? "content" : "role");
        size_t r = 0;
        while (r < N_ROLES && strcmp(roles[i], role_names[r]) != 0)
            r++;
        if (r == N_ROLES) {
            size_t bad;
            if (!di_utf8_valid(roles[i], strlen(roles[i]), &bad))
                return di_error(err, es, DI_ERR_INVALID_ARGUMENT,
                                "message %zu: unknown role (not UTF-8; expected system, user, "
                                "assistant, tool or tool_call)", i);
            size_t shown = strlen(roles[i]);
            if (shown > 40) /* at most 40 bytes, cut before a character, not inside one */
                for (shown = 40; ((unsigned char)roles[i][shown] & 0xC0) == 0x80; shown--)
                    ;
            return di_error(err, es, DI_ERR_INVALID_ARGUMENT,
                            "message %zu: unknown role '%.*s' (expected system, user, assistant, tool "
                            "or tool_call)", i, (int)shown, roles[i]);
        }
        m[i].role = (chat_role)r;
        m[i].text = contents[i];
        m[i].len = strlen(contents[i]);
        size_t bad;
        if (!di_utf8_valid(m[i].text, m[i].len, &bad))
            return di_error(err, es, DI_ERR_TEXT,
                            "message %zu: content is not valid UTF-8 at byte %zu (0x%02x)", i, bad,
                            (unsigned char)m[i].text[bad]);
        if (m[i].role == ROLE_TOOL_CALL && (i == 0 || (m[i - 1].role != ROLE_ASSISTANT &&
                                                       m[i - 1].role != ROLE_TOOL_CALL)))
            return di_error(err, es, DI_ERR_INVALID_ARGUMENT,
                            "message %zu: a tool_call follows the assistant message that made it", i);
        const char *nl = m[i].role == ROLE_TOOL_CALL ? memchr(m[i].text, '\n', m[i].len) : NULL;
        if (m[i].role == ROLE_TOOL_CALL && (!nl || nl == m[i].text))
            return di_error(err, es, DI_ERR_INVALID_ARGUMENT,
                            "message %zu: a tool_call's content is the function's name, a newline, then "
                            "its arguments as JSON", i);
    }
    return DI_OK;
}

/* A template without tool turns refuses the tool and tool_call roles, naming
 * itself and those that have them. */
static di_status check_tool_turns(const chat_template *tpl, const chat_message *m, size_t n, char *err,
                                  size_t es);

static void list_names(char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < N_TEMPLATES; i++) {
        if (!templates[i].format)
            continue;
        size_t len = strlen(templates[i].name);
        if (n + len + 3 >= size)
            break;
        if (n > 0) {
            memcpy(buf + n, ", ", 2);
            n += 2;
        }
        memcpy(buf + n, templates[i].name, len + 1);
        n += len;
    }
}

static di_status check_tool_turns(const chat_template *tpl, const chat_message *m, size_t n, char *err,
                                  size_t es)
{
    for (size_t i = 0; !tpl->tool_turns && i < n; i++)
        if (m[i].role == ROLE_TOOL || m[i].role == ROLE_TOOL_CALL) {
            char with[128] = "";
            for (size_t k = 0; k < N_TEMPLATES; k++)
                if (templates[k].tool_turns)
                    snprintf(with + strlen(with), sizeof with - strlen(with), "%s%s", with[0] ? ", " : "",
                             templates[k].name);
            return di_error(err, es, DI_ERR_INVALID_ARGUMENT,
                            "message %zu: the %s template has no tool turns (role %s); templates with "
                            "them: %s", i, tpl->name, role_names[m[i].role], with);
        }
    return DI_OK;
}

/* Formats the messages with the built-in template (di_chat_format's rules)
 * into a malloc'd text (NUL-terminated; *text_len bytes) and the malloc'd
 * spans of it that are message contents, in order. On failure *text and
 * *content are NULL. */
di_status di_chat_render(const char *template_name, const char *const *roles, const char *const *contents,
                         size_t n_messages, int add_assistant, char **text, size_t *text_len,
                         di_text_span **content, size_t *n_content, char *errbuf, size_t errbuf_size)
{
    *text = NULL, *text_len = 0, *content = NULL, *n_content = 0;
    const chat_template *tpl = find_by_name(template_name, strlen(template_name));
    if (!tpl || !tpl->format) {
        char names[256];
        list_names(names, sizeof names);
        return di_error(errbuf, errbuf_size, DI_ERR_UNSUPPORTED,
                        "unknown chat template '%.60s' (built in: %s)", template_name, names);
    }
    if (n_messages > SIZE_MAX / sizeof(chat_message))
        return di_error(errbuf, errbuf_size, DI_ERR_INVALID_ARGUMENT, "%zu messages are too many",
                        n_messages);
    chat_message *m = malloc((n_messages ? n_messages : 1) * sizeof *m);
    if (!m)
        return di_error(errbuf, errbuf_size, DI_ERR_OUT_OF_MEMORY, "out of memory for %zu messages",
                        n_messages);
    out_text o = {0};
    di_status st = read_messages(roles, contents, n_messages, m, errbuf, errbuf_size);
    if (!st)
        st = check_tool_turns(tpl, m, n_messages, errbuf, errbuf_size);
    if (!st)
        st = tpl->format(tpl, m, n_messages, add_assistant != 0, &o, errbuf, errbuf_size);
    put(&o, "", 1); /* the NUL (put writes nothing for 0 bytes: an empty text gets its buffer) */
    if (!st && (o.oom || !o.p))
        st = di_error(errbuf, errbuf_size, DI_ERR_OUT_OF_MEMORY,
                      "out of memory formatting %zu messages", n_messages);
    free(m);
    if (st) {
        free(o.p);
        free(o.content);
        return st;
    }
    *text = o.p, *text_len = o.n - 1, *content = o.content, *n_content = o.n_content;
    return DI_OK;
}

const char *di_chat_template_turn_end(const char *template_name)
{
    const chat_template *tpl = template_name ? find_by_name(template_name, strlen(template_name)) : NULL;
    return tpl && tpl->format ? tpl->turn_end : NULL;
}
