/*
 * notes.h — why the server refused or faulted, told to the program. A fault
 * or refusal that the executor or a backend records for a session (a kernel's
 * illegal address, a PTX the host device refuses, a pointer outside the
 * session's allocations) is one line; the line goes to the serving agent's
 * log at once and waits here until the next waiting reply that reports an
 * error carries it to the program (docs/cuda-forwarding.md, "Diagnostics").
 *
 * Bounded so that a kernel faulting in a loop cannot grow a reply or the
 * server's memory: GL_NOTES_PENDING bytes wait at most, a session hands the
 * program GL_NOTES_BUDGET lines in all, and what does not fit is counted and
 * said in one closing line. Writing a note never blocks and never fails the
 * call that records it. A gl_notes belongs to one gl_exec and is touched only
 * by the thread that runs its batches.
 */
#ifndef GLEAM_NOTES_H
#define GLEAM_NOTES_H

#include <stddef.h>
#include <stdint.h>

#include "exec_api.h"

#define GL_NOTES_PENDING 4096 /* bytes of lines waiting for a reply */
/* GL_NOTES_LINE (exec_api.h): one line at most (templated kernel names are long) */
#define GL_NOTES_BUDGET 32    /* lines a session hands its program in all */

_Static_assert(GL_NOTES_PENDING + 256 <= GL_REPLY_NOTES_MAX,
               "a reply must hold every waiting line and the closing one");

typedef struct {
    char pending[GL_NOTES_PENDING]; /* '\n'-terminated lines */
    size_t len;
    uint32_t dropped;   /* lines since the last take that only the log has */
    uint32_t delivered; /* lines handed to the program so far */
    int closed;         /* the budget is spent and the closing line went out */
} gl_notes;

/* Keeps one line for the program (text has no newline: one is added; bytes
 * below 0x20 become '?', since the text is the server's and the terminal
 * the user's). The caller logs it. */
void gl_notes_add(gl_notes *n, const char *text);
/* Moves whole waiting lines into out (at most cap bytes) and returns how many
 * bytes it wrote; lines that do not fit stay for the next error reply. */
size_t gl_notes_take(gl_notes *n, uint8_t *out, size_t cap);

#endif /* GLEAM_NOTES_H */
