/*
 * path.c — descriptor-relative path resolution (see path.h). openat2 is
 * tried first for the directory part as a whole; when the kernel lacks it
 * (ENOSYS), a sandbox refuses it (EPERM) or it rejects the request (EINVAL,
 * E2BIG), the walk falls back to openat per component, and remembers that.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "path.h"

#ifndef SYS_openat2
#define SYS_openat2 437
#endif

static atomic_int no_openat2; /* 1: use the fallback walk */

void cm_path_force_fallback(int on)
{
    atomic_store(&no_openat2, on ? 1 : 0);
}

/* Checks rel's shape: relative, components non-empty, not "." or "..". */
static cm_rc check_rel(const char *rel, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    if (!rel[0]) FAIL(CM_EPATH, "path is empty");
    if (rel[0] == '/') FAIL(CM_EPATH, "%.200s: not a relative path", rel);
    for (const char *p = rel;;) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            FAIL(CM_EPATH, "%.200s: empty, '.' or '..' component", rel);
        if (n > NAME_MAX) FAIL(CM_EPATH, "%.200s: a name is longer than %d bytes", rel, NAME_MAX);
        if (!e) break;
        p = e + 1;
    }
out:
    return rc;
}

/* Why opening component name (of rel) in dir as a directory failed with e. */
static cm_rc dir_error(int dir, const char *name, int e, const char *rel, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    struct stat st;
    if (e == ENOENT) FAIL(CM_ENOTFOUND, "%.200s: %s does not exist", rel, name);
    if ((e == ELOOP || e == ENOTDIR || e == EXDEV) &&
        fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISLNK(st.st_mode))
            FAIL(CM_EPATH, "%.200s: %s is a symbolic link, which is not followed", rel, name);
        if (!S_ISDIR(st.st_mode)) FAIL(CM_EPATH, "%.200s: %s is not a directory", rel, name);
    }
    if (e == ELOOP || e == EXDEV)
        FAIL(CM_EPATH, "%.200s: reached through a symbolic link, which is not followed", rel);
    if (e == ENOTDIR) FAIL(CM_EPATH, "%.200s: %s is not a directory", rel, name);
    if (e == ENAMETOOLONG) FAIL(CM_EPATH, "%.200s: name too long", rel);
    FAIL(CM_EIO, "%.200s: %s", rel, strerror(e));
out:
    return rc;
}

/* The whole directory part in one openat2 call: a descriptor, or -1 when
 * the caller must walk component by component — the kernel cannot do it
 * (remembered), or it failed, and the walk names the component and why (a
 * symbolic link, a missing directory it may create, ...). */
static int walk_openat2(int root, const char *dirpart)
{
    struct open_how how = {0};
    how.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    for (int tries = 0;; tries++) {
        long fd = syscall(SYS_openat2, root, dirpart, &how, sizeof how);
        if (fd >= 0) return (int)fd;
        int e = errno;
        if (e == EINTR || (e == EAGAIN && tries < 8)) continue;
        if (e == ENOSYS || e == EPERM || e == EINVAL || e == E2BIG) atomic_store(&no_openat2, 1);
        return -1;
    }
}

cm_rc cm_path_open_dir(int root, const char *rel, unsigned flags, int *dir, const char **leaf,
                       char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    int cur = -1;
    char *copy = NULL;
    *dir = -1;
    CHECK(check_rel(rel, err, errlen));
    const char *slash = strrchr(rel, '/');
    *leaf = slash ? slash + 1 : rel;
    if (!slash) {
        cur = fcntl(root, F_DUPFD_CLOEXEC, 0);
        if (cur < 0) FAIL(CM_EIO, "%.200s: %s", rel, strerror(errno));
        goto done;
    }
    if (!(copy = cm_strndup(rel, (size_t)(slash - rel)))) CHECK(CM_ENOMEM);
    if (!atomic_load(&no_openat2) && (cur = walk_openat2(root, copy)) >= 0) goto done;
    /* One component at a time, each relative to the one before. */
    cur = fcntl(root, F_DUPFD_CLOEXEC, 0);
    if (cur < 0) FAIL(CM_EIO, "%.200s: %s", rel, strerror(errno));
    for (char *p = copy;;) {
        char *e = strchr(p, '/');
        if (e) *e = 0;
        int next = openat(cur, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0 && errno == ENOENT && (flags & PATH_MKDIRS)) {
            if (mkdirat(cur, p, 0700) < 0 && errno != EEXIST)
                FAIL(CM_EIO, "%.200s: cannot create %s: %s", rel, p, strerror(errno));
            next = openat(cur, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        if (next < 0) CHECK(dir_error(cur, p, errno, rel, err, errlen));
        close(cur);
        cur = next;
        if (!e) break;
        p = e + 1;
    }
done:
    *dir = cur;
    cur = -1;
out:
    if (cur >= 0) close(cur);
    free(copy);
    return rc;
}

cm_rc cm_path_open_file(int dir, const char *name, int oflags, mode_t mode, int *fd,
                        struct stat *st, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    struct stat local;
    if (!st) st = &local;
    *fd = -1;
    int f = openat(dir, name, oflags | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, mode);
    if (f < 0) {
        int e = errno;
        struct stat ls;
        if (e == ENOENT) FAIL(CM_ENOTFOUND, "%.200s: no such file", name);
        if (e == EEXIST) { /* O_EXCL: errno stays EEXIST for the caller */
            rc = cm_seterr(err, errlen, CM_EIO, "%.200s: already exists", name);
            errno = EEXIST;
            goto out;
        }
        if (e == ELOOP ||
            (fstatat(dir, name, &ls, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(ls.st_mode)))
            FAIL(CM_EPATH, "%.200s: symbolic links are not followed", name);
        if (e == ENXIO || e == ENODEV || e == EISDIR || e == ETXTBSY)
            FAIL(CM_EPATH, "%.200s: not a regular file", name);
        if (e == ENAMETOOLONG) FAIL(CM_EPATH, "%.200s: name too long", name);
        errno = e;
        FAIL(CM_EIO, "%.200s: %s", name, strerror(e));
    }
    if (fstat(f, st) < 0) FAIL(CM_EIO, "%.200s: %s", name, strerror(errno));
    if (!S_ISREG(st->st_mode)) FAIL(CM_EPATH, "%.200s: not a regular file", name);
    int fl = fcntl(f, F_GETFL);
    if (fl < 0 || fcntl(f, F_SETFL, fl & ~O_NONBLOCK) < 0)
        FAIL(CM_EIO, "%.200s: %s", name, strerror(errno));
    *fd = f;
    f = -1;
out:
    if (f >= 0) close(f);
    return rc;
}

cm_rc cm_path_open_beneath(int root, const char *rel, int oflags, int *fd, struct stat *st,
                           char *err, size_t errlen)
{
    int dir = -1;
    const char *leaf;
    cm_rc rc = cm_path_open_dir(root, rel, 0, &dir, &leaf, err, errlen);
    if (!rc) {
        rc = cm_path_open_file(dir, leaf, oflags, 0, fd, st, err, errlen);
        close(dir);
    }
    return rc;
}

cm_rc cm_path_open_root(const char *path, bool nofollow, int *fd, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    *fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0));
    if (*fd >= 0) return CM_OK;
    int e = errno;
    struct stat st;
    if (e == ENOENT) FAIL(CM_ENOTFOUND, "%.300s does not exist", path);
    if (nofollow && (e == ELOOP || (e == ENOTDIR && lstat(path, &st) == 0 && S_ISLNK(st.st_mode))))
        FAIL(CM_EPATH, "%.300s is a symbolic link, which is not followed", path);
    if (e == ENOTDIR) FAIL(CM_EPATH, "%.300s is not a directory", path);
    FAIL(CM_EIO, "%.300s: %s", path, strerror(e));
out:
    return rc;
}

cm_rc cm_path_read_fd(int fd, const char *name, size_t max, buf *out, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    size_t start = out->len;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
        if ((uint64_t)st.st_size > max)
            FAIL(CM_ETOOBIG, "%.200s: %lld bytes, over the %zu-byte cap", name,
                 (long long)st.st_size, max);
        if (cm_buf_grow(out, (size_t)st.st_size + 1))
            FAIL(CM_ENOMEM, "%.200s: out of memory", name);
    }
    for (;;) {
        if (out->len + 4096 > out->cap && cm_buf_grow(out, 4096))
            FAIL(CM_ENOMEM, "%.200s: out of memory", name);
        ssize_t r = read(fd, out->data + out->len, out->cap - out->len - 1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) FAIL(CM_EIO, "%.200s: %s", name, strerror(errno));
        if (r == 0) break;
        out->len += (size_t)r;
        if (out->len - start > max)
            FAIL(CM_ETOOBIG, "%.200s: grew over the %zu-byte cap", name, max);
    }
    if (out->cap) out->data[out->len] = 0;
out:
    if (rc && out->cap) {
        out->len = start;
        out->data[start] = 0;
    }
    return rc;
}
