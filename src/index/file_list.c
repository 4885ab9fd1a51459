/*
 * file_list.c — the file and problem lists a walk fills (their paths packed
 * into blocks owned by the list), and the file reader, which reaches each
 * listed file from its root's descriptor one directory at a time with
 * openat(O_NOFOLLOW), so a directory swapped for a symbolic link after the
 * walk is refused, never followed.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/buf.h"
#include "file_list.h"

cm_rc cm_index_problem_add(problem_list *l, const char *path, const char *fmt, ...)
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

void cm_index_problem_list_release(problem_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].path);
        free(l->v[i].what);
    }
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* The paths of a list's files, packed into blocks of NAME_BLOCK bytes (or
 * one path's worth, if longer): one allocation per ~400 files rather than
 * one per file, released all together. */
#define NAME_BLOCK (32u << 10)

typedef struct name_block {
    struct name_block *next;
    size_t used, cap;
    char data[];
} name_block;

/* n bytes in l's current block, or a new one; NULL when out of memory. */
char *cm_index_file_list_names(file_list *l, size_t n)
{
    name_block *b = l->names;
    if (!b || b->cap - b->used < n) {
        size_t cap = CM_MAX(n, NAME_BLOCK - sizeof *b);
        if (!(b = malloc(sizeof *b + cap))) return NULL;
        *b = (name_block){l->names, 0, cap};
        l->names = b;
    }
    char *p = b->data + b->used;
    b->used += n;
    return p;
}

/* Moves src's blocks to dst's chain (after dst's current block, which
 * stays the one cm_index_file_list_names fills). */
void cm_index_file_list_absorb_names(file_list *dst, file_list *src)
{
    name_block *last = src->names;
    if (!last) return;
    while (last->next)
        last = last->next;
    if (dst->names) {
        last->next = dst->names->next;
        dst->names->next = src->names;
    } else {
        dst->names = src->names;
    }
    src->names = NULL;
}

void cm_index_file_list_release(file_list *l)
{
    for (name_block *b = l->names, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    free(l->v);
    for (size_t i = 0; i < l->nroots; i++) {
        if (l->roots[i].fd >= 0) close(l->roots[i].fd);
        free(l->roots[i].abs);
    }
    free(l->roots);
    cm_buf_release(&l->dir_record);
    memset(l, 0, sizeof *l);
}

cm_rc cm_discover_relpath(buf *out, const char *base, const char *abs)
{
    size_t bl = strlen(base);
    if (strncmp(abs, base, bl) == 0 && abs[bl] == '/') return cm_buf_adds(out, abs + bl + 1);
    /* Longest common directory prefix, then one "../" per remaining base part. */
    size_t common = 0;
    for (size_t i = 0; base[i] && base[i] == abs[i]; i++)
        if (base[i] == '/') common = i;
    if (base[bl] == 0 && abs[bl] == '/') common = bl;
    cm_rc rc = CM_OK;
    for (const char *p = base + common; *p && !rc; p++)
        if (*p == '/') rc = cm_buf_adds(out, "../");
    if (!rc) rc = cm_buf_adds(out, abs + common + 1);
    return rc;
}

/* openat(O_NOFOLLOW | O_DIRECTORY) on a symbolic link fails with ENOTDIR:
 * tell it apart from a file, as ELOOP. */
int cm_discover_link_errno(int dirfd, const char *name, int e)
{
    struct stat st;
    if (e == ENOTDIR && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
        return ELOOP;
    return e;
}

static int by_rel(const void *a, const void *b)
{
    return strcmp(((const mem_file *)a)->rel, ((const mem_file *)b)->rel);
}

void cm_discover_sort(file_list *l)
{
    if (l->n) qsort(l->v, l->n, sizeof *l->v, by_rel); /* v is NULL when empty */
}

void cm_index_file_reader_init(file_reader *r, const file_list *l)
{
    r->l = l;
    r->root = 0;
    r->dirfd = -1;
    cm_buf_init(&r->dir, 0);
}

void cm_index_file_reader_release(file_reader *r)
{
    if (r->dirfd >= 0) close(r->dirfd);
    r->dirfd = -1;
    cm_buf_release(&r->dir);
}

static const char *open_reason(int e)
{
    return e == ELOOP ? DISCOVER_SYMLINK_PROBLEM : e == ENOENT ? "no such file" : strerror(e);
}

int cm_discover_open_dir(int fd, const char *path, size_t dl)
{
    const char *c = path, *end = path + dl;
    int cur = fd;
    while (c < end) {
        const char *e = memchr(c, '/', (size_t)(end - c));
        if (!e) e = end;
        size_t cl = (size_t)(e - c);
        char comp[NAME_MAX + 1];
        int nfd = -1, err = 0;
        if (cl == 0 || cl > NAME_MAX || (c[0] == '.' && (cl == 1 || (cl == 2 && c[1] == '.')))) {
            err = EINVAL; /* never in a walked path: it would leave the root */
        } else {
            memcpy(comp, c, cl);
            comp[cl] = 0;
            nfd = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            err = nfd < 0 ? cm_discover_link_errno(cur, comp, errno) : 0;
        }
        if (cur != fd) close(cur);
        if (nfd < 0) {
            errno = err;
            return -1;
        }
        cur = nfd;
        c = e + 1;
    }
    return cur == fd ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : cur;
}

cm_rc cm_index_file_reader_read(file_reader *r, const mem_file *f, size_t max, buf *out,
                                struct stat *st, char *why, size_t whylen)
{
    cm_rc rc = CM_OK;
    char *err = why;
    size_t errlen = whylen;
    int fd = -1;
    if (f->root >= r->l->nroots) FAIL(CM_EIO, "no root");
    const char *p = f->abs + f->sub;
    const char *slash = strrchr(p, '/');
    size_t dl = slash ? (size_t)(slash - p) : 0;
    const char *name = slash ? slash + 1 : p;
    if (r->dirfd < 0 || r->root != f->root || r->dir.len != dl ||
        (dl && memcmp(r->dir.data, p, dl) != 0)) {
        if (r->dirfd >= 0) close(r->dirfd);
        cm_buf_reset(&r->dir);
        r->dirfd = cm_discover_open_dir(r->l->roots[f->root].fd, p, dl);
        if (r->dirfd < 0) FAIL(CM_EIO, "%s", open_reason(errno));
        r->root = f->root;
        if (cm_buf_add(&r->dir, p, dl)) {
            close(r->dirfd);
            r->dirfd = -1;
            CHECK(CM_ENOMEM);
        }
    }
    fd = openat(r->dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) FAIL(CM_EIO, "%s", open_reason(errno));
    if (fstat(fd, st) < 0) FAIL(CM_EIO, "%s", strerror(errno));
    if (!S_ISREG(st->st_mode)) FAIL(CM_EIO, "not a regular file");
    if ((uint64_t)st->st_size > max)
        FAIL(CM_ETOOBIG, "%lld bytes, over the %zu-byte cap", (long long)st->st_size, max);
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) FAIL(CM_EIO, "%s", strerror(errno));
    if (cm_buf_grow(out, (size_t)st->st_size)) CHECK(CM_ENOMEM);
    for (;;) {
        if (out->len + 4096 > out->cap && cm_buf_grow(out, 4096)) CHECK(CM_ENOMEM);
        ssize_t n = read(fd, out->data + out->len, out->cap - out->len - 1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) FAIL(CM_EIO, "%s", strerror(errno));
        if (n == 0) break;
        out->len += (size_t)n;
        if (out->len > max) FAIL(CM_ETOOBIG, "grew over the %zu-byte cap", max);
    }
    out->data[out->len] = 0;
out:
    if (rc == CM_ENOMEM) cm_seterr(why, whylen, rc, "out of memory");
    if (fd >= 0) close(fd);
    return rc;
}

bool cm_discover_daily_date(const char *rel, int *y, int *m, int *d)
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