/*
 * cooperative.c — whether a cooperative grid fits: NVIDIA's driver refuses a
 * cooperative launch of more blocks than the device holds at once
 * (cuOccupancyMaxActiveBlocksPerMultiprocessor times its multiprocessors)
 * with CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, from the launch itself. The
 * launch is one-way here, so the interposer asks the serving device the
 * occupancy of the grid's shape (one waiting call) and answers at once; the
 * server checks again (it never trusts the client's check).
 *
 * State: the last answers, keyed by function, block size and dynamic shared
 * memory, so that a program that launches the same cooperative kernel in a
 * loop asks once. A function handle is never minted twice in a session, so
 * an answer cannot be stale; the table is guarded by one mutex.
 */
#include <pthread.h>

#include "gl_client_gen.h"
#include "internal.h"

#define SLOTS 64

typedef struct {
    uint64_t func, threads, shared;
    int per_sm; /* 0: empty */
} answer;

static answer g_answers[SLOTS];
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned slot_of(uint64_t func, uint64_t threads, uint64_t shared)
{
    uint64_t h = func * 0x9E3779B97F4A7C15ull ^ threads * 0xC2B2AE3D27D4EB4Full ^ shared;
    return (unsigned)(h >> 58) % SLOTS;
}

static CUresult per_sm(CUfunction f, uint64_t threads, unsigned shared, int ptds, int *out)
{
    uint64_t key = (uint64_t)(uintptr_t)f;
    unsigned k = slot_of(key, threads, shared);
    pthread_mutex_lock(&g_lock);
    answer a = g_answers[k];
    pthread_mutex_unlock(&g_lock);
    if (a.per_sm > 0 && a.func == key && a.threads == threads && a.shared == shared) {
        *out = a.per_sm;
        return CUDA_SUCCESS;
    }
    CUresult r = glw_cuOccupancyMaxActiveBlocksPerMultiprocessor(out, f, (int)threads, shared,
                                                                 ptds);
    if (r == CUDA_SUCCESS && *out > 0) {
        pthread_mutex_lock(&g_lock);
        g_answers[k] = (answer){key, threads, shared, *out};
        pthread_mutex_unlock(&g_lock);
    }
    return r;
}

CUresult gl_cooperative_fits(CUfunction f, const unsigned grid[3], const unsigned block[3],
                             unsigned shared, int ptds)
{
    uint64_t threads = (uint64_t)block[0] * block[1] * block[2];
    uint64_t blocks = (uint64_t)grid[0] * grid[1] * grid[2];
    int fit = 0, sms = 0;
    CUdevice dev;
    CUresult r = per_sm(f, threads, shared, ptds, &fit);
    if (r == CUDA_SUCCESS && (r = gli_cuCtxGetDevice(&dev, ptds)) == CUDA_SUCCESS)
        r = gli_cuDeviceGetAttribute(&sms, GL_ATTR_MULTIPROCESSOR_COUNT, dev, ptds);
    if (r != CUDA_SUCCESS)
        return r;
    return blocks <= (uint64_t)(fit > 0 ? fit : 0) * (uint64_t)(sms > 0 ? sms : 1)
               ? CUDA_SUCCESS
               : CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
}
