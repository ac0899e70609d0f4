/*
 * status.c — status names, version and build information.
 */
#include "detinfer.h"

#define DI_STRINGIFY_(x) #x
#define DI_STRINGIFY(x) DI_STRINGIFY_(x)

#ifndef DI_BUILD_FLAGS
#define DI_BUILD_FLAGS "unknown"
#endif

/* The source revision (git describe), which the Makefile writes into
 * di_revision.h; "unknown" outside a git tree (an sdist) or another build. */
#if defined(__has_include)
#if __has_include("di_revision.h")
#include "di_revision.h"
#endif
#endif
#ifndef DI_SOURCE_REVISION
#define DI_SOURCE_REVISION "unknown"
#endif

DI_API const char *di_status_name(di_status status)
{
    switch (status) {
    case DI_OK: return "DI_OK";
    case DI_ERR_INVALID_ARGUMENT: return "DI_ERR_INVALID_ARGUMENT";
    case DI_ERR_OUT_OF_MEMORY: return "DI_ERR_OUT_OF_MEMORY";
    case DI_ERR_IO: return "DI_ERR_IO";
    case DI_ERR_FORMAT: return "DI_ERR_FORMAT";
    case DI_ERR_UNSUPPORTED: return "DI_ERR_UNSUPPORTED";
    case DI_ERR_MODEL: return "DI_ERR_MODEL";
    case DI_ERR_SAMPLING_REFUSED: return "DI_ERR_SAMPLING_REFUSED";
    case DI_ERR_TOKEN_RANGE: return "DI_ERR_TOKEN_RANGE";
    case DI_ERR_CONTEXT_FULL: return "DI_ERR_CONTEXT_FULL";
    case DI_ERR_SEQUENCE: return "DI_ERR_SEQUENCE";
    case DI_ERR_STATE: return "DI_ERR_STATE";
    case DI_ERR_BACKEND_UNAVAILABLE: return "DI_ERR_BACKEND_UNAVAILABLE";
    case DI_ERR_THREAD: return "DI_ERR_THREAD";
    case DI_ERR_UNKNOWN_KEY: return "DI_ERR_UNKNOWN_KEY";
    case DI_ERR_INTERNAL: return "DI_ERR_INTERNAL";
    case DI_ERR_BUFFER_TOO_SMALL: return "DI_ERR_BUFFER_TOO_SMALL";
    case DI_ERR_TEXT: return "DI_ERR_TEXT";
    case DI_ERR_GRAMMAR: return "DI_ERR_GRAMMAR";
    case DI_ERR_GRAMMAR_REJECTED: return "DI_ERR_GRAMMAR_REJECTED";
    }
    return "DI_STATUS_UNKNOWN";
}

DI_API uint32_t di_version_number(void)
{
    return DI_VERSION_NUMBER;
}

DI_API const char *di_version_string(void)
{
    return DI_VERSION_STRING;
}

DI_API const char *di_build_info(void)
{
    return "libdetinfer " DI_VERSION_STRING "; revision " DI_SOURCE_REVISION "; numerics " DI_STRINGIFY(
        DI_NUMERICS_VERSION) "; integer numerics " DI_STRINGIFY(DI_INTEGER_NUMERICS_VERSION) "; cc " __VERSION__ "; flags " DI_BUILD_FLAGS
           "; reduction lanes 32, chunk 1024; profile portable; backends cpu";
}
