/*
 * ptxc_spawn.h — running the C compiler so that nothing of it outlives the
 * agent: its own process group, killed with the agent (a parent-death
 * signal when the agent is killed, the exit handler when it exits), and its
 * own temporary folder, which also holds the compiler's temporary files
 * (TMPDIR) and is removed whole.
 */
#ifndef PTXC_SPAWN_H
#define PTXC_SPAWN_H

#include <stddef.h>

/* A new private folder under $TMPDIR (else /tmp) into OUT: 0, or -1 (errno). */
int ptxc_temp_dir_make(char *out, size_t n);

/* Removes DIR and every file in it (the compiler may leave any names). */
void ptxc_temp_dir_remove(const char *dir);

/* Runs ARGV (argv[0] looked up on PATH) with stdin from /dev/null, stdout
 * and stderr into LOG and TMPDIR set to DIR; kills its whole process group
 * after TIMEOUT_MS. Its exit status, or -1 (no start, killed, or killed by
 * a signal). */
int ptxc_spawn_run(char *const argv[], const char *dir, const char *log, int timeout_ms);

/* Kills every compile still running and removes its folder. Runs by itself
 * when the process exits; callable before (idempotent). */
void ptxc_spawn_stop_all(void);

#endif
