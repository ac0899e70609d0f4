/*
 * cli_fingerprint.c — the machine's facts (the library, the host's
 * floating point, CPU and OS, CUDA, the environment) and the digest of
 * those a profile depends on (see cli_fingerprint.h).
 */
#include <fenv.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <gnu/libc-version.h>
#endif

#include "cli/cli_digest.h"
#include "cli/cli_fingerprint.h"
#include "cli/cli_options.h"
#include "cli/cli_text.h"

typedef enum scope { SCOPE_INFO, SCOPE_BOTH, SCOPE_DEVICE } scope;

/* Which digests a key is part of (see cli_fingerprint.h). */
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

int cli_fact_in_digest(const char *key, di_profile profile)
{
    scope s = key_scope(key);
    return s == SCOPE_BOTH || (s == SCOPE_DEVICE && profile == DI_PROFILE_DEVICE);
}

void cli_facts_add(cli_facts *facts, const char *key, const char *value)
{
    if (facts->n == CLI_MAX_FACTS)
        return;
    cli_fact *f = &facts->f[facts->n++];
    cli_copy(f->key, sizeof f->key, key);
    /* one line each: newlines would break the canonical text */
    cli_copy(f->value, sizeof f->value, value);
    for (char *c = f->value; *c; c++)
        if (*c == '\n' || *c == '\r')
            *c = ' ';
}

const char *cli_facts_get(const cli_facts *facts, const char *key)
{
    for (int i = 0; i < facts->n; i++)
        if (!strcmp(facts->f[i].key, key))
            return facts->f[i].value;
    return NULL;
}

/* ---- The library ------------------------------------------------------------ */

void cli_build_info_part(const char *prefix, char *out, size_t n)
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

static void library_facts(cli_facts *facts, di_profile profile)
{
    char buf[300], numerics[256], cc[256], backends[64], revision[128];
    const char *info = di_build_info();
    cli_facts_add(facts, "profile", cli_profile_name(profile));
    cli_facts_add(facts, "library.version", di_version_string());
    cli_build_info_part("revision ", revision, sizeof revision); /* not in the fingerprint: equal numerics compare */
    cli_facts_add(facts, "library.revision", revision);
    snprintf(buf, sizeof buf, "%s", DI_VERSION_STRING);
    cli_facts_add(facts, "tool.header_version", buf);
    cli_build_info_part("reduction ", numerics, sizeof numerics);
    snprintf(buf, sizeof buf, "reduction %s", numerics);
    cli_facts_add(facts, "library.numerics", buf);
    cli_build_info_part("cc ", cc, sizeof cc);
    cli_build_info_part("backends ", backends, sizeof backends);
    cli_facts_add(facts, "library.build", info);
    cli_facts_add(facts, "library.compiler", cc);
    cli_facts_add(facts, "library.backends", backends);
    int fast = strstr(info, "fast-math") && !strstr(info, "-fno-fast-math");
    fast |= strstr(info, "-Ofast") != NULL || strstr(info, "-funsafe-math") != NULL ||
            strstr(info, "-ffinite-math") != NULL || strstr(info, "-fassociative-math") != NULL;
    cli_facts_add(facts, "library.fast_math", fast ? "yes" : "no");
    cli_facts_add(facts, "library.fp_contract", strstr(info, "-ffp-contract=off") ? "off" : "unknown");
}

/* ---- Floating point, CPU and OS ---------------------------------------------- */

/* The host's floating-point state, for information: results do not depend
 * on it (see key_scope), but a flushed or non-nearest state says that
 * something in the process (often a fast-math library) changed it. */
static void float_facts(cli_facts *facts)
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
    cli_facts_add(facts, "float.rounding", nearest ? "nearest" : "other");
    cli_facts_add(facts, "float.denormals", ftz || daz ? "flushed" : "kept");
    cli_facts_add(facts, "libm.fmaf", fused ? "fused" : "not-fused");
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

static void host_facts(cli_facts *facts)
{
    char buf[512], model[256];
    cpu_model(model, sizeof model);
    cli_facts_add(facts, "cpu.model", model);
    snprintf(buf, sizeof buf, "%ld", sysconf(_SC_NPROCESSORS_ONLN));
    cli_facts_add(facts, "cpu.count", buf);
    /* The path a default session takes, as the library decides it. */
    di_cpu_path path;
    char err[256] = "";
    int resolved = di_cpu_path_resolve(DI_CPU_PATH_AUTO, &path, err, sizeof err) == DI_OK;
    cli_facts_add(facts, "cpu.simd", resolved ? di_cpu_path_name(path) : "none");
    struct utsname u;
    if (uname(&u) == 0) {
        snprintf(buf, sizeof buf, "%s %s %s", u.sysname, u.release, u.machine);
        cli_facts_add(facts, "os", buf);
    }
#ifdef __GLIBC__
    snprintf(buf, sizeof buf, "glibc %s", gnu_get_libc_version());
#else
    snprintf(buf, sizeof buf, "not glibc");
#endif
    cli_facts_add(facts, "libc", buf);
}

/* ---- CUDA ---------------------------------------------------------------------- */

static void cuda_facts(cli_facts *facts, const cli_cuda_info *ci)
{
    char buf[64];
    cli_cuda_version_text(ci->driver_version, buf, sizeof buf);
    cli_facts_add(facts, "cuda.driver", ci->driver.found ? buf : "none");
    cli_cuda_version_text(ci->runtime_version, buf, sizeof buf);
    cli_facts_add(facts, "cuda.runtime", ci->runtime.found ? buf : "none");
    snprintf(buf, sizeof buf, "%d.%d.%d", ci->cublas_version[0], ci->cublas_version[1], ci->cublas_version[2]);
    cli_facts_add(facts, "cublas.version", ci->cublas.found ? buf : "none");
    cli_cudnn_version_text(ci->cudnn_version, buf, sizeof buf);
    cli_facts_add(facts, "cudnn.version", ci->cudnn.found ? buf : "none");
}

static void device_facts(cli_facts *facts, const cli_cuda_info *ci)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%d", ci->n_devices);
    cli_facts_add(facts, "gpu.count", buf);
    if (ci->n_devices == 0) {
        cli_facts_add(facts, "gpu.name", "none");
        return;
    }
    const cli_cuda_device *g = &ci->devices[0]; /* the device sessions use first */
    cli_facts_add(facts, "gpu.name", g->name);
    snprintf(buf, sizeof buf, "%d.%d", g->cc_major, g->cc_minor);
    cli_facts_add(facts, "gpu.compute_capability", buf);
    snprintf(buf, sizeof buf, "%d", g->sm_count);
    cli_facts_add(facts, "gpu.sm_count", buf);
    cli_facts_add(facts, "gpu.uuid", g->uuid);
    cli_facts_add(facts, "gpu.ecc", g->ecc ? "on" : "off");
}

/* Settings that change what vendor libraries compute. */
static void env_facts(cli_facts *facts)
{
    static const char *const names[] = {"CUBLAS_WORKSPACE_CONFIG", "NVIDIA_TF32_OVERRIDE", "CUDA_VISIBLE_DEVICES",
                                        NULL};
    for (int i = 0; names[i]; i++) {
        char key[48];
        snprintf(key, sizeof key, "env.%s", names[i]);
        const char *value = getenv(names[i]);
        cli_facts_add(facts, key, value ? value : "unset");
    }
}

void cli_facts_collect(cli_facts *facts, di_profile profile, const cli_cuda_info *ci)
{
    library_facts(facts, profile);
    float_facts(facts);
    host_facts(facts);
    cuda_facts(facts, ci);
    device_facts(facts, ci);
    env_facts(facts);
}

/* ---- The digest --------------------------------------------------------------- */

static int fact_order(const void *a, const void *b)
{
    return strcmp(((const cli_fact *)a)->key, ((const cli_fact *)b)->key);
}

di_status cli_facts_digest(const cli_facts *facts, di_profile profile, di_digest *out)
{
    cli_fact sorted[CLI_MAX_FACTS];
    int m = 0;
    for (int i = 0; i < facts->n; i++)
        if (cli_fact_in_digest(facts->f[i].key, profile))
            sorted[m++] = facts->f[i];
    qsort(sorted, (size_t)m, sizeof *sorted, fact_order);
    char text[CLI_MAX_FACTS * 320];
    size_t len = 0;
    for (int i = 0; i < m; i++)
        len += (size_t)snprintf(text + len, sizeof text - len, "%s=%s\n", sorted[i].key, sorted[i].value);
    while (len % 4)
        text[len++] = '\n'; /* so the text itself is what is hashed */
    return cli_digest_bytes(text, len, out);
}

di_status cli_fingerprint(di_profile profile, di_digest *out)
{
    cli_facts *facts = calloc(1, sizeof *facts);
    if (!facts)
        return DI_ERR_OUT_OF_MEMORY;
    cli_cuda_info ci;
    cli_cuda_probe(&ci);
    cli_facts_collect(facts, profile, &ci);
    const di_status st = cli_facts_digest(facts, profile, out);
    free(facts);
    return st;
}
