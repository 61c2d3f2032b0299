/*
 * gl_session.h — what the interposer, the agents and the executor agree on
 * besides the record format: the envelope around every message of a session,
 * the session hello and the waiting-call reply. docs/cuda-forwarding.md has
 * the story; this file has the bytes.
 */
#ifndef GLEAM_SESSION_H
#define GLEAM_SESSION_H

#include <stddef.h>
#include <stdint.h>

/* The layouts below are written as structs so that Python reads sizes and
 * offsets from them (cffi) instead of keeping its own copy; on the wire every
 * integer is little-endian, and the code reads and writes the bytes at these
 * offsets (gl_bytes.h), never the structs themselves. */
/* cdef: begin */
#define GL_ENV_HEADER_SIZE 16
/* Envelope: its header, then body_len bytes of body. flags and reserved are 0;
 * the agents stamp the session (the interposer sends 0). */
typedef struct {
    uint32_t body_len;
    uint8_t type;       /* GL_ENV_* */
    uint8_t flags;
    uint16_t reserved;
    uint64_t session;
} gl_env_head;
/* BLOB: digest(32) | bytes, the client agent's answer to a server that missed a
 * blob reference (peer/cache/client.py). RING: only on the program's socket,
 * a note that the next envelope waits in the hand-over ring (gl_ring.h); the
 * client agent forwards the BATCH it finds there. GL_ENV_RING is the last type
 * a program sends. CLAIMED: only between agents, a BATCH with the content
 * digests the client agent computed for its cacheable inline payloads
 * (gl_claims_head, count gl_claim, then the batch; docs/cache.md). */
enum gl_env_type {
    GL_ENV_BATCH = 1,
    GL_ENV_REPLY = 2,
    GL_ENV_HELLO = 3,
    GL_ENV_FAIL = 4,
    GL_ENV_BLOB = 5,
    GL_ENV_RING = 6,
    GL_ENV_CLAIMED = 7
};
/* A claim: record is the batch's record (from 0) whose inline payload of len
 * bytes the sender says has this content digest. The server keeps the payload
 * under it unverified and hashes it when a reference first resolves to it. */
#define GL_CLAIMS_HEAD_SIZE 8
#define GL_CLAIM_SIZE 48
typedef struct {
    uint32_t count;
    uint32_t zero;
} gl_claims_head;
typedef struct {
    uint32_t record;
    uint32_t zero;
    uint64_t len;
    uint8_t digest[32];
} gl_claim;
/* A FAIL body: why the session ended, UTF-8, at most this many bytes; the
 * interposer shows all of it on the program's stderr. */
#define GL_FAIL_REASON_MAX 1000

/* Host-to-device payloads up to this size travel inside the batch buffer;
 * larger ones go out by writev from the application's buffer. */
#define GL_INLINE_MAX (64u * 1024u)
/* Copies are cut into chunks of at most this size (one envelope each). Small
 * enough that the five stages of a copy (program -> client agent -> seal ->
 * link -> open -> device memory) overlap: 8 MiB chunks reached 65% of the
 * 10 Gbit/s lab link, 2 MiB 74-82%, 1 MiB 88-90% (docs/benchmarks.md). */
#define GL_COPY_CHUNK (1u * 1024u * 1024u)
/* The interposer's batch buffer: a batch is flushed when the next record
 * does not fit. */
#define GL_BATCH_CAPACITY (256u * 1024u)
/* A REPLY body: i32 result, i32 deferred, u32 n_values, u32 n_bytes,
 * u64 values[GL_REPLY_MAX_VALUES] (n_values of them meaningful), then n_bytes
 * bytes, then the trailer's sections (below; the envelope's length tells
 * whether there are any). Notes are UTF-8 lines, each ending in '\n', that
 * say why the server faulted or refused (src/exec/notes.h). The value slots are
 * fixed so that the executor can write output bytes in place before it knows
 * anything else. */
#define GL_REPLY_MAX_VALUES 8
#define GL_REPLY_HEADER_SIZE (16 + 8 * GL_REPLY_MAX_VALUES)
typedef struct {
    int32_t result;
    int32_t deferred;
    uint32_t n_values;
    uint32_t n_bytes;
    uint64_t values[GL_REPLY_MAX_VALUES];
} gl_reply_head;
#define GL_REPLY_NOTES_MAX 8192
/* The reply's trailer: after its bytes, zero or more sections, each
 * u8 kind, u8 flags, u16 0, u32 len, bytes[len]:
 *   GL_SECTION_NOTES   the server's notes (above), only in a reply that reports
 *                      an error, at most GL_REPLY_NOTES_MAX bytes, first;
 *   GL_SECTION_STDOUT, GL_SECTION_STDERR  what the session's kernels printed
 *                      (device printf; a failed device assertion's message),
 *                      released at CUDA's flush points, in order; the program
 *                      writes it to its own stdout or stderr. At most
 *                      GL_REPLY_OUTPUT_MAX bytes of such sections (headers
 *                      included) in one reply; GL_SECTION_MORE in the last
 *                      one's flags says more waits (glOutputTake fetches it). */
#define GL_SECTION_HEADER_SIZE 8
typedef struct {
    uint8_t kind;       /* GL_SECTION_* */
    uint8_t flags;      /* GL_SECTION_MORE */
    uint16_t zero;
    uint32_t len;
} gl_section_head;
enum { GL_SECTION_NOTES = 1, GL_SECTION_STDOUT = 2, GL_SECTION_STDERR = 3 };
#define GL_SECTION_MORE 1
#define GL_REPLY_OUTPUT_MAX 1048576
#define GL_REPLY_TRAILER_MAX (GL_SECTION_HEADER_SIZE + GL_REPLY_NOTES_MAX + GL_REPLY_OUTPUT_MAX)

#define GL_MAX_DEVICES 8
#define GL_DEVICE_ATTR_SLOTS 256
#define GL_NAME_LEN 256
/* cdef: end */
#define GL_ENV_TYPE_AT offsetof(gl_env_head, type)
#define GL_ENV_SESSION_AT offsetof(gl_env_head, session)
_Static_assert(sizeof(gl_env_head) == GL_ENV_HEADER_SIZE, "envelope header: 16 bytes, no padding");
_Static_assert(sizeof(gl_reply_head) == GL_REPLY_HEADER_SIZE, "reply header: no padding");
_Static_assert(sizeof(gl_claims_head) == GL_CLAIMS_HEAD_SIZE, "claims header: no padding");
_Static_assert(sizeof(gl_claim) == GL_CLAIM_SIZE, "claim: no padding");
_Static_assert(sizeof(gl_section_head) == GL_SECTION_HEADER_SIZE, "section header: no padding");

#define GL_HELLO_LINE_LEN 512

typedef struct {
    char name[GL_NAME_LEN];      /* NUL-terminated */
    uint64_t total_mem;
    uint8_t uuid[16];
    int32_t attrs[GL_DEVICE_ATTR_SLOTS]; /* by CUdevice_attribute number; 0 if unknown */
} gl_device_info;

/* The HELLO body. All integers little-endian (both ends are x86-64/aarch64 Linux). */
typedef struct {
    uint32_t magic;              /* GL_HELLO_MAGIC */
    uint32_t version;            /* GL_HELLO_VERSION */
    uint64_t session;
    uint64_t va_base;            /* the session's device address range */
    uint64_t va_size;
    int32_t driver_version;      /* what cuDriverGetVersion answers */
    int32_t device_count;
    char server[64];             /* serving peer's name, NUL-terminated */
    char backend[16];            /* "cuda" or "host" */
    /* Where the session runs and why, in words, for the program's user: the line
     * the interposer prints on stderr under `gleam-peer run` (GLEAM_SESSION_LINE).
     * NUL-terminated UTF-8. */
    char line[GL_HELLO_LINE_LEN];
    gl_device_info devices[GL_MAX_DEVICES];
} gl_session_hello;

#define GL_HELLO_MAGIC 0x4f4c4847u /* "GHLO" */
#define GL_HELLO_VERSION 2u

#endif /* GLEAM_SESSION_H */
