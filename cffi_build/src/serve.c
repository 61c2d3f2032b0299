/*
 * serve.c — the serving agent's native lane (serve.h).
 */
#include "serve.h"

#include <stdlib.h>
#include <string.h>

#include "gl_session.h"

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_u64(const uint8_t *p)
{
    return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
    put_u32(p, (uint32_t)v);
    put_u32(p + 4, (uint32_t)(v >> 32));
}

gl_serve *gl_serve_new(gl_exec *x, gl_stream *s, uint64_t session, uint32_t cache_min,
                       size_t reply_body_cap)
{
    gl_serve *v = calloc(1, sizeof *v);
    if (!v)
        return NULL;
    v->reply_cap = GL_ENV_HEADER_SIZE + reply_body_cap;
    v->reply = malloc(v->reply_cap);
    if (!v->reply) {
        free(v);
        return NULL;
    }
    v->x = x;
    v->s = s;
    v->session = session;
    v->cache_min = cache_min;
    return v;
}

void gl_serve_free(gl_serve *v)
{
    if (v) {
        free(v->reply);
        free(v);
    }
}

int gl_serve_next(gl_serve *v, uint8_t **out, uint64_t *len)
{
    for (;;) {
        uint8_t *env;
        int64_t n = gl_stream_recv(v->s, &env);
        if (n == 0)
            return GL_SERVE_END;
        if (n < 0) {
            v->error = (int)n;
            return GL_SERVE_E_STREAM;
        }
        if (n < GL_ENV_HEADER_SIZE || get_u32(env) != (uint64_t)n - GL_ENV_HEADER_SIZE
            || env[4] != GL_ENV_BATCH || env[5] || env[6] || env[7]
            || get_u64(env + 8) != v->session)
            return GL_SERVE_E_ENVELOPE;
        const uint8_t *batch = env + GL_ENV_HEADER_SIZE;
        size_t blen = (size_t)n - GL_ENV_HEADER_SIZE;
        size_t reply_len = 0;
        /* The executor reads the batch whole before it runs any of it: a blob
         * reference it cannot resolve (only Python's store can) stops it there. */
        int rc = gl_exec_run(v->x, batch, blen, v->reply + GL_ENV_HEADER_SIZE,
                             v->reply_cap - GL_ENV_HEADER_SIZE, &reply_len);
        if (rc == GL_EXEC_E_REF) {
            *out = env;
            *len = (uint64_t)n;
            return GL_SERVE_SLOW;
        }
        if (rc < 0) {
            v->error = rc;
            return GL_SERVE_E_BATCH;
        }
        v->batches++;
        v->records += blen >= 24 ? get_u32(batch + 16) : 0;
        v->bytes_in += (uint64_t)n;
        /* It ran; its cacheable payloads go to the store (Python) once replied. */
        int store = v->cache_min && gl_exec_last_max_inline(v->x) >= v->cache_min;
        if (rc != 1) {
            if (store) {
                *out = env;
                *len = (uint64_t)n;
                return GL_SERVE_STORE;
            }
            continue;
        }
        put_u32(v->reply, (uint32_t)reply_len);
        v->reply[4] = GL_ENV_REPLY;
        v->reply[5] = v->reply[6] = v->reply[7] = 0;
        put_u64(v->reply + 8, v->session);
        v->replies++;
        v->bytes_out += GL_ENV_HEADER_SIZE + reply_len;
        int sent = gl_stream_send(v->s, v->reply, GL_ENV_HEADER_SIZE + reply_len);
        if (sent != 0) {
            v->error = sent;
            return GL_SERVE_E_STREAM;
        }
        if (store) {
            *out = env;
            *len = (uint64_t)n;
            return GL_SERVE_STORE;
        }
    }
}
