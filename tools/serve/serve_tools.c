/*
 * serve_tools.c — OpenAI's tool calls in a chat (docs/SERVING.md, "Tool
 * calls"): tools [{"type": "function", "function": {"name", "description",
 * "parameters", "strict"}}], tool_choice ("none", "auto", "required" or
 * {"type": "function", "function": {"name"}}) and parallel_tool_calls.
 *
 * A call is written in the layout the template's model family was trained
 * on. Qwen 2.5 and 3 (chatml; Hermes), which the generic fallback of the
 * templates without a format of their own states in the system turn too:
 *
 *     <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>
 *
 * several separated by "\n"; Llama 3.1 (llama3): the whole message is one
 * call, {"name": "NAME", "parameters": ARGS}; Mistral Nemo
 * (mistral-v3-tekken), whose whole prompt is written here:
 *
 *     [TOOL_CALLS][{"name": "NAME", "arguments": ARGS}, ...]
 *
 * It is generated under one
 * grammar made of the tools' parameter schemas, each compiled by the
 * library's JSON-schema path and its rules renamed t<i>-...: with required
 * or a named function from the first token; with auto, text that never
 * holds the marker, then optionally the calls (llama3: a message that
 * starts with "{" is a call). So ARGS always parses and follows its schema.
 * The finished text is parsed back into message.tool_calls, ids derived
 * from the sequence digest, so the same request gives the same bytes.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/serve.h"

#define MAX_TOOLS 64
#define NAME_HEAD "{\"name\": \""
#define MISTRAL_ID_LEN 9 /* Mistral's call ids: 9 letters or digits */

/* How a template's model family writes its calls: the marker that begins
 * them (what auto's free text never holds), then around the list, around
 * each call and between calls. */
typedef struct call_format {
    const char *marker;
    const char *list_open, *list_close;
    const char *open, *close; /* around each call */
    const char *separator;    /* between calls */
    const char *args_head;    /* between the name and the arguments */
    int whole_message;        /* one call, the whole message, no marker (Llama 3.1) */
} call_format;

static const call_format hermes = {"<tool_call>", "", "", "<tool_call>\n", "\n</tool_call>", "\n",
                                   "\", \"arguments\": ", 0};
static const call_format llama = {"", "", "", "", "", "", "\", \"parameters\": ", 1};
static const call_format mistral = {"[TOOL_CALLS]", "[TOOL_CALLS][", "]", "", "", ", ", "\", \"arguments\": ", 0};

static const call_format *format_of(const sv_request *r)
{
    return r->tool_format == SV_TOOL_FORMAT_LLAMA3    ? &llama
           : r->tool_format == SV_TOOL_FORMAT_MISTRAL ? &mistral
                                                      : &hermes;
}

/* Qwen 3's system text for tools (Qwen 2.5's after its system message):
 * before, and after, the tools' JSON one per line. */
static const char tools_head[] =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
static const char tools_tail[] =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call>";
/* Llama 3.1's first user message with tools: this, then each tool as
 * json.dumps(indent=4) and "\n\n", then the message's text, trimmed. */
static const char llama_head[] =
    "Given the following functions, please respond with a JSON for a function call with its proper arguments "
    "that best answers the given prompt.\n\nRespond in the format {\"name\": function name, \"parameters\": "
    "dictionary of argument name and its value}.Do not use variables.\n\n";

/* ---- The request's fields ---------------------------------------------------- */

static const char *tool_name(json_t *tool)
{
    return json_string_value(json_object_get(json_object_get(tool, "function"), "name"));
}

static int check_tool(json_t *tools, size_t i, sv_error *e)
{
    json_t *tool = json_array_get(tools, i), *fn = json_object_get(tool, "function");
    json_t *type = json_object_get(tool, "type"), *name = json_object_get(fn, "name");
    if (!json_is_object(tool) || !json_is_string(type) || strcmp(json_string_value(type), "function") ||
        !json_is_object(fn) || sv_unknown_key(tool, (const char *const[]){"type", "function", NULL}))
        return sv_bad(e, "tools", "tools[%zu] must be {\"type\": \"function\", \"function\": {\"name\", "
                      "\"description\", \"parameters\"}}", i);
    if (!json_is_string(name) || !sv_function_name_ok(json_string_value(name)))
        return sv_bad(e, "tools", "tools[%zu]: 'function.name' must be 1 to 64 letters, digits, '_' or '-'", i);
    const char *n = json_string_value(name);
    const char *key = sv_unknown_key(fn, (const char *const[]){"name", "description", "parameters", "strict", NULL});
    if (key)
        return sv_bad(e, "tools", "tool '%s': unknown field 'function.%.40s'", n, key);
    json_t *description = json_object_get(fn, "description"), *strict = json_object_get(fn, "strict");
    json_t *params = json_object_get(fn, "parameters");
    if (description && !json_is_string(description) && !json_is_null(description))
        return sv_bad(e, "tools", "tool '%s': 'description' must be a string", n);
    if (strict && !json_is_boolean(strict) && !json_is_null(strict))
        return sv_bad(e, "tools", "tool '%s': 'strict' must be true or false", n);
    if (params && !json_is_object(params) && !json_is_null(params))
        return sv_bad(e, "tools", "tool '%s': 'parameters' must be a JSON schema (an object)", n);
    json_t *ptype = json_object_get(params, "type"); /* the arguments are an object, as OpenAI's */
    if (ptype && !(json_is_string(ptype) && !strcmp(json_string_value(ptype), "object")))
        return sv_bad(e, "tools", "tool '%s': 'parameters' must describe an object (\"type\": \"object\")", n);
    for (size_t k = 0; k < i; k++)
        if (!strcmp(tool_name(json_array_get(tools, k)), n))
            return sv_bad(e, "tools", "tool '%s' is defined twice (tools[%zu] and tools[%zu])", n, k, i);
    return 0;
}

/* tool_choice: the mode, and the one function it names (or -1). */
static int get_choice(json_t *root, json_t *tools, int *mode, long *named, sv_error *e)
{
    json_t *choice = json_object_get(root, "tool_choice");
    const size_t n = json_array_size(tools);
    *named = -1;
    *mode = n ? SV_TOOLS_AUTO : SV_TOOLS_OFF;
    if (!choice || json_is_null(choice))
        return 0;
    const char *s = json_string_value(choice);
    if (s && (!strcmp(s, "none") || !strcmp(s, "auto"))) {
        *mode = !strcmp(s, "none") ? SV_TOOLS_OFF : *mode;
        return 0;
    }
    if (s && !strcmp(s, "required")) {
        *mode = SV_TOOLS_REQUIRED;
        return n ? 0 : sv_bad(e, "tool_choice", "'tool_choice' is \"required\" but there are no 'tools'");
    }
    json_t *fn = json_object_get(choice, "function"), *type = json_object_get(choice, "type");
    json_t *name = json_object_get(fn, "name");
    if (!json_is_object(choice) || !json_is_string(type) || strcmp(json_string_value(type), "function") ||
        !json_is_object(fn) || !json_is_string(name) || json_object_size(choice) != 2 || json_object_size(fn) != 1)
        return sv_bad(e, "tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": "
                      "\"function\", \"function\": {\"name\": NAME}}");
    for (size_t k = 0; k < n; k++)
        if (!strcmp(tool_name(json_array_get(tools, k)), json_string_value(name))) {
            *mode = SV_TOOLS_REQUIRED;
            *named = (long)k;
            return 0;
        }
    return sv_bad(e, "tool_choice", "'tool_choice' names the function '%.64s', which is not one of 'tools'",
                  json_string_value(name));
}

/* ---- The grammar ---------------------------------------------------------------- */

/* GBNF text s with every rule name prefixed: literals, classes and
 * repetition counts are copied as they are. */
static void put_renamed(sv_buf *g, const char *s, size_t n, const char *prefix)
{
    for (size_t i = 0; i < n;) {
        const char c = s[i];
        size_t j = i + 1;
        if (c == '"' || c == '[' || c == '{') {
            const char close = c == '"' ? '"' : c == '[' ? ']' : '}';
            while (j < n && s[j] != close)
                j += s[j] == '\\' ? 2 : 1;
            j = j < n ? j + 1 : n;
        } else if (isalnum((unsigned char)c) || c == '-' || c == '_') {
            while (j < n && (isalnum((unsigned char)s[j]) || s[j] == '-' || s[j] == '_'))
                j++;
            sv_buf_puts(g, prefix);
        }
        sv_buf_put(g, s + i, j - i);
        i = j;
    }
}

/* Tool i's parameters compiled by the library (400 naming the tool when
 * they are outside the subset), their GBNF into g (when not NULL) with its
 * rules prefixed t<i>-. No parameters: {} only. */
static int tool_rules(json_t *tool, size_t i, sv_buf *g, sv_error *e)
{
    json_t *params = json_object_get(json_object_get(tool, "function"), "parameters");
    json_t *none = !params || json_is_null(params)
                       ? json_pack("{s:s, s:{}, s:b}", "type", "object", "properties", "additionalProperties", 0)
                       : NULL;
    char *schema = json_dumps(none ? none : params, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(none);
    if (!schema)
        return sv_bad(e, "tools", "out of memory");
    di_grammar *dg = NULL;
    char err[512] = "";
    di_status st = di_grammar_from_json_schema(schema, strlen(schema), 0, &dg, err, sizeof err);
    free(schema);
    if (st == DI_ERR_UNSUPPORTED)
        return sv_bad(e, "tools", "tool '%s': 'parameters' is outside the supported JSON-schema subset "
                      "(docs/STRUCTURED.md): %s", tool_name(tool), err);
    if (st)
        return sv_bad(e, "tools", "tool '%s': 'parameters' is not a usable JSON schema: %s: %s", tool_name(tool),
                      di_status_name(st), err);
    size_t len = 0;
    char *text = NULL;
    if (g && (st = di_grammar_gbnf(dg, NULL, 0, &len)) == DI_ERR_BUFFER_TOO_SMALL && (text = malloc(len + 1)))
        st = di_grammar_gbnf(dg, text, len + 1, &len);
    di_grammar_free(dg);
    if (g && (!text || st)) {
        free(text);
        return sv_bad(e, "tools", "out of memory");
    }
    if (g) {
        char prefix[16];
        snprintf(prefix, sizeof prefix, "t%zu-", i);
        put_renamed(g, text, len, prefix);
        sv_buf_puts(g, "\n");
    }
    free(text);
    return 0;
}

/* A byte inside a GBNF class, escaped where the class syntax needs it. */
static void put_class_char(sv_buf *g, char c)
{
    sv_buf_puts(g, c == '[' || c == ']' || c == '\\' || c == '^' || c == '-' ? "\\" : "");
    sv_buf_put(g, &c, 1);
}

/* Text that never holds the marker m (auto: what may come before the calls):
 * free ::= ([^m0] | "m0" free-1)* free-end, where free-k, having matched k
 * bytes of the marker, must leave it (or start it again at m0), and
 * free-end is a proper prefix of the marker. m's first byte m0 ('<', '[')
 * is in no other place of it. */
static void put_free_text(sv_buf *g, const char *m)
{
    const size_t len = strlen(m);
    char line[128];
    sv_buf_puts(g, "free ::= ([^");
    put_class_char(g, m[0]);
    snprintf(line, sizeof line, "] | \"%c\" free-1)* free-end\n", m[0]);
    sv_buf_puts(g, line);
    for (size_t k = 1; k < len; k++) {
        snprintf(line, sizeof line, "free-%zu ::= [^", k);
        sv_buf_puts(g, line);
        put_class_char(g, m[k]);
        put_class_char(g, m[0]);
        snprintf(line, sizeof line, "] | \"%c\" free-1", m[0]);
        sv_buf_puts(g, line);
        if (k + 1 < len) {
            snprintf(line, sizeof line, " | \"%c\" free-%zu", m[k], k + 1);
            sv_buf_puts(g, line);
        }
        sv_buf_puts(g, "\n");
    }
    sv_buf_puts(g, "free-end ::= \"\"");
    for (size_t k = 1; k < len; k++) {
        snprintf(line, sizeof line, " | \"%.*s\"", (int)k, m);
        sv_buf_puts(g, line);
    }
    sv_buf_puts(g, "\n");
}

/* s as a GBNF literal. */
static void put_literal(sv_buf *g, const char *s)
{
    sv_buf_puts(g, "\"");
    for (; *s; s++)
        sv_buf_puts(g, *s == '"' ? "\\\"" : *s == '\\' ? "\\\\" : *s == '\n' ? "\\n" : (char[]){*s, 0});
    sv_buf_puts(g, "\"");
}

/* The tools' grammar (only the named one's when named >= 0) into r->grammar;
 * every tool's parameters are compiled, so each is checked. */
static int tools_grammar(sv_request *r, json_t *tools, long named, sv_error *e)
{
    const call_format *f = format_of(r);
    sv_buf g = {0};
    char line[160];
    if (f->whole_message) { /* auto: text not starting with "{" (that would be a call), or a call */
        sv_buf_puts(&g, r->tool_mode == SV_TOOLS_AUTO ? "root ::= call | ([^{] [^\\x00]*)?\n" : "root ::= call\n");
    } else {
        sv_buf_puts(&g, r->tool_mode == SV_TOOLS_AUTO ? "root ::= free calls?\n" : "root ::= calls\n");
        sv_buf_puts(&g, "calls ::= ");
        if (*f->list_open) {
            put_literal(&g, f->list_open);
            sv_buf_puts(&g, " ");
        }
        sv_buf_puts(&g, "block");
        if (r->parallel_calls) {
            sv_buf_puts(&g, " (");
            put_literal(&g, f->separator);
            sv_buf_puts(&g, " block)*");
        }
        if (*f->list_close) {
            sv_buf_puts(&g, " ");
            put_literal(&g, f->list_close);
        }
        sv_buf_puts(&g, "\nblock ::= ");
        put_literal(&g, f->open);
        sv_buf_puts(&g, " call ");
        put_literal(&g, f->close);
        sv_buf_puts(&g, "\n");
    }
    sv_buf_puts(&g, "call ::= ");
    for (size_t i = 0, first = 1; i < json_array_size(tools); i++)
        if (named < 0 || (size_t)named == i) {
            snprintf(line, sizeof line, "%scall-%zu", first ? "" : " | ", i);
            sv_buf_puts(&g, line);
            first = 0;
        }
    sv_buf_puts(&g, "\n");
    for (size_t i = 0; i < json_array_size(tools); i++) {
        const int used = named < 0 || (size_t)named == i;
        /* {"name": "NAME", "arguments": ARGS}: a name is [A-Za-z0-9_-]+, nothing to escape */
        if (used) {
            char head[128];
            snprintf(head, sizeof head, NAME_HEAD "%s%s", tool_name(json_array_get(tools, i)), f->args_head);
            snprintf(line, sizeof line, "call-%zu ::= ", i);
            sv_buf_puts(&g, line);
            put_literal(&g, head);
            snprintf(line, sizeof line, " t%zu-root \"}\"\n", i);
            sv_buf_puts(&g, line);
        }
        if (tool_rules(json_array_get(tools, i), i, used ? &g : NULL, e)) {
            free(g.p);
            return -1;
        }
    }
    if (r->tool_mode == SV_TOOLS_AUTO && !f->whole_message)
        put_free_text(&g, f->marker);
    const int rc = g.oom ? sv_bad(e, "tools", "out of memory")
                         : sv_grammar_from_gbnf(g.p, g.n, "tools", &r->grammar, e);
    free(g.p);
    return rc;
}

int sv_request_tools(const sv_server *srv, json_t *root, sv_request *r, sv_error *e)
{
    json_t *tools = json_object_get(root, "tools");
    const char *tpl = srv->chat_template ? srv->chat_template : "";
    r->tool_format = !strcmp(tpl, "llama3")              ? SV_TOOL_FORMAT_LLAMA3
                     : !strcmp(tpl, "mistral-v3-tekken") ? SV_TOOL_FORMAT_MISTRAL
                                                         : SV_TOOL_FORMAT_HERMES;
    r->parallel_calls = !json_is_false(json_object_get(root, "parallel_tool_calls"));
    if (tools && !json_is_null(tools) && !json_is_array(tools))
        return sv_bad(e, "tools", "'tools' must be an array of {\"type\": \"function\", \"function\": {...}}");
    if (json_array_size(tools) > MAX_TOOLS)
        return sv_bad(e, "tools", "at most %d tools", MAX_TOOLS);
    for (size_t i = 0; i < json_array_size(tools); i++)
        if (check_tool(tools, i, e))
            return -1;
    long named = -1;
    if (get_choice(root, tools, &r->tool_mode, &named, e))
        return -1;
    if (json_array_size(tools))
        r->tools = json_incref(tools);
    for (size_t i = 0; r->tool_mode == SV_TOOLS_OFF && i < json_array_size(tools); i++)
        if (tool_rules(json_array_get(tools, i), i, NULL, e)) /* checked, though no call is generated */
            return -1;
    if (r->tool_mode == SV_TOOLS_OFF)
        return 0;
    if (r->grammar)
        return sv_bad(e, "tool_choice", "tool calls are generated under their own grammar: 'response_format', "
                      "'grammar' and 'json_schema' go with tools only when 'tool_choice' is \"none\"");
    if (r->stream && r->logprobs)
        return sv_bad(e, "logprobs", "'logprobs' is not served in a stream that may hold tool calls");
    return tools_grammar(r, tools, named, e);
}

/* ---- The prompt ---------------------------------------------------------------- */

/* A history's tool call (NAME "\n" ARGS, serve_messages.c) as the generic
 * layout writes it. */
static void put_call(sv_buf *b, const char *entry)
{
    const char *nl = strchr(entry, '\n');
    sv_buf_puts(b, hermes.open);
    sv_buf_puts(b, NAME_HEAD);
    sv_buf_put(b, entry, nl ? (size_t)(nl - entry) : strlen(entry));
    sv_buf_puts(b, hermes.args_head);
    sv_buf_puts(b, nl ? nl + 1 : "{}");
    sv_buf_puts(b, "}");
    sv_buf_puts(b, hermes.close);
}

/* For a template without tool turns: an assistant message and its calls
 * become one assistant text (the text, then the calls, "\n" between), a
 * run of tool answers one user text of <tool_response> blocks (Qwen's
 * layout). */
static int generic_history(sv_chat *chat, sv_error *e)
{
    size_t w = 0, i = 0;
    while (i < chat->n) {
        const int calls = !strcmp(chat->roles[i], "assistant") && i + 1 < chat->n &&
                          !strcmp(chat->roles[i + 1], "tool_call");
        const int answers = !strcmp(chat->roles[i], "tool");
        if (!calls && !answers) {
            chat->roles[w] = chat->roles[i];
            chat->contents[w++] = chat->contents[i++];
            continue;
        }
        sv_buf b = {0};
        size_t j = i + (calls ? 1 : 0);
        sv_buf_puts(&b, calls ? chat->contents[i] : "");
        for (; j < chat->n && !strcmp(chat->roles[j], calls ? "tool_call" : "tool"); j++) {
            sv_buf_puts(&b, b.n ? "\n" : "");
            if (calls) {
                put_call(&b, chat->contents[j]);
            } else {
                sv_buf_puts(&b, "<tool_response>\n");
                sv_buf_puts(&b, chat->contents[j]);
                sv_buf_puts(&b, "\n</tool_response>");
            }
        }
        if (b.oom || !b.p) { /* the entries not moved yet are freed here, the rest by sv_chat_free */
            free(b.p);
            for (size_t k = i; k < chat->n; k++)
                free(chat->contents[k]);
            chat->n = w;
            return sv_bad(e, "messages", "out of memory");
        }
        for (size_t k = i; k < j; k++)
            free(chat->contents[k]);
        chat->roles[w] = calls ? "assistant" : "user";
        chat->contents[w++] = b.p;
        i = j;
    }
    chat->n = w;
    return 0;
}

/* Each tool as the templates' tojson writes it (indent > 0: tojson(indent=N)),
 * each after `before` and before `after`. */
static void put_tools(sv_buf *b, json_t *tools, int indent, const char *before, const char *after)
{
    for (size_t i = 0; i < json_array_size(tools); i++) {
        char *json = sv_python_json_indent(json_array_get(tools, i), indent);
        sv_buf_puts(b, before);
        sv_buf_puts(b, json ? json : "");
        sv_buf_puts(b, after);
        b->oom |= !json;
        free(json);
    }
}

/* Llama 3.1: the tools and its instructions before the first user message
 * (after the system message), whose text the template trims. */
static int llama_tools(const sv_request *r, sv_chat *chat, sv_error *e)
{
    const size_t at = chat->n && !strcmp(chat->roles[0], "system") ? 1 : 0;
    if (at >= chat->n || strcmp(chat->roles[at], "user"))
        return sv_bad(e, "messages", "the llama3 template puts the tools in the first user message: the chat "
                      "has none right after its system message");
    const char *text = chat->contents[at];
    size_t len = strlen(text);
    while (len && strchr(" \t\n\r\f\v", text[len - 1]))
        len--;
    while (len && strchr(" \t\n\r\f\v", *text))
        text++, len--;
    sv_buf b = {0};
    sv_buf_puts(&b, llama_head);
    put_tools(&b, r->tools, 4, "", "\n\n");
    sv_buf_put(&b, text, len);
    if (b.oom || !b.p) {
        free(b.p);
        return sv_bad(e, "messages", "out of memory");
    }
    free(chat->contents[at]);
    chat->contents[at] = b.p;
    return 0;
}

/* Qwen's (and the generic) system text: the first system message's text and
 * "\n\n", or a system message of its own first. */
static int system_tools(const sv_request *r, sv_chat *chat, sv_error *e)
{
    const int has_system = chat->n && !strcmp(chat->roles[0], "system");
    sv_buf b = {0};
    if (has_system) {
        sv_buf_puts(&b, chat->contents[0]);
        sv_buf_puts(&b, "\n\n");
    }
    sv_buf_puts(&b, tools_head);
    put_tools(&b, r->tools, 0, "\n", "");
    sv_buf_puts(&b, tools_tail);
    if (b.oom || !b.p || (!has_system && chat->n == chat->cap)) {
        free(b.p);
        return sv_bad(e, "messages", b.oom ? "out of memory" : "too many messages to add the tools' system message");
    }
    if (has_system) {
        free(chat->contents[0]);
    } else {
        memmove(chat->roles + 1, chat->roles, chat->n * sizeof *chat->roles);
        memmove(chat->contents + 1, chat->contents, chat->n * sizeof *chat->contents);
        chat->n++;
        chat->roles[0] = "system";
    }
    chat->contents[0] = b.p;
    return 0;
}

int sv_tools_messages(const sv_server *srv, const sv_request *r, sv_chat *chat, sv_error *e)
{
    if (!r->tools)
        return 0;
    if (r->tool_format == SV_TOOL_FORMAT_MISTRAL) /* the whole prompt: sv_tools_mistral_prompt */
        return 0;
    if (r->tool_format == SV_TOOL_FORMAT_LLAMA3) /* its own tool turns: rendered by the library */
        return llama_tools(r, chat, e);
    if (strcmp(srv->chat_template, "chatml") && generic_history(chat, e))
        return -1;
    return system_tools(r, chat, e);
}

/* ---- Mistral's prompt ------------------------------------------------------------
 * Mistral Nemo's template (tests/data/chat_templates/mistralai-Mistral-Nemo-
 * Instruct-2407.jinja, llama.cpp's mistral-v3-tekken) as it writes a chat
 * with tools, which the library's formatter does not: the tools before the
 * last user message, the system message in that message when it is the
 * chat's last, calls with their 9-character ids, answers with the call's id.
 * Written and tokenized here: each marker the template writes becomes its
 * control token (when the vocabulary has it as one; else it is text), and
 * the text between markers, messages included, is tokenized as plain text,
 * so that no message forges a marker. */

typedef struct mistral_prompt {
    const sv_server *srv;
    sv_buf text;        /* plain text since the last marker */
    int32_t *ids;
    size_t n, cap;
    int failed;
    char err[256];
} mistral_prompt;

/* The tokens of text (flags: di_model_tokenize's) after those so far. */
static void add_ids(mistral_prompt *m, const char *text, size_t len, uint32_t flags)
{
    size_t need = 0;
    if (m->failed || (!len && !(flags & DI_TOKENIZE_ADD_BOS)))
        return;
    di_status st = di_model_tokenize(m->srv->model, text, len, flags, NULL, 0, &need, m->err, sizeof m->err);
    if ((st && st != DI_ERR_BUFFER_TOO_SMALL) || !need) {
        m->failed = st && st != DI_ERR_BUFFER_TOO_SMALL;
        return;
    }
    if (m->n + need > m->cap) {
        const size_t cap = (m->n + need) * 2 + 64;
        int32_t *ids = realloc(m->ids, cap * sizeof *ids);
        if (!ids) {
            m->failed = 1;
            snprintf(m->err, sizeof m->err, "out of memory");
            return;
        }
        m->ids = ids, m->cap = cap;
    }
    st = di_model_tokenize(m->srv->model, text, len, flags, m->ids + m->n, m->cap - m->n, &need, m->err,
                           sizeof m->err);
    m->failed = st != DI_OK;
    m->n += st ? 0 : need;
}

/* The plain text so far, tokenized. */
static void flush_text(mistral_prompt *m)
{
    if (m->text.oom && !m->failed) {
        m->failed = 1;
        snprintf(m->err, sizeof m->err, "out of memory");
    }
    add_ids(m, m->text.p ? m->text.p : "", m->text.n, 0);
    m->text.n = 0;
}

/* The plain text so far, tokenized; then marker, as its control token. */
static void put_marker(mistral_prompt *m, const char *marker)
{
    int32_t id[2];
    size_t n = 0;
    char piece[4];
    size_t piece_len = 1;
    const int control = di_model_tokenize(m->srv->model, marker, strlen(marker), DI_TOKENIZE_PARSE_SPECIAL, id, 2,
                                          &n, NULL, 0) == DI_OK && n == 1 &&
                        di_model_token_piece(m->srv->model, id[0], piece, sizeof piece, &piece_len) == DI_OK &&
                        piece_len == 0;
    if (!control) { /* not one of this vocabulary's control tokens: text */
        sv_buf_puts(&m->text, marker);
        return;
    }
    flush_text(m);
    add_ids(m, marker, strlen(marker), DI_TOKENIZE_PARSE_SPECIAL);
}

/* The tools as the template writes them: each function's fields in their
 * order ("return" left out), a string as it is between quotes, another value
 * as tojson. */
static void mistral_tools(mistral_prompt *m, json_t *tools)
{
    put_marker(m, "[AVAILABLE_TOOLS]");
    sv_buf_puts(&m->text, "[");
    for (size_t i = 0; i < json_array_size(tools); i++) {
        json_t *fn = json_object_get(json_array_get(tools, i), "function"), *val;
        const char *key;
        int first = 1;
        sv_buf_puts(&m->text, i ? ", {\"type\": \"function\", \"function\": {" : "{\"type\": \"function\", "
                                                                                  "\"function\": {");
        json_object_foreach(fn, key, val)
        {
            if (!strcmp(key, "return"))
                continue;
            sv_buf_puts(&m->text, first ? "\"" : ", \"");
            sv_buf_puts(&m->text, key);
            first = 0;
            if (json_is_string(val)) {
                sv_buf_puts(&m->text, "\": \"");
                sv_buf_put(&m->text, json_string_value(val), json_string_length(val));
                sv_buf_puts(&m->text, "\"");
                continue;
            }
            char *json = sv_python_json(val);
            sv_buf_puts(&m->text, "\": ");
            sv_buf_puts(&m->text, json ? json : "");
            m->text.oom |= !json;
            free(json);
        }
        sv_buf_puts(&m->text, "}}");
    }
    sv_buf_puts(&m->text, "]");
    put_marker(m, "[/AVAILABLE_TOOLS]");
}

/* A history id (a call's "id", a tool message's "tool_call_id"): 9 letters
 * or digits, as the template requires; NULL when it is not. */
static const char *mistral_id(json_t *v)
{
    const char *s = json_string_value(v);
    if (!s || strlen(s) != MISTRAL_ID_LEN)
        return NULL;
    for (size_t i = 0; i < MISTRAL_ID_LEN; i++)
        if (!isalnum((unsigned char)s[i]))
            return NULL;
    return s;
}

/* The chat (OpenAI's messages, and the same as sv_chat_messages made them:
 * one entry a message, then its calls) as the template writes it. */
static int mistral_render(mistral_prompt *m, const sv_request *r, json_t *messages, const sv_chat *chat,
                          sv_error *e)
{
    const int has_system = chat->n && !strcmp(chat->roles[0], "system");
    size_t last_user = chat->n, turn = 0;
    for (size_t k = 0; k < chat->n; k++)
        last_user = !strcmp(chat->roles[k], "user") ? k : last_user;
    add_ids(m, "", 0, DI_TOKENIZE_ADD_BOS);
    for (size_t i = has_system, k = has_system; i < json_array_size(messages); i++) {
        json_t *msg = json_array_get(messages, i), *calls = json_object_get(msg, "tool_calls");
        const char *role = chat->roles[k], *content = chat->contents[k];
        const size_t n_calls = json_is_array(calls) ? json_array_size(calls) : 0;
        if (!strcmp(role, "system"))
            return sv_bad(e, "messages", "message %zu: the Mistral template takes a system message only first", i);
        if (strcmp(role, "tool") && !n_calls) { /* the template's check of turns skips calls and answers */
            if (!strcmp(role, "user") != (turn % 2 == 0))
                return sv_bad(e, "messages", "message %zu: the Mistral template needs user and assistant messages "
                              "in turn after the system message (tool calls and answers aside)", i);
            turn++;
        }
        if (!strcmp(role, "user")) {
            if (k == last_user)
                mistral_tools(m, r->tools);
            put_marker(m, "[INST]");
            if (has_system && i + 1 == json_array_size(messages)) {
                sv_buf_puts(&m->text, chat->contents[0]);
                sv_buf_puts(&m->text, "\n\n");
            }
            sv_buf_puts(&m->text, content);
            put_marker(m, "[/INST]");
        } else if (n_calls) { /* the message's text is not written, as in the template */
            put_marker(m, "[TOOL_CALLS]");
            sv_buf_puts(&m->text, "[");
            for (size_t c = 0; c < n_calls; c++) {
                const char *entry = chat->contents[k + 1 + c], *nl = strchr(entry, '\n');
                const char *id = mistral_id(json_object_get(json_array_get(calls, c), "id"));
                if (!id)
                    return sv_bad(e, "messages", "message %zu: tool call %zu: the Mistral template takes ids of %d "
                                  "letters or digits", i, c, MISTRAL_ID_LEN);
                sv_buf_puts(&m->text, c ? ", " NAME_HEAD : NAME_HEAD);
                sv_buf_put(&m->text, entry, (size_t)(nl - entry));
                sv_buf_puts(&m->text, mistral.args_head);
                sv_buf_puts(&m->text, nl + 1);
                sv_buf_puts(&m->text, ", \"id\": \"");
                sv_buf_puts(&m->text, id);
                sv_buf_puts(&m->text, "\"}");
            }
            sv_buf_puts(&m->text, "]");
            put_marker(m, "</s>");
        } else if (!strcmp(role, "assistant")) {
            sv_buf_puts(&m->text, content);
            put_marker(m, "</s>");
        } else { /* a tool's answer: its text as it is */
            const char *id = mistral_id(json_object_get(msg, "tool_call_id"));
            if (!id)
                return sv_bad(e, "messages", "message %zu: the Mistral template takes a 'tool_call_id' of %d letters "
                              "or digits", i, MISTRAL_ID_LEN);
            put_marker(m, "[TOOL_RESULTS]");
            sv_buf_puts(&m->text, "{\"content\": ");
            sv_buf_puts(&m->text, content);
            sv_buf_puts(&m->text, ", \"call_id\": \"");
            sv_buf_puts(&m->text, id);
            sv_buf_puts(&m->text, "\"}");
            put_marker(m, "[/TOOL_RESULTS]");
        }
        k += 1 + n_calls;
    }
    flush_text(m);
    return 0;
}

int sv_tools_mistral_prompt(const sv_server *srv, const sv_request *r, json_t *messages, const sv_chat *chat,
                            sv_prompt *p, sv_error *e)
{
    mistral_prompt m = {.srv = srv};
    int rc = mistral_render(&m, r, messages, chat, e);
    if (!rc && m.failed)
        rc = sv_bad(e, "messages", "the messages cannot be tokenized with the Mistral template: %s", m.err);
    if (!rc && m.n > (size_t)srv->context)
        rc = sv_bad(e, "messages", "the prompt has %zu tokens; the context is %lld", m.n, (long long)srv->context);
    free(m.text.p);
    if (rc) {
        free(m.ids);
        return -1;
    }
    p->ids = m.ids;
    p->n = (uint32_t)m.n;
    return 0;
}

/* ---- The calls parsed back ------------------------------------------------------- */

/* When text[*pos..n) begins with s: past it, and 1. */
static int skip(const char *text, size_t n, size_t *pos, const char *s)
{
    const size_t len = strlen(s);
    if (n - *pos < len || memcmp(text + *pos, s, len))
        return 0;
    *pos += len;
    return 1;
}

/* One call at text[*pos..n) in format f, as the grammar wrote it: open
 * {"name": "NAME", ARGS_HEAD ARGS} close; NULL when it is not one. */
static json_t *parse_call(const call_format *f, const char *text, size_t n, size_t *pos, const char *id)
{
    size_t p = *pos;
    if (!skip(text, n, &p, f->open) || !skip(text, n, &p, NAME_HEAD))
        return NULL;
    char name[65];
    size_t nn = 0;
    while (p + nn < n && text[p + nn] != '"' && nn < sizeof name - 1)
        nn++;
    memcpy(name, text + p, nn);
    name[nn] = '\0';
    p += nn;
    if (!sv_function_name_ok(name) || !skip(text, n, &p, f->args_head))
        return NULL;
    /* ARGS is one JSON object: jansson reads it and says where it ended */
    json_error_t err;
    json_t *args = json_loadb(text + p, n - p, JSON_DISABLE_EOF_CHECK | JSON_REJECT_DUPLICATES, &err);
    const int is_object = json_is_object(args);
    json_decref(args);
    if (!is_object)
        return NULL;
    const size_t args_at = p;
    p += (size_t)err.position;
    const size_t args_len = p - args_at;
    if (!skip(text, n, &p, "}") || !skip(text, n, &p, f->close))
        return NULL;
    *pos = p;
    return json_pack("{s:s, s:s, s:{s:s, s:s%}}", "id", id, "type", "function", "function", "name", name,
                     "arguments", text + args_at, args_len);
}

/* Where the calls of c's text would begin, or NULL. */
static const char *calls_start(const call_format *f, const sv_choice *c, size_t upto)
{
    if (f->whole_message)
        return upto && c->text[0] == '{' ? c->text : NULL;
    return memmem(c->text, upto, f->marker, strlen(f->marker));
}

/* Call k's id, from the sequence digest (hex): "call_" + 24 hex digits +
 * "_k", or for Mistral, whose template takes 9 letters or digits only, the
 * digest's first 64 bits mixed with k, in base 62. */
static void call_id(const sv_request *r, const char *hex, size_t k, char *id, size_t size)
{
    if (r->tool_format != SV_TOOL_FORMAT_MISTRAL) {
        snprintf(id, size, "call_%.24s_%zu", hex, k);
        return;
    }
    static const char digits[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    char first[17];
    memcpy(first, hex, 16);
    first[16] = '\0';
    uint64_t v = strtoull(first, NULL, 16) ^ ((uint64_t)(k + 1) * 0x9E3779B97F4A7C15u);
    for (size_t i = 0; i < MISTRAL_ID_LEN && i + 1 < size; i++, v /= 62)
        id[i] = digits[v % 62];
    id[size > MISTRAL_ID_LEN ? MISTRAL_ID_LEN : size - 1] = '\0';
}

void sv_tools_finish(sv_choice *c)
{
    const sv_request *r = c->req;
    if (r->tool_mode == SV_TOOLS_OFF || !c->text || !c->finish_reason)
        return;
    /* cut by max_tokens or the context: the calls written whole are kept (they
     * parse and follow their schema), the one cut short is dropped, and the
     * finish_reason stays "length" */
    const int cut = !strcmp(c->finish_reason, "length");
    if (!cut && strcmp(c->finish_reason, "stop"))
        return;
    const call_format *f = format_of(r);
    const char *text = c->text, *at = calls_start(f, c, c->text_visible);
    const size_t n = c->text_visible;
    size_t pos = at ? (size_t)(at - text) : 0;
    if (!at || !skip(text, n, &pos, f->list_open))
        return;
    char hex[DI_DIGEST_HEX_SIZE], id[48];
    cli_hex(&c->sequence, hex);
    json_t *calls = json_array();
    for (size_t k = 0; calls; k++) {
        call_id(r, hex, k, id, sizeof id);
        json_t *call = parse_call(f, text, n, &pos, id);
        if (!call && cut && k > 0)
            break; /* the last call, cut short */
        if (!call || json_array_append_new(calls, call)) {
            json_decref(calls);
            return; /* not calls after all: the text stays the content */
        }
        size_t end = pos;
        if (skip(text, n, &end, f->list_close) && end == n)
            break;
        if (!skip(text, n, &pos, f->separator)) {
            if (cut)
                break; /* cut inside the separator or the close */
            calls = (json_decref(calls), NULL);
        }
    }
    if (!calls)
        return;
    c->tool_calls = calls;
    c->calls_at = (size_t)(at - text);
    if (!cut)
        c->finish_reason = "tool_calls";
}

size_t sv_tools_sendable(const sv_choice *c, size_t upto)
{
    if (c->req->tool_mode == SV_TOOLS_OFF || !c->text)
        return upto;
    if (c->tool_calls)
        return c->calls_at < upto ? c->calls_at : upto;
    if (format_of(c->req)->whole_message) /* nothing yet, or a "{" that begins a call */
        return upto && c->text[0] != '{' ? upto : 0;
    const char *marker = format_of(c->req)->marker;
    const size_t m = strlen(marker);
    const char *at = memmem(c->text, upto, marker, m);
    if (at)
        return (size_t)(at - c->text);
    for (size_t k = m - 1; k > 0; k--) /* the longest end of the text that may begin the marker */
        if (k <= upto && !memcmp(c->text + upto - k, marker, k))
            return upto - k;
    return upto;
}
