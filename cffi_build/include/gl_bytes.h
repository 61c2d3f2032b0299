/*
 * gl_bytes.h — little-endian integers at any address, and the envelope check
 * both agents' native lanes make (gl_session.h has the envelope's bytes).
 *
 * On a little-endian host a load is one unaligned move (memcpy), else the bytes
 * are assembled one by one: the same value either way, whatever the alignment.
 * Header-only (static inline), no state: shared by the native core and the
 * interposer.
 */
#ifndef GLEAM_BYTES_H
#define GLEAM_BYTES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gl_session.h"

static inline uint16_t gl_get_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t gl_get_u32(const uint8_t *p)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
#else
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
#endif
}

static inline uint64_t gl_get_u64(const uint8_t *p)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
#else
    return (uint64_t)gl_get_u32(p) | ((uint64_t)gl_get_u32(p + 4) << 32);
#endif
}

static inline void gl_put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void gl_put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static inline void gl_put_u64(uint8_t *p, uint64_t v)
{
    gl_put_u32(p, (uint32_t)v);
    gl_put_u32(p + 4, (uint32_t)(v >> 32));
}

/* An envelope header's flags and reserved bits (0 in every envelope a
 * well-behaved end writes). */
static inline uint32_t gl_env_bits(const uint8_t *env)
{
    return env[offsetof(gl_env_head, flags)] | gl_get_u16(env + offsetof(gl_env_head, reserved));
}

/* Whether the n bytes at env are one whole envelope of type kind for session:
 * its length is the rest of the bytes, its flags and reserved bits are zero. */
static inline int gl_env_is(const uint8_t *env, uint64_t n, uint8_t kind, uint64_t session)
{
    return n >= GL_ENV_HEADER_SIZE && gl_get_u32(env) == n - GL_ENV_HEADER_SIZE
           && env[GL_ENV_TYPE_AT] == kind && gl_env_bits(env) == 0
           && gl_get_u64(env + GL_ENV_SESSION_AT) == session;
}

/* Writes an envelope header for a body of body_len bytes that follows it: the
 * one writer of envelope headers in C (the interposer passes session 0, which
 * its agent stamps). */
static inline void gl_env_header(uint8_t *env, uint8_t kind, uint64_t session, uint32_t body_len)
{
    memset(env, 0, GL_ENV_HEADER_SIZE);
    gl_put_u32(env + offsetof(gl_env_head, body_len), body_len);
    env[GL_ENV_TYPE_AT] = kind;
    gl_put_u64(env + GL_ENV_SESSION_AT, session);
}

/* Writes a reply trailer's section header for len bytes that follow it. */
static inline void gl_section_header(uint8_t *out, uint8_t kind, uint8_t flags, uint32_t len)
{
    memset(out, 0, GL_SECTION_HEADER_SIZE);
    out[offsetof(gl_section_head, kind)] = kind;
    out[offsetof(gl_section_head, flags)] = flags;
    gl_put_u32(out + offsetof(gl_section_head, len), len);
}

#endif
