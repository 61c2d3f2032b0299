/*
 * device_query.c — what the driver reports about each device: the first thing to run
 * through gleam, since every answer comes from the serving peer's GPU (or its host device).
 *
 * Usage: device_query
 */
#include "common.h"

struct attr {
    const char *key;
    CUdevice_attribute attr;
};

static const struct attr ATTRS[] = {
    {"multiprocessors", CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT},
    {"max_threads_per_block", CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK},
    {"warp_size", CU_DEVICE_ATTRIBUTE_WARP_SIZE},
    {"max_shared_per_block", CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK},
    {"l2_cache_bytes", CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE},
    {"unified_addressing", CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING},
    {"concurrent_kernels", CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS},
};
#define N_ATTRS (sizeof ATTRS / sizeof ATTRS[0])

int main(void)
{
    CHECK(cuInit(0));
    int driver = 0, count = 0;
    CHECK(cuDriverGetVersion(&driver));
    CHECK(cuDeviceGetCount(&count));
    printf("driver %d.%d, %d device(s)\n", driver / 1000, driver % 1000 / 10, count);

    int ok = count >= 1 && driver > 0;
    char json[8192];
    size_t at = 0;
    at += (size_t)snprintf(json + at, sizeof json - at,
                           "{\"example\": \"device_query\", \"driver_version\": %d, \"devices\": [",
                           driver);
    for (int i = 0; i < count && at < sizeof json; ++i) {
        CUdevice dev;
        char name[256];
        size_t total = 0;
        int major = 0, minor = 0;
        CHECK(cuDeviceGet(&dev, i));
        CHECK(cuDeviceGetName(name, (int)sizeof name, dev));
        CHECK(cuDeviceTotalMem(&total, dev));
        /* Attributes rather than cuDeviceComputeCapability, which CUDA 13 removed. */
        CHECK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
        CHECK(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
        ok = ok && total > 0 && major >= 1 && name[0] != '\0';
        /* The name goes into JSON: keep it printable and free of quotes. */
        for (char *c = name; *c; ++c)
            if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20)
                *c = '?';

        printf("device %d: %s, %.1f GiB, compute capability %d.%d\n", i, name,
               (double)total / (1024.0 * 1024.0 * 1024.0), major, minor);
        at += (size_t)snprintf(json + at, sizeof json - at,
                               "%s{\"index\": %d, \"name\": \"%s\", \"total_memory\": %zu, "
                               "\"compute_capability\": \"%d.%d\"",
                               i ? ", " : "", i, name, total, major, minor);
        for (size_t a = 0; a < N_ATTRS && at < sizeof json; ++a) {
            int v = 0;
            CHECK(cuDeviceGetAttribute(&v, ATTRS[a].attr, dev));
            printf("  %-22s %d\n", ATTRS[a].key, v);
            at += (size_t)snprintf(json + at, sizeof json - at, ", \"%s\": %d", ATTRS[a].key, v);
        }
        if (at < sizeof json)
            at += (size_t)snprintf(json + at, sizeof json - at, "}");
    }
    if (at >= sizeof json) {
        fprintf(stderr, "too many devices to report\n");
        return 1;
    }
    printf("%s], \"count\": %d, \"ok\": %s}\n", json, count, ok ? "true" : "false");
    return ok ? 0 : 1;
}
