/*
 * backend_loader.c — finds and loads the CUDA plugin with dlopen, so that
 * libdetinfer.so itself needs no CUDA library (no DT_NEEDED on one) and runs
 * where there is no driver. The plugin is never unloaded: a CUDA runtime
 * that was initialised must not be unmapped while the process runs, and
 * dlopen of an already loaded file only takes a reference.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/backend/backend.h"
#include "lib/base/errors.h"

/* The directory of the object holding this code (libdetinfer.so, or the
 * program it is linked into), with a trailing '/', or "" when unknown. */
static void own_directory(char *dir, size_t size)
{
    Dl_info info;
    dir[0] = '\0';
    if (!dladdr((void *)&di_backend_load_cuda, &info) || !info.dli_fname)
        return;
    const char *slash = strrchr(info.dli_fname, '/');
    if (!slash)
        return;
    const size_t len = (size_t)(slash - info.dli_fname) + 1;
    if (len < size)
        snprintf(dir, size, "%.*s", (int)len, info.dli_fname);
}

/* Checks the plugin's table against the headers this library was built with. */
static di_status check_ops(const di_backend_ops *ops, const char *path, char *errbuf, size_t errbuf_size)
{
    const di_backend_ops want = {DI_BACKEND_OPS_SIZES, .name = NULL};
    if (!ops)
        return di_error(errbuf, errbuf_size, DI_ERR_BACKEND_UNAVAILABLE,
                        "the CUDA plugin %s returned no backend table", path);
    if (ops->abi != want.abi || ops->sizeof_ops != want.sizeof_ops ||
        ops->sizeof_params != want.sizeof_params || ops->sizeof_row != want.sizeof_row ||
        ops->sizeof_model != want.sizeof_model || ops->sizeof_layer != want.sizeof_layer ||
        ops->sizeof_weight != want.sizeof_weight)
        return di_error(errbuf, errbuf_size, DI_ERR_BACKEND_UNAVAILABLE,
                        "the CUDA plugin %s was built for another libdetinfer (backend ABI %u, "
                        "model struct %u bytes; this library: ABI %u, %u bytes)",
                        path, ops->abi, ops->sizeof_model, want.abi, want.sizeof_model);
    if (!ops->create || !ops->destroy || !ops->info || !ops->forward || !ops->logits || !ops->seq_copy)
        return di_error(errbuf, errbuf_size, DI_ERR_BACKEND_UNAVAILABLE,
                        "the CUDA plugin %s has an incomplete backend table", path);
    return DI_OK;
}

static di_status open_plugin(const char *path, const di_backend_ops **out, char *errbuf,
                             size_t errbuf_size)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        return di_error(errbuf, errbuf_size, DI_ERR_BACKEND_UNAVAILABLE,
                        "the CUDA plugin cannot be loaded: %s", e ? e : path);
    }
    di_backend_entry_fn entry;
    void *sym = dlsym(h, DI_BACKEND_ENTRY_NAME);
    memcpy(&entry, &sym, sizeof entry); /* object to function pointer, as POSIX allows */
    if (!sym)
        return di_error(errbuf, errbuf_size, DI_ERR_BACKEND_UNAVAILABLE,
                        "%s is not a libdetinfer CUDA plugin (no %s)", path, DI_BACKEND_ENTRY_NAME);
    const di_backend_ops *ops = entry();
    di_status st = check_ops(ops, path, errbuf, errbuf_size);
    if (st)
        return st;
    *out = ops;
    return DI_OK;
}

di_status di_backend_load_cuda(const di_backend_ops **out, char *errbuf, size_t errbuf_size)
{
    *out = NULL;
    const char *env = getenv("DETINFER_CUDA_PLUGIN");
    if (env && *env) {
        char why[DI_ERRMSG_SIZE] = "";
        di_status st = open_plugin(env, out, why, sizeof why);
        return st ? di_error(errbuf, errbuf_size, st, "DETINFER_CUDA_PLUGIN=%s: %s", env, why) : DI_OK;
    }
    char dir[4096], path[4200], first_error[DI_ERRMSG_SIZE] = "";
    own_directory(dir, sizeof dir);
    if (dir[0]) {
        snprintf(path, sizeof path, "%s%s", dir, DI_CUDA_PLUGIN_SONAME);
        di_status st = open_plugin(path, out, first_error, sizeof first_error);
        if (st == DI_OK || !strstr(first_error, "cannot be loaded"))
            return st ? di_error(errbuf, errbuf_size, st, "%s", first_error) : DI_OK;
    }
    di_status st = open_plugin(DI_CUDA_PLUGIN_SONAME, out, errbuf, errbuf_size);
    if (st && strstr(errbuf ? errbuf : "", "cannot be loaded"))
        return di_error(errbuf, errbuf_size, DI_ERR_BACKEND_UNAVAILABLE,
                        "the CUDA backend is not installed: %s was found neither next to libdetinfer "
                        "(%s) nor on the loader's path; build it with `make cuda` or set "
                        "DETINFER_CUDA_PLUGIN (%s)",
                        DI_CUDA_PLUGIN_SONAME, dir[0] ? dir : "directory unknown",
                        first_error[0] ? first_error : "not found");
    return st;
}
