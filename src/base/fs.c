/*
 * fs.c — POSIX file helpers (see fs.h).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs.h"

/* O_NONBLOCK until fstat proves a regular file: a FIFO or a device never
 * blocks the open or the read. */
static cm_rc read_file(const char *path, int nofollow, size_t max, buf *out, char *err,
                       size_t errlen)
{
    cm_rc rc = CM_OK;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | nofollow);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR) FAIL(CM_ENOTFOUND, "%s: no such file", path);
        FAIL(CM_EIO, "%s: %s", path, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) < 0) FAIL(CM_EIO, "%s: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode)) FAIL(CM_EIO, "%s: not a regular file", path);
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
        FAIL(CM_EIO, "%s: %s", path, strerror(errno));
    if ((uint64_t)st.st_size > max)
        FAIL(CM_ETOOBIG, "%s: %lld bytes, over the %zu-byte cap", path, (long long)st.st_size, max);
    if (cm_buf_grow(out, (size_t)st.st_size)) FAIL(CM_ENOMEM, "%s: out of memory", path);
    for (;;) {
        if (out->len + 4096 > out->cap && cm_buf_grow(out, 4096))
            FAIL(CM_ETOOBIG, "%s: over the %zu-byte cap", path, max);
        ssize_t r = read(fd, out->data + out->len, out->cap - out->len - 1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) FAIL(CM_EIO, "%s: %s", path, strerror(errno));
        if (r == 0) break;
        out->len += (size_t)r;
        if (out->len > max) FAIL(CM_ETOOBIG, "%s: grew over the %zu-byte cap", path, max);
    }
    out->data[out->len] = 0;
out:
    if (fd >= 0) close(fd);
    return rc;
}

cm_rc cm_fs_read_file(const char *path, size_t max, buf *out, char *err, size_t errlen)
{
    return read_file(path, O_NOFOLLOW, max, out, err, errlen);
}

cm_rc cm_fs_read_file_follow(const char *path, size_t max, buf *out, char *err, size_t errlen)
{
    return read_file(path, 0, max, out, err, errlen);
}

cm_rc cm_fs_mkdirs(const char *path, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    struct stat st;
    if (!stat(path, &st) && S_ISDIR(st.st_mode)) return CM_OK; /* the usual case: one call */
    char *p = cm_strdup(path);
    if (!p) return CM_ENOMEM;
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != 0) continue;
        char c = *s;
        *s = 0;
        if (mkdir(p, 0700) < 0 && errno != EEXIST) {
            char clip[FS_CLIP_MAX + 1];
            FAIL(CM_EIO, "mkdir %s: %s", cm_fs_clip(p, clip), strerror(errno));
        }
        *s = c;
        if (!c) break;
    }
out:
    free(p);
    return rc;
}

cm_rc cm_fs_join(buf *out, const char *a, const char *b)
{
    if (b[0] == '/' || !a[0]) return cm_buf_adds(out, b);
    cm_rc rc = cm_buf_adds(out, a);
    if (!rc && a[strlen(a) - 1] != '/') rc = cm_buf_addc(out, '/');
    if (!rc) rc = cm_buf_adds(out, b);
    return rc;
}

char *cm_fs_dirname(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return cm_strdup(".");
    if (slash == path) return cm_strdup("/");
    return cm_strndup(path, (size_t)(slash - path));
}

const char *cm_fs_clip(const char *path, char out[FS_CLIP_MAX + 1])
{
    size_t n = strlen(path);
    if (n <= FS_CLIP_MAX) return path;
    size_t head = FS_CLIP_MAX / 3, tail = FS_CLIP_MAX - head - 3;
    while (head > 0 && ((unsigned char)path[head] & 0xC0) == 0x80)
        head--; /* path[head] starts a character: cut before it */
    const char *t = path + n - tail;
    while (*t && ((unsigned char)*t & 0xC0) == 0x80)
        t++;
    memcpy(out, path, head);
    memcpy(out + head, "...", 3);
    memcpy(out + head + 3, t, strlen(t) + 1);
    return out;
}

void cm_fs_sync_dir(const char *path)
{
    char *dir = cm_fs_dirname(path);
    if (!dir) return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(dir);
}

char *cm_fs_expand_home(const char *path)
{
    if (path[0] != '~' || (path[1] != '/' && path[1] != 0)) return cm_strdup(path);
    const char *home = getenv("HOME");
    if (!home || !*home) home = "/";
    buf b = BUF_INIT;
    if (cm_buf_adds(&b, home) || cm_buf_adds(&b, path + 1)) {
        cm_buf_release(&b);
        return NULL;
    }
    return cm_buf_detach(&b);
}

bool cm_fs_normalise(char *p)
{
    bool abs = p[0] == '/', ok = true;
    size_t base = abs ? 1 : 0, w = base, r = base, len = strlen(p);
    while (r < len) {
        size_t e = r;
        while (e < len && p[e] != '/')
            e++;
        size_t n = e - r;
        if (n == 0 || (n == 1 && p[r] == '.')) {
            /* nothing */
        } else if (n == 2 && p[r] == '.' && p[r + 1] == '.') {
            if (w == base) {
                ok = false;
            } else {
                while (w > base && p[w - 1] != '/')
                    w--;
                if (w > base) w--;
            }
        } else {
            if (w > base) p[w++] = '/';
            memmove(p + w, p + r, n);
            w += n;
        }
        r = e + 1;
    }
    p[w] = 0;
    return ok;
}

/* The directory of the module holding this code: a shared library's when
 * dladdr names one, else the program's. */
static bool module_dir(char *dir, size_t n)
{
    Dl_info di;
    ssize_t len = -1;
    const char *base =
        dladdr((void *)module_dir, &di) && di.dli_fname ? strrchr(di.dli_fname, '/') : NULL;
    if (base && strncmp(base + 1, "lib", 3) == 0 && strstr(base, ".so") &&
        realpath(di.dli_fname, dir))
        len = (ssize_t)strlen(dir);
    else if ((len = readlink("/proc/self/exe", dir, n - 1)) >= 0)
        dir[len] = 0;
    char *slash = len > 0 ? strrchr(dir, '/') : NULL;
    if (!slash) return false;
    *slash = 0;
    return true;
}

char *cm_fs_find_beside(const char *const *rels)
{
    char dir[PATH_MAX];
    if (!module_dir(dir, sizeof dir)) return NULL;
    for (size_t i = 0; rels[i]; i++) {
        buf b = BUF_INIT;
        if (cm_fs_join(&b, dir, rels[i]) == CM_OK && access(b.data, F_OK) == 0)
            return cm_buf_detach(&b);
        cm_buf_release(&b);
    }
    return NULL;
}
