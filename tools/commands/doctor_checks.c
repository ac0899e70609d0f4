/*
 * doctor_checks.c — the OK/INFO/WARN lines of `detinfer doctor`:
 * what each fact of the fingerprint means for determinism here, and with
 * --model what the library reports for a session.
 */
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands/doctor.h"

static void check_add(doctor *d, doctor_level lv, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void check_add(doctor *d, doctor_level lv, const char *name, const char *fmt, ...)
{
    if (d->n_checks == DOCTOR_MAX_CHECKS)
        return;
    doctor_check *c = &d->checks[d->n_checks++];
    c->lv = lv;
    snprintf(c->name, sizeof c->name, "%s", name);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->text, sizeof c->text, fmt, ap);
    va_end(ap);
}

/* The value of a fact the collection always adds ("" if it did not). */
static const char *fact(const doctor *d, const char *key)
{
    const char *v = cli_facts_get(&d->facts, key);
    return v ? v : "";
}

/* ---- The library ------------------------------------------------------------ */

static void library_checks(doctor *d)
{
    const char *revision = fact(d, "library.revision"), *backends = fact(d, "library.backends");
    const char *cc = fact(d, "library.compiler");
    char flags[256];
    cli_build_info_part("flags ", flags, sizeof flags);
    if (di_version_number() == DI_VERSION_NUMBER)
        check_add(d, LV_OK, "library", "libdetinfer %s (revision %s, ABI %d), the version this tool was built with",
                  di_version_string(), revision, DI_ABI_VERSION);
    else
        check_add(d, LV_WARN, "library", "libdetinfer %s (revision %s) loaded, but this tool was built with header %s",
                  di_version_string(), revision, DI_VERSION_STRING);
    if (!strcmp(fact(d, "library.fast_math"), "yes"))
        check_add(d, LV_WARN, "build flags", "%s: a fast-math build may reorder and contract float operations", flags);
    else if (strcmp(fact(d, "library.fp_contract"), "off"))
        check_add(d, LV_WARN, "build flags", "%s: -ffp-contract=off not recorded; fused a*b+c may differ", flags);
    else
        check_add(d, LV_OK, "build flags", "%s (no fast-math, no implicit contraction)", flags);
    check_add(d, LV_INFO, "compiler", "cc %s", cc[0] ? cc : "unknown");
    check_add(d, LV_INFO, "numerics", "%s; backends in this build: %s", fact(d, "library.numerics"),
              backends[0] ? backends : "unknown");
    if (strstr(di_build_info(), "sanitize"))
        check_add(d, LV_INFO, "sanitizers", "the library is instrumented (a test build; slower, same digests)");
    if (d->profile == DI_PROFILE_DEVICE && !strstr(backends, "cuda"))
        check_add(d, LV_WARN, "device profile", "this build has no CUDA backend (backends: %s)", backends);
}

/* ---- Floating point, CPU and OS ---------------------------------------------- */

static void host_checks(doctor *d)
{
    int nearest = !strcmp(fact(d, "float.rounding"), "nearest");
    int flushed = !strcmp(fact(d, "float.denormals"), "flushed");
    int fused = !strcmp(fact(d, "libm.fmaf"), "fused");
    check_add(d, LV_INFO, "floating point", "host state: %s, denormals %s, libm fmaf %s (does not affect results: "
              "the library pins its own per call)", nearest ? "round to nearest" : "rounding NOT to nearest",
              flushed ? "FLUSHED (FTZ/DAZ: a fast-math library may be loaded)" : "kept",
              fused ? "fused" : "not fused");
    long online = strtol(fact(d, "cpu.count"), NULL, 10);
    cpu_set_t set;
    int usable = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : (int)online;
    check_add(d, LV_INFO, "cpu", "%s; %ld logical CPUs, %d usable by this process", fact(d, "cpu.model"), online,
              usable);
    /* The path a default session takes, as the library decides it (with
     * --model, di_session_backend_info names it too). */
    di_cpu_path path;
    char err[256] = "";
    if (di_cpu_path_resolve(DI_CPU_PATH_AUTO, &path, err, sizeof err) == DI_OK)
        check_add(d, LV_INFO, "simd path", "%s%s (scalar, avx2 and avx512 give the same bits)", di_cpu_path_name(path),
                  getenv("DETINFER_CPU_PATH") && *getenv("DETINFER_CPU_PATH") ? ", from DETINFER_CPU_PATH" : "");
    else
        check_add(d, LV_WARN, "simd path", "a default session cannot start: %s", err);
    const char *os = cli_facts_get(&d->facts, "os");
    if (os)
        check_add(d, LV_INFO, "os", "%s", os);
    check_add(d, LV_INFO, "libc", "%s", fact(d, "libc"));
}

/* ---- CUDA ---------------------------------------------------------------------- */

static void driver_checks(doctor *d, const cli_cuda_info *ci)
{
    const char *drv = fact(d, "cuda.driver"), *rt = fact(d, "cuda.runtime");
    if (!ci->driver.found)
        check_add(d, d->profile == DI_PROFILE_DEVICE ? LV_WARN : LV_INFO, "cuda driver",
                  "not found (%s)%s", ci->driver.path,
                  d->profile == DI_PROFILE_DEVICE ? "" : ": no GPU here; the portable profile needs none");
    else
        check_add(d, ci->init_status ? LV_WARN : LV_OK, "cuda driver", "%s (%s)%s%s", drv, ci->driver.path,
                  ci->init_status ? "; cuInit failed: " : "", ci->init_status ? ci->init_error : "");
    if (!ci->runtime.found)
        check_add(d, LV_INFO, "cuda runtime", "not found");
    else if (ci->driver.found && ci->driver_version && ci->runtime_version > ci->driver_version)
        check_add(d, LV_WARN, "cuda runtime", "%s (%s) is newer than the driver %s: kernels will not launch", rt,
                  ci->runtime.path, drv);
    else
        check_add(d, LV_INFO, "cuda runtime", "%s (%s)", rt, ci->runtime.path);
}

static void vendor_library_checks(doctor *d, const cli_cuda_info *ci)
{
    char built[32];
    int rt_major = ci->runtime_version / 1000;
    if (ci->cublas.found) {
        int off = rt_major && ci->cublas_version[0] && ci->cublas_version[0] != rt_major;
        check_add(d, off ? LV_WARN : LV_INFO, "cublas", "%s (%s)%s", fact(d, "cublas.version"), ci->cublas.path,
                  off ? ": a different CUDA major version than the runtime" : "");
    } else {
        check_add(d, LV_INFO, "cublas", "not found");
    }
    if (ci->cudnn.found) {
        cli_cuda_version_text((int)ci->cudnn_cudart, built, sizeof built);
        int off = rt_major && ci->cudnn_cudart && (int)ci->cudnn_cudart / 1000 != rt_major;
        check_add(d, off ? LV_WARN : LV_INFO, "cudnn", "%s, built for CUDA %s (%s)%s", fact(d, "cudnn.version"),
                  built, ci->cudnn.path, off ? ": not the runtime's major version" : "");
    } else {
        check_add(d, LV_INFO, "cudnn", "not found");
    }
}

static void device_checks(doctor *d, const cli_cuda_info *ci)
{
    doctor_level dev_lv = d->profile == DI_PROFILE_DEVICE ? LV_WARN : LV_INFO;
    for (int i = 0; i < ci->n_devices && i < CLI_CUDA_MAX_DEVICES; i++) {
        const cli_cuda_device *g = &ci->devices[i];
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

/* Settings that change what vendor libraries compute, or what runs. */
static void env_checks(doctor *d)
{
    int device = d->profile == DI_PROFILE_DEVICE;
    const char *ws = getenv("CUBLAS_WORKSPACE_CONFIG");
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
    if (tf32)
        check_add(d, device ? LV_WARN : LV_INFO, "NVIDIA_TF32_OVERRIDE",
                  "%s: changes cuBLAS/cuDNN math; keep it the same on every machine", tf32);
    const char *perturb = getenv("DETINFER_TEST_PERTURB");
    if (perturb && *perturb)
        check_add(d, LV_WARN, "DETINFER_TEST_PERTURB",
                  "%s: a test-only fault injection of 'detinfer verify'; never set it in production", perturb);
    const char *preload = getenv("LD_PRELOAD");
    if (preload && *preload)
        check_add(d, LV_WARN, "LD_PRELOAD", "%s: preloaded code can replace math functions", preload);
}

void doctor_checks(doctor *d, const cli_cuda_info *ci)
{
    library_checks(d);
    host_checks(d);
    driver_checks(d, ci);
    vendor_library_checks(d, ci);
    device_checks(d, ci);
    env_checks(d);
}

/* With --model: the fingerprint the library itself reports for a session of
 * the chosen backend (di_session_backend_info), or why it could not open one. */
void doctor_session_checks(doctor *d, const char *model_path, const cli_session_opts *so)
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
        cli_facts_add(&d->facts, "session.backend_info", di_session_backend_info(s));
        check_add(d, LV_OK, "session", "%s", di_session_backend_info(s));
    }
    di_session_free(s);
    di_model_free(model);
}
