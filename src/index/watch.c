/*
 * watch.c — the inotify watcher of watch.h. Directory watches are kept in a
 * table wd → absolute path so that a directory created inside a watched one
 * can be watched in turn (and its existing contents count as a change).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/buf.h"
#include "../base/fs.h"
#include "discover.h"
#include "watch.h"

#define DIR_MASK                                                                                   \
    (IN_CLOSE_WRITE | IN_MODIFY | IN_ATTRIB | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |  \
     IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK)

typedef struct wdir {
    int wd;
    char *path;
    bool tree; /* subdirectories are watched too (memory/, extraPaths dirs) */
    bool root; /* the workspace root: only MEMORY.md, memory.md, memory matter */
} wdir;

struct watcher {
    int fd;
    const cm_config *cfg;
    cm_logger lg;
    wdir *v;
    size_t n, cap;
    bool degraded;
};

int watcher_fd(const watcher *w)
{
    return w->fd;
}

size_t watcher_count(const watcher *w)
{
    return w->n;
}

bool watcher_degraded(const watcher *w)
{
    return w->degraded;
}

static wdir *find(watcher *w, int wd)
{
    for (size_t i = 0; i < w->n; i++)
        if (w->v[i].wd == wd) return &w->v[i];
    return NULL;
}

static void forget(watcher *w, int wd)
{
    for (size_t i = 0; i < w->n; i++)
        if (w->v[i].wd == wd) {
            free(w->v[i].path);
            w->v[i] = w->v[--w->n];
            return;
        }
}

/* Adds a watch on directory path (and, for a tree, on its subdirectories). */
static cm_rc add_dir(watcher *w, const char *path, bool tree, bool root, int depth)
{
    int wd = inotify_add_watch(w->fd, path, DIR_MASK);
    if (wd < 0) {
        if (errno == ENOSPC || errno == ENOMEM) {
            if (!w->degraded)
                cm_logf(&w->lg, CM_LOG_WARN,
                        "inotify watch limit reached at %s (fs.inotify.max_user_watches); "
                        "falling back to periodic rescans",
                        path);
            w->degraded = true;
        }
        return CM_OK; /* gone meanwhile, not a directory, or no permission */
    }
    wdir *d = find(w, wd);
    if (d) { /* already watched (the same directory reached twice) */
        d->tree |= tree;
        return CM_OK;
    }
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        wdir *nv = realloc(w->v, cap * sizeof *nv);
        if (!nv) return CM_ENOMEM;
        w->v = nv;
        w->cap = cap;
    }
    char *copy = cm_strdup(path);
    if (!copy) return CM_ENOMEM;
    w->v[w->n++] = (wdir){wd, copy, tree, root};
    if (!tree || depth > 64) return CM_OK;
    DIR *dir = opendir(path);
    if (!dir) return CM_OK;
    cm_rc rc = CM_OK;
    buf sub = BUF_INIT;
    struct dirent *de;
    while (!rc && (de = readdir(dir)) != NULL) {
        if (de->d_name[0] == '.' &&
            (de->d_name[1] == 0 || (de->d_name[1] == '.' && de->d_name[2] == 0)))
            continue;
        if (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN) continue;
        buf_reset(&sub);
        rc = fs_join(&sub, path, de->d_name);
        struct stat st;
        if (!rc && lstat(sub.data, &st) == 0 && S_ISDIR(st.st_mode))
            rc = add_dir(w, sub.data, true, false, depth + 1);
    }
    closedir(dir);
    buf_release(&sub);
    return rc;
}

cm_rc watcher_open(const cm_config *cfg, const cm_logger *lg, watcher **out, char *err,
                   size_t errlen)
{
    cm_rc rc = CM_OK;
    buf p = BUF_INIT;
    watcher *w = calloc(1, sizeof *w);
    if (!w) return CM_ENOMEM;
    w->cfg = cfg;
    if (lg) w->lg = *lg;
    w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (w->fd < 0) FAIL(CM_EIO, "inotify: %s", strerror(errno));
    CHECK(add_dir(w, cfg->workspace, false, true, 0));
    CHECK(fs_join(&p, cfg->workspace, "memory"));
    CHECK(add_dir(w, p.data, true, false, 0));
    for (size_t i = 0; i < cfg->extra_paths.n; i++) {
        buf_reset(&p);
        rc = config_extra_path(cfg, i, &p);
        if (rc == CM_EPATH) {
            rc = CM_OK;
            continue;
        }
        CHECK(rc);
        struct stat st;
        if (lstat(p.data, &st) == 0 && S_ISDIR(st.st_mode)) {
            CHECK(add_dir(w, p.data, true, false, 0));
        } else { /* a file, or not there yet: watch where it lives */
            char *dir = fs_dirname(p.data);
            if (!dir) CHECK(CM_ENOMEM);
            rc = add_dir(w, dir, false, false, 0);
            free(dir);
            CHECK(rc);
        }
    }
out:
    buf_release(&p);
    if (rc) {
        if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
        watcher_free(w);
        return rc;
    }
    *out = w;
    return CM_OK;
}

void watcher_free(watcher *w)
{
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    for (size_t i = 0; i < w->n; i++) free(w->v[i].path);
    free(w->v);
    free(w);
}

static bool is_md(const char *name, size_t n)
{
    return n > 3 && memcmp(name + n - 3, ".md", 3) == 0;
}

unsigned watcher_read(watcher *w)
{
    unsigned what = 0;
    char bufr[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));
    buf sub = BUF_INIT;
    for (;;) {
        ssize_t n = read(w->fd, bufr, sizeof bufr);
        if (n <= 0) break; /* EAGAIN: drained */
        for (char *p = bufr; p < bufr + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            p += sizeof *ev + ev->len;
            if (ev->mask & IN_Q_OVERFLOW) {
                what |= WATCH_OVERFLOW | WATCH_CHANGED;
                continue;
            }
            wdir *d = find(w, ev->wd);
            if (!d) continue;
            if (ev->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) {
                /* the directory itself went away: its files did too */
                if (!d->root) what |= WATCH_CHANGED;
                if (ev->mask & IN_IGNORED) forget(w, ev->wd);
                continue;
            }
            const char *name = ev->len ? ev->name : "";
            size_t nl = strlen(name);
            bool isdir = (ev->mask & IN_ISDIR) != 0;
            if (d->root) {
                bool ours = !strcmp(name, "MEMORY.md") || !strcmp(name, "memory.md") ||
                            !strcmp(name, "memory");
                if (!ours) continue;
                what |= WATCH_CHANGED;
                if (isdir && !strcmp(name, "memory") && (ev->mask & (IN_CREATE | IN_MOVED_TO))) {
                    buf_reset(&sub);
                    if (fs_join(&sub, d->path, name) == CM_OK) add_dir(w, sub.data, true, false, 0);
                }
                continue;
            }
            if (isdir) {
                if (!d->tree) continue;
                what |= WATCH_CHANGED;
                if (ev->mask & (IN_CREATE | IN_MOVED_TO)) {
                    buf_reset(&sub);
                    /* d may move when add_dir grows the table: copy the path first */
                    if (fs_join(&sub, d->path, name) == CM_OK) add_dir(w, sub.data, true, false, 0);
                }
                continue;
            }
            if (is_md(name, nl)) what |= WATCH_CHANGED;
        }
    }
    buf_release(&sub);
    return what;
}
