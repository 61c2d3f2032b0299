/* dpcrypto.c — see dpcrypto.h. The only global state is the table and the
 * status text, written once under pthread_once and read-only afterwards. */
#include "dpcrypto.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


static gl_crypto_api api;
static const gl_crypto_api *loaded;
static const char *status = "libcrypto was not loaded";
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* Resolves every entry point from one handle; 0 when any is missing. */
static int resolve(void *h, gl_crypto_api *a)
{
    struct {
        void **slot;
        const char *name;
    } syms[] = {
        {(void **)&a->ctx_new, "EVP_CIPHER_CTX_new"},
        {(void **)&a->ctx_free, "EVP_CIPHER_CTX_free"},
        {(void **)&a->aes_256_gcm, "EVP_aes_256_gcm"},
        {(void **)&a->encrypt_init, "EVP_EncryptInit_ex"},
        {(void **)&a->decrypt_init, "EVP_DecryptInit_ex"},
        {(void **)&a->ctrl, "EVP_CIPHER_CTX_ctrl"},
        {(void **)&a->encrypt_update, "EVP_EncryptUpdate"},
        {(void **)&a->decrypt_update, "EVP_DecryptUpdate"},
        {(void **)&a->encrypt_final, "EVP_EncryptFinal_ex"},
        {(void **)&a->decrypt_final, "EVP_DecryptFinal_ex"},
        {(void **)&a->digest, "EVP_Digest"},
        {(void **)&a->sha256, "EVP_sha256"},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        /* POSIX guarantees a data pointer can hold a function's address here. */
        *syms[i].slot = dlsym(h, syms[i].name);
        if (*syms[i].slot == NULL)
            return 0;
    }
    return 1;
}

/* NIST GCM test case 14: key and IV all zero, one zero block. A libcrypto
 * whose AES-GCM gives other bytes (a stub, a FIPS build refusing) is unusable. */
static int known_answer(const gl_crypto_api *a)
{
    static const uint8_t want_ct[16] = {0xce, 0xa7, 0x40, 0x3d, 0x4d, 0x60, 0x6b, 0x6e,
                                        0x07, 0x4e, 0xc5, 0xd3, 0xba, 0xf3, 0x9d, 0x18};
    static const uint8_t want_tag[16] = {0xd0, 0xd1, 0xc8, 0xa7, 0x99, 0x99, 0x6b, 0xf0,
                                         0x26, 0x5b, 0x98, 0xb5, 0xd4, 0x8a, 0xb9, 0x19};
    uint8_t key[32] = {0}, iv[12] = {0}, pt[16] = {0}, ct[16], tag[16];
    int n = 0, fin = 0, ok;
    gl_evp_ctx *c = a->ctx_new();

    if (c == NULL)
        return 0;
    ok = a->encrypt_init(c, a->aes_256_gcm(), NULL, NULL, NULL) == 1
         && a->ctrl(c, GL_EVP_GCM_SET_IVLEN, 12, NULL) == 1
         && a->encrypt_init(c, NULL, NULL, key, iv) == 1
         && a->encrypt_update(c, ct, &n, pt, 16) == 1 && n == 16
         && a->encrypt_final(c, ct + n, &fin) == 1 && fin == 0
         && a->ctrl(c, GL_EVP_GCM_GET_TAG, 16, tag) == 1
         && memcmp(ct, want_ct, 16) == 0 && memcmp(tag, want_tag, 16) == 0;
    a->ctx_free(c);
    return ok;
}

static void load(void)
{
    /* The process's own copy first: CPython's _ssl has usually loaded it. */
    static const char *names[] = {"libcrypto.so.3", "libcrypto.so.1.1", "libcrypto.so"};
    status = "libcrypto not found (tried libcrypto.so.3, libcrypto.so.1.1, libcrypto.so)";
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h == NULL)
            continue;
        if (!resolve(h, &api)) {
            status = "libcrypto lacks an EVP function gleam needs";
            dlclose(h);
            continue;
        }
        if (!known_answer(&api)) {
            status = "libcrypto's AES-256-GCM failed its known-answer test";
            dlclose(h);
            continue;
        }
        status = NULL;
        loaded = &api; /* the handle stays open for the process's life */
        return;
    }
}

const gl_crypto_api *gl_crypto(void)
{
    pthread_once(&once, load);
    return loaded;
}

const char *gl_crypto_status(void)
{
    pthread_once(&once, load);
    return status;
}

int gl_sha256(const uint8_t *data, size_t len, uint8_t *out)
{
    const gl_crypto_api *a = gl_crypto();
    unsigned int n = 0;

    if (a == NULL || (data == NULL && len != 0))
        return GL_CRYPTO_E_FAIL;
    if (a->digest(len ? (const void *)data : (const void *)"", len, out, &n, a->sha256(), NULL)
            != 1
        || n != 32)
        return GL_CRYPTO_E_FAIL;
    return 0;
}

/* The calling thread's CPU time: on a shared machine the cipher's cost per
 * byte, which is what bench wire compares, is steadier than the wall clock. */
static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

double gl_crypto_gcm_rate(uint32_t frame, uint32_t piece, uint64_t total, int open)
{
    const gl_crypto_api *a = gl_crypto();
    uint8_t key[32] = {1}, iv[12] = {0}, tag[16] = {0}, *buf;
    gl_evp_ctx *c;
    int outl, ok = 1;
    double start, secs;
    uint64_t done = 0;
    int (*init)(gl_evp_ctx *, const void *, void *, const uint8_t *, const uint8_t *);
    int (*update)(gl_evp_ctx *, uint8_t *, int *, const uint8_t *, int);

    if (a == NULL || frame == 0 || piece == 0 || piece > (1u << 30) || total == 0)
        return -1;
    init = open ? a->decrypt_init : a->encrypt_init;
    update = open ? a->decrypt_update : a->encrypt_update;
    buf = calloc(1, frame);
    c = a->ctx_new();
    if (buf == NULL || c == NULL || init(c, a->aes_256_gcm(), NULL, NULL, NULL) != 1
        || a->ctrl(c, GL_EVP_GCM_SET_IVLEN, 12, NULL) != 1 || init(c, NULL, NULL, key, NULL) != 1)
        ok = 0;
    start = cpu_s();
    /* The stream's per-frame work without its sockets: IV, AAD, the body in
     * pieces (in place), and the tag (an open's tag check fails here, which
     * costs the same as one that passes). */
    for (uint64_t seq = 0; ok && done < total; seq++) {
        iv[4] = (uint8_t)seq, iv[5] = (uint8_t)(seq >> 8), iv[6] = (uint8_t)(seq >> 16);
        ok = init(c, NULL, NULL, NULL, iv) == 1 && update(c, NULL, &outl, buf, 4) == 1;
        for (uint32_t off = 0; ok && off < frame; off += piece) {
            uint32_t k = frame - off < piece ? frame - off : piece;
            ok = update(c, buf + off, &outl, buf + off, (int)k) == 1;
        }
        if (ok && open) {
            ok = a->ctrl(c, GL_EVP_GCM_SET_TAG, 16, tag) == 1;
            a->decrypt_final(c, tag, &outl);
        } else if (ok) {
            ok = a->encrypt_final(c, tag, &outl) == 1 && a->ctrl(c, GL_EVP_GCM_GET_TAG, 16, tag) == 1;
        }
        done += frame;
    }
    secs = cpu_s() - start;
    if (c != NULL)
        a->ctx_free(c);
    free(buf);
    return ok && secs > 0 ? (double)done / secs : -1;
}
