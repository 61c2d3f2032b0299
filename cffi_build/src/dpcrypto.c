/* dpcrypto.c — see dpcrypto.h. The only global state is the table and the
 * status text, written once under pthread_once and read-only afterwards. */
#include "dpcrypto.h"

#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include "dpstream.h"

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
        return GL_STREAM_E_CRYPTO;
    if (a->digest(len ? (const void *)data : (const void *)"", len, out, &n, a->sha256(), NULL)
            != 1
        || n != 32)
        return GL_STREAM_E_CRYPTO;
    return 0;
}
