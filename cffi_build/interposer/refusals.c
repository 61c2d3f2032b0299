/*
 * refusals.c — the driver features gleam refuses on purpose, and why. A call
 * of one of them answers CUDA_ERROR_NOT_SUPPORTED like any name gleam does
 * not forward (procaddr.c), but its one stderr line says why, and the device
 * attributes that announce the feature read 0, so a program that asks first
 * takes its other path (docs/cuda-forwarding.md, "Refused on purpose").
 * No state: constant tables.
 */
#include <string.h>

#include "internal.h"

typedef struct {
    const char *const *names; /* exact names, or prefixes ending in '*' */
    const char *why;
} refusal;

/* IPC hands memory and events to another process, which has its own gleam
 * session (and perhaps another server); sessions never see each other's. */
static const char *const IPC[] = {"cuIpc*", "cuMemPoolExport*", "cuMemPoolImport*", NULL};
/* The session's device addresses come from gleam's allocator inside the
 * range its server reserved; memory mapped where the program chooses is
 * not forwarded. */
static const char *const VMM[] = {
    "cuMemAddressReserve", "cuMemAddressFree", "cuMemCreate", "cuMemRelease", "cuMemMap",
    "cuMemMapArrayAsync*", "cuMemUnmap", "cuMemSetAccess", "cuMemGetAccess",
    "cuMemExportToShareableHandle", "cuMemImportFromShareableHandle",
    "cuMemGetAllocationGranularity", "cuMemGetAllocationPropertiesFromHandle",
    "cuMemRetainAllocationHandle", NULL};
/* A session is one context on its server's device. */
static const char *const GREEN[] = {
    "cuGreenCtx*", "cuCtxFromGreenCtx", "cuStreamGetGreenCtx", "cuDevResource*", "cuDevSm*",
    "cuDeviceGetDevResource", "cuCtxGetDevResource", NULL};

static const refusal REFUSALS[] = {
    {IPC, "IPC shares memory and events with another process, and each process has its own "
          "gleam session, which no other can reach"},
    {VMM, "virtual memory management maps memory at addresses the program picks, and a "
          "session's device addresses come from gleam's allocator in the range its server "
          "reserved"},
    {GREEN, "green contexts split a device's multiprocessors between contexts, and a session "
            "is one context on its server's device"},
};

static int matches(const char *pattern, const char *name)
{
    size_t n = strlen(pattern);
    if (n > 0 && pattern[n - 1] == '*')
        return strncmp(pattern, name, n - 1) == 0;
    return strcmp(pattern, name) == 0;
}

const char *gl_refusal_reason(const char *name)
{
    for (size_t r = 0; name != NULL && r < sizeof REFUSALS / sizeof REFUSALS[0]; r++)
        for (const char *const *p = REFUSALS[r].names; *p != NULL; p++)
            if (matches(*p, name))
                return REFUSALS[r].why;
    return NULL;
}

/* Device attributes that announce a refused feature: VIRTUAL_MEMORY_MANAGEMENT
 * (102), the shareable handle types (103-105, 128), the pools' IPC handle
 * types (119), IPC events (125), host-memory VMM (141, 145). A cuda backend's
 * GPU has them; through gleam the program must not count on them. */
int gl_refused_attribute(int attrib)
{
    static const int REFUSED[] = {102, 103, 104, 105, 119, 125, 128, 141, 145};
    for (size_t i = 0; i < sizeof REFUSED / sizeof REFUSED[0]; i++)
        if (REFUSED[i] == attrib)
            return 1;
    return 0;
}
