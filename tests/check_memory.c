/*
 * check_memory.c — memory that follows the work: a context beyond the
 * model's training context is refused unless the caller insists
 * (DI_CONFIG_ALLOW_LONG_CONTEXT, detinfer run --allow-long-context); a
 * session reserves no KV cache up front and each sequence's cache grows with
 * it (di_session_kv_bytes against the bytes a position takes, computed here
 * from the model's shape); growth changes no bit; running out of memory
 * while growing (RLIMIT_AS in the forked test process) fails the step or
 * copy and changes no sequence; and `detinfer run --max-new 1048576` does not
 * touch memory for a million positions before its first token (the peak RSS
 * of the process, from wait4).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "test_util.h"

/* llama-family test model: head_dim = n_embd / n_head */
#define MODEL "mha_tied_f32"

static int64_t model_int(const di_model *m, di_model_key key)
{
    int64_t v = 0;
    ck_assert_int_eq(di_model_get_int(m, key, &v), DI_OK);
    return v;
}

/* Bytes of keys and values one position of one sequence takes: both
 * tensors, every layer, every KV head of head_dim floats. */
static uint64_t bytes_per_position(const di_model *m)
{
    const int64_t head_dim = model_int(m, DI_MODEL_N_EMBD) / model_int(m, DI_MODEL_N_HEAD);
    return 2 * (uint64_t)model_int(m, DI_MODEL_N_LAYER) * (uint64_t)model_int(m, DI_MODEL_N_HEAD_KV) *
           (uint64_t)head_dim * sizeof(float);
}

static di_status create(const di_model *m, int64_t max_seq, int64_t ctx, int64_t allow, di_session **s,
                        char *err, size_t err_size)
{
    di_config *c = NULL;
    ck_assert_int_eq(di_config_create(&c), DI_OK);
    ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_MAX_SEQUENCES, max_seq), DI_OK);
    ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_CONTEXT_LENGTH, ctx), DI_OK);
    if (allow >= 0)
        ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_ALLOW_LONG_CONTEXT, allow), DI_OK);
    di_status st = di_session_create(m, c, s, err, err_size);
    di_config_free(c);
    return st;
}

static di_session *session(const di_model *m, int64_t max_seq, int64_t ctx, int64_t allow)
{
    di_session *s = NULL;
    char err[512];
    di_status st = create(m, max_seq, ctx, allow, &s, err, sizeof err);
    ck_assert_msg(st == DI_OK, "session: %s: %s", di_status_name(st), err);
    return s;
}

static uint64_t kv_bytes(di_session *s)
{
    uint64_t b = UINT64_MAX;
    ck_assert_int_eq(di_session_kv_bytes(s, &b), DI_OK);
    return b;
}

static uint32_t seq_length(di_session *s, uint32_t seq)
{
    uint32_t n = UINT32_MAX;
    ck_assert_int_eq(di_session_seq_length(s, seq, &n), DI_OK);
    return n;
}

/* n tokens of the model's vocabulary, a fixed pseudo-random sequence */
static int32_t *tokens_for(const di_model *m, uint32_t n, uint64_t seed)
{
    int32_t *t = malloc((size_t)n * sizeof *t);
    ck_assert_ptr_nonnull(t);
    const uint64_t vocab = (uint64_t)model_int(m, DI_MODEL_N_VOCAB);
    for (uint32_t i = 0; i < n; i++)
        t[i] = (int32_t)(tu_rand(&seed) % vocab);
    return t;
}

/* ---- the training context --------------------------------------------------------- */

START_TEST(test_context_beyond_training_refused)
{
    di_model *m = tu_load(MODEL);
    const int64_t trained = model_int(m, DI_MODEL_N_CTX_TRAIN);
    di_session *s = NULL;
    char err[512] = "";
    /* one past the training context: refused, with a message naming the key */
    ck_assert_int_eq(create(m, 1, trained + 1, -1, &s, err, sizeof err), DI_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(err, "DI_CONFIG_ALLOW_LONG_CONTEXT") && strstr(err, "training context"), "%s", err);
    ck_assert_int_eq(create(m, 1, 1 << 24, 0, &s, err, sizeof err), DI_ERR_INVALID_ARGUMENT);
    /* the training context itself, and the default (0), are accepted */
    s = session(m, 1, trained, -1);
    di_session_free(s);
    s = session(m, 1, 0, -1);
    /* the default is the training context (it is below the cap of 4096) */
    int32_t *t = tokens_for(m, (uint32_t)trained + 1, 1);
    tu_step(s, 0, t, (uint32_t)trained, 0);
    const uint32_t seq = 0, one = 1;
    ck_assert_int_eq(di_session_step(s, 1, &seq, &one, t + trained, 0), DI_ERR_CONTEXT_FULL);
    di_session_free(s);
    /* insisting: a sequence runs past the training context */
    s = session(m, 1, trained + 1, 1);
    tu_step(s, 0, t, (uint32_t)trained + 1, 0);
    ck_assert_uint_eq(seq_length(s, 0), (uint32_t)trained + 1);
    di_session_free(s);
    free(t);
    di_model_free(m);
}
END_TEST

START_TEST(test_allow_long_context_key)
{
    di_config *c = NULL;
    int64_t v = -1;
    ck_assert_int_eq(di_config_create(&c), DI_OK);
    ck_assert_int_eq(di_config_get_int(c, DI_CONFIG_ALLOW_LONG_CONTEXT, &v), DI_OK);
    ck_assert_int_eq(v, 0);
    ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_ALLOW_LONG_CONTEXT, 1), DI_OK);
    ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_ALLOW_LONG_CONTEXT, 2), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_ALLOW_LONG_CONTEXT, -1), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_config_set_float(c, DI_CONFIG_ALLOW_LONG_CONTEXT, 1.0), DI_ERR_UNKNOWN_KEY);
    ck_assert_int_eq(di_config_get_int(c, DI_CONFIG_ALLOW_LONG_CONTEXT, &v), DI_OK);
    ck_assert_int_eq(v, 1);
    di_config_free(c);
}
END_TEST

/* ---- growth ---------------------------------------------------------------------------- */

/* Nothing up front, whatever max_sequences x context_length: 4096 sequences
 * of 2^24 positions would be terabytes. */
START_TEST(test_nothing_reserved_up_front)
{
    di_model *m = tu_load(MODEL);
    di_session *s = session(m, 4096, 1 << 24, 1);
    ck_assert_uint_eq(kv_bytes(s), 0);
    int32_t *t = tokens_for(m, 3, 2);
    tu_step(s, 4095, t, 3, 0);
    ck_assert_uint_eq(kv_bytes(s), 64 * bytes_per_position(m));
    di_session_free(s);
    free(t);
    uint64_t b;
    ck_assert_int_eq(di_session_kv_bytes(NULL, &b), DI_ERR_INVALID_ARGUMENT);
    di_model_free(m);
}
END_TEST

/* The cache doubles from 64 positions as the sequence grows, per sequence;
 * reset frees it, truncation keeps it, copy grows the destination. */
START_TEST(test_cache_grows_with_sequence)
{
    di_model *m = tu_load(MODEL);
    const uint64_t p = bytes_per_position(m);
    di_session *s = session(m, 3, 256, -1);
    int32_t *t = tokens_for(m, 256, 3);
    ck_assert_uint_eq(kv_bytes(s), 0);
    tu_step(s, 0, t, 10, 0);
    ck_assert_uint_eq(kv_bytes(s), 64 * p);
    tu_step(s, 0, t + 10, 54, 0); /* 64: still fits */
    ck_assert_uint_eq(kv_bytes(s), 64 * p);
    tu_step(s, 0, t + 64, 1, 0);  /* 65: doubles */
    ck_assert_uint_eq(kv_bytes(s), 128 * p);
    tu_step(s, 0, t + 65, 100, 0); /* 165: past double, to the context's 256 */
    ck_assert_uint_eq(kv_bytes(s), 256 * p);
    tu_step(s, 1, t, 1, 0);
    ck_assert_uint_eq(kv_bytes(s), (256 + 64) * p);
    /* truncation keeps the cache; copy grows the destination to at least length */
    ck_assert_int_eq(di_session_seq_truncate(s, 0, 100), DI_OK);
    ck_assert_uint_eq(kv_bytes(s), (256 + 64) * p);
    ck_assert_int_eq(di_session_seq_copy(s, 0, 2, 100), DI_OK);
    const uint64_t after_copy = kv_bytes(s);
    ck_assert_msg(after_copy >= (256 + 64 + 100) * p && after_copy <= (256 + 64 + 200) * p, "%llu",
                  (unsigned long long)after_copy);
    /* a reset frees */
    ck_assert_int_eq(di_session_seq_reset(s, 0), DI_OK);
    ck_assert_uint_eq(kv_bytes(s), after_copy - 256 * p);
    ck_assert_int_eq(di_session_seq_truncate(s, 2, 0), DI_OK);
    ck_assert_uint_eq(kv_bytes(s), 64 * p);
    di_session_free(s);
    free(t);
    di_model_free(m);
}
END_TEST

/* Growth moves a cache without changing a bit: a sequence fed one token per
 * step (growing at 64 and 128) gives the digests of the same tokens fed at
 * once into a cache allocated in one piece; a copy made after growth, and
 * one made into a smaller cache, continue alike. */
START_TEST(test_growth_changes_no_bit)
{
    enum { N = 200 };
    di_model *m = tu_load(MODEL);
    int32_t *t = tokens_for(m, N + 1, 4);
    di_session *whole = session(m, 1, 256, -1), *grown = session(m, 3, 256, -1);
    di_digest want[N], got[N];
    tu_prompt_digests(whole, 0, t, N, NULL, 0, want);
    for (uint32_t i = 0; i < N; i++) {
        tu_step(grown, 0, t + i, 1, 0);
        got[i] = tu_last_digest(grown, 0);
        tu_assert_digest_eq(&want[i], &got[i], "one token per step", (int)i);
    }
    /* seq 1 holds 10 tokens (64 positions) and becomes a copy of 150 */
    tu_step(grown, 1, t, 10, 0);
    ck_assert_int_eq(di_session_seq_copy(grown, 0, 1, 150), DI_OK);
    ck_assert_int_eq(di_session_seq_copy(grown, 0, 2, N), DI_OK);
    tu_step(grown, 1, t + 150, 1, 0);
    got[0] = tu_last_digest(grown, 1);
    tu_assert_digest_eq(&want[150], &got[0], "copy of 150, then token 150", 150);
    tu_step(whole, 0, t + N, 1, 0);
    tu_step(grown, 2, t + N, 1, 0);
    want[0] = tu_last_digest(whole, 0);
    got[0] = tu_last_digest(grown, 2);
    tu_assert_digest_eq(&want[0], &got[0], "copy of 200, then token 200", N);
    di_session_free(whole);
    di_session_free(grown);
    free(t);
    di_model_free(m);
}
END_TEST

/* ---- out of memory while growing ------------------------------------------------------- */

#ifdef __GLIBC__
/* The address space this process maps now (bytes). */
static uint64_t address_space(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    ck_assert_ptr_nonnull(f);
    unsigned long pages = 0;
    ck_assert_int_eq(fscanf(f, "%lu", &pages), 1);
    fclose(f);
    return (uint64_t)pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* From here on, at most `room` more bytes of address space. */
static void limit_growth(struct rlimit *saved, uint64_t room)
{
    ck_assert_int_eq(getrlimit(RLIMIT_AS, saved), 0);
    struct rlimit lim = *saved;
    lim.rlim_cur = address_space() + room;
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &lim), 0);
}
#endif

/* A step whose growth finds no memory gives DI_ERR_OUT_OF_MEMORY and changes
 * no sequence: not the one that could not grow, not one grown before it in
 * the same step; so is a copy. Afterwards the session goes on as if the
 * failures had not happened. Runs in Check's forked test process, which the
 * address-space limit binds alone. */
START_TEST(test_growth_out_of_memory_all_or_nothing)
{
#ifndef __GLIBC__
    printf("memory: not glibc: the out-of-memory test is skipped\n");
#else
    const char *sanitize = getenv("DI_TEST_SANITIZE");
    if (sanitize && *sanitize) {
        printf("memory: a sanitizer maps its own shadow memory: the out-of-memory test is skipped\n");
        return;
    }
    /* every block of 64 KiB or more is its own mapping, and freed ones leave */
    ck_assert_int_eq(mallopt(M_MMAP_THRESHOLD, 64 * 1024), 1);
    enum { LONG = 3000, BIG = 1 << 20 };
    di_model *m = tu_load(MODEL);
    int32_t *t = tokens_for(m, LONG + 2, 5);
    di_session *ref = session(m, 1, BIG + 64, 1), *s = session(m, 3, BIG + 64, 1);
    /* ref: the digests the session must give afterwards */
    di_digest want_long, want_short, got;
    tu_step(ref, 0, t, LONG + 1, 0);
    want_long = tu_last_digest(ref, 0);
    ck_assert_int_eq(di_session_seq_reset(ref, 0), DI_OK);
    tu_step(ref, 0, t, 65, 0);
    want_short = tu_last_digest(ref, 0);

    tu_step(s, 0, t, LONG, 0);  /* 3000 positions */
    tu_step(s, 1, t, 64, 0);    /* 64 positions, full */
    const di_digest before0 = tu_last_digest(s, 0), before1 = tu_last_digest(s, 1);
    const uint64_t bytes = kv_bytes(s);
    int32_t *big = tokens_for(m, BIG, 6);

    struct rlimit saved;
    limit_growth(&saved, 1 << 20); /* 1 MiB: far less than a million positions need */
    /* seq 1 grows to 128 positions (128 KiB)... */
    const uint32_t ids[2] = {1, 0}, counts[2] = {1, BIG - LONG};
    int32_t *both = malloc((size_t)(BIG - LONG + 1) * sizeof *both);
    di_status st_step = both ? DI_OK : DI_ERR_OUT_OF_MEMORY;
    if (both) {
        both[0] = t[64];
        memcpy(both + 1, big, (size_t)(BIG - LONG) * sizeof *both);
        /* ...and seq 0 cannot grow to a million positions */
        st_step = di_session_step(s, 2, ids, counts, both, 0);
    }
    /* a copy of 3000 positions into seq 2 needs 3000 positions of cache */
    const di_status st_copy = di_session_seq_copy(s, 0, 2, LONG);
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &saved), 0);
    free(both);
    ck_assert_int_eq(st_step, DI_ERR_OUT_OF_MEMORY);
    ck_assert_msg(strstr(di_session_errmsg(s), "out of memory"), "%s", di_session_errmsg(s));
    ck_assert_int_eq(st_copy, DI_ERR_OUT_OF_MEMORY);

    /* nothing changed: lengths, results (seq 1 may keep its larger cache) */
    ck_assert_uint_eq(seq_length(s, 0), LONG);
    ck_assert_uint_eq(seq_length(s, 1), 64);
    ck_assert_uint_eq(seq_length(s, 2), 0);
    got = tu_last_digest(s, 0);
    tu_assert_digest_eq(&before0, &got, "seq 0's logits after the failed step", 0);
    got = tu_last_digest(s, 1);
    tu_assert_digest_eq(&before1, &got, "seq 1's logits after the failed step", 1);
    ck_assert_uint_ge(kv_bytes(s), bytes);
    /* and the session goes on exactly */
    tu_step(s, 0, t + LONG, 1, 0);
    got = tu_last_digest(s, 0);
    tu_assert_digest_eq(&want_long, &got, "seq 0 after the failures", LONG);
    tu_step(s, 1, t + 64, 1, 0);
    got = tu_last_digest(s, 1);
    tu_assert_digest_eq(&want_short, &got, "seq 1 after the failures", 64);
    free(big);
    free(t);
    di_session_free(ref);
    di_session_free(s);
    di_model_free(m);
#endif
}
END_TEST

/* A cache doubles one layer at a time: with room for the new cache and a
 * layer of the old one (and the RoPE tables' growth), but not for the old
 * and new caches side by side, the step that doubles succeeds. gemma3_f32
 * has 7 layers: at 2048 positions its cache holds 5.25 MiB, at 4096
 * 10.5 MiB; doubling whole would need 10.5 MiB more, layer by layer 6 MiB. */
START_TEST(test_doubling_needs_one_layer_of_room)
{
#ifndef __GLIBC__
    printf("memory: not glibc: the doubling-room test is skipped\n");
#else
    const char *sanitize = getenv("DI_TEST_SANITIZE");
    if (sanitize && *sanitize) {
        printf("memory: a sanitizer maps its own shadow memory: the doubling-room test is skipped\n");
        return;
    }
    ck_assert_int_eq(mallopt(M_MMAP_THRESHOLD, 64 * 1024), 1);
    enum { N = 2048 };
    di_model *m = tu_load("gemma3_f32");
    int32_t *t = tokens_for(m, N + 1, 7);
    di_session *ref = session(m, 1, 4 * N, 1), *s = session(m, 1, 4 * N, 1);
    tu_step(ref, 0, t, N + 1, 0);
    const di_digest want = tu_last_digest(ref, 0);
    di_session_free(ref);
    tu_step(s, 0, t, N, 0);
    const uint64_t before = kv_bytes(s);
    ck_assert_uint_gt(before, 5u << 20);
    struct rlimit saved;
    limit_growth(&saved, 9u << 20); /* the new cache, a layer of the old, the tables, slack */
    const uint32_t seq = 0, one = 1;
    const di_status st = di_session_step(s, 1, &seq, &one, t + N, 0);
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &saved), 0);
    ck_assert_msg(st == DI_OK, "%s: %s", di_status_name(st), di_session_errmsg(s));
    ck_assert_uint_eq(kv_bytes(s), 2 * before);
    const di_digest got = tu_last_digest(s, 0);
    tu_assert_digest_eq(&want, &got, "after the doubling", N);
    di_session_free(s);
    free(t);
    di_model_free(m);
#endif
}
END_TEST

/* ---- detinfer run --max-new 1048576 ------------------------------------------------------ */

/* The peak resident set (VmHWM) of a running process, in KiB; -1 if unknown.
 * Read from /proc rather than wait4's ru_maxrss, which also counts the
 * forked copy of this test process before the exec (hundreds of MiB under
 * the sanitizers). */
static long peak_rss_kib(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kib = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

/* Runs the tool with args until it has printed `steps` step lines (or ends),
 * then kills it; returns its exit status (wait4) and its peak RSS in KiB
 * (VmHWM just before the kill; wait4's figure when it ended by itself). */
static int run_tool(char *const args[], int steps, long *max_rss_kib, char *out, size_t out_size)
{
    int pipefd[2];
    ck_assert_int_eq(pipe(pipefd), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(pipefd[1], STDOUT_FILENO);
        dup2(pipefd[1], STDERR_FILENO);
        close(pipefd[0]);
        close(pipefd[1]);
        execv(args[0], args);
        _exit(127);
    }
    close(pipefd[1]);
    FILE *f = fdopen(pipefd[0], "r");
    ck_assert_ptr_nonnull(f);
    char line[1024];
    size_t used = 0;
    out[0] = '\0';
    int seen = 0;
    while (seen < steps && fgets(line, sizeof line, f)) {
        seen += strncmp(line, "step ", 5) == 0;
        if (used + strlen(line) < out_size) {
            strcpy(out + used, line);
            used += strlen(line);
        }
    }
    long hwm = -1;
    if (seen >= steps) {
        hwm = peak_rss_kib(pid);
        kill(pid, SIGKILL);
    }
    fclose(f);
    int status = 0;
    struct rusage ru;
    ck_assert_int_eq(wait4(pid, &status, 0, &ru), pid);
    *max_rss_kib = hwm >= 0 ? hwm : ru.ru_maxrss;
    return status;
}

/* Before this library grew its tables with the sequences, the first token of
 * this run came after RoPE tables for 1048579 positions (about 400 MB for
 * this model's 2 x 24-entry rows in 2 settings); now the process stays far
 * below. Without --allow-long-context the run is refused. */
START_TEST(test_run_max_new_million_peak_rss)
{
    char tool[4096], model[4096], out[4096];
    tu_tool_path(tool, sizeof tool);
    snprintf(model, sizeof model, "%s", tu_model_path("gemma3_f32", ".gguf"));
    long rss = 0;
    char *refused[] = {tool, "run", "--model", model, "--tokens", "1,2,3", "--max-new", "1048576", NULL};
    int status = run_tool(refused, 1, &rss, out, sizeof out);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 1, "status %d: %s", status, out);
    ck_assert_msg(strstr(out, "--allow-long-context") && strstr(out, "training context"), "%s", out);

    char *insist[] = {tool, "run", "--model", model, "--tokens", "1,2,3", "--max-new", "1048576",
                      "--allow-long-context", NULL};
    status = run_tool(insist, 3, &rss, out, sizeof out);
    ck_assert_msg(strstr(out, "step 2 "), "the run did not reach its third token (status %d): %s", status, out);
    const char *sanitize = getenv("DI_TEST_SANITIZE");
    const long bound_kib = sanitize && *sanitize ? 256 * 1024 : 128 * 1024; /* the old run: 394 MiB */
    printf("memory: detinfer run --max-new 1048576: peak RSS %ld KiB at its third token (bound %ld)\n", rss,
           bound_kib);
    ck_assert_msg(rss < bound_kib, "peak RSS %ld KiB, bound %ld KiB", rss, bound_kib);
}
END_TEST

Suite *memory_suite(void)
{
    Suite *s = suite_create("memory");
    TCase *tc = tcase_create("memory");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_context_beyond_training_refused);
    tcase_add_test(tc, test_allow_long_context_key);
    tcase_add_test(tc, test_nothing_reserved_up_front);
    tcase_add_test(tc, test_cache_grows_with_sequence);
    tcase_add_test(tc, test_growth_changes_no_bit);
    tcase_add_test(tc, test_growth_out_of_memory_all_or_nothing);
    tcase_add_test(tc, test_doubling_needs_one_layer_of_room);
    tcase_add_test(tc, test_run_max_new_million_peak_rss);
    suite_add_tcase(s, tc);
    return s;
}
