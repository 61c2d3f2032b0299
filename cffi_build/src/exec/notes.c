/*
 * notes.c — the lines a session's server keeps for its program (notes.h).
 */
#include <stdio.h>
#include <string.h>

#include "notes.h"

/* The line that ends a session's notes: the rest are only in the log. */
static const char CLOSING[] =
    "further messages of this session are only in the serving agent's log";

void gl_notes_add(gl_notes *n, const char *text)
{
    char line[GL_NOTES_LINE];
    size_t k = 0;
    for (const char *p = text; *p != '\0' && k + 1 < sizeof line; p++)
        line[k++] = (unsigned char)*p < 0x20 ? '?' : *p;
    line[k++] = '\n';
    if (n->closed || n->len + k > sizeof n->pending) {
        n->dropped++;
        return;
    }
    /* A kernel launched in a loop faults the same way each time: one line. */
    if (n->len >= k && memcmp(n->pending + n->len - k, line, k) == 0
        && (n->len == k || n->pending[n->len - k - 1] == '\n')) {
        n->dropped++;
        return;
    }
    memcpy(n->pending + n->len, line, k);
    n->len += k;
}

/* Appends "text\n" when it fits; returns the bytes written (0: it did not). */
static size_t put_line(uint8_t *out, size_t cap, const char *text)
{
    size_t k = strlen(text);
    if (k + 1 > cap)
        return 0;
    memcpy(out, text, k);
    out[k] = '\n';
    return k + 1;
}

static uint32_t count_lines(const char *p, size_t len)
{
    uint32_t c = 0;
    for (size_t i = 0; i < len; i++)
        c += p[i] == '\n';
    return c;
}

size_t gl_notes_take(gl_notes *n, uint8_t *out, size_t cap)
{
    size_t used = 0, off = 0;
    while (off < n->len && n->delivered < GL_NOTES_BUDGET) {
        const char *nl = memchr(n->pending + off, '\n', n->len - off);
        size_t k = (size_t)(nl - (n->pending + off)) + 1;
        if (used + k > cap)
            break;
        memcpy(out + used, n->pending + off, k);
        used += k;
        off += k;
        n->delivered++;
    }
    if (n->delivered >= GL_NOTES_BUDGET) { /* the rest only in the log */
        n->dropped += count_lines(n->pending + off, n->len - off);
        off = n->len;
    }
    memmove(n->pending, n->pending + off, n->len - off);
    n->len -= off;
    if (n->len > 0 || n->closed)
        return used; /* more lines wait: the counts go out after them */
    if (n->delivered >= GL_NOTES_BUDGET) {
        size_t w = put_line(out + used, cap - used, CLOSING);
        n->closed = w > 0;
        used += w;
    } else if (n->dropped > 0) {
        char text[128];
        snprintf(text, sizeof text, "(%u more message%s in the serving agent's log)", n->dropped,
                 n->dropped == 1 ? "" : "s");
        size_t w = put_line(out + used, cap - used, text);
        if (w > 0)
            n->dropped = 0;
        used += w;
    }
    return used;
}
