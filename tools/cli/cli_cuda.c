/*
 * cli_cuda.c — CUDA facts through dlopen/dlsym (see cli_cuda.h).
 * The prototypes below are declared here with plain C types: CUresult,
 * cudaError_t, cublasStatus_t are ints, CUdevice is an int, CUuuid is 16
 * bytes, libraryPropertyType an int enum. The libraries stay loaded until
 * the process exits (unloading the driver after cuInit is not safe).
 */
#include "cli/cli_cuda.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

typedef int (*cu_init_fn)(unsigned flags);
typedef int (*cu_int_out_fn)(int *value);
typedef int (*cu_device_get_fn)(int *device, int ordinal);
typedef int (*cu_device_name_fn)(char *name, int len, int device);
typedef int (*cu_device_attribute_fn)(int *value, int attribute, int device);
typedef int (*cu_device_uuid_fn)(unsigned char uuid[16], int device);
typedef int (*cu_device_mem_fn)(size_t *bytes, int device);
typedef int (*cu_error_name_fn)(int error, const char **name);
typedef int (*cublas_property_fn)(int type, int *value);
typedef size_t (*cudnn_version_fn)(void);

/* CUdevice_attribute values (cuda.h; numbered and stable) */
enum { ATTR_COMPUTE_MODE = 20, ATTR_SM_COUNT = 16, ATTR_ECC = 32, ATTR_CC_MAJOR = 75, ATTR_CC_MINOR = 76 };

/* The first of names that loads; its file name (or the last error) in lib->path. */
static void *open_first(const char *const *names, cli_cuda_lib *lib)
{
    for (; *names; names++) {
        void *h = dlopen(*names, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *e = dlerror();
            snprintf(lib->path, sizeof lib->path, "%s", e ? e : *names);
            continue;
        }
        struct link_map *map = NULL;
        if (dlinfo(h, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name)
            snprintf(lib->path, sizeof lib->path, "%s", map->l_name);
        else
            snprintf(lib->path, sizeof lib->path, "%s", *names);
        lib->found = 1;
        return h;
    }
    return NULL;
}

/* dlsym into a function pointer without a cast from void * (ISO C). */
static int sym(void *h, const char *name, void *fn_ptr, size_t size)
{
    void *p = h ? dlsym(h, name) : NULL;
    if (p)
        memcpy(fn_ptr, &p, size);
    return p != NULL;
}

static void probe_device(void *h, int ordinal, cli_cuda_device *d)
{
    cu_device_get_fn get;
    cu_device_name_fn name;
    cu_device_attribute_fn attr;
    cu_device_uuid_fn uuid;
    cu_device_mem_fn mem;
    int dev = 0;
    if (!sym(h, "cuDeviceGet", &get, sizeof get) || get(&dev, ordinal))
        return;
    if (sym(h, "cuDeviceGetName", &name, sizeof name))
        name(d->name, (int)sizeof d->name, dev);
    if (sym(h, "cuDeviceGetAttribute", &attr, sizeof attr)) {
        attr(&d->cc_major, ATTR_CC_MAJOR, dev);
        attr(&d->cc_minor, ATTR_CC_MINOR, dev);
        attr(&d->sm_count, ATTR_SM_COUNT, dev);
        attr(&d->ecc, ATTR_ECC, dev);
        attr(&d->compute_mode, ATTR_COMPUTE_MODE, dev);
    }
    unsigned char u[16];
    if ((sym(h, "cuDeviceGetUuid_v2", &uuid, sizeof uuid) || sym(h, "cuDeviceGetUuid", &uuid, sizeof uuid)) &&
        uuid(u, dev) == 0)
        snprintf(d->uuid, sizeof d->uuid,
                 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2],
                 u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
    if (sym(h, "cuDeviceTotalMem_v2", &mem, sizeof mem))
        mem(&d->memory, dev);
}

static void probe_driver(cli_cuda_info *info)
{
    static const char *const names[] = {"libcuda.so.1", NULL};
    void *h = open_first(names, &info->driver);
    cu_int_out_fn version, count;
    cu_init_fn init;
    cu_error_name_fn error_name;
    if (!h)
        return;
    if (sym(h, "cuDriverGetVersion", &version, sizeof version))
        version(&info->driver_version);
    if (!sym(h, "cuInit", &init, sizeof init))
        return;
    info->init_status = init(0);
    const char *ename = NULL;
    if (info->init_status && sym(h, "cuGetErrorName", &error_name, sizeof error_name))
        error_name(info->init_status, &ename);
    snprintf(info->init_error, sizeof info->init_error, "%s", ename ? ename : info->init_status ? "error" : "");
    if (info->init_status || !sym(h, "cuDeviceGetCount", &count, sizeof count) || count(&info->n_devices))
        return;
    for (int i = 0; i < info->n_devices && i < CLI_CUDA_MAX_DEVICES; i++)
        probe_device(h, i, &info->devices[i]);
}

static void probe_runtime(cli_cuda_info *info)
{
    static const char *const names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so",
                                        NULL};
    void *h = open_first(names, &info->runtime);
    cu_int_out_fn version;
    if (sym(h, "cudaRuntimeGetVersion", &version, sizeof version))
        version(&info->runtime_version);
}

static void probe_cublas(cli_cuda_info *info)
{
    static const char *const names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so",
                                        NULL};
    void *h = open_first(names, &info->cublas);
    cublas_property_fn prop;
    if (sym(h, "cublasGetProperty", &prop, sizeof prop))
        for (int i = 0; i < 3; i++) /* MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL */
            prop(i, &info->cublas_version[i]);
}

static void probe_cudnn(cli_cuda_info *info)
{
    static const char *const names[] = {"libcudnn.so.9", "libcudnn.so.8", "libcudnn.so", NULL};
    void *h = open_first(names, &info->cudnn);
    cudnn_version_fn version;
    if (sym(h, "cudnnGetVersion", &version, sizeof version))
        info->cudnn_version = version();
    if (sym(h, "cudnnGetCudartVersion", &version, sizeof version))
        info->cudnn_cudart = version();
}

void cli_cuda_probe(cli_cuda_info *info)
{
    memset(info, 0, sizeof *info);
    probe_driver(info);
    probe_runtime(info);
    probe_cublas(info);
    probe_cudnn(info);
}

void cli_cuda_version_text(int version, char *out, size_t n)
{
    if (version <= 0)
        snprintf(out, n, "unknown");
    else
        snprintf(out, n, "%d.%d", version / 1000, version % 1000 / 10);
}

void cli_cudnn_version_text(size_t version, char *out, size_t n)
{
    if (version == 0)
        snprintf(out, n, "unknown");
    else if (version >= 90000) /* 9.x: major*10000 + minor*100 + patch */
        snprintf(out, n, "%zu.%zu.%zu", version / 10000, version / 100 % 100, version % 100);
    else /* 8.x and earlier: major*1000 + minor*100 + patch */
        snprintf(out, n, "%zu.%zu.%zu", version / 1000, version / 100 % 10, version % 100);
}
