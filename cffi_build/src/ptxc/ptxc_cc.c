/*
 * ptxc_cc.c — the compile tier's compiler and cache. A kernel's C source is
 * compiled by the system's C compiler (cc from PATH, or GLEAM_PTX_CC) into a
 * shared object, kept in a cache directory under the SHA-256 of (the
 * source, which holds the ABI text, the compiler's identity, the flags and
 * the CPU), and loaded with dlopen. The cache is GLEAM_PTX_CACHE, else
 * $XDG_CACHE_HOME/gleam/ptx, else ~/.cache/gleam/ptx ("off": none); a
 * directory that another user owns or others may write is not used.
 *
 * Loading: the bytes are read into memory, their SHA-256 compared with the
 * one recorded beside them when they were compiled, and the very bytes
 * checked are what dlopen maps (a sealed memfd), so a corrupted or foreign
 * file is never loaded. No compiler, a compile that fails or a cache that
 * cannot be used: one line on stderr (once per process) and the kernel
 * stays interpreted.
 *
 * Global state: the compiler's identity and the cache directory, found once
 * (pthread_once) and read-only afterwards; the once-only log flags.
 * Ownership: ptxc_loaded owns its dlopen handle (ptxc_cc_unload).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crypto/dpcrypto.h"
#include "ptxc.h"
#include "ptxc_spawn.h"

/* -ffp-contract=off: a PTX mul and add stay two roundings (the interpreter's
 * and a GPU's meaning); -fno-strict-aliasing: device memory is read and
 * written through any type, as PTX may; -fno-math-errno only lets sqrt
 * vectorise (same result); -O3 (cfg.opt, GLEAM_PTX_OPT may lower it: the test
 * suite compiles at -O1, a third of the time): the lane loops vectorise. */
static const char *const cc_flags[] = {"-march=native", "-ffp-contract=off",
                                       "-fno-strict-aliasing", "-fno-math-errno", "-fPIC",
                                       "-shared", "-std=gnu11", "-w", "-pipe", NULL};
#define CC_TIMEOUT_MS (300 * 1000)
#define MAX_OBJECT (64u << 20)

static struct {
    char path[512];      /* the compiler; "" when none */
    uint8_t id[32];      /* SHA-256 of its --version, the flags and the CPU */
    char dir[512];       /* the cache; "" when none */
    char opt[4];         /* "-O3", or "-O0".."-O2" from GLEAM_PTX_OPT */
} cfg;
static pthread_once_t cfg_once = PTHREAD_ONCE_INIT;
static int logged_no_cc, logged_no_cache, logged_failure, logged_corrupt;

static void log_once(int *flag, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_once(int *flag, const char *fmt, ...)
{
    if (__atomic_exchange_n(flag, 1, __ATOMIC_RELAXED))
        return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "gleam: %s\n", line);
}

static void hex(const uint8_t *d, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* Reads a whole regular file (at most MAX bytes): the bytes (malloc) or NULL. */
static uint8_t *slurp(const char *path, size_t max, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return NULL;
    struct stat st;
    uint8_t *buf = NULL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size <= max
        && (buf = malloc((size_t)st.st_size + 1)) != NULL) {
        size_t got = 0;
        while (got < (size_t)st.st_size) {
            ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
            if (r <= 0)
                break;
            got += (size_t)r;
        }
        if (got != (size_t)st.st_size) {
            free(buf);
            buf = NULL;
        } else
            *len = got;
    }
    close(fd);
    return buf;
}

static int write_all(int fd, const void *data, size_t n)
{
    const uint8_t *p = data;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The CPU the code is built for (-march=native): its model and flags. */
static void cpu_identity(char *out, size_t n)
{
    size_t len = 0;
    uint8_t *info = slurp("/proc/cpuinfo", 4u << 20, &len);
    out[0] = 0;
    if (info == NULL)
        return;
    info[len] = 0;
    const char *keys[] = {"model name", "flags"};
    size_t at = 0;
    for (int k = 0; k < 2; k++) {
        const char *line = strstr((const char *)info, keys[k]);
        if (line == NULL)
            continue;
        size_t l = strcspn(line, "\n");
        if (at + l + 1 < n) {
            memcpy(out + at, line, l);
            at += l;
            out[at++] = '\n';
            out[at] = 0;
        }
    }
    free(info);
}

/* The optimisation level: GLEAM_PTX_OPT 0..3 (default 3). It is one of the
 * flags, so objects of different levels never share a cache entry. */
static void find_opt_level(void)
{
    const char *o = getenv("GLEAM_PTX_OPT");
    char level = o != NULL && o[0] >= '0' && o[0] <= '3' && o[1] == 0 ? o[0] : '3';
    snprintf(cfg.opt, sizeof cfg.opt, "-O%c", level);
}

static void find_compiler(void)
{
    const char *cc = getenv("GLEAM_PTX_CC");
    snprintf(cfg.path, sizeof cfg.path, "%s", cc != NULL && *cc ? cc : "cc");
    char dir[256], log[300];
    if (ptxc_temp_dir_make(dir, sizeof dir) != 0) {
        cfg.path[0] = 0;
        return;
    }
    snprintf(log, sizeof log, "%s/v.log", dir);
    char *argv[] = {cfg.path, "--version", NULL};
    size_t len = 0;
    uint8_t *version = ptxc_spawn_run(argv, dir, log, 30000) == 0 ? slurp(log, 1u << 20, &len) : NULL;
    ptxc_temp_dir_remove(dir);
    if (version == NULL) {
        cfg.path[0] = 0;
        return;
    }
    char cpu[8192];
    cpu_identity(cpu, sizeof cpu);
    size_t flen = sizeof cfg.opt + 1;
    for (int i = 0; cc_flags[i] != NULL; i++)
        flen += strlen(cc_flags[i]) + 1;
    size_t total = len + flen + strlen(cpu) + 64;
    char *id = malloc(total), *p = id;
    if (id == NULL) {
        free(version);
        cfg.path[0] = 0;
        return;
    }
    p += snprintf(p, total, "abi %d\n", PTXC_ABI_VERSION);
    memcpy(p, version, len);
    p += len;
    p += sprintf(p, "%s ", cfg.opt);
    for (int i = 0; cc_flags[i] != NULL; i++)
        p += sprintf(p, "%s ", cc_flags[i]);
    p += sprintf(p, "\n%s", cpu);
    if (gl_sha256((const uint8_t *)id, (size_t)(p - id), cfg.id) != 0)
        cfg.path[0] = 0; /* no SHA-256 (no libcrypto): no safe cache key, no compile */
    free(id);
    free(version);
}

/* The cache directory: made 0700 if missing; used only if it is ours and no
 * one else may write it. */
static void find_cache(void)
{
    const char *env = getenv("GLEAM_PTX_CACHE"), *xdg = getenv("XDG_CACHE_HOME"),
               *home = getenv("HOME");
    cfg.dir[0] = 0;
    if (env != NULL && (*env == 0 || strcmp(env, "off") == 0))
        return;
    char base[480];
    if (env != NULL)
        snprintf(cfg.dir, sizeof cfg.dir, "%s", env);
    else if (xdg != NULL && *xdg == '/') {
        snprintf(base, sizeof base, "%s/gleam", xdg);
        mkdir(xdg, 0700);
        mkdir(base, 0700);
        snprintf(cfg.dir, sizeof cfg.dir, "%s/ptx", base);
    } else if (home != NULL && *home == '/') {
        snprintf(base, sizeof base, "%s/.cache", home);
        mkdir(base, 0700);
        snprintf(base, sizeof base, "%s/.cache/gleam", home);
        mkdir(base, 0700);
        snprintf(cfg.dir, sizeof cfg.dir, "%s/ptx", base);
    } else
        return;
    mkdir(cfg.dir, 0700);
    struct stat st;
    if (lstat(cfg.dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()
        || (st.st_mode & 022) != 0) {
        log_once(&logged_no_cache, "the compile tier's cache %s is not a directory of this user "
                 "that only it may write: compiled kernels are not kept", cfg.dir);
        cfg.dir[0] = 0;
    }
}

static void configure(void)
{
    find_opt_level();
    find_compiler();
    find_cache();
}

/* dlopen of exactly these bytes: a sealed memfd, so nothing can change them
 * between the check and the load. */
static int load_bytes(const uint8_t *so, size_t len, ptxc_loaded *out, char *why, size_t n)
{
    int fd = memfd_create("gleam-ptxc", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
        snprintf(why, n, "memfd_create: %s", strerror(errno));
        return -1;
    }
    if (write_all(fd, so, len) != 0
        || fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) != 0) {
        snprintf(why, n, "writing the compiled code: %s", strerror(errno));
        close(fd);
        return -1;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (dl == NULL) {
        const char *e = dlerror();
        snprintf(why, n, "dlopen: %s", e != NULL ? e : "failed");
        close(fd);
        return -1;
    }
    const unsigned *abi = dlsym(dl, PTXC_SYM_ABI);
    void *fn = dlsym(dl, PTXC_SYM_KERNEL);
    if (abi == NULL || fn == NULL || *abi != PTXC_ABI_VERSION) {
        snprintf(why, n, "the compiled code is not of this gleam (ABI)");
        dlclose(dl);
        close(fd);
        return -1;
    }
    out->dl = dl;
    out->fd = fd;
    memcpy(&out->fn, &fn, sizeof fn);
    return 0;
}

/* The cached object of KEY when its recorded SHA-256 matches its bytes. */
static uint8_t *cache_get(const char *key, size_t *len)
{
    char so[600], sum[600];
    snprintf(so, sizeof so, "%s/%s.so", cfg.dir, key);
    snprintf(sum, sizeof sum, "%s/%s.sha256", cfg.dir, key);
    size_t slen = 0;
    uint8_t *want = slurp(sum, 256, &slen), *bytes = NULL;
    if (want != NULL && slen >= 64 && (bytes = slurp(so, MAX_OBJECT, len)) != NULL) {
        uint8_t d[32];
        char h[65];
        if (gl_sha256(bytes, *len, d) == 0) {
            hex(d, 32, h);
            if (memcmp(h, want, 64) == 0) {
                free(want);
                return bytes;
            }
        }
        log_once(&logged_corrupt, "a compiled kernel in %s does not match its recorded hash: "
                 "it is removed and compiled again", cfg.dir);
        unlink(so);
        unlink(sum);
    }
    free(want);
    free(bytes);
    return NULL;
}

/* Writes PATH atomically (a private temporary name, then rename). */
static void put_file(const char *path, const void *data, size_t len)
{
    char tmp[640];
    snprintf(tmp, sizeof tmp, "%s.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return;
    int ok = write_all(fd, data, len) == 0 && fsync(fd) == 0;
    close(fd);
    if (!ok || rename(tmp, path) != 0)
        unlink(tmp);
}

static void cache_put(const char *key, const uint8_t *so, size_t len)
{
    uint8_t d[32];
    char h[66], path[600];
    if (gl_sha256(so, len, d) != 0)
        return;
    hex(d, 32, h);
    h[64] = '\n';
    snprintf(path, sizeof path, "%s/%s.so", cfg.dir, key);
    put_file(path, so, len);
    snprintf(path, sizeof path, "%s/%s.sha256", cfg.dir, key);
    put_file(path, h, 65);
}

/* Compiles SOURCE: the object's bytes, or NULL and why. */
static uint8_t *compile(const char *source, size_t len, size_t *olen, char *why, size_t n)
{
    char dir[256], c[300], so[300], log[300];
    if (ptxc_temp_dir_make(dir, sizeof dir) != 0) {
        snprintf(why, n, "no temporary directory: %s", strerror(errno));
        return NULL;
    }
    snprintf(c, sizeof c, "%s/k.c", dir);
    snprintf(so, sizeof so, "%s/k.so", dir);
    snprintf(log, sizeof log, "%s/cc.log", dir);
    uint8_t *bytes = NULL;
    int fd = open(c, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || write_all(fd, source, len) != 0) {
        snprintf(why, n, "cannot write the C source: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        ptxc_temp_dir_remove(dir);
        return NULL;
    }
    close(fd);
    char *argv[32];
    int a = 0;
    argv[a++] = cfg.path;
    argv[a++] = cfg.opt;
    for (int i = 0; cc_flags[i] != NULL; i++)
        argv[a++] = (char *)cc_flags[i];
    argv[a++] = "-o";
    argv[a++] = so;
    argv[a++] = c;
    argv[a++] = "-lm";
    argv[a] = NULL;
    int st = ptxc_spawn_run(argv, dir, log, CC_TIMEOUT_MS);
    if (st != 0 || (bytes = slurp(so, MAX_OBJECT, olen)) == NULL) {
        size_t ll = 0;
        uint8_t *msg = slurp(log, 1u << 20, &ll);
        if (msg != NULL) {
            msg[ll] = 0;
            msg[strcspn((char *)msg, "\n")] = 0;
        }
        snprintf(why, n, "%s failed (status %d): %.200s", cfg.path, st,
                 msg != NULL ? (char *)msg : "");
        free(msg);
    }
    ptxc_temp_dir_remove(dir);
    return bytes;
}

int ptxc_cc_load(const char *source, size_t len, ptxc_loaded *out, char *why, size_t why_len)
{
    memset(out, 0, sizeof *out);
    pthread_once(&cfg_once, configure);
    if (cfg.path[0] == 0) {
        log_once(&logged_no_cc, "no C compiler (cc on PATH, or GLEAM_PTX_CC) or no SHA-256: "
                 "the host device interprets every kernel");
        snprintf(why, why_len, "no C compiler");
        return -1;
    }
    uint8_t d[32], *so = NULL;
    char key[65];

    size_t olen = 0;
    /* the key: the compiler's identity, then the source (which holds the ABI text) */
    uint8_t *keyed = malloc(len + 32);
    if (keyed == NULL) {
        snprintf(why, why_len, "out of memory");
        return -1;
    }
    memcpy(keyed, cfg.id, 32);
    memcpy(keyed + 32, source, len);
    int hashed = gl_sha256(keyed, len + 32, d) == 0;
    free(keyed);
    if (!hashed) {
        snprintf(why, why_len, "no SHA-256");
        return -1;
    }
    hex(d, 32, key);
    if (cfg.dir[0] != 0 && (so = cache_get(key, &olen)) != NULL)
        out->from_cache = 1;
    else if ((so = compile(source, len, &olen, why, why_len)) == NULL) {
        log_once(&logged_failure, "a kernel stays interpreted: %s", why);
        return -1;
    } else if (cfg.dir[0] != 0)
        cache_put(key, so, olen);
    int rc = load_bytes(so, olen, out, why, why_len);
    free(so);
    if (rc != 0)
        log_once(&logged_failure, "a kernel stays interpreted: %s", why);
    return rc;
}

void ptxc_cc_unload(ptxc_loaded *l)
{
    if (l->dl != NULL) {
        dlclose(l->dl);
        close(l->fd);
    }
    memset(l, 0, sizeof *l);
}
