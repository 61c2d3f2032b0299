/*
 * integrity.c — the answer to libcudart's start-up check of the driver (the
 * "integrity" export table, d4082055-bde6-704b-8d34-ba123c66e1f2).
 *
 * cudart 12 and 13 call the table's slot 1 three times while they
 * initialise, with a version (runtime version * 1 + 0, 1, 2) and the current
 * Unix time, and compare the 16 bytes written with their own computation; a
 * mismatch is cudaErrorSoftwareValidityNotEstablished on every later call.
 * For versions ending in 0 and 1 the answer is a constant; for the others it
 * is HMAC-MD2 (RFC 2104 over RFC 1319) under a fixed 16-byte key, of the
 * driver version, that version, the process and thread ids, the addresses of
 * the two tables and of the function, the time, then each device's UUID and
 * PCI domain, bus and device numbers. The layout and the constants come from
 * public notes on these tables (ZLUDA's dark_api); the MD2 and HMAC here are
 * written from the RFCs and checked against RFC 1319's test vectors
 * (tests/test_cuda_runtime.py).
 *
 * No state: every call computes from its arguments and the session's facts.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "gl_client_gen.h"
#include "internal.h"

/* RFC 1319, section 3.2: the permutation of 0..255 built from pi's digits. */
static const uint8_t MD2_S[256] = {
    41,  46,  67,  201, 162, 216, 124, 1,   61,  54,  84,  161, 236, 240, 6,   19,
    98,  167, 5,   243, 192, 199, 115, 140, 152, 147, 43,  217, 188, 76,  130, 202,
    30,  155, 87,  60,  253, 212, 224, 22,  103, 66,  111, 24,  138, 23,  229, 18,
    190, 78,  196, 214, 218, 158, 222, 73,  160, 251, 245, 142, 187, 47,  238, 122,
    169, 104, 121, 145, 21,  178, 7,   63,  148, 194, 16,  137, 11,  34,  95,  33,
    128, 127, 93,  154, 90,  144, 50,  39,  53,  62,  204, 231, 191, 247, 151, 3,
    255, 25,  48,  179, 72,  165, 181, 209, 215, 94,  146, 42,  172, 86,  170, 198,
    79,  184, 56,  210, 150, 164, 125, 182, 118, 252, 107, 226, 156, 116, 4,   241,
    69,  157, 112, 89,  100, 113, 135, 32,  134, 91,  207, 101, 230, 45,  168, 2,
    27,  96,  37,  173, 174, 176, 185, 246, 28,  70,  97,  105, 52,  64,  126, 15,
    85,  71,  163, 35,  221, 81,  175, 58,  195, 92,  249, 206, 186, 197, 234, 38,
    44,  83,  13,  110, 133, 40,  132, 9,   211, 223, 205, 244, 65,  129, 77,  82,
    106, 220, 55,  200, 108, 193, 171, 250, 36,  225, 123, 8,   12,  189, 177, 74,
    120, 136, 149, 139, 227, 99,  232, 109, 233, 203, 213, 254, 59,  0,   29,  57,
    242, 239, 183, 14,  102, 88,  208, 228, 166, 119, 114, 248, 235, 117, 75,  10,
    49,  68,  80,  180, 143, 237, 31,  26,  219, 153, 141, 51,  159, 17,  131, 20,
};

typedef struct {
    uint8_t x[48];     /* the state; x[0..16) is the digest */
    uint8_t sum[16];   /* the checksum */
    uint8_t block[16]; /* bytes not yet compressed */
    unsigned n;        /* how many */
    uint8_t last;      /* the checksum's running byte (L in the RFC) */
} md2;

static void md2_compress(md2 *h)
{
    uint8_t t = 0;

    for (int i = 0; i < 16; i++) {
        h->x[16 + i] = h->block[i];
        h->x[32 + i] = h->block[i] ^ h->x[i];
        h->last = h->sum[i] ^= MD2_S[h->block[i] ^ h->last];
    }
    for (int round = 0; round < 18; round++) {
        for (int k = 0; k < 48; k++)
            t = h->x[k] ^= MD2_S[t];
        t = (uint8_t)(t + round);
    }
}

static void md2_update(md2 *h, const void *data, size_t len)
{
    const uint8_t *p = data;

    while (len-- > 0) {
        h->block[h->n++] = *p++;
        if (h->n == 16) {
            md2_compress(h);
            h->n = 0;
        }
    }
}

static void md2_final(md2 *h, uint8_t out[16])
{
    uint8_t pad = (uint8_t)(16 - h->n);
    uint8_t sum[16];

    for (unsigned i = 0; i < pad; i++)
        md2_update(h, &pad, 1);
    memcpy(sum, h->sum, 16);
    md2_update(h, sum, 16);
    memcpy(out, h->x, 16);
}

/* RFC 2104 with MD2's 16-byte block: the key is exactly one block. */
static void hmac_md2(const uint8_t key[16], const void *msg, size_t len, uint8_t out[16])
{
    uint8_t pad[16], inner[16];
    md2 h;

    memset(&h, 0, sizeof h);
    for (int i = 0; i < 16; i++)
        pad[i] = key[i] ^ 0x36;
    md2_update(&h, pad, 16);
    md2_update(&h, msg, len);
    md2_final(&h, inner);
    memset(&h, 0, sizeof h);
    for (int i = 0; i < 16; i++)
        pad[i] = key[i] ^ 0x5c;
    md2_update(&h, pad, 16);
    md2_update(&h, inner, 16);
    md2_final(&h, out);
}

void gl_md2(const void *msg, size_t len, uint8_t out[16])
{
    md2 h;

    memset(&h, 0, sizeof h);
    md2_update(&h, msg, len);
    md2_final(&h, out);
}

static const uint8_t KEY[16] = {0x14, 0x6a, 0xdd, 0xae, 0x53, 0xa9, 0xa7, 0x52,
                                0xaa, 0x08, 0x41, 0x36, 0x0b, 0xf5, 0x5a, 0x9f};

#define GL_ATTR_PCI_BUS_ID 33
#define GL_ATTR_PCI_DEVICE_ID 34
#define GL_ATTR_PCI_DOMAIN_ID 50
#define GL_INTEGRITY_MAX_DEVICES 16

typedef struct {
    uint32_t driver_version;
    uint32_t version;
    uint32_t pid;
    uint32_t tid;
    const void *cudart_table;
    const void *integrity_table;
    const void *fn;
    uint64_t seconds;
} integrity_head;

typedef struct {
    uint8_t uuid[16];
    int32_t pci_domain;
    int32_t pci_bus;
    int32_t pci_device;
} integrity_device;

CUresult gl_integrity_answer(uint32_t version, uint64_t seconds, const void *cudart_table,
                             const void *integrity_table, const void *fn, uint64_t out[2])
{
    uint8_t msg[sizeof(integrity_head) + GL_INTEGRITY_MAX_DEVICES * sizeof(integrity_device)];
    uint8_t digest[16];
    integrity_head head;
    int driver = 0, count = 0;

    if (out == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (version % 10 == 0 || version % 10 == 1) {
        out[0] = version % 10 == 0 ? 0x3341181c03cb675cull : 0x1841181c03cb675cull;
        out[1] = 0x8ed383aa1f4cd1e8ull;
        return CUDA_SUCCESS;
    }
    gli_cuDriverGetVersion(&driver, 0);
    if (gli_cuDeviceGetCount(&count, 0) != CUDA_SUCCESS)
        count = 0;
    if (count > GL_INTEGRITY_MAX_DEVICES)
        count = GL_INTEGRITY_MAX_DEVICES;
    memset(&head, 0, sizeof head);
    head.driver_version = (uint32_t)driver;
    head.version = version;
    head.pid = (uint32_t)getpid();
    head.tid = (uint32_t)(uintptr_t)pthread_self();
    head.cudart_table = cudart_table;
    head.integrity_table = integrity_table;
    head.fn = fn;
    head.seconds = seconds;
    memcpy(msg, &head, sizeof head);
    size_t len = sizeof head;
    for (int d = 0; d < count; d++) {
        integrity_device dev;
        int v = 0;
        memset(&dev, 0, sizeof dev);
        gli_cuDeviceGetUuid((CUuuid *)dev.uuid, d, 0);
        dev.pci_domain = gli_cuDeviceGetAttribute(&v, GL_ATTR_PCI_DOMAIN_ID, d, 0) == 0 ? v : 0;
        dev.pci_bus = gli_cuDeviceGetAttribute(&v, GL_ATTR_PCI_BUS_ID, d, 0) == 0 ? v : 0;
        dev.pci_device = gli_cuDeviceGetAttribute(&v, GL_ATTR_PCI_DEVICE_ID, d, 0) == 0 ? v : 0;
        memcpy(msg + len, &dev, sizeof dev);
        len += sizeof dev;
    }
    hmac_md2(KEY, msg, len, digest);
    memcpy(out, digest, 16);
    return CUDA_SUCCESS;
}
