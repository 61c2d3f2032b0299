/*
 * shelf.c — the serving agent's blobs in RAM and its lanes' cache events (shelf.h).
 */
#define _GNU_SOURCE /* O_DIRECT */
#include "shelf.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "digest.h"
#include "gl_bytes.h"
#include "seeded.h"
#include "mem/spares.h"

#define DIGEST 32
#define MIN_BUCKETS 64

struct gl_shelf_blob {
    uint32_t refs; /* atomic */
    uint8_t digest[DIGEST];
    uint64_t len;
    size_t cap;    /* bytes allocated, this struct included (spares.h) */
    uint8_t *data; /* len bytes; bytes past len are never read */
    int verified;  /* atomic: 1 once the bytes are known to hash to digest */
};

/* A large blob's bytes start on a page of their own and the buffer holds them
 * rounded up to whole pages: the disk tier then writes them with O_DIRECT,
 * straight from here, instead of copying each into the page cache (perf: that
 * copy and its page-cache upkeep cost the serving agent a core-second per GiB
 * of first sightings, on the cores the lanes needed). */
#define PAGE ((size_t)4096)
#define ALIGNED_MIN ((uint64_t)GL_SPARE_MIN)

static size_t page_up(uint64_t n) { return ((size_t)n + PAGE - 1) / PAGE * PAGE; }

typedef struct entry {
    struct entry *next;
    gl_shelf_blob *blob;
} entry;

typedef struct event {
    struct event *next;
    gl_shelf_event ev;
} event;

struct gl_shelf {
    pthread_mutex_t mu; /* the table */
    entry **buckets;
    size_t nbuckets;    /* a power of two */
    uint64_t entries, bytes;

    pthread_mutex_t qmu; /* the queue */
    pthread_cond_t qcv;
    event *head, *tail;
    uint64_t queued, queued_bytes, queue_cap;
    uint64_t hits, offers, dropped;
    uint64_t verified, verified_bytes, refused; /* claims checked at their first use */
    int closed;
    uint64_t seed; /* bucket_of's secret */
};

static gl_shelf_blob *blob_new(const uint8_t *digest, const uint8_t *data, uint64_t len,
                               int verified)
{
    int aligned = len >= ALIGNED_MIN;
    size_t head = aligned ? PAGE : sizeof(gl_shelf_blob);
    size_t cap;
    gl_shelf_blob *b = gl_spare_alloc(head + (aligned ? page_up(len) : (size_t)len), &cap);
    if (!b)
        return NULL;
    b->cap = cap;
    b->refs = 1;
    b->verified = verified;
    memcpy(b->digest, digest, DIGEST);
    b->len = len;
    b->data = (uint8_t *)b + head;
    if (len)
        memcpy(b->data, data, (size_t)len);
    if (aligned) /* what the O_DIRECT write carries past len: zeros, never old bytes */
        memset(b->data + len, 0, page_up(len) - (size_t)len);
    return b;
}

gl_shelf_blob *gl_shelf_blob_new(const uint8_t *digest, const uint8_t *data, uint64_t len)
{
    return blob_new(digest, data, len, 1);
}

gl_shelf_blob *gl_shelf_blob_claimed(const uint8_t *digest, const uint8_t *data, uint64_t len)
{
    return blob_new(digest, data, len, 0);
}

int gl_shelf_blob_verified(const gl_shelf_blob *b)
{
    return __atomic_load_n(&b->verified, __ATOMIC_ACQUIRE);
}

gl_shelf_blob *gl_shelf_blob_ref(gl_shelf_blob *b)
{
    __atomic_add_fetch(&b->refs, 1, __ATOMIC_RELAXED);
    return b;
}

void gl_shelf_blob_unref(gl_shelf_blob *b)
{
    if (b && __atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) == 0)
        gl_spare_free(b, b->cap);
}

const uint8_t *gl_shelf_blob_data(const gl_shelf_blob *b) { return b->data; }

static int pwrite_all(int fd, const uint8_t *p, size_t n, off_t off)
{
    while (n) {
        ssize_t w = pwrite(fd, p, n, off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? -errno : -EIO;
        p += w;
        n -= (size_t)w;
        off += w;
    }
    return 0;
}

/* O_DIRECT on fd, or off: 0, or -errno. */
static int set_direct(int fd, int on)
{
#ifdef O_DIRECT
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0)
        return -errno;
    int want = on ? (flags | O_DIRECT) : (flags & ~O_DIRECT);
    if (want != flags && fcntl(fd, F_SETFL, want) != 0)
        return -errno;
#else
    (void)fd;
    (void)on;
#endif
    return 0;
}

int gl_shelf_blob_write_file(const gl_shelf_blob *b, const char *path)
{
    int direct = b->len >= ALIGNED_MIN;
    int fd = -1;
#ifdef O_DIRECT
    if (direct)
        fd = open(path, O_WRONLY | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
#endif
    if (fd < 0) { /* no O_DIRECT here (tmpfs, some FUSE): the page cache then */
        direct = 0;
        fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0)
            return -errno;
    }
    int rc = pwrite_all(fd, b->data, direct ? page_up(b->len) : (size_t)b->len, 0);
    if (rc == -EINVAL && direct) { /* the device wants larger blocks than a page */
        rc = ftruncate(fd, 0) != 0 ? -errno : set_direct(fd, 0);
        if (rc == 0) /* else never a file of the right length without its bytes */
            rc = pwrite_all(fd, b->data, (size_t)b->len, 0);
    }
    /* To exactly len: the last page's zeros go, and so does whatever an older
     * file being overwritten held past len. */
    if (rc == 0 && ftruncate(fd, (off_t)b->len) != 0)
        rc = -errno;
    if (rc == 0 && fsync(fd) != 0)
        rc = -errno;
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    return rc;
}

int gl_shelf_blob_write_record(const gl_shelf_blob *b, int fd, uint64_t offset,
                               const uint8_t *head, size_t head_len)
{
    if (head_len > PAGE || offset % PAGE)
        return -EINVAL;
    _Alignas(4096) uint8_t page[4096];
    memset(page, 0, sizeof page);
    memcpy(page, head, head_len);
    /* fd keeps its mode between records: set it for each blob, both ways. */
    int direct = b->len >= ALIGNED_MIN && set_direct(fd, 1) == 0;
    int rc = direct ? 0 : set_direct(fd, 0);
    if (rc == 0)
        rc = pwrite_all(fd, b->data, direct ? page_up(b->len) : (size_t)b->len,
                        (off_t)(offset + PAGE));
    if (rc == -EINVAL && direct) { /* the device wants larger blocks than a page */
        direct = 0;
        rc = set_direct(fd, 0);
        if (rc == 0)
            rc = pwrite_all(fd, b->data, (size_t)b->len, (off_t)(offset + PAGE));
    }
    if (rc != 0)
        return rc; /* no header: the bytes it would name are not there */
    /* The header last, so that a crash between the two writes leaves no new
     * header over missing bytes (a read checks the digest all the same). */
    rc = pwrite_all(fd, page, PAGE, (off_t)offset);
    if (rc == -EINVAL && direct) { /* a header page the device will not take directly */
        rc = set_direct(fd, 0);
        if (rc == 0)
            rc = pwrite_all(fd, page, PAGE, (off_t)offset);
    }
    return rc;
}

uint64_t gl_shelf_blob_len(const gl_shelf_blob *b) { return b->len; }

gl_shelf *gl_shelf_new(uint64_t queue_cap)
{
    gl_shelf *sh = calloc(1, sizeof *sh);
    if (!sh)
        return NULL;
    sh->nbuckets = MIN_BUCKETS;
    sh->buckets = calloc(sh->nbuckets, sizeof *sh->buckets);
    if (!sh->buckets) {
        free(sh);
        return NULL;
    }
    sh->queue_cap = queue_cap;
    sh->seed = gl_new_seed(sh);
    pthread_mutex_init(&sh->mu, NULL);
    pthread_mutex_init(&sh->qmu, NULL);
    pthread_cond_init(&sh->qcv, NULL);
    return sh;
}

/* A client's claims put digests it chose in the table: the bucket is keyed
 * with the shelf's secret, so they cannot pile up on one chain. */
static size_t bucket_in(uint64_t seed, size_t nbuckets, const uint8_t *digest)
{
    return (size_t)gl_seeded_mix(gl_get_u64(digest), seed) & (nbuckets - 1);
}

static size_t bucket_of(const gl_shelf *sh, const uint8_t *digest)
{
    return bucket_in(sh->seed, sh->nbuckets, digest);
}

static entry **find_locked(gl_shelf *sh, const uint8_t *digest)
{
    entry **at = &sh->buckets[bucket_of(sh, digest)];
    while (*at && memcmp((*at)->blob->digest, digest, DIGEST) != 0)
        at = &(*at)->next;
    return at;
}

static void grow_locked(gl_shelf *sh)
{
    size_t n = sh->nbuckets * 2;
    entry **fresh = calloc(n, sizeof *fresh);
    if (!fresh)
        return; /* longer chains, still correct */
    for (size_t i = 0; i < sh->nbuckets; i++) {
        for (entry *e = sh->buckets[i], *next; e; e = next) {
            next = e->next;
            size_t j = bucket_in(sh->seed, n, e->blob->digest);
            e->next = fresh[j];
            fresh[j] = e;
        }
    }
    free(sh->buckets);
    sh->buckets = fresh;
    sh->nbuckets = n;
}

int gl_shelf_put(gl_shelf *sh, gl_shelf_blob *b)
{
    gl_shelf_blob *old = NULL;
    pthread_mutex_lock(&sh->mu);
    entry **at = find_locked(sh, b->digest);
    if (*at) {
        old = (*at)->blob;
        sh->bytes -= old->len;
        (*at)->blob = gl_shelf_blob_ref(b);
        sh->bytes += b->len;
    } else {
        entry *e = malloc(sizeof *e);
        if (!e) {
            pthread_mutex_unlock(&sh->mu);
            return -1;
        }
        e->blob = gl_shelf_blob_ref(b);
        e->next = NULL;
        *at = e;
        sh->entries++;
        sh->bytes += b->len;
        if (sh->entries > sh->nbuckets)
            grow_locked(sh);
    }
    pthread_mutex_unlock(&sh->mu);
    gl_shelf_blob_unref(old);
    return 0;
}

/* Drops digest's entry; only if it is b, when b is not NULL (not a newer
 * buffer put since). */
static void drop_entry(gl_shelf *sh, const uint8_t *digest, const gl_shelf_blob *b)
{
    entry *gone = NULL;
    pthread_mutex_lock(&sh->mu);
    entry **at = find_locked(sh, digest);
    if (*at && (!b || (*at)->blob == b)) {
        gone = *at;
        *at = gone->next;
        sh->entries--;
        sh->bytes -= gone->blob->len;
    }
    pthread_mutex_unlock(&sh->mu);
    if (gone) {
        gl_shelf_blob_unref(gone->blob);
        free(gone);
    }
}

void gl_shelf_drop(gl_shelf *sh, const uint8_t *digest)
{
    drop_entry(sh, digest, NULL);
}

static entry *detach_all_locked(gl_shelf *sh)
{
    entry *all = NULL;
    for (size_t i = 0; i < sh->nbuckets; i++) {
        for (entry *e = sh->buckets[i], *next; e; e = next) {
            next = e->next;
            e->next = all;
            all = e;
        }
        sh->buckets[i] = NULL;
    }
    sh->entries = sh->bytes = 0;
    return all;
}

static void free_entries(entry *e)
{
    for (entry *next; e; e = next) {
        next = e->next;
        gl_shelf_blob_unref(e->blob);
        free(e);
    }
}

void gl_shelf_clear(gl_shelf *sh)
{
    pthread_mutex_lock(&sh->mu);
    entry *all = detach_all_locked(sh);
    pthread_mutex_unlock(&sh->mu);
    free_entries(all); /* buffers are freed outside the lock */
}

gl_shelf_blob *gl_shelf_take(gl_shelf *sh, const uint8_t *digest, uint64_t len)
{
    gl_shelf_blob *b = NULL;
    pthread_mutex_lock(&sh->mu);
    entry *e = *find_locked(sh, digest);
    if (e && e->blob->len == len)
        b = gl_shelf_blob_ref(e->blob);
    pthread_mutex_unlock(&sh->mu);
    return b;
}

static void post_refused(gl_shelf *sh, const gl_shelf_blob *b);

int gl_shelf_check(gl_shelf *sh, gl_shelf_blob *b)
{
    if (gl_shelf_blob_verified(b))
        return 1;
    uint8_t d[DIGEST];
    gl_content_digest(b->data, (size_t)b->len, d);
    if (memcmp(d, b->digest, DIGEST) == 0) {
        int unchecked = 0; /* two lanes may check it at once: one counts it */
        if (!__atomic_compare_exchange_n(&b->verified, &unchecked, 1, 0, __ATOMIC_RELEASE,
                                         __ATOMIC_RELAXED))
            return 1;
        pthread_mutex_lock(&sh->qmu);
        sh->verified++;
        sh->verified_bytes += b->len;
        pthread_mutex_unlock(&sh->qmu);
        return 1;
    }
    drop_entry(sh, b->digest, b);
    post_refused(sh, b);
    return 0;
}

/* ------------------------------------------------------------------ events */

static void enqueue_locked(gl_shelf *sh, event *e)
{
    e->next = NULL;
    if (sh->tail)
        sh->tail->next = e;
    else
        sh->head = e;
    sh->tail = e;
    sh->queued++;
    pthread_cond_signal(&sh->qcv);
}

void gl_shelf_post_hit(gl_shelf *sh, const uint8_t *digest, uint64_t len, uint16_t call_id)
{
    event *e = calloc(1, sizeof *e);
    pthread_mutex_lock(&sh->qmu);
    sh->hits++;
    if (!e || sh->closed) { /* a hit lost only ages its blob a little sooner */
        pthread_mutex_unlock(&sh->qmu);
        free(e);
        return;
    }
    e->ev.kind = GL_SHELF_HIT;
    memcpy(e->ev.digest, digest, DIGEST);
    e->ev.len = len;
    e->ev.call_id = call_id;
    enqueue_locked(sh, e);
    pthread_mutex_unlock(&sh->qmu);
}

int gl_shelf_post_offer(gl_shelf *sh, gl_shelf_blob *b, uint16_t call_id)
{
    event *e = calloc(1, sizeof *e);
    pthread_mutex_lock(&sh->qmu);
    sh->offers++;
    /* A store that falls behind loses cache copies, never the lane's time:
     * the payload already ran, so dropping it only costs a later resend. */
    if (!e || sh->closed || sh->queued_bytes + b->len > sh->queue_cap) {
        sh->dropped++;
        pthread_mutex_unlock(&sh->qmu);
        free(e);
        gl_shelf_blob_unref(b);
        return -1;
    }
    e->ev.kind = GL_SHELF_OFFER;
    memcpy(e->ev.digest, b->digest, DIGEST);
    e->ev.len = b->len;
    e->ev.call_id = call_id;
    e->ev.blob = b;
    sh->queued_bytes += b->len;
    enqueue_locked(sh, e);
    pthread_mutex_unlock(&sh->qmu);
    return 0;
}

static void post_refused(gl_shelf *sh, const gl_shelf_blob *b)
{
    event *e = calloc(1, sizeof *e);
    pthread_mutex_lock(&sh->qmu);
    sh->refused++;
    if (e && !sh->closed) {
        e->ev.kind = GL_SHELF_REFUSED;
        memcpy(e->ev.digest, b->digest, DIGEST);
        e->ev.len = b->len;
        enqueue_locked(sh, e);
        e = NULL;
    }
    pthread_mutex_unlock(&sh->qmu);
    free(e); /* (lost: the store keeps a copy that fails its next check too) */
}

static void deadline_after(struct timespec *ts, double seconds)
{
    clock_gettime(CLOCK_REALTIME, ts);
    long long ns = ts->tv_nsec + (long long)(seconds * 1e9);
    ts->tv_sec += (time_t)(ns / 1000000000LL);
    ts->tv_nsec = (long)(ns % 1000000000LL);
}

int gl_shelf_next_event(gl_shelf *sh, gl_shelf_event *out)
{
    pthread_mutex_lock(&sh->qmu);
    event *e = sh->head;
    if (!e) {
        pthread_mutex_unlock(&sh->qmu);
        return 0;
    }
    sh->head = e->next;
    if (!sh->head)
        sh->tail = NULL;
    sh->queued--;
    if (e->ev.blob)
        sh->queued_bytes -= e->ev.len;
    pthread_mutex_unlock(&sh->qmu);
    *out = e->ev;
    free(e);
    return 1;
}

int gl_shelf_wait(gl_shelf *sh, double timeout_s)
{
    struct timespec until;
    deadline_after(&until, timeout_s > 0 ? timeout_s : 0);
    pthread_mutex_lock(&sh->qmu);
    while (!sh->head && !sh->closed) {
        if (pthread_cond_timedwait(&sh->qcv, &sh->qmu, &until) == ETIMEDOUT)
            break;
    }
    int rc = sh->head ? 1 : sh->closed ? -1 : 0;
    pthread_mutex_unlock(&sh->qmu);
    return rc;
}

void gl_shelf_close_queue(gl_shelf *sh)
{
    pthread_mutex_lock(&sh->qmu);
    sh->closed = 1;
    pthread_cond_broadcast(&sh->qcv);
    pthread_mutex_unlock(&sh->qmu);
}

void gl_shelf_counts_get(gl_shelf *sh, gl_shelf_counts *out)
{
    pthread_mutex_lock(&sh->mu);
    out->entries = sh->entries;
    out->bytes = sh->bytes;
    pthread_mutex_unlock(&sh->mu);
    pthread_mutex_lock(&sh->qmu);
    out->queued = sh->queued;
    out->queued_bytes = sh->queued_bytes;
    out->hits = sh->hits;
    out->offers = sh->offers;
    out->dropped = sh->dropped;
    out->verified = sh->verified;
    out->verified_bytes = sh->verified_bytes;
    out->refused = sh->refused;
    pthread_mutex_unlock(&sh->qmu);
}

void gl_shelf_free(gl_shelf *sh)
{
    if (!sh)
        return;
    free_entries(detach_all_locked(sh));
    for (event *e = sh->head, *next; e; e = next) {
        next = e->next;
        gl_shelf_blob_unref(e->ev.blob);
        free(e);
    }
    pthread_cond_destroy(&sh->qcv);
    pthread_mutex_destroy(&sh->qmu);
    pthread_mutex_destroy(&sh->mu);
    free(sh->buckets);
    free(sh);
}
