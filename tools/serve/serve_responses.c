/*
 * serve_responses.c — POST /v1/responses, the core of OpenAI's Responses API
 * (docs/SERVING.md, "The Responses API"). A request's own fields are checked
 * here; then it is written as the chat request it means (instructions and
 * input as messages, max_output_tokens as max_tokens, text.format as
 * response_format, tools and function-call items as the chat's tools and
 * tool turns) and parsed by sv_request_parse(SV_CHAT), so every check, the
 * grammar, the engine, the tool calls and the detinfer object are the
 * chat's. The answer is a Response object (its calls as function_call
 * items), or a stream of its events.
 */
#include <stdlib.h>
#include <string.h>

#include "cli/cli_json.h"
#include "serve/serve.h"

#define MAX_METADATA 16 /* OpenAI's bounds on metadata */
#define MAX_METADATA_KEY 64
#define MAX_METADATA_VALUE 512

/* ---- The request ---------------------------------------------------------- */

/* Every field a request may have; the rest are a 400 naming them. */
static const char *const known_fields[] = {
    /* served */
    "model", "input", "instructions", "max_output_tokens", "temperature", "top_p", "seed", "text", "stream",
    "stream_options", "user", "metadata", "detinfer", "tools", "tool_choice", "parallel_tool_calls",
    /* accepted with their neutral values only (check_neutral) */
    "store", "previous_response_id", "background", "conversation",
    "reasoning", "include", "truncation", "service_tier", "prompt", "top_logprobs", "max_tool_calls",
    /* accepted, ignored: hints for OpenAI's caches and abuse checks */
    "prompt_cache_key", "prompt_cache_retention", "safety_identifier", NULL};

static int absent(json_t *v)
{
    return !v || json_is_null(v);
}

static int is_text(json_t *v, const char *s)
{
    return json_is_string(v) && !strcmp(json_string_value(v), s);
}

/* Every key of o is one of the NULL-ended names; else 400 naming
 * "where.key". */
static int only_keys(json_t *o, const char *const *names, const char *where, sv_error *e)
{
    const char *key = sv_unknown_key(o, names);
    if (!key)
        return 0;
    char param[sizeof e->param];
    if (snprintf(param, sizeof param, "%s%s%s", where, *where ? "." : "", key) >= (int)sizeof param)
        param[sizeof param - 1] = '\0'; /* a long key is named cut, as sv_bad cuts it anyway */
    return sv_bad(e, param, "unknown field '%s' for /v1/responses", param);
}

/* reasoning: null, or {"effort": null or "none", "summary": null}: the
 * models served here do not reason before they answer. */
static int check_reasoning(json_t *v, sv_error *e)
{
    if (absent(v))
        return 0;
    const char *const keys[] = {"effort", "summary", "generate_summary", NULL};
    if (!json_is_object(v))
        return sv_bad(e, "reasoning", "'reasoning' must be an object or null");
    if (only_keys(v, keys, "reasoning", e))
        return -1;
    json_t *effort = json_object_get(v, "effort");
    if (!absent(effort) && !is_text(effort, "none"))
        return sv_bad(e, "reasoning", "'reasoning.effort' is not supported (only null or \"none\"): the models "
                      "served here do not reason before they answer");
    if (!absent(json_object_get(v, "summary")) || !absent(json_object_get(v, "generate_summary")))
        return sv_bad(e, "reasoning", "'reasoning.summary' is not supported (only null): there is no reasoning");
    return 0;
}

/* include: what to add to a response. Encrypted reasoning adds nothing (the
 * models do not reason; inspect-ai asks for it), the rest is not served. */
static int check_include(json_t *v, sv_error *e)
{
    if (absent(v))
        return 0;
    if (!json_is_array(v))
        return sv_bad(e, "include", "'include' must be an array");
    size_t i;
    json_t *item;
    json_array_foreach(v, i, item) if (!is_text(item, "reasoning.encrypted_content")) return sv_bad(
        e, "include", "'include' may only hold \"reasoning.encrypted_content\" (there is no reasoning to add); "
        "item %zu asks for more (log-probabilities: /v1/chat/completions)", i);
    return 0;
}

/* metadata: up to 16 string values, as OpenAI's; echoed in the response. */
static int check_metadata(json_t *v, sv_error *e)
{
    if (absent(v))
        return 0;
    if (!json_is_object(v) || json_object_size(v) > MAX_METADATA)
        return sv_bad(e, "metadata", "'metadata' must be an object of at most %d strings", MAX_METADATA);
    const char *key;
    json_t *value;
    json_object_foreach(v, key, value)
    {
        if (strlen(key) > MAX_METADATA_KEY || !json_is_string(value) ||
            json_string_length(value) > MAX_METADATA_VALUE)
            return sv_bad(e, "metadata", "'metadata' keys have at most %d characters and its values are strings "
                          "of at most %d", MAX_METADATA_KEY, MAX_METADATA_VALUE);
    }
    return 0;
}

/* The fields that change nothing here, accepted with their neutral values
 * only: nothing is stored, no hosted tool is called, nothing reasons. */
static int check_neutral(json_t *root, sv_error *e)
{
    json_t *v;
    if (!absent(v = json_object_get(root, "store")) && !json_is_false(v))
        return sv_bad(e, "store", "'store' is not supported (only false or null: this server stores no responses)");
    if (!absent(v = json_object_get(root, "parallel_tool_calls")) && !json_is_boolean(v))
        return sv_bad(e, "parallel_tool_calls", "'parallel_tool_calls' must be true or false");
    if (!absent(json_object_get(root, "previous_response_id")))
        return sv_bad(e, "previous_response_id", "'previous_response_id' is not supported: this server stores no "
                      "responses; send the whole conversation in 'input'");
    if (!absent(json_object_get(root, "conversation")))
        return sv_bad(e, "conversation", "'conversation' is not supported: this server stores no conversations; "
                      "send the whole conversation in 'input'");
    if (!absent(v = json_object_get(root, "background")) && !json_is_false(v))
        return sv_bad(e, "background", "'background' is not supported (only false or null): a response is "
                      "answered on its request's connection");
    if (check_reasoning(json_object_get(root, "reasoning"), e))
        return -1;
    if (check_include(json_object_get(root, "include"), e))
        return -1;
    if (!absent(v = json_object_get(root, "truncation")) && !is_text(v, "disabled"))
        return sv_bad(e, "truncation", "'truncation' is not supported (only \"disabled\" or null): an input "
                      "longer than the context is refused, never cut");
    if (!absent(v = json_object_get(root, "service_tier")) && !is_text(v, "auto") && !is_text(v, "default"))
        return sv_bad(e, "service_tier", "'service_tier' is not supported (only null, \"auto\" or \"default\")");
    if (!absent(json_object_get(root, "prompt")))
        return sv_bad(e, "prompt", "'prompt' is not supported: prompt templates are stored by OpenAI; send the "
                      "text in 'input'");
    if (!absent(v = json_object_get(root, "top_logprobs")) && !(json_is_integer(v) && json_integer_value(v) == 0))
        return sv_bad(e, "top_logprobs", "'top_logprobs' is not supported on /v1/responses (only 0 or null): "
                      "use /v1/chat/completions for log-probabilities");
    if (!absent(v = json_object_get(root, "max_tool_calls")) && !json_is_integer(v))
        return sv_bad(e, "max_tool_calls", "'max_tool_calls' must be an integer");
    const char *const strings[] = {"prompt_cache_key", "prompt_cache_retention", "safety_identifier", NULL};
    for (int i = 0; strings[i]; i++)
        if (!absent(v = json_object_get(root, strings[i])) && !json_is_string(v))
            return sv_bad(e, strings[i], "'%s' must be a string", strings[i]);
    return check_metadata(json_object_get(root, "metadata"), e);
}

/* stream_options: {"include_obfuscation": bool}, only with "stream": true;
 * nothing is obfuscated here. */
static int check_stream_options(json_t *root, sv_error *e)
{
    json_t *so = json_object_get(root, "stream_options");
    if (absent(so))
        return 0;
    if (!json_is_object(so))
        return sv_bad(e, "stream_options", "'stream_options' must be an object");
    if (!json_is_true(json_object_get(root, "stream")))
        return sv_bad(e, "stream_options", "'stream_options' is only allowed with \"stream\": true");
    if (only_keys(so, (const char *const[]){"include_obfuscation", NULL}, "stream_options", e))
        return -1;
    json_t *v = json_object_get(so, "include_obfuscation");
    if (!absent(v) && !json_is_boolean(v))
        return sv_bad(e, "stream_options", "'stream_options.include_obfuscation' must be true or false");
    return 0;
}

/* An input item's content as one text: a string, or its input_text and
 * output_text parts joined in order (as a chat joins its text parts). New
 * reference, or NULL with e set. */
static json_t *content_text(json_t *content, size_t i, sv_error *e)
{
    char param[64];
    snprintf(param, sizeof param, "input[%zu].content", i);
    if (json_is_string(content))
        return json_incref(content);
    if (!json_is_array(content)) {
        sv_bad(e, param, "'%s' must be a string or an array of input_text parts", param);
        return NULL;
    }
    size_t len = 0, k;
    json_t *part;
    json_array_foreach(content, k, part)
    {
        json_t *type = json_is_object(part) ? json_object_get(part, "type") : NULL;
        snprintf(param, sizeof param, "input[%zu].content[%zu]", i, k);
        if (!is_text(type, "input_text") && !is_text(type, "output_text")) {
            sv_bad(e, param, "input item %zu, content part %zu has type '%s': only input_text and output_text "
                   "parts are served (the models are text-only)", i, k,
                   json_is_string(type) ? json_string_value(type) : "?");
            return NULL;
        }
        if (only_keys(part, (const char *const[]){"type", "text", "annotations", "logprobs", NULL}, param, e))
            return NULL;
        if (!json_is_string(json_object_get(part, "text"))) {
            sv_bad(e, param, "'%s.text' must be a string", param);
            return NULL;
        }
        len += json_string_length(json_object_get(part, "text"));
    }
    char *joined = malloc(len + 1), *p = joined;
    if (!joined) {
        sv_bad(e, "input", "out of memory");
        return NULL;
    }
    json_array_foreach(content, k, part)
    {
        json_t *text = json_object_get(part, "text");
        memcpy(p, json_string_value(text), json_string_length(text));
        p += json_string_length(text);
    }
    json_t *out = json_stringn(joined, len);
    free(joined);
    if (!out)
        sv_bad(e, "input", "out of memory");
    return out;
}

/* One input item, a message, as a chat message. */
static json_t *input_message(json_t *item, size_t i, sv_error *e)
{
    char param[64];
    snprintf(param, sizeof param, "input[%zu]", i);
    /* id, status and phase: an earlier response's output item sent back */
    if (only_keys(item, (const char *const[]){"type", "role", "content", "id", "status", "phase", NULL}, param, e))
        return NULL;
    json_t *role = json_object_get(item, "role");
    if (!is_text(role, "user") && !is_text(role, "system") && !is_text(role, "developer") &&
        !is_text(role, "assistant")) {
        snprintf(param, sizeof param, "input[%zu].role", i);
        sv_bad(e, param, "input item %zu: the role must be user, system, developer or assistant", i);
        return NULL;
    }
    json_t *text = content_text(json_object_get(item, "content"), i, e);
    return text ? json_pack("{s:O, s:o}", "role", role, "content", text) : NULL;
}

/* A function_call item (an earlier response's call sent back) as a chat
 * tool call: added to the assistant message just before it, or to a new
 * one. 0, or -1 with e set. */
static int input_call(json_t *item, size_t i, json_t *messages, sv_error *e)
{
    char param[64];
    snprintf(param, sizeof param, "input[%zu]", i);
    if (only_keys(item, (const char *const[]){"type", "call_id", "name", "arguments", "id", "status", NULL}, param,
                  e))
        return -1;
    json_t *call_id = json_object_get(item, "call_id"), *name = json_object_get(item, "name");
    json_t *args = json_object_get(item, "arguments");
    if (!json_is_string(call_id) || !json_is_string(name) || !json_is_string(args))
        return sv_bad(e, param, "input item %zu: a function_call has the strings 'call_id', 'name' and "
                      "'arguments'", i);
    json_t *call = json_pack("{s:O, s:s, s:{s:O, s:O}}", "id", call_id, "type", "function", "function", "name", name,
                             "arguments", args);
    json_t *last = json_array_get(messages, json_array_size(messages) - 1);
    if (!is_text(json_object_get(last, "role"), "assistant")) {
        last = json_pack("{s:s, s:n, s:[]}", "role", "assistant", "content", "tool_calls");
        json_array_append_new(messages, last);
    }
    json_t *calls = json_object_get(last, "tool_calls");
    if (!calls)
        json_object_set_new(last, "tool_calls", calls = json_array());
    return json_array_append_new(calls, call) ? sv_bad(e, "input", "out of memory") : 0;
}

/* A function_call_output item as the chat's tool message. */
static json_t *input_call_output(json_t *item, size_t i, sv_error *e)
{
    char param[64];
    snprintf(param, sizeof param, "input[%zu]", i);
    if (only_keys(item, (const char *const[]){"type", "call_id", "output", "id", "status", NULL}, param, e))
        return NULL;
    json_t *call_id = json_object_get(item, "call_id");
    if (!json_is_string(call_id)) {
        sv_bad(e, param, "input item %zu: a function_call_output has a string 'call_id'", i);
        return NULL;
    }
    json_t *text = content_text(json_object_get(item, "output"), i, e);
    return text ? json_pack("{s:s, s:O, s:o}", "role", "tool", "tool_call_id", call_id, "content", text) : NULL;
}

/* One input item into messages: a message, a function call or its output. */
static int input_item(json_t *item, size_t i, json_t *messages, sv_error *e)
{
    char param[64];
    snprintf(param, sizeof param, "input[%zu]", i);
    if (!json_is_object(item))
        return sv_bad(e, param, "'%s' must be a message object {\"role\", \"content\"}", param);
    json_t *type = json_object_get(item, "type");
    if (is_text(type, "function_call"))
        return input_call(item, i, messages, e);
    json_t *m = NULL;
    if (is_text(type, "function_call_output")) {
        m = input_call_output(item, i, e);
    } else if (absent(type) || is_text(type, "message")) {
        m = input_message(item, i, e);
    } else {
        snprintf(param, sizeof param, "input[%zu].type", i);
        return sv_bad(e, param, "input item %zu has type '%s': only messages, function_call and "
                      "function_call_output items are served (no reasoning or hosted tools' items)", i,
                      json_is_string(type) ? json_string_value(type) : "?");
    }
    return m ? (json_array_append_new(messages, m) ? sv_bad(e, "input", "out of memory") : 0) : -1;
}

/* instructions (a system turn first), then input, as chat messages. */
static json_t *chat_messages(json_t *root, sv_error *e)
{
    json_t *input = json_object_get(root, "input"), *instructions = json_object_get(root, "instructions");
    if (absent(input)) {
        sv_bad(e, "input", "'input' is required");
        return NULL;
    }
    if (!json_is_string(input) && !json_is_array(input)) {
        sv_bad(e, "input", "'input' must be a string or an array of messages");
        return NULL;
    }
    if (json_is_array(input) && json_array_size(input) == 0) {
        sv_bad(e, "input", "'input' has no messages");
        return NULL;
    }
    if (!absent(instructions) && !json_is_string(instructions)) {
        sv_bad(e, "instructions", "'instructions' must be a string");
        return NULL;
    }
    json_t *messages = json_array();
    if (!absent(instructions))
        json_array_append_new(messages, json_pack("{s:s, s:O}", "role", "system", "content", instructions));
    if (json_is_string(input)) {
        json_array_append_new(messages, json_pack("{s:s, s:O}", "role", "user", "content", input));
        return messages;
    }
    size_t i;
    json_t *item;
    json_array_foreach(input, i, item) if (input_item(item, i, messages, e))
    {
        json_decref(messages);
        return NULL;
    }
    return messages;
}

/* text: {"format": {"type": "text" | "json_object" | "json_schema", ...},
 * "verbosity"} into the chat's response_format (NULL with e->status 0 for
 * none; NULL with e set for an error). */
static json_t *response_format(json_t *root, sv_error *e)
{
    e->status = 0;
    json_t *text = json_object_get(root, "text");
    if (absent(text))
        return NULL;
    if (!json_is_object(text)) {
        sv_bad(e, "text", "'text' must be an object {\"format\": {...}}");
        return NULL;
    }
    if (only_keys(text, (const char *const[]){"format", "verbosity", NULL}, "text", e))
        return NULL;
    json_t *verbosity = json_object_get(text, "verbosity");
    if (!absent(verbosity) && !is_text(verbosity, "medium")) {
        sv_bad(e, "text.verbosity", "'text.verbosity' is not supported (only \"medium\" or null)");
        return NULL;
    }
    json_t *format = json_object_get(text, "format");
    if (absent(format))
        return NULL;
    json_t *type = json_is_object(format) ? json_object_get(format, "type") : NULL;
    if (is_text(type, "text") || is_text(type, "json_object")) {
        if (only_keys(format, (const char *const[]){"type", NULL}, "text.format", e))
            return NULL;
        return json_pack("{s:O}", "type", type);
    }
    if (!is_text(type, "json_schema")) {
        sv_bad(e, "text.format.type", "'text.format' must be an object whose type is \"text\", \"json_object\" "
               "or \"json_schema\"");
        return NULL;
    }
    if (only_keys(format, (const char *const[]){"type", "name", "schema", "strict", "description", NULL},
                  "text.format", e))
        return NULL;
    json_t *js = json_deep_copy(format);
    json_object_del(js, "type");
    return json_pack("{s:s, s:o}", "type", "json_schema", "json_schema", js);
}

/* tools ([{"type": "function", "name", "description", "parameters",
 * "strict"}]), tool_choice ({"type": "function", "name"} for one) and
 * parallel_tool_calls into the chat's shapes in chat. 0, or -1 with e set;
 * the chat's parser checks the rest (schemas, duplicate names). */
static int chat_tools(json_t *root, json_t *chat, sv_error *e)
{
    json_t *tools = json_object_get(root, "tools"), *choice = json_object_get(root, "tool_choice"), *tool;
    if (!absent(tools) && !json_is_array(tools))
        return sv_bad(e, "tools", "'tools' must be an array of {\"type\": \"function\", \"name\", \"description\", "
                      "\"parameters\", \"strict\"}");
    json_t *out = json_array();
    json_object_set_new(chat, "tools", out);
    size_t i;
    json_array_foreach(tools, i, tool)
    {
        char param[64];
        snprintf(param, sizeof param, "tools[%zu]", i);
        json_t *type = json_object_get(tool, "type"), *name = json_object_get(tool, "name");
        if (!json_is_object(tool) || !is_text(type, "function"))
            return sv_bad(e, "tools", "tools[%zu] has type '%s': only function tools ({\"type\": \"function\", "
                          "\"name\", ...}) are served, no hosted tools", i,
                          json_is_string(type) ? json_string_value(type) : "?");
        if (only_keys(tool, (const char *const[]){"type", "name", "description", "parameters", "strict", NULL},
                      param, e))
            return -1;
        if (!json_is_string(name) || !sv_function_name_ok(json_string_value(name)))
            return sv_bad(e, "tools", "tools[%zu]: 'name' must be 1 to 64 letters, digits, '_' or '-'", i);
        json_t *fn = json_copy(tool);
        json_object_del(fn, "type");
        json_array_append_new(out, json_pack("{s:s, s:o}", "type", "function", "function", fn));
    }
    if (is_text(choice, "none") || is_text(choice, "auto") || is_text(choice, "required")) {
        json_object_set(chat, "tool_choice", choice);
    } else if (!absent(choice)) {
        json_t *name = json_object_get(choice, "name");
        if (!is_text(json_object_get(choice, "type"), "function") || !json_is_string(name) ||
            json_object_size(choice) != 2)
            return sv_bad(e, "tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": "
                          "\"function\", \"name\": NAME}");
        json_object_set_new(chat, "tool_choice", json_pack("{s:s, s:{s:O}}", "type", "function", "function", "name",
                                                           name));
    }
    if (!absent(json_object_get(root, "parallel_tool_calls")))
        json_object_set(chat, "parallel_tool_calls", json_object_get(root, "parallel_tool_calls"));
    return 0;
}

/* The chat request that root means; NULL with e set. */
static json_t *chat_request(json_t *root, sv_error *e)
{
    json_t *messages = chat_messages(root, e);
    if (!messages)
        return NULL;
    json_t *format = response_format(root, e);
    if (!format && e->status) {
        json_decref(messages);
        return NULL;
    }
    json_t *chat = json_pack("{s:o}", "messages", messages);
    if (format)
        json_object_set_new(chat, "response_format", format);
    if (chat_tools(root, chat, e)) {
        json_decref(chat);
        return NULL;
    }
    const char *const same[] = {"model", "temperature", "top_p", "seed", "stream", "user", "detinfer", NULL};
    for (int i = 0; same[i]; i++)
        if (json_object_get(root, same[i]))
            json_object_set(chat, same[i], json_object_get(root, same[i]));
    if (json_object_get(root, "max_output_tokens"))
        json_object_set(chat, "max_tokens", json_object_get(root, "max_output_tokens"));
    return chat;
}

/* An error of the chat's parser, renamed to the Responses request's fields. */
static void rename_fields(sv_error *e)
{
    static const struct { const char *chat, *responses; } names[] = {
        {"response_format.json_schema", "text.format"},
        {"response_format", "text.format"},
        {"max_tokens", "max_output_tokens"},
        {"messages", "input"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const size_t n = strlen(names[i].chat);
        if (strncmp(e->param, names[i].chat, n))
            continue;
        char param[sizeof e->param];
        snprintf(param, sizeof param, "%s%s", names[i].responses, e->param + n);
        snprintf(e->param, sizeof e->param, "%s", param);
        const char *at = strstr(e->message, names[i].chat); /* where the message names the field */
        if (at) {
            char message[sizeof e->message];
            snprintf(message, sizeof message, "%.*s%s%s", (int)(at - e->message), e->message, names[i].responses,
                     at + n);
            snprintf(e->message, sizeof e->message, "%s", message);
        }
        return;
    }
}

/* root's field `name` (new reference), or dflt when it is absent or null
 * (dflt is a new reference, released when unused). */
static json_t *echo(json_t *root, const char *name, json_t *dflt)
{
    json_t *v = json_object_get(root, name);
    if (absent(v))
        return dflt;
    json_decref(dflt);
    return json_incref(v);
}

/* The Response object's fields that the request fixes (r->responses):
 * what OpenAI echoes of the request, and its constants here. */
static json_t *response_template(const sv_server *srv, json_t *root)
{
    json_t *text = json_object_get(root, "text");
    json_t *format = json_is_object(text) ? json_object_get(text, "format") : NULL;
    json_t *t = json_object();
    json_object_set_new(t, "id", json_null()); /* with created_at, once parsed */
    json_object_set_new(t, "object", json_string("response"));
    json_object_set_new(t, "created_at", json_null());
    json_object_set_new(t, "status", json_string("in_progress"));
    json_object_set_new(t, "background", json_false());
    json_object_set_new(t, "error", json_null());
    json_object_set_new(t, "incomplete_details", json_null());
    json_object_set_new(t, "instructions", echo(root, "instructions", json_null()));
    json_object_set_new(t, "max_output_tokens", echo(root, "max_output_tokens", json_null()));
    json_object_set_new(t, "max_tool_calls", json_null());
    json_object_set_new(t, "model", json_string(srv->cfg.model_name));
    json_object_set_new(t, "output", json_array());
    json_object_set_new(t, "parallel_tool_calls", echo(root, "parallel_tool_calls", json_true()));
    json_object_set_new(t, "previous_response_id", json_null());
    json_object_set_new(t, "reasoning", json_pack("{s:n, s:n}", "effort", "summary"));
    json_object_set_new(t, "service_tier", json_string("default"));
    json_object_set_new(t, "store", json_false());
    /* as applied: greedy (0) unless the request says otherwise */
    json_object_set_new(t, "temperature", echo(root, "temperature", json_real(0)));
    json_object_set_new(t, "top_p", echo(root, "top_p", json_real(1)));
    json_object_set_new(t, "text", json_pack("{s:o, s:s}", "format",
                                             absent(format) ? json_pack("{s:s}", "type", "text") : json_incref(format),
                                             "verbosity", "medium"));
    json_object_set_new(t, "tool_choice", echo(root, "tool_choice", json_string("auto")));
    json_object_set_new(t, "tools", echo(root, "tools", json_array()));
    json_object_set_new(t, "top_logprobs", json_integer(0));
    json_object_set_new(t, "truncation", json_string("disabled"));
    json_object_set_new(t, "usage", json_null());
    json_object_set_new(t, "user", echo(root, "user", json_null()));
    json_object_set_new(t, "metadata", echo(root, "metadata", json_object()));
    return t;
}

int sv_responses_parse(sv_server *srv, const char *body, size_t len, sv_request **out, sv_error *e)
{
    *out = NULL;
    json_t *root = sv_json_load(body, len, e);
    if (!root)
        return -1;
    json_t *chat = NULL;
    char *text = NULL;
    if (!json_is_object(root))
        sv_bad(e, NULL, "the body must be a JSON object");
    else if (!only_keys(root, known_fields, "", e) && !check_neutral(root, e) && !check_stream_options(root, e) &&
             (chat = chat_request(root, e)) && !(text = json_dumps(chat, JSON_COMPACT)))
        sv_bad(e, NULL, "out of memory");
    json_t *fixed = text ? response_template(srv, root) : NULL;
    /* only the chat's text is kept while it is parsed: one body's JSON at a time */
    json_decref(chat);
    json_decref(root);
    if (!text)
        return -1;
    const int rc = sv_request_parse(srv, SV_CHAT, text, strlen(text), out, e);
    free(text);
    if (rc) {
        rename_fields(e);
        json_decref(fixed);
        return -1;
    }
    sv_request *r = *out;
    static unsigned long long counter;
    snprintf(r->id, sizeof r->id, "resp_%llx%08llx", (unsigned long long)r->created,
             __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
    json_object_set_new(fixed, "id", json_string(r->id));
    json_object_set_new(fixed, "created_at", json_integer(r->created));
    r->responses = fixed;
    return 0;
}

/* ---- The response --------------------------------------------------------- */

/* {"type": "output_text", "text", "annotations": [], "logprobs": []} */
static json_t *text_part(const char *text, size_t len)
{
    return json_pack("{s:s, s:o, s:[], s:[]}", "type", "output_text", "text", cli_json_textn(text, len),
                     "annotations", "logprobs");
}

/* The id of the one output item, the assistant's message: the response's
 * with "msg_" for "resp_". */
static json_t *item_id(const sv_request *r)
{
    char id[sizeof r->id];
    snprintf(id, sizeof id, "msg_%s", r->id + strlen("resp_"));
    return json_string(id);
}

static json_t *message_item(const sv_request *r, const char *status, json_t *content)
{
    return json_pack("{s:o, s:s, s:s, s:s, s:o}", "id", item_id(r), "type", "message", "status", status, "role",
                     "assistant", "content", content);
}

/* 1 when the choice stopped at max_output_tokens (or the context). */
static int cut_short(const sv_choice *c)
{
    return !c->finish_reason || !strcmp(c->finish_reason, "length");
}

static json_t *usage(const sv_request *r)
{
    const json_int_t in = r->n_prompt_tokens, out = sv_choice_of(r, 0)->n_out;
    return json_pack("{s:I, s:{s:i, s:i}, s:I, s:{s:i}, s:I}", "input_tokens", in, "input_tokens_details",
                     "cached_tokens", 0, "cache_write_tokens", 0, "output_tokens", out, "output_tokens_details",
                     "reasoning_tokens", 0, "total_tokens", in + out);
}

/* Call k of choice c as a function_call item; in progress: its arguments
 * not yet given. Its id: the response's with "fc_" for "resp_", and k. */
static json_t *call_item(const sv_request *r, const sv_choice *c, size_t k, int in_progress)
{
    json_t *call = json_array_get(c->tool_calls, k), *fn = json_object_get(call, "function");
    char id[sizeof r->id + 24];
    snprintf(id, sizeof id, "fc_%s_%zu", r->id + strlen("resp_"), k);
    return json_pack("{s:s, s:s, s:s, s:o, s:O, s:O}", "id", id, "type", "function_call", "status",
                     in_progress ? "in_progress" : "completed", "arguments",
                     in_progress ? json_string("") : json_incref(json_object_get(fn, "arguments")), "call_id",
                     json_object_get(call, "id"), "name", json_object_get(fn, "name"));
}

/* The bytes of c's text that are the message's: all, or those before its
 * calls. */
static size_t message_text_len(const sv_choice *c)
{
    return c->tool_calls ? c->calls_at : c->text_visible;
}

/* The Response: done (the request finished), or as it starts (in progress,
 * no output). Its output: the assistant's message (none when the answer is
 * calls alone), then a function_call item per call. */
static json_t *response_object(const sv_server *srv, const sv_request *r, int done)
{
    json_t *o = json_deep_copy(r->responses);
    if (!done)
        return o;
    const sv_choice *c = sv_choice_of(r, 0);
    const int incomplete = cut_short(c);
    json_object_set_new(o, "status", json_string(incomplete ? "incomplete" : "completed"));
    if (incomplete)
        json_object_set_new(o, "incomplete_details", json_pack("{s:s}", "reason", "max_output_tokens"));
    json_t *output = json_array();
    if (!c->tool_calls || c->calls_at) {
        json_t *part = text_part(c->text ? c->text : "", message_text_len(c));
        json_array_append_new(output,
                              message_item(r, incomplete ? "incomplete" : "completed", json_pack("[o]", part)));
    }
    for (size_t k = 0; k < json_array_size(c->tool_calls); k++)
        json_array_append_new(output, call_item(r, c, k, 0));
    json_object_set_new(o, "output", output);
    json_object_set_new(o, "usage", usage(r));
    json_object_set_new(o, "detinfer", sv_detinfer_object(srv, r, 0));
    return o;
}

char *sv_responses_json(const sv_server *srv, const sv_request *r)
{
    return sv_json_dump(response_object(srv, r, 1));
}

/* ---- The stream ------------------------------------------------------------ */

typedef struct sse_buf {
    char *p;
    size_t n;
} sse_buf;

/* Appends "event: TYPE\ndata: {...}\n\n", data with its type and the
 * stream's next sequence_number (data is released). */
static void add_event(sse_buf *b, sv_responses_stream *st, const char *type, json_t *data)
{
    json_object_set_new(data, "type", json_string(type));
    json_object_set_new(data, "sequence_number", json_integer(st->events++));
    char *text = sv_json_dump(data);
    if (!text)
        return;
    const size_t need = strlen("event: ") + strlen(type) + strlen("\ndata: ") + strlen(text) + strlen("\n\n");
    char *p = realloc(b->p, b->n + need + 1);
    if (p) {
        b->p = p;
        b->n += (size_t)sprintf(p + b->n, "event: %s\ndata: %s\n\n", type, text);
    }
    free(text);
}

/* What the events about the text part start with. */
static json_t *part_event(const sv_request *r)
{
    return json_pack("{s:o, s:i, s:i}", "item_id", item_id(r), "output_index", 0, "content_index", 0);
}

static void add_delta(sse_buf *b, sv_responses_stream *st, const sv_request *r, const char *text, size_t len)
{
    json_t *d = part_event(r);
    json_object_set_new(d, "delta", cli_json_textn(text, len));
    json_object_set_new(d, "logprobs", json_array());
    add_event(b, st, "response.output_text.delta", d);
}

/* The message item's opening events (once). */
static void open_message(sse_buf *b, sv_responses_stream *st, const sv_request *r)
{
    if (st->message_open)
        return;
    st->message_open = 1;
    add_event(b, st, "response.output_item.added",
              json_pack("{s:i, s:o}", "output_index", 0, "item", message_item(r, "in_progress", json_array())));
    json_t *d = part_event(r);
    json_object_set_new(d, "part", text_part("", 0));
    add_event(b, st, "response.content_part.added", d);
}

/* The events of output item k of the finished response: its message's
 * closings, or a call's added, arguments and done events. */
static void close_item(sse_buf *b, sv_responses_stream *st, const sv_request *r, json_t *done, size_t k)
{
    json_t *item = json_array_get(json_object_get(done, "output"), k), *d;
    if (is_text(json_object_get(item, "type"), "message")) {
        json_t *part = json_array_get(json_object_get(item, "content"), 0);
        d = part_event(r);
        json_object_set(d, "text", json_object_get(part, "text"));
        json_object_set_new(d, "logprobs", json_array());
        add_event(b, st, "response.output_text.done", d);
        d = part_event(r);
        json_object_set(d, "part", part);
        add_event(b, st, "response.content_part.done", d);
    } else {
        const size_t call = k - (json_array_size(json_object_get(done, "output")) -
                                 json_array_size(sv_choice_of(r, 0)->tool_calls));
        json_t *added = call_item(r, sv_choice_of(r, 0), call, 1), *args = json_object_get(item, "arguments");
        add_event(b, st, "response.output_item.added", json_pack("{s:I, s:o}", "output_index", (json_int_t)k, "item",
                                                                  added));
        add_event(b, st, "response.function_call_arguments.delta",
                  json_pack("{s:O, s:I, s:O}", "item_id", json_object_get(item, "id"), "output_index", (json_int_t)k,
                            "delta", args));
        add_event(b, st, "response.function_call_arguments.done",
                  json_pack("{s:O, s:I, s:O, s:O}", "item_id", json_object_get(item, "id"), "output_index",
                            (json_int_t)k, "name", json_object_get(item, "name"), "arguments", args));
    }
    add_event(b, st, "response.output_item.done",
              json_pack("{s:I, s:O}", "output_index", (json_int_t)k, "item", item));
}

char *sv_responses_events(const sv_server *srv, const sv_request *r, sv_responses_stream *st)
{
    sse_buf b = {NULL, 0};
    const sv_choice *c = sv_choice_of(r, 0);
    const char *error = sv_request_error(r);
    if (!st->opened) {
        st->opened = 1;
        add_event(&b, st, "response.created", json_pack("{s:o}", "response", response_object(srv, r, 0)));
        add_event(&b, st, "response.in_progress", json_pack("{s:o}", "response", response_object(srv, r, 0)));
        if (r->tool_mode == SV_TOOLS_OFF) /* else once there is text: an answer may be calls alone */
            open_message(&b, st, r);
    }
    /* a delta per token whose text became visible (none for a token whose
     * text is held back or empty, or may be a tool call) */
    for (; !error && st->tokens_sent < c->n_out; st->tokens_sent++) {
        const size_t upto = sv_tools_sendable(c, c->visible_after[st->tokens_sent]);
        if (upto > st->text_sent) {
            open_message(&b, st, r);
            add_delta(&b, st, r, c->text + st->text_sent, upto - st->text_sent);
            st->text_sent = upto;
        }
    }
    if (sv_request_done(r) && !st->closed) {
        st->closed = 1;
        if (error) {
            add_event(&b, st, "error", json_pack("{s:s, s:s, s:n}", "code", "server_error", "message", error,
                                                 "param"));
            return b.p;
        }
        if (message_text_len(c) > st->text_sent) {
            open_message(&b, st, r);
            add_delta(&b, st, r, c->text + st->text_sent, message_text_len(c) - st->text_sent);
            st->text_sent = message_text_len(c);
        }
        if (!c->tool_calls)
            open_message(&b, st, r);
        json_t *done = response_object(srv, r, 1);
        for (size_t k = 0; k < json_array_size(json_object_get(done, "output")); k++)
            close_item(&b, st, r, done, k);
        add_event(&b, st, cut_short(c) ? "response.incomplete" : "response.completed",
                  json_pack("{s:o}", "response", done));
    }
    return b.p;
}
