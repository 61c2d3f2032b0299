/*
 * dpcrypto.h — OpenSSL's libcrypto, opened at run time (dlopen) so that
 * building gleam needs no OpenSSL headers: CPython's _ssl and _hashlib link it,
 * so every Linux CPython has one. The EVP types stay opaque; only the
 * prototypes gleam calls are declared, by hand, below.
 *
 * gl_crypto() loads the library once (pthread_once) and runs one AES-256-GCM
 * known-answer test; the table it returns is read-only afterwards and may be
 * used from any thread. Cipher contexts are not shared: each owner (a stream's
 * direction) creates its own.
 */
#ifndef GLEAM_DPCRYPTO_H
#define GLEAM_DPCRYPTO_H

#include <stddef.h>
#include <stdint.h>

/* OpenSSL's EVP_CTRL_GCM_* numbers (stable since 1.0.1). */
enum { GL_EVP_GCM_SET_IVLEN = 0x9, GL_EVP_GCM_GET_TAG = 0x10, GL_EVP_GCM_SET_TAG = 0x11 };

/* cdef: begin */
/* Bytes a stream seals between two writes, at most (dpstream.c, SEAL_PIECE_MAX),
 * and opens per read (OPEN_PIECE): large enough that the syscall is cheap
 * beside it; sizes chosen by measurement (docs/data-connection.md). */
#define GL_GCM_PIECE (1024u * 1024u)
#define GL_GCM_OPEN_PIECE (512u * 1024u)
/* cdef: end */

typedef struct gl_evp_ctx gl_evp_ctx; /* EVP_CIPHER_CTX */

typedef struct {
    gl_evp_ctx *(*ctx_new)(void);
    void (*ctx_free)(gl_evp_ctx *c);
    const void *(*aes_256_gcm)(void);
    int (*encrypt_init)(gl_evp_ctx *c, const void *cipher, void *engine, const uint8_t *key,
                        const uint8_t *iv);
    int (*decrypt_init)(gl_evp_ctx *c, const void *cipher, void *engine, const uint8_t *key,
                        const uint8_t *iv);
    int (*ctrl)(gl_evp_ctx *c, int type, int arg, void *ptr);
    int (*encrypt_update)(gl_evp_ctx *c, uint8_t *out, int *outl, const uint8_t *in, int inl);
    int (*decrypt_update)(gl_evp_ctx *c, uint8_t *out, int *outl, const uint8_t *in, int inl);
    int (*encrypt_final)(gl_evp_ctx *c, uint8_t *out, int *outl);
    int (*decrypt_final)(gl_evp_ctx *c, uint8_t *out, int *outl);
    int (*digest)(const void *data, size_t n, uint8_t *md, unsigned int *size, const void *type,
                  void *engine);
    const void *(*sha256)(void);
} gl_crypto_api;

/* The loaded table, or NULL (gl_crypto_status says why). */
const gl_crypto_api *gl_crypto(void);

/* cdef: begin */
/* What gl_sha256 returns when libcrypto fails: the data connection's
 * GL_STREAM_E_CRYPTO too (dpstream.c checks that they agree). */
#define GL_CRYPTO_E_FAIL -5

/* NULL when libcrypto is loaded and AES-256-GCM works, else why not (static text). */
const char *gl_crypto_status(void);

/* SHA-256 of data[0 .. len) into out (32 bytes): 0, or GL_CRYPTO_E_FAIL. */
int gl_sha256(const uint8_t *data, size_t len, uint8_t *out);

/* Bytes per CPU-second (of the calling thread) that libcrypto's AES-256-GCM
 * seals (open 0) or opens (open 1) in place, in frames of `frame` bytes handled
 * `piece` bytes at a time, over at least `total` bytes; -1 when it cannot. The
 * cipher's share of a stream's cost without its sockets, for bench wire. */
double gl_crypto_gcm_rate(uint32_t frame, uint32_t piece, uint64_t total, int open);
/* cdef: end */

#endif
