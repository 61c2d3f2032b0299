/*
 * ptxc_spawn.c — see ptxc_spawn.h. Why not posix_spawn: it cannot ask for a
 * parent-death signal, and an agent killed mid-compile left its cc running
 * with parent 1 and its folder in /tmp. Why not fork: it would mark every
 * page of the agent (its host device's memory among them) copy-on-write, and
 * each page written afterwards would fault once. So the child is made as
 * posix_spawn makes its own: clone with CLONE_VM | CLONE_VFORK on a stack of
 * its own, the agent's thread suspended until the exec; all signals blocked
 * around it, and in the child every handled signal reset to its default, so
 * that no handler of the agent's runs on the agent's memory in the child.
 * The child makes only system calls before the exec.
 *
 * What a killed agent still leaves: the compiler driver dies with it, but
 * the driver's own children (cc1, as, ld) do not get the signal; they end
 * on their own when their pipes close, writing only into the folder, which
 * the exit handler has removed or, after SIGKILL, nobody removes.
 *
 * Global state (guarded by `lock`): the list of running compiles, whose
 * entries live on their callers' stacks for the length of a run, and
 * `stopping`, set once at exit, after which nothing new starts.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ptxc_spawn.h"

extern char **environ;

struct running {
    pid_t pid;
    pid_t owner; /* the process that started it: a forked copy's exit must not kill it */
    const char *dir;
    struct running *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct running *runs;
static int stopping;

int ptxc_temp_dir_make(char *out, size_t n)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(out, n, "%s/gleam-ptxc-XXXXXX", tmp != NULL && *tmp ? tmp : "/tmp");
    return mkdtemp(out) != NULL ? 0 : -1;
}

void ptxc_temp_dir_remove(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d == NULL) {
        if (fd >= 0)
            close(fd);
        rmdir(dir);
        return;
    }
    /* flat: the compiler makes files here, never folders */
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            unlinkat(fd, e->d_name, 0);
    closedir(d);
    rmdir(dir);
}

/* The environment with TMPDIR replaced by DIR's (malloc; NULL if no memory). */
static char **environment_in(const char *tmpdir_entry)
{
    size_t n = 0;
    while (environ != NULL && environ[n] != NULL)
        n++;
    char **env = malloc((n + 2) * sizeof *env);
    if (env == NULL)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "TMPDIR=", 7) != 0)
            env[k++] = environ[i];
    env[k++] = (char *)tmpdir_entry;
    env[k] = NULL;
    return env;
}

/* In the child: FROM becomes TO, inherited across exec. */
static void move_fd(int from, int to)
{
    if (from == to)
        fcntl(to, F_SETFD, 0);
    else
        dup2(from, to);
}

struct child {
    char *const *argv;
    char **env;
    int in, out;
    pid_t parent;
    sigset_t mask; /* the agent thread's, restored before the exec */
};

#define CHILD_STACK (64 << 10)

/* The child, on its own stack and the agent's memory, until the exec. */
static int child_main(void *arg)
{
    const struct child *c = arg;
    for (int s = 1; s < NSIG; s++) {
        struct sigaction sa;
        if (sigaction(s, NULL, &sa) == 0 && sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN) {
            sa.sa_handler = SIG_DFL;
            sa.sa_flags = 0;
            sigaction(s, &sa, NULL);
        }
    }
    setpgid(0, 0);
    /* sent when the thread that made the child ends: it waits for the child */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != c->parent)
        _exit(127);
    move_fd(c->in, 0);
    move_fd(c->out, 1);
    dup2(1, 2);
    sigprocmask(SIG_SETMASK, &c->mask, NULL);
    execvpe(c->argv[0], c->argv, c->env);
    _exit(127);
}

/* Starts the child: its pid, or -1. */
static pid_t start_child(struct child *c)
{
    void *stack = mmap(NULL, CHILD_STACK, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED)
        return -1;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &c->mask);
    pid_t pid = clone(child_main, (char *)stack + CHILD_STACK, CLONE_VM | CLONE_VFORK | SIGCHLD,
                      c);
    pthread_sigmask(SIG_SETMASK, &c->mask, NULL);
    munmap(stack, CHILD_STACK); /* the child has exec'd or exited: CLONE_VFORK */
    return pid;
}

/* Waits for PID up to TIMEOUT_MS (a pidfd, where the kernel has them);
 * kills its process group when the time is up. */
static void wait_limited(pid_t pid, int timeout_ms)
{
    int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pfd < 0)
        return;
    struct pollfd p = {.fd = pfd, .events = POLLIN};
    int r;
    do
        r = poll(&p, 1, timeout_ms);
    while (r < 0 && errno == EINTR);
    if (r == 0)
        kill(-pid, SIGKILL);
    close(pfd);
}

int ptxc_spawn_run(char *const argv[], const char *dir, const char *log, int timeout_ms)
{
    char tmpdir[300];
    snprintf(tmpdir, sizeof tmpdir, "TMPDIR=%s", dir);
    char **env = environment_in(tmpdir);
    int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int out = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    struct running me = {.pid = -1, .owner = getpid(), .dir = dir};
    struct child c = {.argv = argv, .env = env, .in = in, .out = out, .parent = me.owner};
    pthread_mutex_lock(&lock);
    if (env != NULL && in >= 0 && out >= 0 && !stopping) {
        me.pid = start_child(&c);
        if (me.pid > 0) { /* its own group already: it is past the exec */
            me.next = runs;
            runs = &me;
        }
    }
    pthread_mutex_unlock(&lock);
    free(env);
    if (in >= 0)
        close(in);
    if (out >= 0)
        close(out);
    if (me.pid <= 0)
        return -1;
    wait_limited(me.pid, timeout_ms);
    int status = 0, rc;
    while ((rc = (int)waitpid(me.pid, &status, 0)) < 0 && errno == EINTR)
        ;
    pthread_mutex_lock(&lock);
    for (struct running **r = &runs; *r != NULL; r = &(*r)->next)
        if (*r == &me) {
            *r = me.next;
            break;
        }
    pthread_mutex_unlock(&lock);
    return rc >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

__attribute__((destructor)) void ptxc_spawn_stop_all(void)
{
    pthread_mutex_lock(&lock);
    stopping = 1;
    for (struct running *r = runs; r != NULL; r = r->next) {
        if (r->owner != getpid())
            continue;
        kill(-r->pid, SIGKILL);
        /* the driver's exit, so its last writes land before the folder goes */
        wait_limited(r->pid, 2000);
        ptxc_temp_dir_remove(r->dir);
    }
    pthread_mutex_unlock(&lock);
}
