/*
 * discover.c — walks the memory roots with a small pool of threads sharing a
 * queue of directories: each thread reads a directory (fdopendir), stats its
 * .md files with fstatat(AT_SYMLINK_NOFOLLOW) — so a symbolic link is seen and
 * skipped, never followed — and queues its subdirectories. On a large tree the
 * stat calls, which dominate a no-op sync, run on every core. Files reached
 * twice (same device and inode) are dropped after the walk, keeping the
 * smallest path.
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

#define MAX_DEPTH   64
#define MAX_THREADS 4

typedef struct dir_job {
    char *abs;
    int depth;
} dir_job;

/* What one thread found; merged after the walk. */
typedef struct found {
    file_list files;
    problem_list problems;
    cm_rc rc;
} found;

typedef struct walk {
    const cm_config *cfg;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    dir_job *q; /* stack of directories to read */
    size_t nq, capq;
    int busy; /* threads reading a directory */
    bool failed;
    /* (dev, ino) of directories already queued: a directory reached twice is
     * read once. Guarded by mu. */
    dev_t *ddev;
    ino_t *dino;
    size_t nd, capd;
} walk;

cm_rc problem_add(problem_list *l, const char *path, const char *fmt, ...)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        mem_problem *nv = realloc(l->v, cap * sizeof *nv);
        if (!nv) return CM_ENOMEM;
        l->v = nv;
        l->cap = cap;
    }
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    mem_problem *p = &l->v[l->n];
    p->path = cm_strdup(path);
    p->what = cm_strdup(what);
    if (!p->path || !p->what) {
        free(p->path);
        free(p->what);
        return CM_ENOMEM;
    }
    l->n++;
    return CM_OK;
}

void problem_list_release(problem_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].path);
        free(l->v[i].what);
    }
    free(l->v);
    memset(l, 0, sizeof *l);
}

void file_list_release(file_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].rel);
        free(l->v[i].abs);
    }
    free(l->v);
    memset(l, 0, sizeof *l);
}

cm_rc discover_relpath(buf *out, const char *base, const char *abs)
{
    size_t bl = strlen(base);
    if (strncmp(abs, base, bl) == 0 && abs[bl] == '/') return buf_adds(out, abs + bl + 1);
    /* Longest common directory prefix, then one "../" per remaining base part. */
    size_t common = 0;
    for (size_t i = 0; base[i] && base[i] == abs[i]; i++)
        if (base[i] == '/') common = i;
    if (base[bl] == 0 && abs[bl] == '/') common = bl;
    cm_rc rc = CM_OK;
    for (const char *p = base + common; *p && !rc; p++)
        if (*p == '/') rc = buf_adds(out, "../");
    if (!rc) rc = buf_adds(out, abs + common + 1);
    return rc;
}

static bool is_md(const char *name)
{
    size_t n = strlen(name);
    return n > 3 && strcmp(name + n - 3, ".md") == 0;
}

static cm_rc add_file(const cm_config *cfg, found *f, const char *abs, const struct stat *st)
{
    buf rel = BUF_INIT;
    cm_rc rc = discover_relpath(&rel, cfg->workspace, abs);
    if (rc) {
        buf_release(&rel);
        return rc;
    }
    if (st->st_size > DISCOVER_MAX_FILE_BYTES) {
        rc = problem_add(&f->problems, rel.data, "skipped: %lld bytes, over the %lld-byte cap",
                         (long long)st->st_size, (long long)DISCOVER_MAX_FILE_BYTES);
        buf_release(&rel);
        return rc;
    }
    file_list *l = &f->files;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        mem_file *nv = realloc(l->v, cap * sizeof *nv);
        if (!nv) {
            buf_release(&rel);
            return CM_ENOMEM;
        }
        l->v = nv;
        l->cap = cap;
    }
    mem_file *m = &l->v[l->n];
    m->rel = buf_detach(&rel);
    m->abs = cm_strdup(abs);
    m->source = "memory";
    m->size = st->st_size;
    m->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
    m->dev = st->st_dev;
    m->ino = st->st_ino;
    if (!m->abs) {
        free(m->rel);
        return CM_ENOMEM;
    }
    l->n++;
    l->total_bytes += (uint64_t)st->st_size;
    return CM_OK;
}

static cm_rc add_problem(const cm_config *cfg, found *f, const char *abs, const char *what, int e)
{
    buf rel = BUF_INIT;
    cm_rc rc = discover_relpath(&rel, cfg->workspace, abs);
    if (!rc) rc = problem_add(&f->problems, rel.data, "%s: %s", what, strerror(e));
    buf_release(&rel);
    return rc;
}

/* Queues a directory unless it was queued before. Call with mu held. */
static cm_rc queue_dir(walk *w, const char *abs, int depth, dev_t dev, ino_t ino)
{
    for (size_t i = 0; i < w->nd; i++)
        if (w->dino[i] == ino && w->ddev[i] == dev) return CM_OK;
    if (w->nd == w->capd) {
        size_t cap = w->capd ? w->capd * 2 : 64;
        dev_t *nd = realloc(w->ddev, cap * sizeof *nd);
        if (!nd) return CM_ENOMEM;
        w->ddev = nd;
        ino_t *ni = realloc(w->dino, cap * sizeof *ni);
        if (!ni) return CM_ENOMEM;
        w->dino = ni;
        w->capd = cap;
    }
    w->ddev[w->nd] = dev;
    w->dino[w->nd++] = ino;
    if (w->nq == w->capq) {
        size_t cap = w->capq ? w->capq * 2 : 64;
        dir_job *nv = realloc(w->q, cap * sizeof *nv);
        if (!nv) return CM_ENOMEM;
        w->q = nv;
        w->capq = cap;
    }
    char *copy = cm_strdup(abs);
    if (!copy) return CM_ENOMEM;
    w->q[w->nq++] = (dir_job){copy, depth};
    return CM_OK;
}

/* Reads one directory: stats its .md files, queues its subdirectories. */
static cm_rc read_dir(walk *w, found *f, const dir_job *job)
{
    cm_rc rc = CM_OK;
    int fd = open(job->abs, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        int e = errno;
        if (fd >= 0) close(fd);
        return add_problem(w->cfg, f, job->abs, "cannot read directory", e);
    }
    buf path = BUF_INIT;
    CHECK(buf_adds(&path, job->abs));
    size_t base = path.len;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *name = de->d_name;
        if (name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0))) continue;
        if (de->d_type == DT_LNK || (de->d_type == DT_REG && !is_md(name))) continue;
        path.len = base;
        CHECK(buf_addc(&path, '/'));
        CHECK(buf_adds(&path, name));
        struct stat st;
        if (fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            CHECK(add_problem(w->cfg, f, path.data, "cannot stat", errno));
        } else if (S_ISREG(st.st_mode) && is_md(name)) {
            CHECK(add_file(w->cfg, f, path.data, &st));
        } else if (S_ISDIR(st.st_mode)) {
            if (job->depth >= MAX_DEPTH) {
                CHECK(add_problem(w->cfg, f, path.data, "skipped, nested too deep", ELOOP));
                continue;
            }
            pthread_mutex_lock(&w->mu);
            rc = queue_dir(w, path.data, job->depth + 1, st.st_dev, st.st_ino);
            pthread_cond_signal(&w->cv);
            pthread_mutex_unlock(&w->mu);
            CHECK(rc);
        }
    }
out:
    closedir(d);
    buf_release(&path);
    return rc;
}

typedef struct worker {
    walk *w;
    found f;
} worker;

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
        cm_rc rc = read_dir(w, &k->f, &job);
        free(job.abs);
        pthread_mutex_lock(&w->mu);
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

/* A root: a file or a directory given by absolute path; symlinks ignored. */
static cm_rc add_root(walk *w, found *f, const char *abs)
{
    struct stat st;
    if (lstat(abs, &st) < 0) return CM_OK; /* absent roots are normal (no memory/ yet) */
    if (S_ISREG(st.st_mode)) return is_md(abs) ? add_file(w->cfg, f, abs, &st) : CM_OK;
    if (!S_ISDIR(st.st_mode)) return CM_OK; /* a symbolic link, a device... */
    return queue_dir(w, abs, 0, st.st_dev, st.st_ino);
}

static int by_rel(const void *a, const void *b)
{
    return strcmp(((const mem_file *)a)->rel, ((const mem_file *)b)->rel);
}

static int by_inode_then_rel(const void *a, const void *b)
{
    const mem_file *x = a, *y = b;
    if (x->dev != y->dev) return x->dev < y->dev ? -1 : 1;
    if (x->ino != y->ino) return x->ino < y->ino ? -1 : 1;
    return strcmp(x->rel, y->rel);
}

/* Moves everything from src into dst. */
static cm_rc absorb(file_list *dst, problem_list *pdst, found *src)
{
    if (src->files.n) {
        mem_file *nv = realloc(dst->v, (dst->n + src->files.n) * sizeof *nv);
        if (!nv) return CM_ENOMEM;
        dst->v = nv;
        memcpy(dst->v + dst->n, src->files.v, src->files.n * sizeof *nv);
        dst->n += src->files.n;
        dst->cap = dst->n;
        dst->total_bytes += src->files.total_bytes;
    }
    free(src->files.v);
    memset(&src->files, 0, sizeof src->files);
    for (size_t i = 0; i < src->problems.n; i++) {
        cm_rc rc = problem_add(pdst, src->problems.v[i].path, "%s", src->problems.v[i].what);
        if (rc) return rc;
    }
    problem_list_release(&src->problems);
    return CM_OK;
}

cm_rc discover_files(const cm_config *cfg, file_list *out, problem_list *problems)
{
    cm_rc rc = CM_OK;
    walk w = {.cfg = cfg};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    worker k[MAX_THREADS];
    memset(k, 0, sizeof k);
    found roots = {0};
    buf p = BUF_INIT;
    memset(out, 0, sizeof *out);

    /* The roots: MEMORY.md (else memory.md), memory/, extraPaths. */
    struct stat st;
    CHECK(fs_join(&p, cfg->workspace, "MEMORY.md"));
    if (lstat(p.data, &st) < 0) {
        buf_reset(&p);
        CHECK(fs_join(&p, cfg->workspace, "memory.md"));
    }
    CHECK(add_root(&w, &roots, p.data));
    buf_reset(&p);
    CHECK(fs_join(&p, cfg->workspace, "memory"));
    CHECK(add_root(&w, &roots, p.data));
    for (size_t i = 0; i < cfg->extra_paths.n; i++) {
        buf_reset(&p);
        rc = config_extra_path(cfg, i, &p);
        if (rc == CM_EPATH) { /* climbs above "/": ignored */
            rc = CM_OK;
            continue;
        }
        CHECK(rc);
        CHECK(add_root(&w, &roots, p.data));
    }

    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int nthreads = (int)CM_MAX(1, CM_MIN(MAX_THREADS, cores));
    pthread_t tid[MAX_THREADS];
    int started = 0;
    for (int i = 0; i < nthreads; i++) {
        k[i].w = &w;
        if (i > 0 && pthread_create(&tid[i], NULL, work, &k[i]) == 0) started++;
    }
    work(&k[0]); /* the calling thread works too */
    for (int i = 1; i <= started; i++)
        pthread_join(tid[i], NULL);

    CHECK(absorb(out, problems, &roots));
    for (int i = 0; i < nthreads; i++) {
        if (k[i].f.rc && !rc) rc = k[i].f.rc;
        cm_rc r2 = absorb(out, problems, &k[i].f);
        if (!rc) rc = r2;
    }
    CHECK(rc);
    /* One entry per file: same (dev, ino) → keep the smallest path. */
    qsort(out->v, out->n, sizeof *out->v, by_inode_then_rel);
    size_t wr = 0;
    for (size_t i = 0; i < out->n; i++) {
        if (wr && out->v[wr - 1].dev == out->v[i].dev && out->v[wr - 1].ino == out->v[i].ino) {
            out->total_bytes -= (uint64_t)out->v[i].size;
            free(out->v[i].rel);
            free(out->v[i].abs);
            continue;
        }
        out->v[wr++] = out->v[i];
    }
    out->n = wr;
    qsort(out->v, out->n, sizeof *out->v, by_rel);
out:
    for (size_t i = 0; i < w.nq; i++)
        free(w.q[i].abs);
    free(w.q);
    free(w.ddev);
    free(w.dino);
    for (int i = 0; i < MAX_THREADS; i++) {
        file_list_release(&k[i].f.files);
        problem_list_release(&k[i].f.problems);
    }
    file_list_release(&roots.files);
    problem_list_release(&roots.problems);
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cv);
    buf_release(&p);
    if (rc) file_list_release(out);
    return rc;
}

bool discover_daily_date(const char *rel, int *y, int *m, int *d)
{
    const char *name = strrchr(rel, '/');
    if (strncmp(rel, "memory/", 7) != 0 || !name) return false;
    name++;
    if (strlen(name) != 13 || strcmp(name + 10, ".md") != 0) return false;
    for (int i = 0; i < 10; i++) {
        bool dash = i == 4 || i == 7;
        if (dash ? name[i] != '-' : (name[i] < '0' || name[i] > '9')) return false;
    }
    *y = (name[0] - '0') * 1000 + (name[1] - '0') * 100 + (name[2] - '0') * 10 + (name[3] - '0');
    *m = (name[5] - '0') * 10 + (name[6] - '0');
    *d = (name[8] - '0') * 10 + (name[9] - '0');
    return *m >= 1 && *m <= 12 && *d >= 1 && *d <= 31;
}
