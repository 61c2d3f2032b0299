/*
 * digest_lanes.h — BLAKE3's compression run over LANES inputs at once, one
 * input per vector lane. Written once; digest.c includes it per width with
 *   LANES       the lanes of a vector,
 *   SUFFIX      the name's ending (lanes_<SUFFIX>; its vector type is
 *               dl_vec_<SUFFIX>, LANES 32-bit words),
 *   TARGET      the function's target attribute (empty for portable C),
 *   LOAD_BLOCK  a function (m, p, row) that fills m[j] with word j of the
 *               64-byte block at p + row[k] in lane k, for every lane:
 *               the lanes' blocks transposed.
 *
 * The function hashes N inputs (N <= LANES) that lie STRIDE bytes apart
 * from BASE, each BLOCKS whole 64-byte blocks, from the chaining value IV,
 * and writes each one's 32-byte chaining value to OUT + 32 k. Spare lanes
 * repeat the last input so that every load stays inside the caller's bytes.
 * Every input is read before any output is written, so OUT may be BASE.
 *
 * The small loops are unrolled by pragma: left as loops, GCC kept the state
 * vectors on the stack between blocks (8 % slower at -O2).
 */
#define DL_CAT_(a, b) a##b
#define DL_CAT(a, b) DL_CAT_(a, b)
#define DL_VEC DL_CAT(dl_vec_, SUFFIX)


TARGET static void DL_CAT(lanes_, SUFFIX)(const uint8_t *base, uint32_t stride, unsigned n,
                                          unsigned blocks, const b3_job *job, uint8_t *out)
{
    uint32_t row[LANES];
    DL_VEC lo, hi;
    for (unsigned k = 0; k < LANES; k++) {
        unsigned from = k < n ? k : n - 1;
        row[k] = from * stride;
        uint64_t c = job->counter + (job->count_lanes ? from : 0);
        lo[k] = (uint32_t)c;
        hi[k] = (uint32_t)(c >> 32);
    }
    DL_VEC h[8];
    _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++)
        h[i] = (DL_VEC){} + B3_IV[i];
    for (unsigned b = 0; b < blocks; b++) {
        const uint8_t *p = base + (size_t)b * B3_BLOCK;
        DL_VEC m[16];
        LOAD_BLOCK(m, p, row);
        unsigned fl = job->flags | (b == 0 ? job->first : 0) | (b + 1 == blocks ? job->last : 0);
        DL_VEC v[16];
        _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++)
            v[i] = h[i];
        _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)
            v[8 + i] = (DL_VEC){} + B3_IV[i];
        v[12] = lo;
        v[13] = hi;
        v[14] = (DL_VEC){} + (uint32_t)B3_BLOCK;
        v[15] = (DL_VEC){} + fl;
        B3_ROUNDS(v, m);
        _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++)
            h[i] = v[i] ^ v[i + 8];
    }
    for (unsigned k = 0; k < n; k++)
        for (int i = 0; i < 8; i++)
            b3_store32(out + 32 * k + 4 * i, h[i][k]);
}

#undef DL_VEC
