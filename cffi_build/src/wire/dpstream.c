/*
 * dpstream.c — see dpstream.h and docs/data-connection.md.
 *
 * State: one error word shared by both directions (the first error wins and
 * is returned by every later call), a send half (its lock, cipher context,
 * counter and sealing buffer) and a receive half (its cipher context, counter
 * and a buffer holding the current frame plus bytes read ahead). Counters are
 * written by their own half and read with atomics by anyone.
 *
 * Sending seals into the stream's buffer, never the caller's, one piece at a
 * time, and writes each piece while it is still in cache; a frame of at most
 * one piece goes out in one send(2). Receiving reads the header, refuses a
 * length outside 1 .. max_frame before allocating anything, then reads the
 * body into the buffer and opens it in place as each read lands; the
 * plaintext is only handed out once the tag has verified.
 */
#include "dpstream.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "crypto/dpcrypto.h"
#include "gl_bytes.h"
#include "dplocal.h"

/* gl_sha256's failure and the stream's are one code (dpcrypto.h). */
_Static_assert(GL_STREAM_E_CRYPTO == GL_CRYPTO_E_FAIL, "one libcrypto failure code");

/* Bytes sealed between two writes: a whole frame up to this, about one L2
 * (this VM's CPU has 1 MiB) for the send to copy out. Each send(2) of
 * loopback TCP pays for a push through the receiver's stack: on the project's
 * VM (bench wire) the sender cost 0.58-0.59 CPU-s per GB of 1 MiB frames in
 * 128 KiB pieces, 0.49-0.51 in 1 MiB ones, and the receiver 0.38 against
 * 0.33-0.35; whole frames (1 MiB and a few hundred bytes) were no better. */
#define SEAL_PIECE_MAX GL_GCM_PIECE
/* Bytes asked of one recv(2) inside a frame's body, opened as soon as they are
 * in. Each recv of loopback TCP also pays for the window update it sends: on
 * the development VM 512 KiB reads cost the receiver about a fifth less CPU
 * per GB than 128 KiB ones; 1 and 2 MiB reads were no better. */
#define OPEN_PIECE GL_GCM_OPEN_PIECE
/* Bytes asked for beyond the current frame, so that the next small frame (or
 * the next header) usually comes with the same recv(2). */
#define READ_AHEAD (64u * 1024u)
/* A frame's length is a u32 and EVP counts in int; keep well inside both. */
#define MAX_FRAME_LIMIT (1u << 30)
#define NONCE_SIZE 12
#define OVERHEAD (GL_STREAM_HEADER_SIZE + GL_STREAM_TAG_SIZE)

struct gl_stream {
    int fd;
    uint32_t max_frame;
    int err;        /* sticky GL_STREAM_E_*, 0 while alive (atomic) */
    int sys_errno;  /* errno of the failure behind GL_STREAM_E_IO (atomic) */
    int shut;       /* gl_stream_shutdown was called (atomic) */
    const gl_crypto_api *c;

    pthread_mutex_t send_lock;
    gl_evp_ctx *enc;
    uint32_t send_dir;
    uint64_t send_seq;
    uint32_t piece; /* bytes sealed between two writes: max_frame, at most SEAL_PIECE_MAX */
    uint8_t *sbuf;  /* OVERHEAD + piece */
    uint64_t frames_sent, bytes_sent;

    gl_evp_ctx *dec;
    uint32_t recv_dir;
    uint64_t recv_seq;
    uint8_t *rbuf; /* [rstart, rend) holds unread bytes */
    size_t rcap, rstart, rend;
    uint64_t frames_received, bytes_received;

    gl_llink *link; /* a local pair's (no fd, no cipher), else NULL */
    int side;
};

/* Records the stream's first error and returns the one that stands. */
static int fail(gl_stream *s, int code)
{
    int expected = 0;
    __atomic_compare_exchange_n(&s->err, &expected, code, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    return __atomic_load_n(&s->err, __ATOMIC_ACQUIRE);
}

/* A socket failure: CLOSED when it was our own shutdown that caused it. */
static int fail_io(gl_stream *s, int e)
{
    if (__atomic_load_n(&s->shut, __ATOMIC_ACQUIRE))
        return fail(s, GL_STREAM_E_CLOSED);
    __atomic_store_n(&s->sys_errno, e, __ATOMIC_RELEASE);
    return fail(s, GL_STREAM_E_IO);
}

static int dead(gl_stream *s)
{
    return __atomic_load_n(&s->err, __ATOMIC_ACQUIRE);
}

static void nonce(uint8_t out[NONCE_SIZE], uint32_t dir, uint64_t seq)
{
    gl_put_u32(out, dir);
    gl_put_u64(out + 4, seq);
}

static void bump(uint64_t *counter, uint64_t by)
{
    __atomic_store_n(counter, __atomic_load_n(counter, __ATOMIC_RELAXED) + by, __ATOMIC_RELAXED);
}

/* ---- creation ---------------------------------------------------------- */

static gl_evp_ctx *cipher_ctx(const gl_crypto_api *c, int encrypt, const uint8_t *key)
{
    int (*init)(gl_evp_ctx *, const void *, void *, const uint8_t *, const uint8_t *) =
        encrypt ? c->encrypt_init : c->decrypt_init;
    gl_evp_ctx *x = c->ctx_new();

    /* The key schedule is computed once here; each frame then sets only its IV. */
    if (x != NULL
        && (init(x, c->aes_256_gcm(), NULL, NULL, NULL) != 1
            || c->ctrl(x, GL_EVP_GCM_SET_IVLEN, NONCE_SIZE, NULL) != 1
            || init(x, NULL, NULL, key, NULL) != 1)) {
        c->ctx_free(x);
        x = NULL;
    }
    return x;
}

static gl_stream *local_end(gl_llink *link, int side, uint32_t max_frame)
{
    gl_stream *s = calloc(1, sizeof *s);

    if (s == NULL)
        return NULL;
    if (pthread_mutex_init(&s->send_lock, NULL) != 0) {
        free(s);
        return NULL;
    }
    s->fd = -1, s->max_frame = max_frame, s->link = link, s->side = side;
    return s;
}

int gl_stream_pair(uint32_t max_frame, uint64_t max_queued, gl_stream **a, gl_stream **b)
{
    gl_llink *link;

    *a = *b = NULL;
    if (max_frame == 0 || max_frame > MAX_FRAME_LIMIT)
        return GL_STREAM_E_TOO_BIG;
    if ((link = gl_llink_new(max_queued, max_frame)) == NULL)
        return GL_STREAM_E_NOMEM;
    *a = local_end(link, 0, max_frame);
    *b = local_end(link, 1, max_frame);
    if (*a == NULL || *b == NULL) {
        /* An end that exists lets go of the link through its free; one that
         * does not, directly. */
        for (int side = 0; side < 2; side++) {
            gl_stream *end = side == 0 ? *a : *b;
            if (end != NULL)
                gl_stream_free(end);
            else
                gl_llink_release(link, side);
        }
        *a = *b = NULL;
        return GL_STREAM_E_NOMEM;
    }
    return 0;
}

gl_stream *gl_stream_new(int fd, const uint8_t *send_key, uint32_t send_dir,
                         const uint8_t *recv_key, uint32_t recv_dir, uint32_t max_frame,
                         char *err, size_t err_cap)
{
    const gl_crypto_api *c = gl_crypto();
    const char *why = NULL;
    gl_stream *s;

    if (c == NULL)
        why = gl_crypto_status();
    else if (fd < 0)
        why = "the stream needs a connected socket";
    else if (send_key == NULL || recv_key == NULL)
        why = "the stream needs a send key and a receive key";
    else if (send_dir > GL_DIR_TO_CLIENT || recv_dir > GL_DIR_TO_CLIENT || send_dir == recv_dir)
        why = "the two directions must be GL_DIR_TO_SERVER and GL_DIR_TO_CLIENT, one each";
    else if (max_frame == 0 || max_frame > MAX_FRAME_LIMIT)
        why = "max_frame must be 1 .. 2^30 bytes";
    if (why != NULL) {
        if (err != NULL && err_cap > 0)
            snprintf(err, err_cap, "%s", why);
        return NULL;
    }
    s = calloc(1, sizeof *s);
    if (s == NULL || pthread_mutex_init(&s->send_lock, NULL) != 0) {
        free(s);
        if (err != NULL && err_cap > 0)
            snprintf(err, err_cap, "out of memory");
        return NULL;
    }
    s->fd = fd, s->max_frame = max_frame, s->c = c;
    s->send_dir = send_dir, s->recv_dir = recv_dir;
    s->enc = cipher_ctx(c, 1, send_key);
    s->dec = cipher_ctx(c, 0, recv_key);
    s->piece = max_frame < SEAL_PIECE_MAX ? max_frame : SEAL_PIECE_MAX;
    s->sbuf = malloc(OVERHEAD + s->piece);
    if (s->enc == NULL || s->dec == NULL || s->sbuf == NULL) {
        if (err != NULL && err_cap > 0)
            snprintf(err, err_cap, "%s",
                     s->sbuf == NULL ? "out of memory" : "libcrypto refused the AES-256-GCM key");
        gl_stream_free(s);
        return NULL;
    }
    return s;
}

void gl_stream_free(gl_stream *s)
{
    if (s == NULL)
        return;
    if (s->link != NULL)
        gl_llink_release(s->link, s->side);
    if (s->enc != NULL)
        s->c->ctx_free(s->enc); /* frees (and cleanses) the key schedule */
    if (s->dec != NULL)
        s->c->ctx_free(s->dec);
    pthread_mutex_destroy(&s->send_lock);
    free(s->sbuf);
    free(s->rbuf);
    free(s);
}

/* ---- sending ----------------------------------------------------------- */

static int write_all(gl_stream *s, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t k = send(s->fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return fail_io(s, k < 0 ? errno : EPIPE);
        p += k, n -= (size_t)k;
    }
    return 0;
}

/* Seals the frame's plaintext (the parts, in order) and writes it. Called with
 * the send lock held and the length already checked. */
static int seal_and_write(gl_stream *s, const uint8_t *const *parts, const size_t *lens,
                          int nparts, uint32_t total)
{
    const gl_crypto_api *c = s->c;
    uint8_t iv[NONCE_SIZE], *buf = s->sbuf;
    size_t pos = GL_STREAM_HEADER_SIZE, left = total;
    int outl = 0, rc;

    gl_put_u32(buf, total);
    nonce(iv, s->send_dir, s->send_seq++);
    if (c->encrypt_init(s->enc, NULL, NULL, NULL, iv) != 1
        || c->encrypt_update(s->enc, NULL, &outl, buf, GL_STREAM_HEADER_SIZE) != 1)
        return fail(s, GL_STREAM_E_CRYPTO);
    for (int i = 0; i < nparts; i++) {
        const uint8_t *p = parts[i];
        size_t n = lens[i];
        while (n > 0) {
            size_t room = GL_STREAM_HEADER_SIZE + s->piece - pos;
            size_t k = n < room ? n : room;
            if (c->encrypt_update(s->enc, buf + pos, &outl, p, (int)k) != 1 || (size_t)outl != k)
                return fail(s, GL_STREAM_E_CRYPTO);
            pos += k, p += k, n -= k, left -= k;
            /* A full piece goes out now, unless it is the last: the tag joins it. */
            if (pos == GL_STREAM_HEADER_SIZE + s->piece && left > 0) {
                if ((rc = write_all(s, buf, pos)) != 0)
                    return rc;
                pos = 0;
            }
        }
    }
    if (c->encrypt_final(s->enc, buf + pos, &outl) != 1 || outl != 0
        || c->ctrl(s->enc, GL_EVP_GCM_GET_TAG, GL_STREAM_TAG_SIZE, buf + pos) != 1)
        return fail(s, GL_STREAM_E_CRYPTO);
    return write_all(s, buf, pos + GL_STREAM_TAG_SIZE);
}

int gl_stream_sendv(gl_stream *s, const uint8_t *const *parts, const size_t *lens, int nparts)
{
    size_t total = 0;
    int rc;

    for (int i = 0; i < nparts; i++) {
        if (lens[i] > s->max_frame || (parts[i] == NULL && lens[i] != 0))
            return fail(s, GL_STREAM_E_TOO_BIG);
        total += lens[i];
        if (total > s->max_frame)
            return fail(s, GL_STREAM_E_TOO_BIG);
    }
    if (total == 0)
        return fail(s, GL_STREAM_E_TOO_BIG);
    pthread_mutex_lock(&s->send_lock);
    rc = dead(s);
    if (rc == 0 && s->link != NULL && (rc = gl_llink_send(s->link, s->side, parts, lens, nparts,
                                                         total)) != 0)
        rc = fail(s, rc);
    else if (rc == 0 && s->link == NULL)
        rc = seal_and_write(s, parts, lens, nparts, (uint32_t)total);
    if (rc == 0) {
        bump(&s->frames_sent, 1);
        bump(&s->bytes_sent, total);
    }
    pthread_mutex_unlock(&s->send_lock);
    return rc;
}

int gl_stream_send(gl_stream *s, const uint8_t *buf, size_t len)
{
    return gl_stream_sendv(s, &buf, &len, 1);
}

/* ---- receiving --------------------------------------------------------- */

/* One recv(2) into the buffer's free space, at most want bytes: the count, 0
 * at end of stream, or a GL_STREAM_E_* code. */
static ssize_t read_some(gl_stream *s, size_t want)
{
    size_t room = s->rcap - s->rend;
    for (;;) {
        ssize_t k = recv(s->fd, s->rbuf + s->rend, want < room ? want : room, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (__atomic_load_n(&s->shut, __ATOMIC_ACQUIRE))
            return fail(s, GL_STREAM_E_CLOSED);
        if (k < 0)
            return fail_io(s, errno);
        s->rend += (size_t)k;
        return k;
    }
}

/* Makes room for a frame of `need` bytes starting at rstart (and some read
 * ahead): unread bytes move to the front, and the buffer grows if it must. */
static int make_room(gl_stream *s, size_t need)
{
    if (s->rcap - s->rstart >= need)
        return 0;
    if (s->rend > s->rstart)
        memmove(s->rbuf, s->rbuf + s->rstart, s->rend - s->rstart);
    s->rend -= s->rstart;
    s->rstart = 0;
    if (s->rcap < need) {
        size_t cap = need + READ_AHEAD;
        uint8_t *p = realloc(s->rbuf, cap);
        if (p == NULL)
            return fail(s, GL_STREAM_E_NOMEM);
        s->rbuf = p, s->rcap = cap;
    }
    return 0;
}

static int open_piece(gl_stream *s, uint8_t *p, size_t n)
{
    int outl = 0;
    if (s->c->decrypt_update(s->dec, p, &outl, p, (int)n) != 1 || (size_t)outl != n)
        return fail(s, GL_STREAM_E_CRYPTO);
    return 0;
}

int64_t gl_stream_recv(gl_stream *s, uint8_t **out)
{
    const gl_crypto_api *c = s->c;
    uint8_t iv[NONCE_SIZE], *f;
    size_t frame, body_end, opened;
    uint32_t n;
    ssize_t k;
    int rc, outl = 0;

    if ((rc = dead(s)) != 0)
        return rc;
    if (s->link != NULL) {
        int64_t got = gl_llink_recv(s->link, s->side, out);
        if (got > 0) {
            bump(&s->frames_received, 1);
            bump(&s->bytes_received, (uint64_t)got);
        }
        return got;
    }
    if (s->rstart == s->rend)
        s->rstart = s->rend = 0;
    if ((rc = make_room(s, GL_STREAM_HEADER_SIZE + READ_AHEAD)) != 0)
        return rc;
    while (s->rend - s->rstart < GL_STREAM_HEADER_SIZE) {
        if ((k = read_some(s, READ_AHEAD)) < 0)
            return k;
        if (k == 0)
            return s->rend == s->rstart ? 0 : fail(s, GL_STREAM_E_TRUNCATED);
    }
    f = s->rbuf + s->rstart;
    n = gl_get_u32(f);
    if (n == 0 || n > s->max_frame)
        return fail(s, GL_STREAM_E_TOO_BIG);
    frame = OVERHEAD + (size_t)n;
    if ((rc = make_room(s, frame)) != 0)
        return rc;
    f = s->rbuf + s->rstart;
    nonce(iv, s->recv_dir, s->recv_seq);
    if (c->decrypt_init(s->dec, NULL, NULL, NULL, iv) != 1
        || c->decrypt_update(s->dec, NULL, &outl, f, GL_STREAM_HEADER_SIZE) != 1)
        return fail(s, GL_STREAM_E_CRYPTO);
    /* Offsets from rstart: the body is [4, body_end), the tag follows. */
    body_end = GL_STREAM_HEADER_SIZE + n;
    opened = GL_STREAM_HEADER_SIZE;
    for (;;) {
        size_t have = s->rend - s->rstart;
        size_t ready = (have < body_end ? have : body_end) - opened;
        /* Open what has arrived while it is cache-hot, a piece at a time. */
        if (ready >= OPEN_PIECE || (ready > 0 && have >= body_end)) {
            if ((rc = open_piece(s, f + opened, ready)) != 0)
                return rc;
            opened += ready;
        }
        if (have >= frame)
            break;
        /* The frame's remainder in pieces; the last read also asks for what
         * follows it. */
        k = read_some(s, frame - have > OPEN_PIECE ? OPEN_PIECE : frame - have + READ_AHEAD);
        if (k < 0)
            return k;
        if (k == 0)
            return fail(s, GL_STREAM_E_TRUNCATED);
    }
    if (c->ctrl(s->dec, GL_EVP_GCM_SET_TAG, GL_STREAM_TAG_SIZE, f + body_end) != 1)
        return fail(s, GL_STREAM_E_CRYPTO);
    if (c->decrypt_final(s->dec, f + body_end, &outl) != 1)
        return fail(s, GL_STREAM_E_AUTH);
    s->recv_seq++;
    s->rstart += frame;
    bump(&s->frames_received, 1);
    bump(&s->bytes_received, n);
    *out = f + GL_STREAM_HEADER_SIZE;
    return (int64_t)n;
}

/* ---- any thread -------------------------------------------------------- */

void gl_stream_shutdown(gl_stream *s)
{
    __atomic_store_n(&s->shut, 1, __ATOMIC_RELEASE);
    fail(s, GL_STREAM_E_CLOSED);
    if (s->link != NULL)
        gl_llink_close(s->link);
    else
        shutdown(s->fd, SHUT_RDWR);
}

void gl_stream_counters_get(gl_stream *s, gl_stream_counters *out)
{
    out->frames_sent = __atomic_load_n(&s->frames_sent, __ATOMIC_RELAXED);
    out->bytes_sent = __atomic_load_n(&s->bytes_sent, __ATOMIC_RELAXED);
    out->frames_received = __atomic_load_n(&s->frames_received, __ATOMIC_RELAXED);
    out->bytes_received = __atomic_load_n(&s->bytes_received, __ATOMIC_RELAXED);
}

int gl_stream_errno(gl_stream *s)
{
    return __atomic_load_n(&s->sys_errno, __ATOMIC_ACQUIRE);
}

const char *gl_stream_strerror(int code)
{
    switch (code) {
    case 0:
        return "ok";
    case GL_STREAM_E_IO:
        return "the data connection's socket failed";
    case GL_STREAM_E_TRUNCATED:
        return "the peer closed the data connection inside a frame";
    case GL_STREAM_E_TOO_BIG:
        return "a frame was empty or longer than the stream's max_frame";
    case GL_STREAM_E_AUTH:
        return "a frame did not authenticate (wrong key, tampered, replayed or reordered)";
    case GL_STREAM_E_CRYPTO:
        return "libcrypto failed";
    case GL_STREAM_E_CLOSED:
        return "the data connection was shut down";
    case GL_STREAM_E_NOMEM:
        return "out of memory";
    default:
        return "unknown data connection error";
    }
}
