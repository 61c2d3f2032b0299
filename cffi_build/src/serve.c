/*
 * serve.c — the serving agent's native lane (serve.h).
 */
#include "serve.h"

#include <stdlib.h>
#include <string.h>

#include "gl_bytes.h"
#include "gl_session.h"

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

static int send_reply(gl_serve *v, size_t n)
{
    int sent = gl_stream_send(v->s, v->reply, n);
    if (sent != 0) {
        v->error = sent;
        return GL_SERVE_E_STREAM;
    }
    return 0;
}

int gl_serve_next(gl_serve *v, uint8_t **out, uint64_t *len)
{
    if (v->reply_owed) { /* Python has stored the batch it was held back for */
        size_t n = v->reply_owed;
        v->reply_owed = 0;
        if (send_reply(v, n) != 0)
            return GL_SERVE_E_STREAM;
    }
    for (;;) {
        uint8_t *env;
        int64_t n = gl_stream_recv(v->s, &env);
        if (n == 0)
            return GL_SERVE_END;
        if (n < 0) {
            v->error = (int)n;
            return GL_SERVE_E_STREAM;
        }
        if (!gl_env_is(env, (uint64_t)n, GL_ENV_BATCH, v->session))
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
        v->records += blen >= 24 ? gl_get_u32(batch + 16) : 0;
        v->bytes_in += (uint64_t)n;
        /* It ran; its cacheable payloads go to the store (Python), its reply after them. */
        int store = v->cache_min && gl_exec_last_max_inline(v->x) >= v->cache_min;
        if (rc != 1) {
            if (store) {
                *out = env;
                *len = (uint64_t)n;
                return GL_SERVE_STORE;
            }
            continue;
        }
        gl_env_header(v->reply, GL_ENV_REPLY, v->session, (uint32_t)reply_len);
        v->replies++;
        v->bytes_out += GL_ENV_HEADER_SIZE + reply_len;
        if (store) { /* the reply goes at the next call, after the store took the payloads */
            v->reply_owed = GL_ENV_HEADER_SIZE + reply_len;
            *out = env;
            *len = (uint64_t)n;
            return GL_SERVE_STORE;
        }
        if (send_reply(v, GL_ENV_HEADER_SIZE + reply_len) != 0)
            return GL_SERVE_E_STREAM;
    }
}
