/*
 * logs.c — the driver's error log (CUDA 12.9's cuLogs* calls) filled with
 * gleam's own messages: why a call is refused, a server lost, an image that
 * the host device cannot run. Each message still goes to stderr as one
 * "gleam: ..." line; it is also kept in a ring of the last LOG_SLOTS lines,
 * handed to every registered callback (PyTorch registers one and appends what
 * it collects to its CUDA errors, so the reason reaches the exception), and
 * written to CUDA_LOG_FILE (stdout, stderr or a path) when that is set, as
 * NVIDIA's driver does. Lines read "[hh:mm:ss.mmm][tid][gleam][E][entry] text".
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "gl_client_gen.h"
#include "internal.h"

#define LOG_SLOTS 64
#define LOG_LINE 400 /* 64 lines of 400 bytes: the 25600 bytes NVIDIA's keeps */
#define LOG_CALLBACKS 32
/* What goes to stderr is not cut to LOG_LINE: a session's whole FAIL reason fits. */
#define LOG_TEXT (GL_FAIL_REASON_MAX + 128)

struct CUlogsCallbackEntry_st {
    CUlogsCallback fn;
    void *data;
    struct CUlogsCallbackEntry_st *next;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_ring[LOG_SLOTS][LOG_LINE];
static unsigned g_next; /* the sequence number of the next line; an iterator is one */
static struct CUlogsCallbackEntry_st *g_callbacks;
static FILE *g_file;
static int g_file_opened;

/* CUDA_LOG_FILE's stream, opened on the first line (under g_lock). */
static FILE *log_file(void)
{
    if (!g_file_opened) {
        const char *path = getenv("CUDA_LOG_FILE");
        g_file_opened = 1;
        if (path == NULL || path[0] == '\0')
            g_file = NULL;
        else if (strcmp(path, "stdout") == 0)
            g_file = stdout;
        else if (strcmp(path, "stderr") == 0)
            g_file = stderr;
        else
            g_file = fopen(path, "a");
    }
    return g_file;
}

void gl_log(int level, const char *entry, const char *fmt, ...)
{
    char text[LOG_TEXT], line[LOG_TEXT + 128]; /* room for the prefix; kept cut to LOG_LINE */
    struct { CUlogsCallback fn; void *data; } calls[LOG_CALLBACKS];
    int ncalls = 0;
    struct timeval now;
    struct tm tm;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    fprintf(stderr, "gleam: %s\n", text);

    gettimeofday(&now, NULL);
    localtime_r(&now.tv_sec, &tm);
    snprintf(line, sizeof line, "[%02d:%02d:%02d.%03ld][%ld][gleam][%c][%s] %s", tm.tm_hour,
             tm.tm_min, tm.tm_sec, (long)(now.tv_usec / 1000), (long)syscall(SYS_gettid),
             level == GL_LOG_ERROR ? 'E' : 'W', entry, text);
    pthread_mutex_lock(&g_lock);
    size_t n = strnlen(line, LOG_LINE - 1);
    line[n] = '\0';
    memcpy(g_ring[g_next % LOG_SLOTS], line, n + 1);
    g_next++;
    FILE *f = log_file();
    if (f != NULL && f != stderr) {
        fprintf(f, "%s\n", line);
        fflush(f);
    } else if (f == stderr) {
        fprintf(stderr, "%s\n", line);
    }
    for (struct CUlogsCallbackEntry_st *c = g_callbacks; c && ncalls < LOG_CALLBACKS; c = c->next) {
        calls[ncalls].fn = c->fn;
        calls[ncalls++].data = c->data;
    }
    pthread_mutex_unlock(&g_lock);
    /* Outside the lock: a callback may call back into cuLogs*. */
    for (int i = 0; i < ncalls; i++)
        calls[i].fn(calls[i].data, level, line, strlen(line));
}

CUresult gli_cuLogsRegisterCallback(CUlogsCallback callbackFunc, void *userData,
                                    CUlogsCallbackHandle *callback_out, int ptds)
{
    (void)ptds;
    if (callbackFunc == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUlogsCallbackEntry_st *c = calloc(1, sizeof *c);
    if (c == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    c->fn = callbackFunc;
    c->data = userData;
    pthread_mutex_lock(&g_lock);
    c->next = g_callbacks;
    g_callbacks = c;
    pthread_mutex_unlock(&g_lock);
    if (callback_out != NULL)
        *callback_out = c;
    return CUDA_SUCCESS;
}

CUresult gli_cuLogsUnregisterCallback(CUlogsCallbackHandle callback, int ptds)
{
    CUresult r = CUDA_ERROR_INVALID_VALUE;

    (void)ptds;
    pthread_mutex_lock(&g_lock);
    for (struct CUlogsCallbackEntry_st **p = &g_callbacks; callback && *p; p = &(*p)->next) {
        if (*p == callback) {
            *p = callback->next;
            free(callback);
            r = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return r;
}

CUresult gli_cuLogsCurrent(CUlogIterator *iterator_out, unsigned int flags, int ptds)
{
    (void)ptds;
    if (iterator_out == NULL || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_lock);
    *iterator_out = g_next;
    pthread_mutex_unlock(&g_lock);
    return CUDA_SUCCESS;
}

/* The lines from *iterator (every kept line when NULL) to now: the first kept
 * sequence number and how many were lost before it. Under g_lock. */
static unsigned log_range(const CUlogIterator *iterator, unsigned *first)
{
    unsigned oldest = g_next > LOG_SLOTS ? g_next - LOG_SLOTS : 0;
    unsigned from = iterator != NULL ? *iterator : oldest;

    if (from > g_next) /* an iterator from the future: nothing yet */
        from = g_next;
    *first = from < oldest ? oldest : from;
    return *first - from;
}

CUresult gli_cuLogsDumpToFile(CUlogIterator *iterator, const char *pathToFile, unsigned int flags,
                              int ptds)
{
    unsigned first, lost;

    (void)ptds;
    if (pathToFile == NULL || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    FILE *f = fopen(pathToFile, "a");
    if (f == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_lock);
    lost = log_range(iterator, &first);
    if (lost > 0)
        fprintf(f, "[gleam] %u earlier log lines were overwritten\n", lost);
    for (unsigned i = first; i != g_next; i++)
        fprintf(f, "%s\n", g_ring[i % LOG_SLOTS]);
    if (iterator != NULL)
        *iterator = g_next;
    pthread_mutex_unlock(&g_lock);
    return fclose(f) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* The note that heads a dump missing `skipped` earlier lines: its length, 0 when none. */
static size_t skipped_note(unsigned skipped, char note[80])
{
    if (skipped == 0)
        return 0;
    return (size_t)snprintf(note, 80, "[gleam] %u earlier log lines are not in this buffer\n",
                            skipped);
}

/* Newline-separated lines, NUL-terminated; when they do not all fit, a note
 * first and then the newest lines that do, as NVIDIA's documents. */
CUresult gli_cuLogsDumpToMemory(CUlogIterator *iterator, char *buffer, size_t *size,
                                unsigned int flags, int ptds)
{
    char note[80];
    unsigned first, lost;
    CUresult r = CUDA_SUCCESS;

    (void)ptds;
    if (buffer == NULL || size == NULL || *size == 0 || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    size_t room = *size - 1, used = 0;
    pthread_mutex_lock(&g_lock);
    lost = log_range(iterator, &first);
    /* Take lines newest first while they fit beside the note they may need. */
    unsigned start = g_next;
    size_t body = 0;
    while (start != first) {
        size_t len = strlen(g_ring[(start - 1) % LOG_SLOTS]) + 1;
        if (body + len + skipped_note(lost + (start - 1 - first), note) > room)
            break;
        body += len;
        start--;
    }
    unsigned skipped = lost + (start - first);
    if (start == g_next && g_next != first) {
        r = CUDA_ERROR_INVALID_VALUE; /* not even the newest line fits */
    } else {
        size_t n = skipped_note(skipped, note);
        if (n <= room) {
            memcpy(buffer, note, n);
            used = n;
        }
        for (unsigned i = start; i != g_next; i++) {
            size_t len = strlen(g_ring[i % LOG_SLOTS]);
            memcpy(buffer + used, g_ring[i % LOG_SLOTS], len);
            buffer[used + len] = '\n';
            used += len + 1;
        }
        if (iterator != NULL)
            *iterator = g_next;
    }
    pthread_mutex_unlock(&g_lock);
    buffer[used] = '\0';
    *size = used;
    return r;
}
