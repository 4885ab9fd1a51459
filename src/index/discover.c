/*
 * discover.c — walks the memory roots with a small pool of threads sharing a
 * stack of directories. Every directory is opened with openat(parent's
 * descriptor, name, O_NOFOLLOW|O_DIRECTORY), starting from a descriptor of
 * the workspace (or of the directory holding an extraPath outside it), so no
 * path is ever resolved by name below a root: a directory swapped for a
 * symbolic link is refused, never followed. A thread reads a directory
 * (fdopendir), stats its .md files with fstatat(AT_SYMLINK_NOFOLLOW) and
 * queues its subdirectories; the parent's descriptor stays open (shared,
 * reference-counted) until each queued child has opened its own. Directories
 * reached twice are dropped through a hash set of (device, inode), so a walk
 * is linear in the number of directories; files reached twice are dropped
 * after the walk, keeping the smallest path. A large directory's entries are
 * shared out in batches (STAT_BATCH names each), so the threads stat one
 * flat directory of a thousand notes together.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/buf.h"
#include "../base/fs.h"
#include "discover.h"
#include "dir_records.h"
#include "media.h"

#define MAX_DEPTH   64 /* spelled out in the "nested more than 64" problem */
#define MAX_THREADS 4
#define STAT_BATCH  128 /* entries of one directory one thread stats in a go */
/* A directory's entries are shared out in batches only past this many: two
 * threads in one directory contend for its locks, so 1,296 entries are
 * stated faster by one (4.0 against 4.4 ms for a whole search). */
#define SPLIT_MIN 4096

/* A directory descriptor shared by the jobs of its subdirectories; refs is
 * guarded by walk.mu. A root's descriptor belongs to the file list (keep). */
typedef struct dref {
    int fd;
    DIR *dir; /* when a thread read it: owns fd */
    int refs;
    bool keep;
} dref;

typedef struct dir_job {
    dref *parent;
    char *abs;        /* absolute path of the directory (for names and messages) */
    const char *name; /* its name in parent: a suffix of abs, or "." */
    uint32_t root, sub;
    int depth;
    bool media; /* below an extraPath: multimodal memory's media files count too */
    /* A batch of entries to stat instead (parent is then the directory
     * itself and abs its path): nnames NUL-terminated names in a row. */
    char *names;
    size_t nnames;
} dir_job;

/* What one thread found; merged after the walk. */
typedef struct found {
    file_list files;
    problem_list problems;
    cm_rc rc;
    buf rel;    /* scratch: a file's relative path (all zero: empty) */
    buf record; /* directory records (file_list.h's dir_record) */
    size_t hinted;
    dir_fs_cache fs; /* whether the file system met last keeps ctime */
} found;

typedef struct dir_id {
    dev_t dev;
    ino_t ino;
} dir_id;

struct worker;

typedef struct walk {
    const cm_config *cfg;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    dir_job *q; /* stack of directories to read */
    size_t nq, capq;
    int busy;    /* threads reading a directory */
    int threads; /* in the pool, as planned (read-only during the walk) */
    /* Helpers start only when work waits in the queue (a small tree is
     * walked faster by one thread: no start-up, no hand-offs, no two
     * threads in one directory's locks): workers[1..spawned], tid alike. */
    struct worker *workers;
    pthread_t *tid;
    int spawned;
    bool failed;
    /* Open-addressing set of the directories already queued (dev, ino): a
     * directory reached twice is read once. Guarded by mu. */
    dir_id *seen;
    unsigned char *used;
    size_t nseen, capseen;
    size_t dirs, probes;
    /* The roots: [0] the workspace, then directories of outside extraPaths. */
    dref *roots;
    char **root_abs;
    size_t nroots;
    /* Directory records: the hint's, sorted by (dev, ino), read-only during
     * the walk; a directory older than record_before (ns, 0: none) is
     * recorded. */
    hint_dir *hint;
    size_t nhint;
    int64_t record_before;
    size_t ws_len; /* strlen(cfg->workspace) */
} walk;

static bool is_md(const char *name)
{
    size_t n = strlen(name);
    return n > 3 && memcmp(name + n - 3, ".md", 3) == 0;
}

static cm_rc push_file(found *f, const char *rel, size_t rel_len, const char *abs, size_t abs_len,
                       uint32_t root, uint32_t sub, const char *source, const struct stat *st);
static void spawn_helper(walk *w);

/* abs_len: strlen(abs). A file below the workspace (the usual case) has
 * its relative path as the tail of abs, stored once. */
static cm_rc add_file(walk *w, found *f, const char *abs, size_t abs_len, uint32_t root,
                      uint32_t sub, const struct stat *st, bool media)
{
    const cm_config *cfg = w->cfg;
    const char *rel;
    size_t rel_len;
    if (abs_len > w->ws_len + 1 && abs[w->ws_len] == '/' &&
        memcmp(abs, cfg->workspace, w->ws_len) == 0) {
        rel = abs + w->ws_len + 1;
        rel_len = abs_len - w->ws_len - 1;
    } else {
        cm_buf_reset(&f->rel);
        cm_rc rc = cm_discover_relpath(&f->rel, cfg->workspace, abs);
        if (rc) return rc;
        rel = f->rel.data;
        rel_len = f->rel.len;
    }
    if (media && st->st_size > cfg->multimodal_max_bytes)
        return cm_index_problem_add(&f->problems, rel,
                                    "skipped: %lld bytes, over multimodal.maxFileBytes (%d)",
                                    (long long)st->st_size, cfg->multimodal_max_bytes);
    if (st->st_size > DISCOVER_MAX_FILE_BYTES)
        return cm_index_problem_add(&f->problems, rel,
                                    "skipped: %lld bytes, over the %lld-byte cap",
                                    (long long)st->st_size, (long long)DISCOVER_MAX_FILE_BYTES);
    return push_file(f, rel, rel_len, abs, abs_len, root, sub, "memory", st);
}

/* Makes room in l for more files (at least one): a directory's files are
 * reserved at once, so that a large directory costs one move of the array
 * rather than one per doubling. */
static cm_rc reserve_files(file_list *l, size_t more)
{
    if (more < 1) more = 1;
    if (l->cap - l->n >= more) return CM_OK;
    size_t cap = l->cap ? l->cap * 2 : 256;
    while (cap - l->n < more)
        cap *= 2;
    mem_file *nv = realloc(l->v, cap * sizeof *nv);
    if (!nv) return CM_ENOMEM;
    l->v = nv;
    l->cap = cap;
    return CM_OK;
}

/* Appends a file (rel and abs, NUL-terminated, are copied into the list's
 * blocks; a rel that is abs's tail is copied with it). */
static cm_rc push_file(found *f, const char *rel, size_t rel_len, const char *abs, size_t al,
                       uint32_t root, uint32_t sub, const char *source, const struct stat *st)
{
    file_list *l = &f->files;
    bool tail = rel >= abs && rel <= abs + al && rel + rel_len == abs + al;
    char *block = reserve_files(l, 1) == CM_OK
                      ? cm_index_file_list_names(l, al + 1 + (tail ? 0 : rel_len + 1))
                      : NULL;
    if (!block) return CM_ENOMEM;
    memcpy(block, abs, al + 1);
    mem_file *m = &l->v[l->n];
    m->abs = block;
    if (tail) {
        m->rel = block + (rel - abs);
    } else {
        memcpy(block + al + 1, rel, rel_len);
        block[al + 1 + rel_len] = 0;
        m->rel = block + al + 1;
    }
    m->root = root;
    m->sub = sub;
    m->source = source;
    m->size = st->st_size;
    m->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
    m->dev = st->st_dev;
    m->ino = st->st_ino;
    l->n++;
    l->total_bytes += (uint64_t)st->st_size;
    return CM_OK;
}

/* Records a problem; e = 0: what alone, else what plus strerror(e). */
static cm_rc add_problem(const cm_config *cfg, found *f, const char *abs, const char *what, int e)
{
    buf rel = BUF_INIT;
    cm_rc rc = cm_discover_relpath(&rel, cfg->workspace, abs);
    if (!rc && e) rc = cm_index_problem_add(&f->problems, rel.data, "%s: %s", what, strerror(e));
    if (!rc && !e) rc = cm_index_problem_add(&f->problems, rel.data, "%s", what);
    cm_buf_release(&rel);
    return rc;
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

/* Adds (dev, ino) to the set; *added tells whether it was new. Call with mu
 * held. */
static cm_rc seen_add(walk *w, dev_t dev, ino_t ino, bool *added)
{
    if (2 * (w->nseen + 1) > w->capseen) {
        size_t cap = w->capseen ? w->capseen * 2 : 256;
        dir_id *ns = calloc(cap, sizeof *ns);
        unsigned char *nu = calloc(cap, 1);
        if (!ns || !nu) {
            free(ns);
            free(nu);
            return CM_ENOMEM;
        }
        for (size_t i = 0; i < w->capseen; i++) {
            if (!w->used[i]) continue;
            size_t j = mix((uint64_t)w->seen[i].ino ^ mix((uint64_t)w->seen[i].dev)) & (cap - 1);
            while (nu[j])
                j = (j + 1) & (cap - 1);
            ns[j] = w->seen[i];
            nu[j] = 1;
        }
        free(w->seen);
        free(w->used);
        w->seen = ns;
        w->used = nu;
        w->capseen = cap;
    }
    size_t j = mix((uint64_t)ino ^ mix((uint64_t)dev)) & (w->capseen - 1);
    for (;;) {
        w->probes++;
        if (!w->used[j]) break;
        if (w->seen[j].ino == ino && w->seen[j].dev == dev) {
            *added = false;
            return CM_OK;
        }
        j = (j + 1) & (w->capseen - 1);
    }
    w->seen[j] = (dir_id){dev, ino};
    w->used[j] = 1;
    w->nseen++;
    *added = true;
    return CM_OK;
}

/* Drops a reference to a shared directory descriptor. Call with mu held. */
static void dref_put(dref *d)
{
    if (!d || --d->refs > 0 || d->keep) return;
    if (d->dir)
        closedir(d->dir);
    else if (d->fd >= 0)
        close(d->fd);
    free(d);
}

/* Queues the directory name (abs) in parent unless it was queued before.
 * Call with mu held. */
static cm_rc queue_dir(walk *w, dref *parent, const char *abs, const char *name, uint32_t root,
                       uint32_t sub, int depth, bool media, const struct stat *st)
{
    bool added = false;
    cm_rc rc = seen_add(w, st->st_dev, st->st_ino, &added);
    if (rc || !added) return rc;
    if (w->nq == w->capq) {
        size_t cap = w->capq ? w->capq * 2 : 64;
        dir_job *nv = realloc(w->q, cap * sizeof *nv);
        if (!nv) return CM_ENOMEM;
        w->q = nv;
        w->capq = cap;
    }
    char *copy = cm_strdup(abs);
    if (!copy) return CM_ENOMEM;
    /* name is abs's last component (or "." for abs itself) */
    const char *nm = strcmp(name, ".") == 0 ? "." : copy + strlen(abs) - strlen(name);
    parent->refs++;
    w->q[w->nq++] = (dir_job){parent, copy, nm, root, sub, depth, media, NULL, 0};
    return CM_OK;
}

/* Queues a batch of entries of the directory self (path abs) to stat: names
 * (n of them, NUL-terminated in a row, len bytes) are copied. Call with mu
 * held. */
static cm_rc queue_batch(walk *w, dref *self, const char *abs, const char *names, size_t len,
                         size_t n, uint32_t root, uint32_t sub, int depth, bool media)
{
    if (w->nq == w->capq) {
        size_t cap = w->capq ? w->capq * 2 : 64;
        dir_job *nv = realloc(w->q, cap * sizeof *nv);
        if (!nv) return CM_ENOMEM;
        w->q = nv;
        w->capq = cap;
    }
    char *copy = cm_strdup(abs), *nm = malloc(len);
    if (!copy || !nm) {
        free(copy);
        free(nm);
        return CM_ENOMEM;
    }
    memcpy(nm, names, len);
    self->refs++;
    w->q[w->nq++] = (dir_job){self, copy, ".", root, sub, depth, media, nm, n};
    return CM_OK;
}

/* One entry of a directory (or a root): a .md file is listed, a directory
 * queued, a symbolic link named like a note (or given as a root) reported.
 * abs is the entry's absolute path, name its last component (in parent). */
static cm_rc add_entry(walk *w, found *f, dref *parent, const char *abs, size_t abs_len,
                       const char *name, uint32_t root, uint32_t sub, int depth, bool is_root,
                       bool media)
{
    struct stat st;
    if (fstatat(parent->fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        /* an absent root is normal (no memory/ yet); an entry may be gone meanwhile */
        if (errno == ENOENT) return CM_OK;
        return add_problem(w->cfg, f, abs, "cannot stat", errno);
    }
    bool is_media = media && !is_md(name) && cm_index_media_kind(w->cfg, name);
    bool md = is_md(name) || is_media;
    if (S_ISREG(st.st_mode))
        return md ? add_file(w, f, abs, abs_len, root, sub, &st, is_media) : CM_OK;
    if (S_ISLNK(st.st_mode))
        return md || is_root ? add_problem(w->cfg, f, abs, DISCOVER_SYMLINK_PROBLEM, 0) : CM_OK;
    if (S_ISDIR(st.st_mode)) {
        if (depth > MAX_DEPTH)
            return add_problem(w->cfg, f, abs, "skipped: nested more than 64 directories deep", 0);
        pthread_mutex_lock(&w->mu);
        cm_rc rc = queue_dir(w, parent, abs, name, root, sub, depth, media, &st);
        spawn_helper(w);
        pthread_cond_signal(&w->cv);
        pthread_mutex_unlock(&w->mu);
        return rc;
    }
    return md ? add_problem(w->cfg, f, abs, "not a regular file, skipped", 0) : CM_OK;
}

/* Stats n entries (names: NUL-terminated in a row) of the directory dir
 * (path abs), depth its depth. */
static cm_rc stat_names(walk *w, found *f, dref *dir, const char *abs, const char *names, size_t n,
                        uint32_t root, uint32_t sub, int depth, bool media)
{
    cm_rc rc = CM_OK;
    buf path = BUF_INIT;
    CHECK(cm_buf_adds(&path, abs));
    if (path.len && path.data[path.len - 1] != '/') CHECK(cm_buf_addc(&path, '/'));
    size_t base = path.len;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(names);
        if (path.cap - base < len + 1) {
            path.len = base;
            CHECK(cm_buf_add(&path, names, len + 1));
        } else {
            memcpy(path.data + base, names, len + 1);
        }
        CHECK(add_entry(w, f, dir, path.data, base + len, path.data + base, root, sub, depth + 1,
                        false, media));
        names += len + 1;
    }
out:
    cm_buf_release(&path);
    return rc;
}

/* Reads one directory: lists its .md files, queues its subdirectories. */
static cm_rc read_dir(walk *w, found *f, dir_job *job)
{
    cm_rc rc = CM_OK;
    int fd = openat(job->parent->fd, job->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int e = fd < 0 ? cm_discover_link_errno(job->parent->fd, job->name, errno) : 0;
    pthread_mutex_lock(&w->mu);
    dref_put(job->parent);
    job->parent = NULL;
    w->dirs++;
    pthread_mutex_unlock(&w->mu);
    if (fd < 0 && (e == ELOOP || e == ENOTDIR)) /* swapped for a link or a file since listed */
        return e == ELOOP ? add_problem(w->cfg, f, job->abs, DISCOVER_SYMLINK_PROBLEM, 0) : CM_OK;
    if (fd < 0 && e == ENOENT) return CM_OK; /* gone meanwhile */
    /* A directory that a record describes as it is now is not read. */
    struct stat ds;
    bool have = fd >= 0 && !job->media && (w->nhint || w->record_before) && fstat(fd, &ds) == 0;
    const hint_dir *h = NULL;
    if (have && w->nhint) {
        hint_dir key = {.dev = (uint64_t)ds.st_dev, .ino = (uint64_t)ds.st_ino};
        h = cm_dir_records_find(w->hint, w->nhint, &key);
        if (h && h->ctime_ns != cm_dir_ctime_ns(&ds)) h = NULL;
    }
    DIR *d = fd >= 0 && !h ? fdopendir(fd) : NULL;
    if (!d && !h) {
        if (fd >= 0) e = errno;
        if (fd >= 0) close(fd);
        return add_problem(w->cfg, f, job->abs, "cannot read directory", e);
    }
    dref *self = malloc(sizeof *self);
    if (!self) {
        if (d)
            closedir(d);
        else
            close(fd);
        return CM_ENOMEM;
    }
    *self = (dref){fd, d, 1, false};
    /* The entries to stat, gathered first; all but the first batch are
     * queued for the other threads when there are several batches. */
    buf names = BUF_INIT;
    size_t n = 0, first = 0;
    struct dirent *de;
    const char *list = NULL; /* the names to stat: the record's, else names' */
    size_t list_len = 0;
    if (h) {
        f->hinted++;
        list = h->names;
        list_len = h->len;
        n = h->n;
        for (size_t k = 0, at = 0; k < n && k < STAT_BATCH; k++)
            first = at += strlen(list + at) + 1;
    }
    while (d && (de = readdir(d)) != NULL) {
        const char *name = de->d_name;
        if (cm_dir_is_dot(name)) continue;
        bool wanted = is_md(name) || (job->media && cm_index_media_kind(w->cfg, name));
        if (de->d_type == DT_REG && !wanted) continue;
        if (de->d_type == DT_LNK && !wanted) continue;
        CHECK(cm_buf_add(&names, name, strlen(name) + 1));
        n++;
    }
    bool record = have && cm_dir_ctime_ns(&ds) < w->record_before &&
                  cm_dir_ctime_kept(&f->fs, fd, ds.st_dev);
    if (!h) {
        /* a directory recorded has its names in path order (cm_dir_sort_names);
         * one read each time keeps the order it was read in */
        if (record && n > 1) CHECK(cm_dir_sort_names(&names, n));
        for (size_t k = 0, at = 0; k < n && k < STAT_BATCH; k++)
            first = at += strlen(names.data + at) + 1;
        list = names.data;
        list_len = names.len;
    }
    if (record) CHECK(cm_dir_record_add(&f->record, &ds, list, list_len));
    size_t mine = n;
    if (n > SPLIT_MIN && w->threads > 1) {
        mine = STAT_BATCH;
        pthread_mutex_lock(&w->mu);
        for (size_t at = first, k = STAT_BATCH; k < n && !rc;) {
            size_t end = at, cnt = 0;
            while (cnt < STAT_BATCH && k + cnt < n) {
                end += strlen(list + end) + 1;
                cnt++;
            }
            rc = queue_batch(w, self, job->abs, list + at, end - at, cnt, job->root, job->sub,
                             job->depth, job->media);
            at = end;
            k += cnt;
        }
        spawn_helper(w);
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
        CHECK(rc);
    }
    CHECK(reserve_files(&f->files, mine));
    CHECK(
        stat_names(w, f, self, job->abs, list, mine, job->root, job->sub, job->depth, job->media));
out:
    pthread_mutex_lock(&w->mu);
    dref_put(self);
    pthread_mutex_unlock(&w->mu);
    cm_buf_release(&names);
    return rc;
}

typedef struct worker {
    walk *w;
    found f;
} worker;

static void *work(void *arg);

/* Starts one more helper when work waits and the pool is not full. Call
 * with mu held. */
static void spawn_helper(walk *w)
{
    if (w->nq == 0 || w->spawned + 1 >= w->threads) return;
    int i = w->spawned + 1;
    if (pthread_create(&w->tid[i], NULL, work, &w->workers[i]) == 0)
        w->spawned = i;
    else
        w->threads = i; /* no more: the running ones do the rest */
}

static void *work(void *arg)
{
    worker *k = arg;
    walk *w = k->w;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (w->nq == 0 && w->busy > 0 && !w->failed)
            pthread_cond_wait(&w->cv, &w->mu);
        if (w->nq == 0 || w->failed) break; /* nothing queued and nobody can queue more */
        dir_job job = w->q[--w->nq];
        w->busy++;
        pthread_mutex_unlock(&w->mu);
        cm_rc rc = job.names ? stat_names(w, &k->f, job.parent, job.abs, job.names, job.nnames,
                                          job.root, job.sub, job.depth, job.media)
                             : read_dir(w, &k->f, &job);
        free(job.abs);
        pthread_mutex_lock(&w->mu);
        if (job.names) dref_put(job.parent); /* read_dir puts its own */
        free(job.names);
        w->busy--;
        if (rc) {
            k->f.rc = rc;
            w->failed = true;
        }
        if (w->nq == 0 && w->busy == 0) pthread_cond_broadcast(&w->cv);
    }
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* Adds a root directory (fd is taken over). */
static cm_rc add_root_dir(walk *w, int fd, const char *abs)
{
    char *copy = cm_strdup(abs);
    if (!copy) {
        close(fd);
        return CM_ENOMEM;
    }
    w->roots[w->nroots] = (dref){fd, NULL, 1, true};
    w->root_abs[w->nroots++] = copy;
    return CM_OK;
}

/* Offset of what follows the directory dir in a path below it. */
static uint32_t sub_of(const char *dir)
{
    size_t n = strlen(dir);
    return (uint32_t)(n && dir[n - 1] == '/' ? n : n + 1);
}

/* An extraPath (absolute, normalised): inside the workspace it is reached
 * from the workspace's descriptor one component at a time; outside, from a
 * descriptor of its (canonical) parent directory. */
static cm_rc add_extra(walk *w, found *f, const char *p)
{
    cm_rc rc = CM_OK;
    const char *ws = w->root_abs[0];
    uint32_t wsub = sub_of(ws);
    char *parent_abs = NULL;
    dref *parent = NULL;
    if (strcmp(p, ws) == 0) { /* the workspace itself */
        struct stat st;
        if (fstat(w->roots[0].fd, &st) < 0) return CM_OK;
        pthread_mutex_lock(&w->mu);
        rc = queue_dir(w, &w->roots[0], ws, ".", 0, wsub, 0, true, &st);
        pthread_mutex_unlock(&w->mu);
        return rc;
    }
    const char *slash = strrchr(p, '/');
    if (!slash || !slash[1]) return CM_OK;
    if (!(parent_abs = cm_strndup(p, slash == p ? 1 : (size_t)(slash - p)))) return CM_ENOMEM;
    if (strncmp(p, ws, wsub - 1) == 0 && (p[wsub - 1] == '/' || ws[wsub - 1] == '/') &&
        strlen(p) > wsub) {
        /* Inside: open the directories between the workspace and the entry. */
        const char *rest = p + wsub;
        size_t rl = slash > rest ? (size_t)(slash - rest) : 0;
        if (rl == 0) {
            parent = &w->roots[0];
        } else {
            int fd = fcntl(w->roots[0].fd, F_DUPFD_CLOEXEC, 0);
            const char *c = rest;
            while (fd >= 0 && c < rest + rl) {
                const char *e = memchr(c, '/', (size_t)(rest + rl - c));
                if (!e) e = rest + rl;
                char comp[NAME_MAX + 1];
                size_t cl = (size_t)(e - c);
                int nfd = -1;
                if (cl == 0 || cl > NAME_MAX) {
                    errno = ENAMETOOLONG;
                } else {
                    memcpy(comp, c, cl);
                    comp[cl] = 0;
                    nfd = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                    if (nfd < 0) errno = cm_discover_link_errno(fd, comp, errno);
                }
                int e2 = errno;
                close(fd);
                errno = e2;
                fd = nfd;
                c = e + 1;
            }
            if (fd < 0) {
                int e = errno;
                if (e != ENOENT)
                    rc = add_problem(w->cfg, f, p,
                                     e == ELOOP ? DISCOVER_SYMLINK_PROBLEM : "cannot read",
                                     e == ELOOP ? 0 : e);
                goto out;
            }
            if (!(parent = malloc(sizeof *parent))) {
                close(fd);
                CHECK(CM_ENOMEM);
            }
            *parent = (dref){fd, NULL, 1, false};
        }
        CHECK(add_entry(w, f, parent, p, strlen(p), slash + 1, 0, wsub, 0, true, true));
    } else {
        int fd = open(parent_abs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) goto out; /* absent: nothing to list */
        uint32_t k = (uint32_t)w->nroots;
        CHECK(add_root_dir(w, fd, parent_abs));
        parent = &w->roots[k];
        CHECK(add_entry(w, f, parent, p, strlen(p), slash + 1, k, sub_of(parent_abs), 0, true,
                        true));
    }
out:
    if (parent && !parent->keep) {
        pthread_mutex_lock(&w->mu);
        dref_put(parent);
        pthread_mutex_unlock(&w->mu);
    }
    free(parent_abs);
    return rc;
}

/* One entry per file: of the paths with the same (dev, ino) (hard links,
 * a root reached twice) the smallest stays. A hash table of the entries,
 * linear in their number (a sort by inode first cost a second sort). */
static cm_rc drop_links(file_list *l)
{
    size_t cap = 16;
    while (cap < 2 * l->n)
        cap *= 2;
    size_t *slot = malloc(cap * sizeof *slot); /* entry index + 1; 0 = empty */
    bool *gone = calloc(l->n ? l->n : 1, sizeof *gone);
    if (!slot || !gone) {
        free(slot);
        free(gone);
        return CM_ENOMEM;
    }
    memset(slot, 0, cap * sizeof *slot);
    for (size_t i = 0; i < l->n; i++) {
        mem_file *m = &l->v[i];
        size_t j = mix((uint64_t)m->ino ^ mix((uint64_t)m->dev)) & (cap - 1);
        while (slot[j]) {
            mem_file *o = &l->v[slot[j] - 1];
            if (o->dev == m->dev && o->ino == m->ino) break;
            j = (j + 1) & (cap - 1);
        }
        if (!slot[j]) {
            slot[j] = i + 1;
        } else if (strcmp(m->rel, l->v[slot[j] - 1].rel) < 0) {
            gone[slot[j] - 1] = true;
            slot[j] = i + 1;
        } else {
            gone[i] = true;
        }
    }
    size_t wr = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (gone[i]) {
            l->total_bytes -= (uint64_t)l->v[i].size; /* its paths go with the list */
            continue;
        }
        l->v[wr++] = l->v[i];
    }
    l->n = wr;
    free(slot);
    free(gone);
    return CM_OK;
}

/* Moves everything from src into dst. */
static cm_rc absorb(file_list *dst, problem_list *pdst, found *src)
{
    if (src->files.n > dst->n) { /* the larger array is kept, the smaller copied */
        mem_file *v = dst->v;
        size_t n = dst->n, cap = dst->cap;
        dst->v = src->files.v;
        dst->n = src->files.n;
        dst->cap = src->files.cap;
        src->files.v = v;
        src->files.n = n;
        src->files.cap = cap;
    }
    dst->total_bytes += src->files.total_bytes;
    cm_index_file_list_absorb_names(dst, &src->files);
    dst->dirs_hinted += src->hinted;
    if (!dst->dir_record.len) { /* taken over, not copied (a thread's records, or none) */
        buf t = dst->dir_record;
        dst->dir_record = src->record;
        src->record = t;
    } else if (src->record.len &&
               cm_buf_add(&dst->dir_record, src->record.data, src->record.len)) {
        return CM_ENOMEM;
    }
    cm_buf_release(&src->record);
    if (src->files.n && dst->cap - dst->n < src->files.n) {
        mem_file *nv = realloc(dst->v, (dst->n + src->files.n) * sizeof *nv);
        if (!nv) return CM_ENOMEM;
        dst->v = nv;
        dst->cap = dst->n + src->files.n;
    }
    if (src->files.n) memcpy(dst->v + dst->n, src->files.v, src->files.n * sizeof *dst->v);
    dst->n += src->files.n;
    free(src->files.v);
    memset(&src->files, 0, sizeof src->files);
    cm_buf_release(&src->rel);
    for (size_t i = 0; i < src->problems.n; i++) {
        cm_rc rc =
            cm_index_problem_add(pdst, src->problems.v[i].path, "%s", src->problems.v[i].what);
        if (rc) return rc;
    }
    cm_index_problem_list_release(&src->problems);
    return CM_OK;
}

bool cm_discover_sessions_on(const cm_config *cfg)
{
    if (!cfg->session_memory || !cfg->sessions_dir) return false;
    for (size_t i = 0; i < cfg->sources.n; i++)
        if (!strcmp(cfg->sources.v[i], "sessions")) return true;
    return false;
}

/* Session transcripts, for session memory search: every regular *.jsonl of
 * the agent's sessions directory (in the state dir) as "sessions/<name>"
 * (archived *.jsonl.reset.* and *.jsonl.deleted.* are not), read later
 * through that directory's descriptor like any other root. */
static cm_rc add_sessions(const cm_config *cfg, walk *w, found *f)
{
    if (!cm_discover_sessions_on(cfg)) return CM_OK;
    int fd = open(cfg->sessions_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return CM_OK; /* no session yet */
    int lfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    DIR *d = lfd >= 0 ? fdopendir(lfd) : NULL;
    if (!d) {
        if (lfd >= 0) close(lfd);
        close(fd);
        return CM_OK;
    }
    uint32_t root = (uint32_t)w->nroots;
    cm_rc rc = add_root_dir(w, fd, cfg->sessions_dir);
    uint32_t sub = sub_of(cfg->sessions_dir);
    struct dirent *e;
    buf abs = BUF_INIT, rel = BUF_INIT;
    while (!rc && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n <= 6 || strcmp(e->d_name + n - 6, ".jsonl") != 0 || e->d_name[0] == '.') continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
            continue;
        cm_buf_reset(&abs);
        cm_buf_reset(&rel);
        rc = cm_buf_printf(&abs, "%s/%s", cfg->sessions_dir, e->d_name);
        if (!rc) rc = cm_buf_printf(&rel, "sessions/%s", e->d_name);
        if (!rc && st.st_size > DISCOVER_MAX_FILE_BYTES) /* said, as for Markdown */
            rc = cm_index_problem_add(&f->problems, rel.data,
                                      "skipped: %lld bytes, over the %lld-byte cap",
                                      (long long)st.st_size, (long long)DISCOVER_MAX_FILE_BYTES);
        else if (!rc)
            rc = push_file(f, rel.data, rel.len, abs.data, abs.len, root, sub, "sessions", &st);
    }
    closedir(d);
    cm_buf_release(&abs);
    cm_buf_release(&rel);
    return rc;
}

cm_rc cm_discover_files(const cm_config *cfg, file_list *out, problem_list *problems)
{
    cm_rc rc = cm_discover_files_unsorted(cfg, out, problems);
    if (!rc) cm_discover_sort(out);
    return rc;
}

cm_rc cm_discover_files_unsorted(const cm_config *cfg, file_list *out, problem_list *problems)
{
    return cm_discover_files_hinted(cfg, NULL, 0, 0, out, problems);
}

cm_rc cm_discover_files_hinted(const cm_config *cfg, const void *hint, size_t hint_len,
                               int64_t record_before_ns, file_list *out, problem_list *problems)
{
    cm_rc rc = CM_OK;
    walk w = {.cfg = cfg,
              .record_before = record_before_ns > 0 ? record_before_ns : 0,
              .ws_len = strlen(cfg->workspace)};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    worker k[MAX_THREADS];
    memset(k, 0, sizeof k);
    found roots = {0};
    buf p = BUF_INIT;
    memset(out, 0, sizeof *out);
    if (hint && hint_len) CHECK(cm_dir_records_parse(hint, hint_len, &w.hint, &w.nhint));
    w.roots = calloc(cfg->extra_paths.n + 2, sizeof *w.roots); /* + the sessions directory */
    w.root_abs = calloc(cfg->extra_paths.n + 2, sizeof *w.root_abs);
    if (!w.roots || !w.root_abs) CHECK(CM_ENOMEM);

    /* The workspace, opened once; a missing workspace is simply empty. */
    int ws = open(cfg->workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (ws < 0) goto out;
    CHECK(add_root_dir(&w, ws, cfg->workspace));
    uint32_t wsub = sub_of(cfg->workspace);
    /* The roots: MEMORY.md (else memory.md), memory/, extraPaths. */
    struct stat st;
    const char *top =
        fstatat(ws, "MEMORY.md", &st, AT_SYMLINK_NOFOLLOW) == 0 ? "MEMORY.md" : "memory.md";
    CHECK(cm_fs_join(&p, cfg->workspace, top));
    CHECK(add_entry(&w, &roots, &w.roots[0], p.data, p.len, top, 0, wsub, 0, true, false));
    cm_buf_reset(&p);
    CHECK(cm_fs_join(&p, cfg->workspace, "memory"));
    CHECK(add_entry(&w, &roots, &w.roots[0], p.data, p.len, "memory", 0, wsub, 0, true, false));
    for (size_t i = 0; i < cfg->extra_paths.n; i++) {
        cm_buf_reset(&p);
        rc = cm_config_extra_path(cfg, i, &p);
        if (rc == CM_EPATH) { /* climbs above "/": ignored */
            rc = CM_OK;
            continue;
        }
        CHECK(rc);
        CHECK(add_extra(&w, &roots, p.data));
    }

    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int nthreads = (int)CM_MAX(1, CM_MIN(MAX_THREADS, cores));
    pthread_t tid[MAX_THREADS];
    w.threads = nthreads; /* set before any starts; a batch is anyone's job */
    for (int i = 0; i < nthreads; i++)
        k[i].w = &w;
    w.workers = k;
    w.tid = tid;
    work(&k[0]); /* the calling thread works, and starts helpers as work waits */
    for (int i = 1; i <= w.spawned; i++) /* none starts once the walk has ended */
        pthread_join(tid[i], NULL);

    CHECK(add_sessions(cfg, &w, &roots));
    CHECK(absorb(out, problems, &roots));
    for (int i = 0; i < nthreads; i++) {
        if (k[i].f.rc && !rc) rc = k[i].f.rc;
        cm_rc r2 = absorb(out, problems, &k[i].f);
        if (!rc) rc = r2;
    }
    CHECK(rc);
    CHECK(drop_links(out));
    /* The roots' descriptors go with the list, for file_reader. */
    if (!(out->roots = calloc(w.nroots ? w.nroots : 1, sizeof *out->roots))) CHECK(CM_ENOMEM);
    for (size_t i = 0; i < w.nroots; i++) {
        out->roots[i] = (mem_root){w.roots[i].fd, w.root_abs[i]};
        w.roots[i].fd = -1;
        w.root_abs[i] = NULL;
    }
    out->nroots = w.nroots;
    out->dirs_read = w.dirs;
    out->dir_probes = w.probes;
    out->helpers = (size_t)w.spawned;
out:
    for (size_t i = 0; i < w.nq; i++) {
        dref_put(w.q[i].parent);
        free(w.q[i].abs);
        free(w.q[i].names);
    }
    free(w.q);
    free(w.seen);
    free(w.used);
    for (size_t i = 0; i < w.nroots; i++) {
        if (w.roots[i].fd >= 0) close(w.roots[i].fd);
        free(w.root_abs[i]);
    }
    free(w.roots);
    free(w.root_abs);
    free(w.hint);
    for (int i = 0; i < MAX_THREADS; i++) {
        cm_buf_release(&k[i].f.record);
        cm_index_file_list_release(&k[i].f.files);
        cm_index_problem_list_release(&k[i].f.problems);
        cm_buf_release(&k[i].f.rel);
    }
    cm_index_file_list_release(&roots.files);
    cm_index_problem_list_release(&roots.problems);
    cm_buf_release(&roots.rel);
    cm_buf_release(&roots.record);
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cv);
    cm_buf_release(&p);
    if (rc) cm_index_file_list_release(out);
    return rc;
}
