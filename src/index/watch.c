/*
 * watch.c — the inotify watcher of watch.h. Directories are reached the way
 * discovery reaches them: from a descriptor of the workspace (or of an
 * extraPath directory outside it) one component at a time with
 * openat(O_NOFOLLOW | O_DIRECTORY), and the watch is added on the opened
 * descriptor (/proc/self/fd/N), so a directory swapped for a symbolic link is
 * never followed; without /proc the watch goes by name with IN_DONT_FOLLOW |
 * IN_ONLYDIR. No descriptor is kept per watched directory. Watches are kept
 * in a table wd → (root, relative path) so that a directory created inside a
 * watched one can be watched in turn (and its existing contents count as a
 * change).
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
#include "media.h"
#include "watch.h"

#define DIR_MASK                                                                                   \
    (IN_CLOSE_WRITE | IN_MODIFY | IN_ATTRIB | IN_CREATE | IN_DELETE | IN_MOVED_FROM |              \
     IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK)

#define NO_ROOT UINT32_MAX

typedef struct wdir {
    int wd;
    char *path; /* absolute, for messages */
    char *rel;  /* below its root's descriptor ("" for the root itself) */
    uint32_t root;
    bool tree;  /* subdirectories are watched too (memory/, extraPaths dirs) */
    bool top;   /* the workspace root: only MEMORY.md, memory.md, memory matter */
    bool jsonl; /* the sessions dir: its *.jsonl transcripts matter */
} wdir;

struct watcher {
    int fd;
    const cm_config *cfg;
    cm_logger lg;
    wdir *v;
    size_t n, cap;
    bool degraded;
    int *roots; /* [0] the workspace, then extraPath directories outside it */
    size_t nroots;
};

int cm_watcher_fd(const watcher *w)
{
    return w->fd;
}

size_t cm_watcher_count(const watcher *w)
{
    return w->n;
}

bool cm_watcher_degraded(const watcher *w)
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
            free(w->v[i].rel);
            w->v[i] = w->v[--w->n];
            return;
        }
}

/* Watches the directory open as fd: through /proc/self/fd, which names the
 * open directory itself; by name (last component not followed) without it. */
static int watch_fd(watcher *w, int fd, const char *path)
{
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    int wd = inotify_add_watch(w->fd, proc, DIR_MASK & ~(uint32_t)IN_DONT_FOLLOW);
    if (wd < 0 && errno == ENOENT) wd = inotify_add_watch(w->fd, path, DIR_MASK);
    return wd;
}

/* Adds a watch on the directory open as fd (path, rel: its names) and, for a
 * tree, on its subdirectories, opened below fd without following links. */
static cm_rc add_dir_fd(watcher *w, int fd, const char *path, const char *rel, uint32_t root,
                        bool tree, bool top, int depth)
{
    int wd = watch_fd(w, fd, path);
    if (wd < 0) {
        if (errno == ENOSPC || errno == ENOMEM) {
            if (!w->degraded)
                cm_logf(&w->lg, CM_LOG_WARN,
                        "inotify watch limit reached at %s (fs.inotify.max_user_watches); "
                        "falling back to periodic rescans",
                        path);
            w->degraded = true;
        }
        return CM_OK; /* gone meanwhile, or no permission */
    }
    wdir *d = find(w, wd);
    if (d) { /* already watched: reached twice, or moved (then it goes by the new name) */
        d->tree |= tree;
        if (root != d->root || strcmp(rel, d->rel) != 0) {
            char *np = cm_strdup(path), *nr = cm_strdup(rel);
            if (!np || !nr) {
                free(np);
                free(nr);
                return CM_ENOMEM;
            }
            free(d->path);
            free(d->rel);
            d->path = np;
            d->rel = nr;
            d->root = root;
        }
        return CM_OK;
    }
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        wdir *nv = realloc(w->v, cap * sizeof *nv);
        if (!nv) return CM_ENOMEM;
        w->v = nv;
        w->cap = cap;
    }
    char *copy = cm_strdup(path), *rcopy = cm_strdup(rel);
    if (!copy || !rcopy) {
        free(copy);
        free(rcopy);
        return CM_ENOMEM;
    }
    w->v[w->n++] = (wdir){wd, copy, rcopy, root, tree, top, false};
    if (!tree || depth > 64) return CM_OK;
    int lfd = dup(fd);
    DIR *dir = lfd >= 0 ? fdopendir(lfd) : NULL;
    if (!dir) {
        if (lfd >= 0) close(lfd);
        return CM_OK;
    }
    cm_rc rc = CM_OK;
    buf sub = BUF_INIT, subrel = BUF_INIT;
    struct dirent *de;
    while (!rc && (de = readdir(dir)) != NULL) {
        if (de->d_name[0] == '.' &&
            (de->d_name[1] == 0 || (de->d_name[1] == '.' && de->d_name[2] == 0)))
            continue;
        if (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN) continue;
        int cfd = openat(fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (cfd < 0) continue; /* a link, a file, gone: not watched */
        cm_buf_reset(&sub);
        cm_buf_reset(&subrel);
        rc = cm_fs_join(&sub, path, de->d_name);
        if (!rc)
            rc = *rel ? cm_fs_join(&subrel, rel, de->d_name) : cm_buf_adds(&subrel, de->d_name);
        if (!rc) rc = add_dir_fd(w, cfd, sub.data, subrel.data, root, true, false, depth + 1);
        close(cfd);
    }
    closedir(dir);
    cm_buf_release(&sub);
    cm_buf_release(&subrel);
    return rc;
}

/* Watches the directory rel below root (path: its absolute name). */
static cm_rc add_dir_at(watcher *w, uint32_t root, const char *path, const char *rel, bool tree,
                        bool top)
{
    if (root >= w->nroots) return CM_OK;
    int fd = cm_discover_open_dir(w->roots[root], rel, strlen(rel));
    if (fd < 0) return CM_OK; /* not there, or not a directory we may enter */
    cm_rc rc = add_dir_fd(w, fd, path, rel, root, tree, top, 0);
    close(fd);
    return rc;
}

/* Watches a directory outside the workspace by absolute name: the last
 * component is not followed (O_NOFOLLOW); as a tree it becomes a root. */
static cm_rc add_outside(watcher *w, const char *path, bool tree)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (tree ? O_NOFOLLOW : 0));
    if (fd < 0) return CM_OK;
    if (!tree) {
        cm_rc rc = add_dir_fd(w, fd, path, "", NO_ROOT, false, false, 0);
        close(fd);
        return rc;
    }
    int *nv = realloc(w->roots, (w->nroots + 1) * sizeof *nv);
    if (!nv) {
        close(fd);
        return CM_ENOMEM;
    }
    w->roots = nv;
    w->roots[w->nroots++] = fd;
    return add_dir_fd(w, fd, path, "", (uint32_t)(w->nroots - 1), true, false, 0);
}

cm_rc cm_watcher_open(const cm_config *cfg, const cm_logger *lg, watcher **out, char *err,
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
    /* The workspace, opened once: everything inside is reached from it. */
    int ws = open(cfg->workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (ws < 0) goto out; /* not there: nothing to watch (status says so) */
    if (!(w->roots = malloc(sizeof *w->roots))) {
        close(ws);
        CHECK(CM_ENOMEM);
    }
    w->roots[w->nroots++] = ws;
    CHECK(add_dir_fd(w, ws, cfg->workspace, "", 0, false, true, 0));
    CHECK(cm_fs_join(&p, cfg->workspace, "memory"));
    CHECK(add_dir_at(w, 0, p.data, "memory", true, false));
    size_t wl = strlen(cfg->workspace);
    for (size_t i = 0; i < cfg->extra_paths.n; i++) {
        cm_buf_reset(&p);
        rc = cm_config_extra_path(cfg, i, &p);
        if (rc == CM_EPATH) {
            rc = CM_OK;
            continue;
        }
        CHECK(rc);
        char *dir = cm_fs_dirname(p.data);
        if (!dir) CHECK(CM_ENOMEM);
        bool inside = strncmp(p.data, cfg->workspace, wl) == 0 && p.data[wl] == '/';
        if (inside) {
            const char *rel = p.data + wl + 1;
            int fd = cm_discover_open_dir(ws, rel, strlen(rel));
            if (fd >= 0) {
                rc = add_dir_fd(w, fd, p.data, rel, 0, true, false, 0);
                close(fd);
            } else { /* a file, or not there yet: watch where it lives */
                const char *slash = strrchr(rel, '/');
                size_t dl = slash ? (size_t)(slash - rel) : 0;
                char *drel = cm_strndup(rel, dl);
                rc = drel ? add_dir_at(w, 0, dir, drel, false, false) : CM_ENOMEM;
                free(drel);
            }
        } else if (strcmp(p.data, cfg->workspace) == 0) {
            rc = add_dir_fd(w, ws, p.data, "", 0, true, false, 0);
        } else {
            struct stat st;
            if (lstat(p.data, &st) == 0 && S_ISDIR(st.st_mode))
                rc = add_outside(w, p.data, true);
            else /* a file, or not there yet: watch where it lives */
                rc = add_outside(w, dir, false);
        }
        free(dir);
        CHECK(rc);
    }
    /* Session transcripts (session memory search): the sessions dir itself,
     * not followed when it is a symlink, as discovery does. */
    if (cm_discover_sessions_on(cfg)) {
        int fd = open(cfg->sessions_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        /* not there yet (a new agent): no event would say when it appears,
         * so the watcher rescans periodically and never claims freshness */
        if (fd < 0) w->degraded = true;
        if (fd >= 0) {
            size_t before = w->n;
            rc = add_dir_fd(w, fd, cfg->sessions_dir, "", NO_ROOT, false, false, 0);
            close(fd);
            CHECK(rc);
            if (w->n > before) w->v[w->n - 1].jsonl = true;
        }
    }
out:
    cm_buf_release(&p);
    if (rc) {
        if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
        cm_watcher_close(w);
        return rc;
    }
    *out = w;
    return CM_OK;
}

void cm_watcher_close(watcher *w)
{
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    for (size_t i = 0; i < w->n; i++) {
        free(w->v[i].path);
        free(w->v[i].rel);
    }
    free(w->v);
    for (size_t i = 0; i < w->nroots; i++)
        close(w->roots[i]);
    free(w->roots);
    free(w);
}

static bool is_md(const char *name, size_t n)
{
    return n > 3 && memcmp(name + n - 3, ".md", 3) == 0;
}

/* Watches the directory name that appeared in d (reached from d's root). */
static void add_child(watcher *w, const wdir *d, const char *name, buf *sub, buf *subrel)
{
    cm_buf_reset(sub);
    cm_buf_reset(subrel);
    uint32_t root = d->root;
    /* d may move when the table grows: the names are copied first */
    if (cm_fs_join(sub, d->path, name) ||
        (*d->rel ? cm_fs_join(subrel, d->rel, name) : cm_buf_adds(subrel, name)))
        return;
    add_dir_at(w, root, sub->data, subrel->data, true, false);
}

unsigned cm_watcher_read(watcher *w)
{
    unsigned what = 0;
    char bufr[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));
    buf sub = BUF_INIT, subrel = BUF_INIT;
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
                if (!d->top) what |= WATCH_CHANGED;
                if (ev->mask & IN_IGNORED) forget(w, ev->wd);
                continue;
            }
            const char *name = ev->len ? ev->name : "";
            size_t nl = strlen(name);
            bool isdir = (ev->mask & IN_ISDIR) != 0;
            if (d->top) {
                bool ours = !strcmp(name, "MEMORY.md") || !strcmp(name, "memory.md") ||
                            !strcmp(name, "memory");
                if (!ours) continue;
                what |= WATCH_CHANGED;
                if (isdir && !strcmp(name, "memory") && (ev->mask & (IN_CREATE | IN_MOVED_TO)))
                    add_child(w, d, name, &sub, &subrel);
                continue;
            }
            if (isdir) {
                if (!d->tree) continue;
                what |= WATCH_CHANGED;
                if (ev->mask & (IN_CREATE | IN_MOVED_TO)) add_child(w, d, name, &sub, &subrel);
                continue;
            }
            if (d->jsonl && nl > 6 && !memcmp(name + nl - 6, ".jsonl", 6))
                what |= WATCH_SESSIONS;
            else if (is_md(name, nl) || cm_index_media_kind(w->cfg, name))
                what |= WATCH_CHANGED; /* a media file: multimodal memory's, under extraPaths */
        }
    }
    cm_buf_release(&sub);
    cm_buf_release(&subrel);
    return what;
}
