/*
 * discover.c — walks the memory roots with openat/fdopendir and fstatat
 * (AT_SYMLINK_NOFOLLOW), so symbolic links are seen and skipped rather than
 * followed, and a deep tree costs no path re-resolution.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/buf.h"
#include "../base/fs.h"
#include "discover.h"

#define MAX_DEPTH 64

typedef struct seen {
    dev_t *dev;
    ino_t *ino;
    size_t n, cap; /* open-addressed hash of (dev, ino) */
} seen;

typedef struct walker {
    const cm_config *cfg;
    file_list *out;
    problem_list *problems;
    seen seen;
} walker;

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

static uint64_t mix(dev_t d, ino_t i)
{
    uint64_t h = (uint64_t)i * 0x9E3779B97F4A7C15ull ^ (uint64_t)d;
    return h ^ (h >> 29);
}

/* Returns 1 if (dev, ino) was already seen, 0 if newly added, -1 on ENOMEM. */
static int seen_add(seen *s, dev_t d, ino_t i)
{
    if ((s->n + 1) * 2 > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 1024;
        dev_t *nd = calloc(cap, sizeof *nd);
        ino_t *ni = calloc(cap, sizeof *ni);
        if (!nd || !ni) {
            free(nd);
            free(ni);
            return -1;
        }
        for (size_t k = 0; k < s->cap; k++) {
            if (!s->ino[k]) continue;
            size_t j = mix(s->dev[k], s->ino[k]) & (cap - 1);
            while (ni[j]) j = (j + 1) & (cap - 1);
            nd[j] = s->dev[k];
            ni[j] = s->ino[k];
        }
        free(s->dev);
        free(s->ino);
        s->dev = nd;
        s->ino = ni;
        s->cap = cap;
    }
    size_t j = mix(d, i) & (s->cap - 1);
    while (s->ino[j]) {
        if (s->ino[j] == i && s->dev[j] == d) return 1;
        j = (j + 1) & (s->cap - 1);
    }
    s->dev[j] = d;
    s->ino[j] = i ? i : 1;
    s->n++;
    return 0;
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

static cm_rc add_file(walker *w, const char *abs, const struct stat *st)
{
    int r = seen_add(&w->seen, st->st_dev, st->st_ino);
    if (r < 0) return CM_ENOMEM;
    if (r > 0) return CM_OK;
    buf rel = BUF_INIT;
    cm_rc rc = discover_relpath(&rel, w->cfg->workspace, abs);
    if (rc) {
        buf_release(&rel);
        return rc;
    }
    if (st->st_size > DISCOVER_MAX_FILE_BYTES) {
        rc = problem_add(w->problems, rel.data, "skipped: %lld bytes, over the %lld-byte cap",
                         (long long)st->st_size, (long long)DISCOVER_MAX_FILE_BYTES);
        buf_release(&rel);
        return rc;
    }
    file_list *l = w->out;
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
    mem_file *f = &l->v[l->n];
    f->rel = buf_detach(&rel);
    f->abs = cm_strdup(abs);
    f->source = "memory";
    f->size = st->st_size;
    f->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
    if (!f->abs) {
        free(f->rel);
        return CM_ENOMEM;
    }
    l->n++;
    l->total_bytes += (uint64_t)st->st_size;
    return CM_OK;
}

static const char *rel_for_problem(walker *w, const char *abs, buf *tmp)
{
    buf_reset(tmp);
    if (discover_relpath(tmp, w->cfg->workspace, abs) || !tmp->data) return abs;
    return tmp->data;
}

/* Walks directory dfd (whose path is `path`), recursively. Takes dfd. */
static cm_rc walk_dir(walker *w, int dfd, buf *path, int depth)
{
    cm_rc rc = CM_OK;
    DIR *d = fdopendir(dfd);
    buf tmp = BUF_INIT;
    if (!d) {
        close(dfd);
        return problem_add(w->problems, rel_for_problem(w, path->data, &tmp),
                           "cannot read directory: %s", strerror(errno));
    }
    size_t base_len = path->len;
    struct dirent *de;
    while ((de = readdir(d)) != NULL && !rc) {
        const char *name = de->d_name;
        if (name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0))) continue;
        unsigned char type = de->d_type;
        if (type == DT_LNK) continue;
        if (type == DT_REG && !is_md(name)) continue;
        path->len = base_len;
        if ((rc = buf_addc(path, '/')) || (rc = buf_adds(path, name))) break;
        struct stat st;
        if (fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            rc = problem_add(w->problems, rel_for_problem(w, path->data, &tmp), "cannot stat: %s",
                             strerror(errno));
            continue;
        }
        if (S_ISDIR(st.st_mode)) {
            if (depth >= MAX_DEPTH) {
                rc = problem_add(w->problems, rel_for_problem(w, path->data, &tmp),
                                 "skipped: nested deeper than %d directories", MAX_DEPTH);
                continue;
            }
            int r = seen_add(&w->seen, st.st_dev, st.st_ino);
            if (r < 0) rc = CM_ENOMEM;
            if (r) continue;
            int sub = openat(dirfd(d), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub < 0) {
                rc = problem_add(w->problems, rel_for_problem(w, path->data, &tmp),
                                 "cannot open directory: %s", strerror(errno));
                continue;
            }
            rc = walk_dir(w, sub, path, depth + 1);
        } else if (S_ISREG(st.st_mode) && is_md(name)) {
            rc = add_file(w, path->data, &st);
        }
    }
    path->len = base_len;
    path->data[base_len] = 0;
    closedir(d);
    buf_release(&tmp);
    return rc;
}

/* A root: a file or a directory given by absolute path; symlinks ignored. */
static cm_rc add_root(walker *w, const char *abs, bool must_be_md)
{
    struct stat st;
    if (lstat(abs, &st) < 0) return CM_OK; /* absent roots are normal (no memory/ yet) */
    if (S_ISLNK(st.st_mode)) return CM_OK;
    if (S_ISREG(st.st_mode)) return (!must_be_md || is_md(abs)) ? add_file(w, abs, &st) : CM_OK;
    if (!S_ISDIR(st.st_mode)) return CM_OK;
    int r = seen_add(&w->seen, st.st_dev, st.st_ino);
    if (r) return r < 0 ? CM_ENOMEM : CM_OK;
    int fd = open(abs, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    buf path = BUF_INIT;
    cm_rc rc = buf_adds(&path, abs);
    if (fd < 0) {
        buf tmp = BUF_INIT;
        if (!rc)
            rc = problem_add(w->problems, rel_for_problem(w, abs, &tmp), "cannot open directory: %s",
                             strerror(errno));
        buf_release(&tmp);
    } else if (!rc) {
        rc = walk_dir(w, fd, &path, 0);
    } else {
        close(fd);
    }
    buf_release(&path);
    return rc;
}

static int by_rel(const void *a, const void *b)
{
    return strcmp(((const mem_file *)a)->rel, ((const mem_file *)b)->rel);
}

cm_rc discover_files(const cm_config *cfg, file_list *out, problem_list *problems)
{
    cm_rc rc = CM_OK;
    walker w = {cfg, out, problems, {0}};
    buf p = BUF_INIT;
    memset(out, 0, sizeof *out);
    struct stat st;
    CHECK(fs_join(&p, cfg->workspace, "MEMORY.md"));
    if (lstat(p.data, &st) < 0) {
        buf_reset(&p);
        CHECK(fs_join(&p, cfg->workspace, "memory.md"));
    }
    CHECK(add_root(&w, p.data, true));
    buf_reset(&p);
    CHECK(fs_join(&p, cfg->workspace, "memory"));
    CHECK(add_root(&w, p.data, true));
    for (size_t i = 0; i < cfg->extra_paths.n; i++) {
        char *x = fs_expand_home(cfg->extra_paths.v[i]);
        if (!x) CHECK(CM_ENOMEM);
        buf_reset(&p);
        rc = fs_join(&p, cfg->workspace, x);
        free(x);
        CHECK(rc);
        fs_normalise(p.data);
        CHECK(add_root(&w, p.data, true));
    }
    qsort(out->v, out->n, sizeof *out->v, by_rel);
out:
    free(w.seen.dev);
    free(w.seen.ino);
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
