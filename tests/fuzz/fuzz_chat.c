/*
 * fuzz_chat.c — libFuzzer harness for the chat templates (lib/tokenizer/chat_template.c)
 * and tokenizing with DI_TOKENIZE_PARSE_SPECIAL.
 *
 * An input is read as: byte 0 picks a template name (one past the built-in
 * ones is an unknown name), byte 1 bit 0 is add_assistant, and the rest is a
 * message list, messages separated by 0x1E, each one role byte (0 system,
 * 1 user, 2 assistant, 3 tool, 4 tool_call, anything else an unknown role) then its content (cut
 * at a NUL, as a C string is). The same rest is also given to template
 * recognition as a template text.
 *
 * Checked promises (a broken one traps, which libFuzzer reports as a crash):
 *   - recognition gives NULL or a built-in name that di_chat_format accepts;
 *   - di_chat_format gives DI_ERR_UNSUPPORTED exactly for the unknown name,
 *     DI_ERR_INVALID_ARGUMENT / DI_ERR_TEXT for the first unknown role /
 *     invalid UTF-8 content, DI_ERR_INVALID_ARGUMENT otherwise only for gemma
 *     (a system message it cannot place), else DI_OK;
 *   - on DI_OK: the sizing call agrees, one byte less is too small, the text
 *     is NUL-terminated valid UTF-8 and holds every content (trimmed);
 *   - with DI_FUZZ_VOCAB naming a GGUF, the text tokenizes with
 *     DI_TOKENIZE_PARSE_SPECIAL and the ids decode.
 *
 * Build and run: see tests/fuzz/README.md (make fuzz).
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/tokenizer/chat_template.h"
#include "detinfer.h"
#include "lib/format/gguf.h"
#include "lib/tokenizer/tokenizer_internal.h"

#define CHECK(cond)               \
    do {                          \
        if (!(cond))              \
            __builtin_trap();     \
    } while (0)

static const char *const names[] = {
    "chatml", "gemma", "llama3", "llama2", "llama2-sys", "llama2-sys-bos", "llama2-sys-strip",
    "mistral-v1", "mistral-v3", "mistral-v3-tekken", "mistral-v7", "mistral-v7-tekken", "phi3",
    "zephyr", "no-such-template",
};
#define N_NAMES (sizeof names / sizeof names[0])
#define MAX_MESSAGES 64

static di_gguf vocab_gguf;
static di_tokenizer *vocab;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    const char *path = getenv("DI_FUZZ_VOCAB");
    if (!path)
        return 0;
    int fd = open(path, O_RDONLY);
    CHECK(fd >= 0);
    struct stat st;
    CHECK(fstat(fd, &st) == 0);
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    CHECK(map != MAP_FAILED);
    char err[256];
    CHECK(di_gguf_parse(map, (size_t)st.st_size, &vocab_gguf, err, sizeof err) == DI_OK);
    const di_gguf_kv *kv = di_gguf_find_kv(&vocab_gguf, "tokenizer.ggml.tokens");
    CHECK(kv != NULL);
    CHECK(di_tokenizer_load(&vocab_gguf, (uint32_t)kv->v.arr.count, &vocab, err, sizeof err) == DI_OK);
    CHECK(vocab->kind != DI_TOK_KIND_NONE);
    return 0; /* the map stays for the process */
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* content, trimmed of ASCII whitespace, is inside text */
static int holds_trimmed(const char *text, size_t len, const char *content)
{
    size_t start = 0, end = strlen(content);
    while (start < end && is_space(content[start]))
        start++;
    while (end > start && is_space(content[end - 1]))
        end--;
    return end == start || memmem(text, len, content + start, end - start) != NULL;
}

static void check_tokenize(const char *text, size_t len)
{
    if (!vocab || len > 4096)
        return;
    di_tok_vec ids = {0};
    char err[256];
    CHECK(di_tokenizer_encode(vocab, text, len, DI_TOKENIZE_PARSE_SPECIAL | DI_TOKENIZE_ADD_BOS,
                              &ids, err, sizeof err) == DI_OK);
    char *back;
    size_t back_len;
    CHECK(di_tokenizer_decode(vocab, ids.v, ids.n, &back, &back_len, err, sizeof err) == DI_OK);
    free(back);
    free(ids.v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    const char *name = names[data[0] % N_NAMES];
    int unknown_name = data[0] % N_NAMES == N_NAMES - 1;
    int add_ass = data[1] & 1;
    const uint8_t *rest = data + 2;
    size_t rest_len = size - 2;

    /* recognition of the rest as a template text */
    const char *seen = di_chat_detect((const char *)rest, rest_len);
    if (seen) {
        size_t len;
        int known = 0;
        for (size_t i = 0; i + 1 < N_NAMES; i++)
            known |= strcmp(seen, names[i]) == 0;
        CHECK(known);
        CHECK(di_chat_format(seen, NULL, NULL, 0, 1, NULL, 0, &len, NULL, 0) ==
              DI_ERR_BUFFER_TOO_SMALL);
    }

    /* the rest as messages */
    char *copy = malloc(rest_len + 1);
    CHECK(copy != NULL);
    memcpy(copy, rest, rest_len);
    copy[rest_len] = '\0';
    const char *roles[MAX_MESSAGES], *contents[MAX_MESSAGES];
    size_t n = 0;
    di_status want = DI_OK;
    int tool_turns = 0; /* a tool or tool_call message before any error: valid or refused by the template */
    for (size_t i = 0; i < rest_len && n < MAX_MESSAGES;) {
        size_t end = i;
        while (end < rest_len && copy[end] != '\x1e')
            end++;
        copy[end] = '\0';
        static const char *const role_names[] = {"system", "user", "assistant", "tool", "tool_call", "robot"};
        uint8_t r = (uint8_t)copy[i];
        roles[n] = role_names[r < 5 ? r : 5];
        contents[n] = copy + i + 1 <= copy + end ? copy + i + 1 : copy + end;
        size_t bad;
        if (want == DI_OK && !tool_turns && (r == 3 || r == 4))
            tool_turns = 1;
        else if (want == DI_OK && !tool_turns && r >= 5)
            want = DI_ERR_INVALID_ARGUMENT;
        else if (want == DI_OK && !tool_turns && !di_utf8_valid(contents[n], strlen(contents[n]), &bad))
            want = DI_ERR_TEXT;
        n++;
        i = end + 1;
    }
    if (unknown_name)
        want = DI_ERR_UNSUPPORTED;

    size_t need = 0, len = 0;
    char err[512];
    di_status st = di_chat_format(name, roles, contents, n, add_ass, NULL, 0, &need, err, sizeof err);
    if (want != DI_OK) {
        CHECK(st == want);
    } else if (tool_turns && (st == DI_ERR_INVALID_ARGUMENT || st == DI_ERR_TEXT)) {
        /* a template without tool turns, a misplaced or malformed call, a later bad message */
    } else if (st == DI_ERR_INVALID_ARGUMENT) {
        CHECK(strcmp(name, "gemma") == 0); /* a system message it cannot place */
    } else {
        CHECK(st == DI_ERR_BUFFER_TOO_SMALL);
        char *text = malloc(need + 1);
        CHECK(text != NULL);
        if (need > 0)
            CHECK(di_chat_format(name, roles, contents, n, add_ass, text, need, &len, err,
                                 sizeof err) == DI_ERR_BUFFER_TOO_SMALL);
        CHECK(di_chat_format(name, roles, contents, n, add_ass, text, need + 1, &len, err,
                             sizeof err) == DI_OK);
        CHECK(len == need && text[len] == '\0' && strlen(text) == len);
        size_t bad;
        CHECK(di_utf8_valid(text, len, &bad));
        for (size_t i = 0; i < n; i++) /* tool turns are rewritten: JSON strings, a call's name and arguments */
            CHECK(holds_trimmed(text, len, contents[i]) || !strncmp(roles[i], "tool", 4));
        check_tokenize(text, len);
        free(text);
    }
    /* the raw rest, control-token texts and all, through PARSE_SPECIAL */
    size_t bad;
    if (di_utf8_valid((const char *)rest, rest_len, &bad))
        check_tokenize((const char *)rest, rest_len);
    free(copy);
    return 0;
}
