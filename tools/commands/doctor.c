/*
 * doctor.c — `detinfer doctor`: the environment fingerprint of
 * docs/DETERMINISM.md, each fact checked with an OK/INFO/WARN line.
 *
 * A fingerprint is a list of facts "key=value". Each key has a scope: in the
 * digest of both profiles (what the portable contract depends on: library
 * version, numerics contract, build flags; not the host's floating-point
 * state, which the library pins in every call), in
 * the device profile's digest only (GPU model, CUDA, cuBLAS, cuDNN versions,
 * cuBLAS settings), or informational (CPU, OS, libc...). The digest is
 * XXH3-128 of the canonical text: the facts in scope, sorted by key, one
 * "key=value\n" line each, padded with '\n' to a multiple of 4 bytes.
 * `--save FILE` writes every fact; `--compare FILE` reads one back and says
 * whether the two environments promise equal digests.
 */
#include <errno.h>
#include <fenv.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <gnu/libc-version.h>
#endif

#include "cli/cli_json.h"
#include "cli/cli_commands.h"
#include "cli/cli_model.h"
#include "cli/cli_text.h"
#include "commands/cuda.h"
#include "commands/doctor.h"

enum { OPT_PROFILE, OPT_JSON, OPT_SAVE, OPT_COMPARE, OPT_STRICT, OPT_MODEL, OPT_BACKEND, OPT_DEVICE };

static const cli_option options[] = {
    [OPT_PROFILE] = {"--profile", "NAME", "the profile to fingerprint: portable (default), device or integer"},
    [OPT_JSON] = {"--json", NULL, "checks, facts and fingerprint as one JSON object"},
    [OPT_SAVE] = {"--save", "FILE", "write the fingerprint (every fact) to FILE"},
    [OPT_COMPARE] = {"--compare", "FILE", "compare with a fingerprint saved elsewhere; exit 1 unless equal digests are promised"},
    [OPT_STRICT] = {"--strict", NULL, "exit 1 when any check warns"},
    [OPT_MODEL] = {"--model", "FILE", "also open a session on FILE and report di_session_backend_info"},
    [OPT_BACKEND] = {"--backend", "NAME", "the session's backend with --model: cpu (default) or cuda"},
    [OPT_DEVICE] = {"--device", "N", "the session's CUDA device with --model (default 0)"},
    {NULL, NULL, NULL},
};

static const cli_command command = {
    "doctor",
    "[--profile portable|device] [--json] [--save FILE] [--compare FILE] [--strict]\n"
    "       [--model FILE [--backend cpu|cuda] [--device N]]",
    "Prints the environment fingerprint: library version and build flags, CPU\n"
    "model and SIMD path, OS and libc, the host's floating-point state (for\n"
    "information: the library pins its own), and where\n"
    "present the CUDA driver and runtime, cuBLAS and cuDNN versions and GPUs, with\n"
    "OK/INFO/WARN checks and a digest of the facts the profile's digests depend on.\n"
    "In the portable profile hardware does not matter; in the device profile it does.\n"
    "Runs without CUDA (its libraries are loaded only if present).",
    options,
};

typedef enum scope { SCOPE_INFO, SCOPE_BOTH, SCOPE_DEVICE } scope;
typedef enum level { LV_OK, LV_INFO, LV_WARN } level;

#define MAX_FACTS 64
#define MAX_CHECKS 48

typedef struct fact {
    char key[48];
    char value[256];
} fact;

typedef struct check {
    level lv;
    char name[32];
    char text[400];
} check;

typedef struct doctor {
    di_profile profile;
    fact facts[MAX_FACTS];
    int n_facts;
    check checks[MAX_CHECKS];
    int n_checks;
} doctor;

/* ---- Facts and checks ------------------------------------------------------ */

/* Which digests a key is part of (see the top of the file). */
static scope key_scope(const char *key)
{
    /* Not the host's floating-point state (float.*, libm.fmaf): the library
     * pins round-to-nearest without flushing in every call and no libm value
     * reaches a logit (docs/DETERMINISM.md, "The host's environment"). */
    static const char *const both[] = {"profile", "library.version", "library.numerics", "library.fast_math",
                                       "library.fp_contract", NULL};
    static const char *const device[] = {"cuda.driver", "cuda.runtime", "cublas.version", "cudnn.version",
                                         "gpu.name", "gpu.compute_capability", "gpu.sm_count",
                                         "env.CUBLAS_WORKSPACE_CONFIG", "env.NVIDIA_TF32_OVERRIDE", NULL};
    for (int i = 0; both[i]; i++)
        if (!strcmp(key, both[i]))
            return SCOPE_BOTH;
    for (int i = 0; device[i]; i++)
        if (!strcmp(key, device[i]))
            return SCOPE_DEVICE;
    return SCOPE_INFO;
}

static int in_digest(const char *key, di_profile profile)
{
    scope s = key_scope(key);
    return s == SCOPE_BOTH || (s == SCOPE_DEVICE && profile == DI_PROFILE_DEVICE);
}

static void add_fact(fact *facts, int *n, const char *key, const char *value)
{
    if (*n == MAX_FACTS)
        return;
    cli_copy(facts[*n].key, sizeof facts[*n].key, key);
    /* one line each: newlines would break the canonical text */
    cli_copy(facts[*n].value, sizeof facts[*n].value, value);
    for (char *c = facts[*n].value; *c; c++)
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    (*n)++;
}

static void fact_add(doctor *d, const char *key, const char *value)
{
    add_fact(d->facts, &d->n_facts, key, value);
}

static void check_add(doctor *d, level lv, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void check_add(doctor *d, level lv, const char *name, const char *fmt, ...)
{
    if (d->n_checks == MAX_CHECKS)
        return;
    check *c = &d->checks[d->n_checks++];
    c->lv = lv;
    snprintf(c->name, sizeof c->name, "%s", name);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->text, sizeof c->text, fmt, ap);
    va_end(ap);
}

/* ---- The library ------------------------------------------------------------ */

/* The "; "-separated part of di_build_info() that starts with prefix. */
static void build_part(const char *prefix, char *out, size_t n)
{
    const char *info = di_build_info();
    out[0] = '\0';
    for (const char *p = info; p && *p;) {
        const char *end = strstr(p, "; ");
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (!strncmp(p, prefix, strlen(prefix))) {
            snprintf(out, n, "%.*s", (int)(len - strlen(prefix)), p + strlen(prefix));
            return;
        }
        p = end ? end + 2 : NULL;
    }
}

static void library_facts(doctor *d)
{
    char buf[300], numerics[256], flags[256], cc[256], backends[64];
    const char *info = di_build_info();
    fact_add(d, "profile", cli_profile_name(d->profile));
    fact_add(d, "library.version", di_version_string());
    char revision[128];
    build_part("revision ", revision, sizeof revision); /* not in the fingerprint: equal numerics compare */
    fact_add(d, "library.revision", revision);
    snprintf(buf, sizeof buf, "%s", DI_VERSION_STRING);
    fact_add(d, "tool.header_version", buf);
    if (di_version_number() == DI_VERSION_NUMBER)
        check_add(d, LV_OK, "library", "libdetinfer %s (revision %s, ABI %d), the version this tool was built with",
                  di_version_string(), revision, DI_ABI_VERSION);
    else
        check_add(d, LV_WARN, "library", "libdetinfer %s (revision %s) loaded, but this tool was built with header %s",
                  di_version_string(), revision, DI_VERSION_STRING);
    build_part("reduction ", numerics, sizeof numerics);
    snprintf(buf, sizeof buf, "reduction %s", numerics);
    fact_add(d, "library.numerics", buf);
    build_part("flags ", flags, sizeof flags);
    build_part("cc ", cc, sizeof cc);
    build_part("backends ", backends, sizeof backends);
    fact_add(d, "library.build", info);
    fact_add(d, "library.compiler", cc);
    fact_add(d, "library.backends", backends);
    int fast = strstr(info, "fast-math") && !strstr(info, "-fno-fast-math");
    fast |= strstr(info, "-Ofast") != NULL || strstr(info, "-funsafe-math") != NULL ||
            strstr(info, "-ffinite-math") != NULL || strstr(info, "-fassociative-math") != NULL;
    int contract_off = strstr(info, "-ffp-contract=off") != NULL;
    fact_add(d, "library.fast_math", fast ? "yes" : "no");
    fact_add(d, "library.fp_contract", contract_off ? "off" : "unknown");
    if (fast)
        check_add(d, LV_WARN, "build flags", "%s: a fast-math build may reorder and contract float operations", flags);
    else if (!contract_off)
        check_add(d, LV_WARN, "build flags", "%s: -ffp-contract=off not recorded; fused a*b+c may differ", flags);
    else
        check_add(d, LV_OK, "build flags", "%s (no fast-math, no implicit contraction)", flags);
    check_add(d, LV_INFO, "compiler", "cc %s", cc[0] ? cc : "unknown");
    check_add(d, LV_INFO, "numerics", "reduction %s; backends in this build: %s", numerics,
              backends[0] ? backends : "unknown");
    if (strstr(info, "sanitize"))
        check_add(d, LV_INFO, "sanitizers", "the library is instrumented (a test build; slower, same digests)");
    if (d->profile == DI_PROFILE_DEVICE && !strstr(backends, "cuda"))
        check_add(d, LV_WARN, "device profile", "this build has no CUDA backend (backends: %s)", backends);
}

/* ---- Floating point and CPU -------------------------------------------------- */

/* The host's floating-point state, for information: results do not depend
 * on it (see key_scope), but a flushed or non-nearest state says that
 * something in the process (often a fast-math library) changed it. */
static void float_facts(doctor *d)
{
    /* volatile: computed at run time, in this process's floating-point state */
    volatile float min_normal = 1.17549435e-38f, four = 4.0f, one_plus = 1.0f + 0x1p-12f, minus = -(1.0f + 0x1p-11f);
    uint32_t sub_bits = 0x00200000u; /* 2^-128, subnormal */
    float sub_in;
    memcpy(&sub_in, &sub_bits, sizeof sub_in);
    volatile float sub = sub_in;
    int ftz = min_normal / four == 0.0f; /* a subnormal result flushed to zero */
    int daz = sub * four == 0.0f;        /* a subnormal input read as zero */
    int nearest = fegetround() == FE_TONEAREST;
    int fused = fmaf(one_plus, one_plus, minus) == 0x1p-24f; /* unfused gives 0 */
    fact_add(d, "float.rounding", nearest ? "nearest" : "other");
    fact_add(d, "float.denormals", ftz || daz ? "flushed" : "kept");
    fact_add(d, "libm.fmaf", fused ? "fused" : "not-fused");
    check_add(d, LV_INFO, "floating point", "host state: %s, denormals %s, libm fmaf %s (does not affect results: "
              "the library pins its own per call)", nearest ? "round to nearest" : "rounding NOT to nearest",
              ftz || daz ? "FLUSHED (FTZ/DAZ: a fast-math library may be loaded)" : "kept",
              fused ? "fused" : "not fused");
}

static void cpu_model(char *out, size_t n)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    snprintf(out, n, "unknown");
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!colon || (strncmp(line, "model name", 10) && strncmp(line, "Processor", 9)))
            continue;
        colon++;
        while (*colon == ' ' || *colon == '\t')
            colon++;
        colon[strcspn(colon, "\n")] = '\0';
        snprintf(out, n, "%s", colon);
        break;
    }
    if (f)
        fclose(f);
}

static void host_facts(doctor *d)
{
    char buf[512], model[256];
    cpu_model(model, sizeof model);
    fact_add(d, "cpu.model", model);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    int usable = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : (int)online;
    snprintf(buf, sizeof buf, "%ld", online);
    fact_add(d, "cpu.count", buf);
    check_add(d, LV_INFO, "cpu", "%s; %ld logical CPUs, %d usable by this process", model, online, usable);
    /* The path a default session takes, as the library decides it (with
     * --model, di_session_backend_info names it too). */
    di_cpu_path path;
    char err[256] = "";
    if (di_cpu_path_resolve(DI_CPU_PATH_AUTO, &path, err, sizeof err) == DI_OK) {
        fact_add(d, "cpu.simd", di_cpu_path_name(path));
        check_add(d, LV_INFO, "simd path", "%s%s (scalar, avx2 and avx512 give the same bits)", di_cpu_path_name(path),
                  getenv("DETINFER_CPU_PATH") && *getenv("DETINFER_CPU_PATH") ? ", from DETINFER_CPU_PATH" : "");
    } else {
        fact_add(d, "cpu.simd", "none");
        check_add(d, LV_WARN, "simd path", "a default session cannot start: %s", err);
    }
    struct utsname u;
    if (uname(&u) == 0) {
        snprintf(buf, sizeof buf, "%s %s %s", u.sysname, u.release, u.machine);
        fact_add(d, "os", buf);
        check_add(d, LV_INFO, "os", "%s", buf);
    }
#ifdef __GLIBC__
    snprintf(buf, sizeof buf, "glibc %s", gnu_get_libc_version());
#else
    snprintf(buf, sizeof buf, "not glibc");
#endif
    fact_add(d, "libc", buf);
    check_add(d, LV_INFO, "libc", "%s", buf);
}

/* ---- CUDA ---------------------------------------------------------------------- */

static void device_facts(doctor *d, const cuda_info *ci)
{
    level dev_lv = d->profile == DI_PROFILE_DEVICE ? LV_WARN : LV_INFO;
    char buf[256];
    snprintf(buf, sizeof buf, "%d", ci->n_devices);
    fact_add(d, "gpu.count", buf);
    if (ci->n_devices == 0) {
        fact_add(d, "gpu.name", "none");
        return;
    }
    for (int i = 0; i < ci->n_devices && i < CUDA_MAX_DEVICES; i++) {
        const cuda_device *g = &ci->devices[i];
        if (i == 0) { /* the device sessions use first */
            fact_add(d, "gpu.name", g->name);
            snprintf(buf, sizeof buf, "%d.%d", g->cc_major, g->cc_minor);
            fact_add(d, "gpu.compute_capability", buf);
            snprintf(buf, sizeof buf, "%d", g->sm_count);
            fact_add(d, "gpu.sm_count", buf);
            fact_add(d, "gpu.uuid", g->uuid);
            fact_add(d, "gpu.ecc", g->ecc ? "on" : "off");
        }
        check_add(d, LV_INFO, "gpu", "#%d %s, compute capability %d.%d, %d SMs, %.1f GiB, %s", i, g->name,
                  g->cc_major, g->cc_minor, g->sm_count, (double)g->memory / (1024.0 * 1024 * 1024), g->uuid);
        if (g->ecc)
            check_add(d, LV_OK, "gpu ecc", "#%d ECC on", i);
        else
            check_add(d, dev_lv, "gpu ecc", "#%d ECC off: a memory error would go unnoticed", i);
        if (g->compute_mode != 0)
            check_add(d, LV_INFO, "gpu compute mode", "#%d mode %d (not the default shared mode)", i,
                      g->compute_mode);
    }
}

static void driver_checks(doctor *d, const cuda_info *ci)
{
    char drv[32], rt[32];
    cuda_version_text(ci->driver_version, drv, sizeof drv);
    cuda_version_text(ci->runtime_version, rt, sizeof rt);
    if (!ci->driver.found) {
        fact_add(d, "cuda.driver", "none");
        check_add(d, d->profile == DI_PROFILE_DEVICE ? LV_WARN : LV_INFO, "cuda driver",
                  "not found (%s)%s", ci->driver.path,
                  d->profile == DI_PROFILE_DEVICE ? "" : ": no GPU here; the portable profile needs none");
    } else {
        fact_add(d, "cuda.driver", drv);
        check_add(d, ci->init_status ? LV_WARN : LV_OK, "cuda driver", "%s (%s)%s%s", drv, ci->driver.path,
                  ci->init_status ? "; cuInit failed: " : "", ci->init_status ? ci->init_error : "");
    }
    fact_add(d, "cuda.runtime", ci->runtime.found ? rt : "none");
    if (!ci->runtime.found)
        check_add(d, LV_INFO, "cuda runtime", "not found");
    else if (ci->driver.found && ci->driver_version && ci->runtime_version > ci->driver_version)
        check_add(d, LV_WARN, "cuda runtime", "%s (%s) is newer than the driver %s: kernels will not launch", rt,
                  ci->runtime.path, drv);
    else
        check_add(d, LV_INFO, "cuda runtime", "%s (%s)", rt, ci->runtime.path);
}

static void library_checks(doctor *d, const cuda_info *ci)
{
    char buf[64], built[32];
    int rt_major = ci->runtime_version / 1000;
    if (ci->cublas.found) {
        snprintf(buf, sizeof buf, "%d.%d.%d", ci->cublas_version[0], ci->cublas_version[1], ci->cublas_version[2]);
        fact_add(d, "cublas.version", buf);
        int off = rt_major && ci->cublas_version[0] && ci->cublas_version[0] != rt_major;
        check_add(d, off ? LV_WARN : LV_INFO, "cublas", "%s (%s)%s", buf, ci->cublas.path,
                  off ? ": a different CUDA major version than the runtime" : "");
    } else {
        fact_add(d, "cublas.version", "none");
        check_add(d, LV_INFO, "cublas", "not found");
    }
    if (ci->cudnn.found) {
        cudnn_version_text(ci->cudnn_version, buf, sizeof buf);
        cuda_version_text((int)ci->cudnn_cudart, built, sizeof built);
        fact_add(d, "cudnn.version", buf);
        int off = rt_major && ci->cudnn_cudart && (int)ci->cudnn_cudart / 1000 != rt_major;
        check_add(d, off ? LV_WARN : LV_INFO, "cudnn", "%s, built for CUDA %s (%s)%s", buf, built, ci->cudnn.path,
                  off ? ": not the runtime's major version" : "");
    } else {
        fact_add(d, "cudnn.version", "none");
        check_add(d, LV_INFO, "cudnn", "not found");
    }
}

/* Settings that change what vendor libraries compute. */
static void env_checks(doctor *d)
{
    int device = d->profile == DI_PROFILE_DEVICE;
    const char *ws = getenv("CUBLAS_WORKSPACE_CONFIG");
    fact_add(d, "env.CUBLAS_WORKSPACE_CONFIG", ws ? ws : "unset");
    if (!device)
        check_add(d, LV_INFO, "CUBLAS_WORKSPACE_CONFIG", "%s (only the device profile uses cuBLAS)",
                  ws ? ws : "unset");
    else if (ws && (!strcmp(ws, ":4096:8") || !strcmp(ws, ":16:8")))
        check_add(d, LV_OK, "CUBLAS_WORKSPACE_CONFIG", "%s (a fixed workspace per stream)", ws);
    else
        check_add(d, LV_WARN, "CUBLAS_WORKSPACE_CONFIG",
                  "%s: set :4096:8 (or :16:8) so cuBLAS keeps a fixed workspace and reproducible results",
                  ws ? ws : "unset");
    const char *tf32 = getenv("NVIDIA_TF32_OVERRIDE");
    fact_add(d, "env.NVIDIA_TF32_OVERRIDE", tf32 ? tf32 : "unset");
    if (tf32)
        check_add(d, device ? LV_WARN : LV_INFO, "NVIDIA_TF32_OVERRIDE",
                  "%s: changes cuBLAS/cuDNN math; keep it the same on every machine", tf32);
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    fact_add(d, "env.CUDA_VISIBLE_DEVICES", visible ? visible : "unset");
    const char *perturb = getenv("DETINFER_TEST_PERTURB");
    if (perturb && *perturb)
        check_add(d, LV_WARN, "DETINFER_TEST_PERTURB",
                  "%s: a test-only fault injection of 'detinfer verify'; never set it in production", perturb);
    const char *preload = getenv("LD_PRELOAD");
    if (preload && *preload)
        check_add(d, LV_WARN, "LD_PRELOAD", "%s: preloaded code can replace math functions", preload);
}

static void collect(doctor *d)
{
    library_facts(d);
    float_facts(d);
    host_facts(d);
    cuda_info ci;
    cuda_probe(&ci);
    driver_checks(d, &ci);
    library_checks(d, &ci);
    device_facts(d, &ci);
    env_checks(d);
}

/* With --model: the fingerprint the library itself reports for a session of
 * the chosen backend (di_session_backend_info), or why it could not open one. */
static void session_checks(doctor *d, const char *model_path, const cli_session_opts *so)
{
    di_model *model = NULL;
    di_session *s = NULL;
    char err[512] = "";
    di_status st = di_model_load(model_path, &model, err, sizeof err);
    if (!st)
        st = cli_open_session(model, so, &s, err, sizeof err);
    if (st) {
        check_add(d, LV_WARN, "session", "%s backend, %s profile: %s: %s", cli_backend_name(so->backend),
                  cli_profile_name(so->profile), di_status_name(st), err);
    } else {
        fact_add(d, "session.backend_info", di_session_backend_info(s));
        check_add(d, LV_OK, "session", "%s", di_session_backend_info(s));
    }
    di_session_free(s);
    di_model_free(model);
}

/* ---- Fingerprint ------------------------------------------------------------- */

static int fact_order(const void *a, const void *b)
{
    return strcmp(((const fact *)a)->key, ((const fact *)b)->key);
}

/* Digest of the canonical text of the facts in the profile's scope. */
static di_status fingerprint(const fact *facts, int n, di_profile profile, di_digest *out)
{
    fact sorted[MAX_FACTS];
    int m = 0;
    for (int i = 0; i < n; i++)
        if (in_digest(facts[i].key, profile))
            sorted[m++] = facts[i];
    qsort(sorted, (size_t)m, sizeof *sorted, fact_order);
    char text[MAX_FACTS * 320];
    size_t len = 0;
    for (int i = 0; i < m; i++)
        len += (size_t)snprintf(text + len, sizeof text - len, "%s=%s\n", sorted[i].key, sorted[i].value);
    while (len % 4)
        text[len++] = '\n'; /* so the text itself is what is hashed */
    return cli_digest_bytes(text, len, out);
}

di_status doctor_fingerprint(di_profile profile, di_digest *out)
{
    doctor *d = calloc(1, sizeof *d);
    if (!d)
        return DI_ERR_OUT_OF_MEMORY;
    d->profile = profile;
    collect(d);
    const di_status st = fingerprint(d->facts, d->n_facts, profile, out);
    free(d);
    return st;
}

static const char *fact_get(const fact *facts, int n, const char *key)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(facts[i].key, key))
            return facts[i].value;
    return NULL;
}

static int save(const doctor *d, const char *path, const di_digest *fp)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "detinfer doctor: cannot write '%s': %s\n", path, strerror(errno));
        return CLI_EXIT_FAIL;
    }
    char hex[DI_DIGEST_HEX_SIZE];
    cli_hex(fp, hex);
    fprintf(f, "# detinfer doctor fingerprint, profile %s, digest %s\n", cli_profile_name(d->profile), hex);
    for (int i = 0; i < d->n_facts; i++)
        fprintf(f, "%s=%s\n", d->facts[i].key, d->facts[i].value);
    int bad = ferror(f);
    if (fclose(f) || bad) {
        fprintf(stderr, "detinfer doctor: writing '%s' failed\n", path);
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}

static int load(const char *path, fact *facts, int *n)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "detinfer doctor: cannot read '%s': %s\n", path, strerror(errno));
        return CLI_EXIT_FAIL;
    }
    char line[1024];
    *n = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        char *eq = strchr(line, '=');
        if (line[0] == '#' || !line[0] || !eq)
            continue;
        *eq = '\0';
        add_fact(facts, n, line, eq + 1);
    }
    fclose(f);
    if (!fact_get(facts, *n, "profile")) {
        fprintf(stderr, "detinfer doctor: '%s' is not a fingerprint saved by 'detinfer doctor --save'\n", path);
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}

/* A key of either side, with both values (NULL when a side lacks it). */
typedef struct difference {
    const char *key, *here, *there;
} difference;

static int differences(const doctor *d, const fact *other, int n_other, difference *out, int max)
{
    int n = 0;
    for (int i = 0; i < d->n_facts && n < max; i++) {
        const char *there = fact_get(other, n_other, d->facts[i].key);
        if (!there || strcmp(there, d->facts[i].value))
            out[n++] = (difference){d->facts[i].key, d->facts[i].value, there};
    }
    for (int i = 0; i < n_other && n < max; i++)
        if (!fact_get(d->facts, d->n_facts, other[i].key))
            out[n++] = (difference){other[i].key, NULL, other[i].value};
    return n;
}

typedef struct comparison {
    int promised, comparable;
    difference diff[2 * MAX_FACTS];
    int n_diff;
    di_digest theirs;
} comparison;

static int compare(const doctor *d, const char *path, comparison *c)
{
    fact other[MAX_FACTS];
    int n_other;
    int rc = load(path, other, &n_other);
    if (rc)
        return rc;
    const char *their_profile = fact_get(other, n_other, "profile");
    c->comparable = !strcmp(their_profile, cli_profile_name(d->profile));
    c->n_diff = differences(d, other, n_other, c->diff, 2 * MAX_FACTS);
    fingerprint(other, n_other, strcmp(their_profile, "device") ? DI_PROFILE_PORTABLE : DI_PROFILE_DEVICE,
                &c->theirs);
    c->promised = c->comparable;
    for (int i = 0; i < c->n_diff; i++)
        if (in_digest(c->diff[i].key, d->profile))
            c->promised = 0;
    return CLI_EXIT_OK;
}

/* ---- Output ---------------------------------------------------------------- */

static const char *level_word(level lv)
{
    return lv == LV_OK ? "OK" : lv == LV_WARN ? "WARN" : "INFO";
}

static void print_compare_text(const doctor *d, const char *path, const comparison *c)
{
    char hex[DI_DIGEST_HEX_SIZE];
    cli_hex(&c->theirs, hex);
    printf("\ncompared with %s (fingerprint %s):\n", path, hex);
    for (int i = 0; i < c->n_diff; i++) {
        const difference *x = &c->diff[i];
        int matters = in_digest(x->key, d->profile);
        printf("  %-5s %-28s here %s, there %s%s\n", matters ? "DIFF" : "INFO", x->key, x->here ? x->here : "(absent)",
               x->there ? x->there : "(absent)", matters ? "" : "  (does not change digests in this profile)");
    }
    if (!c->comparable)
        printf("NOT COMPARABLE: the file was taken for another profile; run doctor with its --profile\n");
    else if (c->promised)
        printf("EQUAL DIGESTS PROMISED: the two environments differ in nothing the %s profile depends on\n",
               cli_profile_name(d->profile));
    else
        printf("EQUAL DIGESTS NOT PROMISED: the environments differ in what the %s profile depends on (DIFF above)\n",
               cli_profile_name(d->profile));
}

static void print_text(const doctor *d, const di_digest *fp)
{
    printf("detinfer doctor: environment fingerprint for the %s profile\n", cli_profile_name(d->profile));
    for (int i = 0; i < d->n_checks; i++)
        printf("  %-5s %-24s %s\n", level_word(d->checks[i].lv), d->checks[i].name, d->checks[i].text);
    char hex[DI_DIGEST_HEX_SIZE];
    cli_hex(fp, hex);
    printf("fingerprint (%s profile): %s\n", cli_profile_name(d->profile), hex);
    printf("  covers:");
    for (int i = 0; i < d->n_facts; i++)
        if (in_digest(d->facts[i].key, d->profile))
            printf(" %s", d->facts[i].key);
    if (d->profile != DI_PROFILE_DEVICE)
        printf("\n  (CPU, GPU, OS and CUDA versions do not change digests in the %s profile)\n",
               cli_profile_name(d->profile));
    else
        printf("\n  (the device profile's digests also depend on the GPU model and CUDA library versions)\n");
}

static json_t *compare_json(const doctor *d, const char *path, const comparison *c)
{
    json_t *differences = json_array();
    for (int i = 0; i < c->n_diff; i++)
        differences = cli_json_push(differences,
                                    json_pack("{s:s, s:o, s:o, s:b}", "key", c->diff[i].key, "here",
                                              cli_json_text(c->diff[i].here), "there", cli_json_text(c->diff[i].there),
                                              "matters", in_digest(c->diff[i].key, d->profile)));
    return json_pack("{s:o, s:o, s:b, s:b, s:o}", "file", cli_json_text(path), "fingerprint",
                     cli_json_digest(&c->theirs), "comparable", c->comparable, "equal_digests_promised", c->promised,
                     "differences", differences);
}

static int print_json(const doctor *d, const di_digest *fp, const char *path, const comparison *c)
{
    json_t *checks = json_array(), *facts = json_object(), *keys = json_array();
    for (int i = 0; i < d->n_checks; i++)
        checks = cli_json_push(checks, json_pack("{s:s, s:s, s:o}", "status", level_word(d->checks[i].lv), "name",
                                                 d->checks[i].name, "detail", cli_json_text(d->checks[i].text)));
    for (int i = 0; i < d->n_facts; i++)
        facts = cli_json_set(facts, d->facts[i].key, cli_json_text(d->facts[i].value));
    for (int i = 0; i < d->n_facts; i++)
        if (in_digest(d->facts[i].key, d->profile))
            keys = cli_json_push(keys, json_string(d->facts[i].key));
    json_t *root = json_pack("{s:s, s:s, s:o, s:o, s:o, s:o}", "command", "doctor", "profile",
                             cli_profile_name(d->profile), "checks", checks, "facts", facts, "fingerprint_keys", keys,
                             "fingerprint", cli_json_digest(fp));
    if (path)
        root = cli_json_set(root, "compare", compare_json(d, path, c));
    return cli_json_emit(&command, root, stdout);
}

typedef struct doctor_opts {
    const char *save_path, *compare_path, *model_path;
    int json, strict;
    di_profile profile;
    cli_session_opts session; /* with --model */
} doctor_opts;

static int apply_option(int k, const char *v, void *opts)
{
    doctor_opts *o = opts;
    const char *name = options[k].name;
    switch (k) {
    case OPT_PROFILE: return cli_parse_profile(&command, name, v, &o->profile);
    case OPT_JSON: o->json = 1; return 1;
    case OPT_SAVE: o->save_path = v; return 1;
    case OPT_COMPARE: o->compare_path = v; return 1;
    case OPT_STRICT: o->strict = 1; return 1;
    case OPT_MODEL: o->model_path = v; return 1;
    case OPT_BACKEND: return cli_parse_backend(&command, name, v, &o->session.backend);
    case OPT_DEVICE: return cli_parse_device(&command, name, v, &o->session.device);
    }
    return 0;
}

int cli_cmd_doctor(int argc, char **argv)
{
    doctor_opts o = {.profile = CLI_DEFAULT_PROFILE, /* the profile the other tools run by default */
                     .session = {.backend = DI_BACKEND_CPU, .profile = CLI_DEFAULT_PROFILE, .threads = 1,
                                 .max_sequences = 1, .context_length = 16}};
    int rc = cli_parse_options(&command, argc, argv, apply_option, &o, NULL);
    if (rc != CLI_EXIT_OK)
        return rc < 0 ? CLI_EXIT_OK : rc;
    doctor *d = calloc(1, sizeof *d);
    comparison *c = calloc(1, sizeof *c);
    rc = !d || !c ? cli_fail(&command, "allocating", DI_ERR_OUT_OF_MEMORY, "") : CLI_EXIT_OK;
    if (d)
        d->profile = o.profile;
    di_digest fp;
    if (rc == CLI_EXIT_OK) {
        collect(d);
        o.session.profile = d->profile;
        if (o.model_path)
            session_checks(d, o.model_path, &o.session);
        fingerprint(d->facts, d->n_facts, d->profile, &fp);
        if (o.compare_path)
            rc = compare(d, o.compare_path, c);
    }
    if (rc == CLI_EXIT_OK) {
        if (o.json) {
            rc = print_json(d, &fp, o.compare_path, c);
        } else {
            print_text(d, &fp);
            if (o.compare_path)
                print_compare_text(d, o.compare_path, c);
        }
        if (rc == CLI_EXIT_OK && o.save_path)
            rc = save(d, o.save_path, &fp);
        if (rc == CLI_EXIT_OK && o.compare_path && !c->promised)
            rc = CLI_EXIT_FAIL;
        for (int i = 0; rc == CLI_EXIT_OK && o.strict && i < d->n_checks; i++)
            if (d->checks[i].lv == LV_WARN)
                rc = CLI_EXIT_FAIL;
    }
    free(d);
    free(c);
    return rc < 0 ? CLI_EXIT_OK : rc;
}
