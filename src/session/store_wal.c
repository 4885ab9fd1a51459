/*
 * store_wal.c — the journal of sessions.json's deferred changes
 * (store_wal.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/fs.h"
#include "store_wal.h"

#define WAL_TAG ".clawmem-wal."
#define WAL_MAX (256u << 20) /* a journal file past this is not replayed whole */

/* dir and ".<name>.clawmem-wal." of the store at store_path. */
static cm_rc prefix_of(const char *store_path, char **dir, buf *prefix)
{
    const char *slash = strrchr(store_path, '/');
    *dir = cm_fs_dirname(store_path);
    if (!*dir) return CM_ENOMEM;
    return cm_buf_printf(prefix, ".%s" WAL_TAG, slash ? slash + 1 : store_path);
}

static void fsync_dir(const char *dir)
{
    int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d >= 0) {
        fsync(d);
        close(d);
    }
}

cm_rc cm_store_wal_open(const char *store_path, int64_t gen, store_wal_file **out, char *err,
                        size_t errlen)
{
    cm_rc rc = CM_OK;
    char *dir = NULL;
    buf name = BUF_INIT, pre = BUF_INIT;
    store_wal_file *w = NULL;
    *out = NULL;
    if (prefix_of(store_path, &dir, &pre) ||
        cm_buf_printf(&name, "%s/%s%ld.%lld", dir, pre.data, (long)getpid(), (long long)gen) ||
        !(w = calloc(1, sizeof *w)))
        FAIL(CM_ENOMEM, "out of memory");
    w->fd = open(name.data, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (w->fd < 0) FAIL(CM_EIO, "sessions journal: %s", strerror(errno));
    /* held while this process lives: recovery leaves a live journal alone */
    if (flock(w->fd, LOCK_EX | LOCK_NB)) FAIL(CM_EIO, "sessions journal: %s", strerror(errno));
    fsync_dir(dir);
    w->name = cm_buf_detach(&name);
    if (!w->name) FAIL(CM_ENOMEM, "out of memory");
    *out = w;
    w = NULL;
out:
    if (w) {
        if (w->fd >= 0) {
            close(w->fd);
            unlink(name.data);
        }
        free(w);
    }
    free(dir);
    cm_buf_release(&name);
    cm_buf_release(&pre);
    return rc;
}

cm_rc cm_store_wal_write(store_wal_file *w, const char *text, size_t n, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    struct stat st;
    off_t before = fstat(w->fd, &st) ? -1 : st.st_size;
    for (size_t off = 0; off < n;) {
        ssize_t r = write(w->fd, text + off, n - off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            /* a short write leaves no torn line for the next append to
             * extend (recovery skips a torn last line anyway) */
            const char *why = r < 0 ? strerror(errno) : "short write";
            if (before >= 0 && ftruncate(w->fd, before)) why = strerror(errno);
            FAIL(CM_EIO, "sessions journal: %s", why);
        }
        off += (size_t)r;
    }
out:
    return rc;
}

int (*cm_store_wal_datasync)(int fd) = fdatasync;

cm_rc cm_store_wal_sync(store_wal_file *w, char *err, size_t errlen)
{
    if (!cm_store_wal_datasync(w->fd)) return CM_OK;
    return cm_seterr(err, errlen, CM_EIO, "sessions journal: %s", strerror(errno));
}

void cm_store_wal_close(store_wal_file *w, bool unlink_it)
{
    if (!w) return;
    if (unlink_it && w->name) unlink(w->name);
    if (w->fd >= 0) close(w->fd);
    w->fd = -1;
}

void cm_store_wal_free(store_wal_file *w)
{
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    free(w->name);
    free(w);
}

cm_rc cm_store_wal_line(buf *out, int64_t seq, const char *key, const json_t *patch,
                        const json_t *e)
{
    json_t *r = json_pack("{s:I,s:s}", "s", (json_int_t)seq, "k", key);
    if (!r) return CM_ENOMEM;
    int bad = patch ? json_object_set(r, "p", (json_t *)patch)
                    : json_object_set_new(r, "e", e ? json_incref((json_t *)e) : json_null());
    char *t = bad ? NULL : json_dumps(r, JSON_COMPACT);
    json_decref(r);
    cm_rc rc = t ? cm_buf_adds(out, t) : CM_ENOMEM;
    if (!rc) rc = cm_buf_addc(out, '\n');
    free(t);
    return rc;
}

typedef struct wal_rec {
    long long gen, seq;
    json_t *r;
} wal_rec;

static int rec_order(const void *a, const void *b)
{
    const wal_rec *x = a, *y = b;
    if (x->gen != y->gen) return x->gen < y->gen ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Parses the lines of one journal (a torn or foreign line is skipped). */
static cm_rc parse_lines(const buf *b, long long gen, wal_rec **recs, size_t *n, size_t *cap)
{
    for (const char *p = b->data, *end = b->data + b->len; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) break; /* torn tail: its update never returned */
        json_t *r = json_loadb(p, (size_t)(nl - p), 0, NULL);
        p = nl + 1;
        if (!json_is_object(r) || !json_is_string(json_object_get(r, "k")) ||
            !json_is_integer(json_object_get(r, "s"))) {
            json_decref(r);
            continue;
        }
        if (*n == *cap) {
            size_t nc = *cap ? *cap * 2 : 64;
            wal_rec *g = realloc(*recs, nc * sizeof *g);
            if (!g) {
                json_decref(r);
                return CM_ENOMEM;
            }
            *recs = g;
            *cap = nc;
        }
        (*recs)[(*n)++] = (wal_rec){gen, json_integer_value(json_object_get(r, "s")), r};
    }
    return CM_OK;
}

cm_rc cm_store_wal_recover(const char *store_path, json_t *records, store_wal_file **files,
                           char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    char *dir = NULL;
    buf pre = BUF_INIT, path = BUF_INIT, text = BUF_INIT;
    wal_rec *recs = NULL;
    size_t n = 0, cap = 0;
    DIR *d = NULL;
    if (prefix_of(store_path, &dir, &pre)) FAIL(CM_ENOMEM, "out of memory");
    if (!(d = opendir(dir))) goto out; /* no directory: no journal */
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, pre.data, pre.len)) continue;
        const char *dot = strchr(de->d_name + pre.len, '.');
        long long gen = dot ? strtoll(dot + 1, NULL, 10) : 0;
        cm_buf_reset(&path);
        if (cm_buf_printf(&path, "%s/%s", dir, de->d_name)) FAIL(CM_ENOMEM, "out of memory");
        int fd = open(path.data, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) continue;
        if (flock(fd, LOCK_EX | LOCK_NB)) { /* its process lives: its changes are its own */
            close(fd);
            continue;
        }
        cm_buf_reset(&text);
        cm_rc r = cm_fs_read_file(path.data, WAL_MAX, &text, NULL, 0);
        close(fd);
        if (r && r != CM_ENOTFOUND) continue;
        store_wal_file *w = calloc(1, sizeof *w);
        if (!w || !(w->name = cm_strdup(path.data))) {
            free(w);
            FAIL(CM_ENOMEM, "out of memory");
        }
        w->fd = -1;
        w->next = *files;
        *files = w;
        if (!r) CHECK(parse_lines(&text, gen, &recs, &n, &cap) ? CM_ENOMEM : CM_OK);
    }
    if (n) qsort(recs, n, sizeof *recs, rec_order);
    for (size_t i = 0; i < n; i++) {
        if (json_array_append_new(records, recs[i].r)) rc = CM_ENOMEM;
        recs[i].r = NULL;
    }
    if (rc) FAIL(rc, "out of memory");
out:
    for (size_t i = 0; i < n; i++)
        json_decref(recs[i].r);
    free(recs);
    if (d) closedir(d);
    free(dir);
    cm_buf_release(&pre);
    cm_buf_release(&path);
    cm_buf_release(&text);
    return rc;
}
