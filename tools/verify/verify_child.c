/*
 * verify_child.c — the fresh-process axis of `detinfer verify`,
 * and the test-only fault hook.
 *
 * The parent re-executes this program (/proc/self/exe) with the hidden
 * subcommand `__verify-child`, writes the prompts on its stdin as token ids
 * and sampling parameters, one line each:
 *
 *   N t0 t1 ... 0                                   a greedy request
 *   N t0 t1 ... 1 TEMP TOP_K TOP_P MIN_P REP PRES FREQ WINDOW SEED   a sampled one
 *
 * (floats in C99 hexadecimal, exact), and reads one line per prompt back:
 *
 *   trace PROMPT N_POS MAX_NEW SEQUENCE_HEX DIGEST_HEX x N_POS TOKEN x MAX_NEW
 *
 * so nothing but the model file and the settings is shared between the two
 * processes.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "verify/verify.h"

extern char **environ;

/* ---- The test-only fault hook ------------------------------------------- */

int vf_test_hooks_from_env(vf_test_hooks *hooks, char *err, size_t err_size)
{
    memset(hooks, 0, sizeof *hooks);
    const char *spec = getenv("DETINFER_TEST_PERTURB");
    if (!spec || !*spec)
        return 1;
    unsigned long slot = 0, pos;
    char tail;
    int ok;
    if (!strncmp(spec, "tie-token:", 10) || !strncmp(spec, "tie-digest:", 11)) {
        hooks->tie_alter = spec[4] == 't' ? VF_TIE_ALTER_TOKEN : VF_TIE_ALTER_DIGEST;
        ok = sscanf(strchr(spec, ':') + 1, "%lu%c", &pos, &tail) == 1 && pos < 1000;
        hooks->tie = (uint32_t)pos;
    } else if (!strncmp(spec, "child:", 6)) {
        ok = sscanf(spec + 6, "%lu%c", &pos, &tail) == 1;
        hooks->child = (vf_perturb){1, 0, (uint32_t)pos};
    } else {
        ok = sscanf(spec, "%lu:%lu%c", &slot, &pos, &tail) == 2 && slot <= 4095;
        hooks->batched = (vf_perturb){1, (uint32_t)slot, (uint32_t)pos};
    }
    if (!ok) {
        memset(hooks, 0, sizeof *hooks);
        snprintf(err, err_size,
                 "DETINFER_TEST_PERTURB (test only) wants SLOT:POS, child:POS, tie-token:K or tie-digest:K, not '%s'",
                 spec);
    }
    return ok;
}

/* ---- Parent side --------------------------------------------------------- */

static int parse_hex(const char *s, di_digest *d)
{
    if (strlen(s) != 32)
        return 0;
    for (int i = 0; i < 16; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1)
            return 0;
        d->bytes[i] = (uint8_t)v;
    }
    return 1;
}

/* One "trace ..." line into t (allocated here). */
static int parse_trace(char *line, uint32_t n_prompts, const vf_prompt *prompts, vf_trace *t)
{
    char *save, *tok = strtok_r(line, " \n", &save);
    unsigned long prompt, n_pos, max_new;
    if (!tok || strcmp(tok, "trace") || !(tok = strtok_r(NULL, " \n", &save)) ||
        sscanf(tok, "%lu", &prompt) != 1 || prompt >= n_prompts || !(tok = strtok_r(NULL, " \n", &save)) ||
        sscanf(tok, "%lu", &n_pos) != 1 || !(tok = strtok_r(NULL, " \n", &save)) ||
        sscanf(tok, "%lu", &max_new) != 1 || max_new == 0 || n_pos != prompts[prompt].n + max_new - 1)
        return 0;
    if (!vf_trace_init(t, prompts[prompt].n, (uint32_t)max_new))
        return 0;
    t->prompt = (uint32_t)prompt;
    if (!(tok = strtok_r(NULL, " \n", &save)) || !parse_hex(tok, &t->sequence))
        return 0;
    for (uint32_t i = 0; i < t->n_pos; i++)
        if (!(tok = strtok_r(NULL, " \n", &save)) || !parse_hex(tok, &t->digests[i]))
            return 0;
    for (uint32_t i = 0; i < t->max_new; i++) {
        long v;
        if (!(tok = strtok_r(NULL, " \n", &save)) || sscanf(tok, "%ld", &v) != 1)
            return 0;
        t->tokens[i] = (int32_t)v;
    }
    return strtok_r(NULL, " \n", &save) == NULL;
}

/* Writes all of buf; a child that died early gives EPIPE, not SIGPIPE. */
static int write_all(int fd, const char *buf, size_t n)
{
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    int ok = 1;
    while (n > 0 && ok) {
        ssize_t w = write(fd, buf, n);
        if (w < 0 && errno == EINTR)
            continue;
        ok = w > 0;
        if (ok) {
            buf += w;
            n -= (size_t)w;
        }
    }
    if (!ok && errno == EPIPE) { /* take the pending SIGPIPE before unblocking */
        struct timespec zero = {0, 0};
        sigtimedwait(&pipe_set, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return ok;
}

/* " 0", or " 1" and the sampling parameters. */
static int send_sampling(int fd, const di_sampling_params *s)
{
    char buf[320] = " 0";
    if (s->size)
        snprintf(buf, sizeof buf, " 1 %a %d %a %a %a %a %a %u %llu", (double)s->temperature, (int)s->top_k,
                 (double)s->top_p, (double)s->min_p, (double)s->repetition_penalty, (double)s->presence_penalty,
                 (double)s->frequency_penalty, (unsigned)s->penalty_window, (unsigned long long)s->seed);
    return write_all(fd, buf, strlen(buf));
}

static int send_prompts(int fd, const vf_prompt *prompts, uint32_t n_prompts)
{
    int ok = 1;
    for (uint32_t p = 0; p < n_prompts && ok; p++) {
        char num[16];
        snprintf(num, sizeof num, "%u", prompts[p].n);
        ok = write_all(fd, num, strlen(num));
        for (uint32_t i = 0; i < prompts[p].n && ok; i++) {
            snprintf(num, sizeof num, " %d", prompts[p].tokens[i]);
            ok = write_all(fd, num, strlen(num));
        }
        ok = ok && send_sampling(fd, &prompts[p].sampling) && write_all(fd, "\n", 1);
    }
    return ok;
}

static di_status spawn_child(char *const argv[], pid_t *pid, int *to_child, int *from_child, char *err,
                             size_t err_size)
{
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC)) {
        snprintf(err, err_size, "pipe: %s", strerror(errno));
        return DI_ERR_IO;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
    int rc = posix_spawn(pid, "/proc/self/exe", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    if (rc) {
        close(in[1]);
        close(out[0]);
        snprintf(err, err_size, "cannot start a fresh process (/proc/self/exe): %s", strerror(rc));
        return DI_ERR_IO;
    }
    *to_child = in[1];
    *from_child = out[0];
    return DI_OK;
}

/* Reads the child's traces; returns how many were well formed. */
static uint32_t read_traces(FILE *f, const vf_prompt *prompts, uint32_t n_prompts, vf_done_fn done, void *ctx,
                            int *malformed)
{
    char *line = NULL;
    size_t cap = 0;
    uint32_t got = 0;
    *malformed = 0;
    while (getline(&line, &cap, f) >= 0) {
        vf_trace t = {0};
        if (parse_trace(line, n_prompts, prompts, &t)) {
            done(ctx, got++, &t);
        } else {
            *malformed = 1;
        }
        vf_trace_free(&t);
    }
    free(line);
    return got;
}

di_status vf_child_traces(const char *model_path, uint32_t max_new, int last_only, const cli_session_opts *so,
                          const vf_prompt *prompts, uint32_t n_prompts, vf_done_fn done, void *ctx, char *err,
                          size_t err_size)
{
    char max_new_s[16], threads_s[16], device_s[16];
    snprintf(max_new_s, sizeof max_new_s, "%u", max_new);
    snprintf(threads_s, sizeof threads_s, "%ld", so->threads);
    snprintf(device_s, sizeof device_s, "%ld", so->device);
    char *const argv[] = {"detinfer", "__verify-child", "--model", (char *)model_path, "--max-new", max_new_s,
                          "--threads", threads_s, "--backend", (char *)cli_backend_name(so->backend), "--profile",
                          (char *)cli_profile_name(so->profile), "--device", device_s, "--cpu-path",
                          (char *)di_cpu_path_name(so->cpu_path), last_only ? "--last-only" : NULL, NULL};
    pid_t pid;
    int to_child, from_child;
    di_status st = spawn_child(argv, &pid, &to_child, &from_child, err, err_size);
    if (st)
        return st;
    int sent = send_prompts(to_child, prompts, n_prompts);
    close(to_child);
    FILE *f = fdopen(from_child, "r");
    int malformed = 0;
    uint32_t got = 0;
    if (f) {
        got = read_traces(f, prompts, n_prompts, done, ctx, &malformed);
        fclose(f);
    } else {
        close(from_child);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        snprintf(err, err_size, "the fresh process %s %d (its messages are above)",
                 WIFEXITED(status) ? "exited with status" : "was killed by signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        return DI_ERR_INTERNAL;
    }
    if (!sent || malformed || got != n_prompts) {
        snprintf(err, err_size, "the fresh process gave %u well-formed traces for %u prompts", got, n_prompts);
        return DI_ERR_INTERNAL;
    }
    return DI_OK;
}

/* ---- Child side: `detinfer __verify-child` -------------------------------- */

enum { OPT_MODEL, OPT_MAX_NEW, OPT_THREADS, OPT_BACKEND, OPT_PROFILE, OPT_DEVICE, OPT_CPU_PATH, OPT_LAST_ONLY };

static const cli_option child_options[] = {
    [OPT_MODEL] = {"--model", "FILE", "GGUF model file"},
    [OPT_MAX_NEW] = {"--max-new", "N", "tokens to generate per prompt"},
    [OPT_THREADS] = {"--threads", "N", "worker threads"},
    [OPT_BACKEND] = {"--backend", "NAME", "cpu or cuda"},
    [OPT_PROFILE] = {"--profile", "NAME", "portable, device or integer"},
    [OPT_DEVICE] = {"--device", "N", "CUDA device ordinal"},
    [OPT_CPU_PATH] = {"--cpu-path", "NAME", "auto, scalar, avx2 or avx512"},
    [OPT_LAST_ONLY] = {"--last-only", NULL, "hash only the last position of each step's entry"},
    {NULL, NULL, NULL},
};

static const cli_command child_command = {
    "__verify-child",
    "--model FILE --max-new N [--threads N] [--backend NAME] [--profile NAME] [--device N] [--cpu-path NAME] "
    "[--last-only] < prompts",
    "Internal to 'detinfer verify' (the fresh-process axis): reads prompts as token\n"
    "ids and sampling parameters, one per line \"N t0 t1 ... 0|1 [parameters]\", runs\n"
    "each alone and prints its trace.",
    child_options,
};

static void print_trace(void *ctx, uint32_t request, const vf_trace *t)
{
    (void)ctx;
    (void)request;
    char hex[DI_DIGEST_HEX_SIZE];
    cli_hex(&t->sequence, hex);
    printf("trace %u %u %u %s", t->prompt, t->n_pos, t->max_new, hex);
    for (uint32_t i = 0; i < t->n_pos; i++) {
        cli_hex(&t->digests[i], hex);
        printf(" %s", hex);
    }
    for (uint32_t i = 0; i < t->max_new; i++)
        printf(" %d", t->tokens[i]);
    putchar('\n');
}

/* A prompt's sampling parameters after its tokens: "0", or "1" and the fields. */
static int read_sampling(di_sampling_params *s)
{
    int sampled;
    if (scanf("%d", &sampled) != 1 || (sampled != 0 && sampled != 1))
        return 0;
    memset(s, 0, sizeof *s);
    if (!sampled)
        return 1;
    di_sampling_params_init(s);
    unsigned window;
    unsigned long long seed;
    if (scanf("%f %d %f %f %f %f %f %u %llu", &s->temperature, &s->top_k, &s->top_p, &s->min_p,
              &s->repetition_penalty, &s->presence_penalty, &s->frequency_penalty, &window, &seed) != 9)
        return 0;
    s->penalty_window = window;
    s->seed = seed;
    return 1;
}

/* Prompts from stdin, each line "N t0 ... t(N-1)" and its sampling parameters. */
static int read_prompts(vf_prompt_set *set)
{
    unsigned long n;
    while (scanf("%lu", &n) == 1) {
        if (n == 0 || n > (1u << 24))
            return 0;
        if (set->n == set->cap) {
            uint32_t cap = set->cap ? 2 * set->cap : 16;
            vf_prompt *p = realloc(set->p, cap * sizeof *p);
            if (!p)
                return 0;
            set->p = p;
            set->cap = cap;
        }
        vf_prompt *p = &set->p[set->n];
        *p = (vf_prompt){NULL, NULL, malloc(n * sizeof(int32_t)), (uint32_t)n, {0}};
        if (!p->tokens)
            return 0;
        set->n++;
        for (unsigned long i = 0; i < n; i++)
            if (scanf("%d", &p->tokens[i]) != 1)
                return 0;
        if (!read_sampling(&p->sampling))
            return 0;
    }
    return feof(stdin) && set->n > 0;
}

typedef struct child_opts {
    const char *model_path;
    long max_new;
    int last_only;
    cli_session_opts session;
} child_opts;

static int apply_option(int k, const char *v, void *opts)
{
    child_opts *o = opts;
    const char *name = child_options[k].name;
    switch (k) {
    case OPT_MODEL: o->model_path = v; return 1;
    case OPT_MAX_NEW: return cli_parse_long(&child_command, name, v, 1, 1 << 20, &o->max_new);
    case OPT_THREADS: return cli_parse_long(&child_command, name, v, 1, 256, &o->session.threads);
    case OPT_BACKEND: return cli_parse_backend(&child_command, name, v, &o->session.backend);
    case OPT_PROFILE: return cli_parse_profile(&child_command, name, v, &o->session.profile);
    case OPT_DEVICE: return cli_parse_device(&child_command, name, v, &o->session.device);
    case OPT_CPU_PATH: return cli_parse_cpu_path(&child_command, name, v, &o->session.cpu_path);
    case OPT_LAST_ONLY: o->last_only = 1; return 1;
    }
    return 0;
}

int cli_cmd_verify_child(int argc, char **argv)
{
    child_opts o = {.session = {.backend = DI_BACKEND_CPU, .profile = DI_PROFILE_PORTABLE, .threads = 1, .max_sequences = 1}};
    int rc = cli_parse_options(&child_command, argc, argv, apply_option, &o, NULL);
    if (rc != CLI_EXIT_OK)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if (!o.model_path || !o.max_new)
        return cli_usage(&child_command, "--model and --max-new are required");
    const char *model_path = o.model_path;
    long max_new = o.max_new;
    cli_session_opts so = o.session;

    char err[512] = "";
    vf_test_hooks hooks;
    if (!vf_test_hooks_from_env(&hooks, err, sizeof err))
        return cli_usage(&child_command, "%s", err);
    vf_perturb child = hooks.child;
    di_model *model = NULL;
    rc = cli_load_model(&child_command, model_path, &model);
    if (rc)
        return rc;
    vf_prompt_set set = {0};
    di_session *s = NULL;
    if (!read_prompts(&set)) {
        fprintf(stderr, "detinfer __verify-child: malformed prompts on stdin\n");
        rc = CLI_EXIT_FAIL;
        goto out;
    }
    uint32_t longest = 0;
    for (uint32_t i = 0; i < set.n; i++)
        longest = set.p[i].n > longest ? set.p[i].n : longest;
    so.context_length = (int64_t)longest + max_new;
    di_status st = cli_open_session(model, &so, &s, err, sizeof err);
    if (st) {
        rc = cli_fail(&child_command, "creating the session", st, err);
        goto out;
    }
    uint32_t *queue = malloc(set.n * sizeof *queue);
    for (uint32_t i = 0; queue && i < set.n; i++)
        queue[i] = i;
    child.slot = 0; /* alone: every request runs in slot 0 */
    vf_engine_cfg cfg = {1, 0, (uint32_t)max_new, 1, child, o.last_only, 0, print_trace, NULL};
    st = queue ? vf_engine_run(s, cli_model_int(model, DI_MODEL_N_VOCAB), set.p, queue, set.n, &cfg, err,
                               sizeof err)
               : DI_ERR_OUT_OF_MEMORY;
    free(queue);
    if (st)
        rc = cli_fail(&child_command, "running the prompts", st, err);
out:
    fflush(stdout);
    vf_prompts_free(&set);
    di_session_free(s);
    di_model_free(model);
    return rc;
}
