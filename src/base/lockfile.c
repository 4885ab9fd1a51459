/*
 * lockfile.c — shared files written under a lock (lockfile.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "fs.h"
#include "lockfile.h"

/* Field 22 of /proc/<pid>/stat (start time in clock ticks), or -1. */
static long long proc_starttime(long pid)
{
    char path[64], text[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0) return -1;
    text[n] = 0;
    char *p = strrchr(text, ')');
    if (!p) return -1;
    p++;
    for (int field = 3; field < 22 && *p; field++) { /* p is before field 3 */
        while (*p == ' ')
            p++;
        while (*p && *p != ' ')
            p++;
    }
    while (*p == ' ')
        p++;
    char *end;
    long long v = strtoll(p, &end, 10);
    return end != p ? v : -1;
}

/* proc_starttime of this process, read once per pid (a fork reads its
 * own): it never changes while the process lives. */
static long long own_starttime(void)
{
    static _Atomic long long cached_pid = -1, cached_start = -1;
    long pid = (long)getpid();
    if (atomic_load(&cached_pid) == pid) return atomic_load(&cached_start);
    long long start = proc_starttime(pid);
    atomic_store(&cached_pid, -1); /* no reader takes a half-written pair */
    atomic_store(&cached_start, start);
    atomic_store(&cached_pid, pid);
    return start;
}

/* Whether pid names a live process that is not a zombie. */
static bool pid_alive(long pid)
{
    if (pid <= 0) return false;
    if (kill((pid_t)pid, 0) < 0 && errno == ESRCH) return false;
    char path[64], text[512];
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return true;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    text[n > 0 ? n : 0] = 0;
    const char *st = strstr(text, "\nState:");
    if (st) {
        st += 7;
        while (*st == ' ' || *st == '\t')
            st++;
        if (*st == 'Z') return false;
    }
    return true;
}

/* A number after "key": in a small JSON text, or -1. */
static long long json_num(const char *text, const char *key)
{
    char pat[32];
    snprintf(pat, sizeof pat, "\"%s\"", key);
    const char *p = strstr(text, pat);
    if (!p) return -1;
    p += strlen(pat);
    while (*p == ' ' || *p == ':' || *p == '\n' || *p == '\t')
        p++;
    char *end;
    long long v = strtoll(p, &end, 10);
    return end != p ? v : -1;
}

/* "createdAt" of a sidecar as ms since the epoch, or -1. */
static int64_t json_created(const char *text)
{
    const char *p = strstr(text, "\"createdAt\"");
    if (!p || !(p = strchr(p + 11, '"'))) return -1;
    struct tm tm = {0};
    int ms = 0;
    if (sscanf(p + 1, "%4d-%2d-%2dT%2d:%2d:%2d.%3d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
               &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) < 6)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (int64_t)timegm(&tm) * 1000 + ms;
}

/* QuantumClaw's rule: stale when the holder is gone (dead, zombie, pid
 * reused) or the lock is older than stale_ms; a sidecar without a readable
 * pid and time is judged by its mtime. */
static bool sidecar_stale(const char *path, int64_t stale_ms)
{
    char text[512] = "";
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT;
    struct stat st;
    ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? read(fd, text, sizeof text - 1) : -1;
    close(fd);
    text[n > 0 ? n : 0] = 0;
    int64_t now = cm_wall_ms();
    long long pid = json_num(text, "pid");
    int64_t created = json_created(text);
    if (pid > 0 && !pid_alive((long)pid)) return true;
    long long start = json_num(text, "starttime");
    if (pid > 0 && start >= 0) {
        long long cur = proc_starttime((long)pid);
        if (cur >= 0 && cur != start) return true;
    }
    if (created > 0) return now - created > stale_ms;
    int64_t mtime = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
    return pid <= 0 && now - mtime > stale_ms;
}

void cm_lockfile_release(lockfile *l)
{
    if (l->has_sidecar) unlink(l->sidecar);
    l->has_sidecar = false;
    if (l->fd >= 0) close(l->fd);
    if (l->flockfd >= 0 && l->flockfd != l->fd && l->flockfd != l->dirfd) close(l->flockfd);
    if (l->dirfd >= 0) close(l->dirfd);
    l->fd = l->dirfd = l->flockfd = -1;
}

/* Removes temporary files of base that dead writers left in the directory:
 * ".<base>.<pid>.<anything>.tmp" of a process that is gone. */
static void remove_stale_temps(int dirfd, const char *base)
{
    int fd = dup(dirfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0) close(fd);
        return;
    }
    size_t bl = strlen(base);
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *n = e->d_name;
        if (n[0] != '.' || strncmp(n + 1, base, bl) != 0 || n[1 + bl] != '.') continue;
        char *end;
        long pid = strtol(n + 2 + bl, &end, 10);
        size_t nl = strlen(n);
        if (pid <= 0 || *end != '.' || nl < 4 || strcmp(n + nl - 4, ".tmp") != 0) continue;
        if (pid != (long)getpid() && !pid_alive(pid)) unlinkat(dirfd, n, 0);
    }
    closedir(d);
}

static const char *base_of(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

cm_rc cm_lockfile_take(lockfile *l, const char *path, lockfile_mode mode, const lockfile_opts *o,
                       char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    char *dir = cm_fs_dirname(path);
    memset(l, 0, sizeof *l);
    l->fd = l->dirfd = l->flockfd = -1;
    int64_t stale = o && o->stale_ms > 0 ? o->stale_ms : 30000;
    int64_t timeout = o && o->timeout_ms > 0 ? o->timeout_ms : 10000;
    if (!dir) return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    if ((size_t)snprintf(l->path, sizeof l->path, "%s", path) >= sizeof l->path ||
        (size_t)snprintf(l->sidecar, sizeof l->sidecar, "%s.lock", path) >= sizeof l->sidecar)
        FAIL(CM_ETOOBIG, "path too long: %.200s…", path);
    CHECK(cm_fs_mkdirs(dir, err, errlen));
    l->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (l->dirfd < 0) FAIL(CM_EIO, "%s: %s", dir, strerror(errno));
    if (mode == LOCKFILE_APPEND) {
        l->fd = openat(l->dirfd, base_of(path),
                       O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
        struct stat st;
        if (l->fd < 0 || fstat(l->fd, &st) < 0) FAIL(CM_EIO, "%s: %s", path, strerror(errno));
        if (!S_ISREG(st.st_mode)) FAIL(CM_EIO, "%s: not a regular file", path);
        fcntl(l->fd, F_SETFL, O_APPEND); /* O_NONBLOCK off */
        l->flockfd = l->fd;
    } else {
        l->flockfd = l->dirfd;
    }
    while (flock(l->flockfd, LOCK_EX) < 0)
        if (errno != EINTR) FAIL(CM_EIO, "lock %s: %s", path, strerror(errno));
    /* The sidecar appears with its content: written to a private name, then
     * linked into place, so a writer killed at any point leaves a sidecar
     * whose pid shows it stale. */
    char mine[4400], when[40], body[200];
    snprintf(mine, sizeof mine, "%s/.%s.%d.lock.tmp", dir, base_of(path), (int)getpid());
    int64_t now = cm_wall_ms();
    time_t secs = (time_t)(now / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    size_t w = strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(when + w, sizeof when - w, ".%03dZ", (int)(now % 1000));
    long long start = own_starttime();
    int blen =
        start >= 0
            ? snprintf(body, sizeof body,
                       "{\n  \"pid\": %d,\n  \"createdAt\": \"%s\",\n  \"starttime\": %lld\n}",
                       (int)getpid(), when, start)
            : snprintf(body, sizeof body, "{\n  \"pid\": %d,\n  \"createdAt\": \"%s\"\n}",
                       (int)getpid(), when);
    unlink(mine);
    int fd = open(mine, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) FAIL(CM_EIO, "%s: %s", mine, strerror(errno));
    int werr = 0;
    for (int at = 0; at < blen && !werr;) {
        ssize_t wr = write(fd, body + at, (size_t)(blen - at));
        if (wr < 0 && errno != EINTR) werr = errno;
        if (wr == 0) werr = EIO; /* nothing written, no error: never spin on it */
        if (wr > 0) at += (int)wr;
    }
    close(fd);
    if (werr) { /* the reason (a full disk), and the file that was to be locked */
        unlink(mine);
        FAIL(CM_EIO, "lock %s: %s", path, strerror(werr));
    }
    int64_t deadline = cm_now_ms() + timeout;
    unsigned delay = 20;
    for (;;) {
        if (link(mine, l->sidecar) == 0) {
            l->has_sidecar = true;
            break;
        }
        if (errno != EEXIST) {
            int e = errno;
            unlink(mine);
            FAIL(CM_EIO, "%s: %s", l->sidecar, strerror(e));
        }
        if (sidecar_stale(l->sidecar, stale)) {
            unlink(l->sidecar);
            continue;
        }
        if (cm_now_ms() >= deadline) {
            unlink(mine);
            FAIL(CM_EBUSY, "%s is locked by another process (%s)", path, l->sidecar);
        }
        /* Held by a QuantumClaw process: poll, 20 ms doubling to 1 s. */
        struct timespec ts = {delay / 1000, (long)(delay % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        delay = delay * 2 > 1000 ? 1000 : delay * 2;
    }
    unlink(mine);
out:
    free(dir);
    if (rc) cm_lockfile_release(l);
    return rc;
}

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Writes data[0..n) to fd: whole (chunk 0), or in pieces of chunk bytes,
 * each pushed to the disk (sync_file_range: started and waited for) before
 * the next is written, with a rest after each as long as it took (at most
 * LOCKFILE_REST_MAX_US). */
#define LOCKFILE_REST_MAX_US 20000
static int write_paced(int fd, const char *data, size_t n, size_t chunk)
{
    for (size_t off = 0; off < n;) {
        size_t end = chunk && n - off > chunk ? off + chunk : n;
        int64_t t0 = mono_us();
        for (size_t at = off; at < end;) {
            ssize_t w = write(fd, data + at, end - at);
            if (w < 0 && errno == EINTR) continue;
            if (w < 0) return -1;
            at += (size_t)w;
        }
        if (chunk && end < n) {
            /* advisory: a failure is caught by the fsync after the last piece */
            sync_file_range(fd, (off_t)off, (off_t)(end - off),
                            SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                                SYNC_FILE_RANGE_WAIT_AFTER);
            int64_t rest = mono_us() - t0;
            if (rest > LOCKFILE_REST_MAX_US) rest = LOCKFILE_REST_MAX_US;
            struct timespec ts = {0, (long)rest * 1000};
            while (rest > 0 && nanosleep(&ts, &ts) && errno == EINTR) {
            }
        }
        off = end;
    }
    return 0;
}

cm_rc cm_lockfile_replace(lockfile *l, const char *data, size_t n, char *err, size_t errlen)
{
    return cm_lockfile_replace_paced(l, data, n, 0, err, errlen);
}

cm_rc cm_lockfile_replace_paced(lockfile *l, const char *data, size_t n, size_t chunk, char *err,
                                size_t errlen)
{
    cm_rc rc = CM_OK;
    const char *base = base_of(l->path);
    char tmp[600];
    int fd = -1;
    bool made = false;
    remove_stale_temps(l->dirfd, base);
    for (int i = 0; i < 100 && fd < 0; i++) {
        snprintf(tmp, sizeof tmp, ".%.200s.%d.%08x.tmp", base, (int)getpid(),
                 (unsigned)rand() ^ (unsigned)cm_now_ms());
        fd = openat(l->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST) FAIL(CM_EIO, "%s: %s", l->path, strerror(errno));
    }
    if (fd < 0) FAIL(CM_EIO, "%s: no temporary name", l->path);
    made = true;
    if (write_paced(fd, data, n, chunk)) FAIL(CM_EIO, "%s: %s", l->path, strerror(errno));
    if (fsync(fd) < 0) FAIL(CM_EIO, "%s: %s", l->path, strerror(errno));
    close(fd);
    fd = -1;
    if (renameat(l->dirfd, tmp, l->dirfd, base) < 0)
        FAIL(CM_EIO, "%s: %s", l->path, strerror(errno));
    made = false;
    fsync(l->dirfd);
out:
    if (fd >= 0) close(fd);
    if (made) unlinkat(l->dirfd, tmp, 0);
    return rc;
}
