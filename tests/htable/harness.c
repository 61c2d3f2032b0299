/* Drives cffi_build/common/htable.c against a plain array model: random puts,
 * takes and lookups over a small key space (so keys collide, come back after
 * removal and leave tombstones), checked after every step. Exit 0 on success. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "gl_htable.h"

#define KEYS 600
#define STEPS 200000

static uint64_t rng = 88172645463325252ull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Minted handles carry a tag and kind in the high bits over a dense serial. */
static uint64_t key_of(size_t i)
{
    return (0x67ull << 56) | (3ull << 48) | (uint64_t)(i + 1);
}

static void count_one(uint64_t key, void *val, void *arg)
{
    (void)key;
    (void)val;
    ++*(size_t *)arg;
}

static int fail(const char *what, size_t step)
{
    fprintf(stderr, "step %zu: %s\n", step, what);
    return 1;
}

int main(void)
{
    gl_htable t = {0};
    void *model[KEYS] = {0};
    size_t live = 0;

    if (gl_htable_put(&t, 0, model) != -1 || gl_htable_find(&t, 0) != NULL)
        return fail("key 0 must be refused", 0);
    for (size_t step = 0; step < STEPS; step++) {
        size_t i = next() % KEYS;
        uint64_t k = key_of(i);
        void *v = &model[next() % KEYS];
        switch (next() % 3) {
        case 0:
            if (gl_htable_put(&t, k, v) != 0)
                return fail("put failed", step);
            live += model[i] == NULL;
            model[i] = v;
            break;
        case 1:
            if (gl_htable_take(&t, k) != model[i])
                return fail("take returned another value", step);
            live -= model[i] != NULL;
            model[i] = NULL;
            break;
        default: {
            gl_hslot *s = gl_htable_find(&t, k);
            if ((s ? s->val : NULL) != model[i])
                return fail("find disagrees with the model", step);
        }
        }
        if (t.used * 2 > t.cap)
            return fail("more than half the slots used", step);
        if (step % 997 == 0) {
            size_t n = 0;
            gl_htable_each(&t, count_one, &n);
            if (n != live)
                return fail("each visits another number of entries", step);
        }
    }
    /* Removing everything and refilling must not grow the table: tombstones
     * are rehashed away at the same size. */
    for (size_t i = 0; i < KEYS; i++)
        gl_htable_take(&t, key_of(i));
    size_t cap = t.cap;
    for (int round = 0; round < 50; round++)
        for (size_t i = 0; i < KEYS; i++) {
            if (gl_htable_put(&t, key_of(i), model) != 0)
                return fail("refill put failed", (size_t)round);
            gl_htable_take(&t, key_of(i));
        }
    if (t.cap != cap)
        return fail("churn grew the table", 0);
    gl_htable_free(&t);
    if (t.cap != 0 || gl_htable_find(&t, key_of(1)) != NULL)
        return fail("a freed table is not empty", 0);
    puts("ok");
    return 0;
}
