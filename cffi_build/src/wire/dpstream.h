/*
 * dpstream.h — a session's data connection: a sealed, framed byte stream over
 * one connected, blocking TCP socket (docs/data-connection.md).
 *
 * Frame: u32 LE n (plaintext bytes, 1 .. max_frame) | n bytes of AES-256-GCM
 * ciphertext | 16-byte tag. The 4 length bytes are the AAD. The 12-byte nonce
 * is u32 LE direction (GL_DIR_*) followed by u64 LE frame counter, from 0 in
 * each direction; a key is used in one direction only, so no nonce repeats.
 *
 * The keys come from Python (HKDF over the peer link's authenticated
 * handshake); AES-GCM and SHA-256 come from OpenSSL's libcrypto, loaded at run
 * time (every Linux CPython links it), so building needs no OpenSSL headers.
 *
 * Ownership and threads: a stream borrows its fd (the caller closes it after
 * gl_stream_free). Any number of threads may send (one lock orders whole
 * frames); exactly one thread receives. gl_stream_shutdown may be called from
 * any thread to wake both. After any error the stream is dead: every later
 * call returns the same error.
 */
#ifndef GLEAM_DPSTREAM_H
#define GLEAM_DPSTREAM_H

#include <stddef.h>
#include <stdint.h>

/* cdef: begin */
enum { GL_DIR_TO_SERVER = 0, GL_DIR_TO_CLIENT = 1 };
enum { GL_STREAM_KEY_SIZE = 32, GL_STREAM_TAG_SIZE = 16, GL_STREAM_HEADER_SIZE = 4 };

enum {
    GL_STREAM_E_IO = -1,        /* the socket failed (errno in gl_stream_errno) */
    GL_STREAM_E_TRUNCATED = -2, /* the peer closed the connection inside a frame */
    GL_STREAM_E_TOO_BIG = -3,   /* a frame longer than max_frame, or empty */
    GL_STREAM_E_AUTH = -4,      /* a frame that does not authenticate */
    GL_STREAM_E_CRYPTO = -5,    /* libcrypto failed */
    GL_STREAM_E_CLOSED = -6,    /* shut down by gl_stream_shutdown */
    GL_STREAM_E_NOMEM = -7
};

typedef struct gl_stream gl_stream;

typedef struct {
    uint64_t frames_sent, bytes_sent;         /* plaintext bytes */
    uint64_t frames_received, bytes_received; /* plaintext bytes */
} gl_stream_counters;

/* A stream on fd; NULL with the reason in err on failure. */
gl_stream *gl_stream_new(int fd, const uint8_t *send_key, uint32_t send_dir,
                         const uint8_t *recv_key, uint32_t recv_dir, uint32_t max_frame,
                         char *err, size_t err_cap);

/* The two ends of a stream inside this process (dplocal.h): a session an agent
 * serves for its own program, with the same lanes as a peer's. Frames are
 * copied once into a bounded queue and never sealed (they never leave the
 * process); max_queued bounds what one direction holds. 0, or
 * GL_STREAM_E_NOMEM / GL_STREAM_E_TOO_BIG (a bad max_frame). */
int gl_stream_pair(uint32_t max_frame, uint64_t max_queued, gl_stream **a, gl_stream **b);

/* Seals and writes one frame: the concatenation of parts[0 .. nparts). Returns 0
 * or a GL_STREAM_E_* code. Thread-safe. */
int gl_stream_sendv(gl_stream *s, const uint8_t *const *parts, const size_t *lens, int nparts);
int gl_stream_send(gl_stream *s, const uint8_t *buf, size_t len);

/* Reads, authenticates and opens the next frame (the receiving thread only).
 * *out then points at the plaintext inside the stream's buffer, valid until the
 * next gl_stream_recv or gl_stream_free. Returns its length (> 0), 0 at a clean
 * end of stream (the peer closed between frames), or a GL_STREAM_E_* code. */
int64_t gl_stream_recv(gl_stream *s, uint8_t **out);

/* Wakes a blocked send or recv (shutdown(2) of both directions); any thread. */
void gl_stream_shutdown(gl_stream *s);

void gl_stream_counters_get(gl_stream *s, gl_stream_counters *out);
int gl_stream_errno(gl_stream *s);
const char *gl_stream_strerror(int code);
void gl_stream_free(gl_stream *s);
/* cdef: end */

#endif
