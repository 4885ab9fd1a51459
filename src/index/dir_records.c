/*
 * dir_records.c — directory records (dir_records.h): their bytes written,
 * parsed, looked up and compared, and the checks that decide whether a
 * directory may have one.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>

#include "dir_records.h"

#define RECORD_HEAD (8 + 8 + 8 + 4)

bool cm_dir_is_dot(const char *name)
{
    return name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0));
}

static int hint_cmp(const void *a, const void *b)
{
    const hint_dir *x = a, *y = b;
    if (x->dev != y->dev) return x->dev < y->dev ? -1 : 1;
    return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* The number of names in the len bytes at p when they are names a directory
 * can hold, each NUL-terminated: none empty, ".", ".." or with a '/' (a
 * record is read from the index, and its names go to fstatat: none may
 * leave the directory); else SIZE_MAX. One pass over the bytes. */
static size_t names_count(const unsigned char *p, size_t len)
{
    size_t n = 0;
    if (!len) return 0;
    if (p[len - 1] != 0 || memchr(p, '/', len)) return SIZE_MAX;
    for (size_t at = 0; at < len; n++) {
        const char *name = (const char *)p + at;
        size_t l = strlen(name);
        if (l == 0 || cm_dir_is_dot(name)) return SIZE_MAX;
        at += l + 1;
    }
    return n;
}

cm_rc cm_dir_records_parse(const void *data, size_t n, hint_dir **out, size_t *count)
{
    const unsigned char *p = data;
    size_t cnt = 0;
    *out = NULL;
    *count = 0;
    for (size_t at = 0; at < n;) {
        uint32_t len;
        if (n - at < RECORD_HEAD) return CM_OK;
        memcpy(&len, p + at + 24, 4);
        at += RECORD_HEAD;
        if (len > n - at) return CM_OK;
        at += len;
        cnt++;
    }
    if (!cnt) return CM_OK;
    hint_dir *v = calloc(cnt, sizeof *v);
    if (!v) return CM_ENOMEM;
    for (size_t at = 0, i = 0; i < cnt; i++) {
        hint_dir *h = &v[i];
        memcpy(&h->dev, p + at, 8);
        memcpy(&h->ino, p + at + 8, 8);
        memcpy(&h->ctime_ns, p + at + 16, 8);
        memcpy(&h->len, p + at + 24, 4);
        h->names = (const char *)p + at + RECORD_HEAD;
        h->n = names_count((const unsigned char *)h->names, h->len);
        if (h->n == SIZE_MAX) {
            free(v);
            return CM_OK;
        }
        at += RECORD_HEAD + h->len;
    }
    qsort(v, cnt, sizeof *v, hint_cmp);
    *out = v;
    *count = cnt;
    return CM_OK;
}

const hint_dir *cm_dir_records_find(const hint_dir *v, size_t n, const hint_dir *key)
{
    return n ? bsearch(key, v, n, sizeof *v, hint_cmp) : NULL;
}

bool cm_discover_records_same(const void *a, size_t alen, const void *b, size_t blen)
{
    hint_dir *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    bool same = cm_dir_records_parse(a, alen, &x, &nx) == CM_OK &&
                cm_dir_records_parse(b, blen, &y, &ny) == CM_OK && nx == ny &&
                (nx > 0 || (alen == 0 && blen == 0));
    for (size_t i = 0; same && i < nx; i++)
        same = x[i].dev == y[i].dev && x[i].ino == y[i].ino && x[i].ctime_ns == y[i].ctime_ns &&
               x[i].len == y[i].len && memcmp(x[i].names, y[i].names, x[i].len) == 0;
    free(x);
    free(y);
    return same;
}

int64_t cm_dir_ctime_ns(const struct stat *st)
{
    return (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
}

bool cm_dir_ctime_kept(dir_fs_cache *c, int fd, dev_t dev)
{
    static const unsigned long kept[] = {
        0xEF53,     /* ext2/3/4 */
        0x58465342, /* xfs */
        0x9123683E, /* btrfs */
        0x01021994, /* tmpfs */
        0x794c7630, /* overlayfs */
        0xF2F52010, /* f2fs */
        0x2fc12fc1, /* zfs */
        0xca451a4e, /* bcachefs */
    };
    if (c->known && c->dev == dev) return c->ok;
    struct statfs sf;
    c->known = true;
    c->dev = dev;
    c->ok = false;
    if (fstatfs(fd, &sf) != 0) return false;
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
        if ((unsigned long)sf.f_type == kept[i]) c->ok = true;
    return c->ok;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* By strcmp, so that a directory recorded is listed, then and from its
 * record, in its paths' order: the order of the files rows (and of their
 * stat snapshot) after a rebuild, which the no-change check then meets one
 * after another. */
cm_rc cm_dir_sort_names(buf *names, size_t n)
{
    const char **v = malloc(n * sizeof *v);
    char *copy = malloc(names->len);
    if (!v || !copy) {
        free(v);
        free(copy);
        return CM_ENOMEM;
    }
    memcpy(copy, names->data, names->len);
    for (size_t i = 0, at = 0; i < n; i++) {
        v[i] = copy + at;
        at += strlen(copy + at) + 1;
    }
    qsort(v, n, sizeof *v, name_cmp);
    for (size_t i = 0, at = 0; i < n; i++) {
        size_t l = strlen(v[i]) + 1;
        memcpy(names->data + at, v[i], l);
        at += l;
    }
    free(v);
    free(copy);
    return CM_OK;
}

cm_rc cm_dir_record_add(buf *record, const struct stat *ds, const char *names, size_t len)
{
    uint64_t dev = (uint64_t)ds->st_dev, ino = (uint64_t)ds->st_ino;
    int64_t ct = cm_dir_ctime_ns(ds);
    uint32_t l32 = (uint32_t)len;
    if (len > UINT32_MAX) return CM_OK; /* not recorded: read next time */
    cm_rc rc = cm_buf_add(record, &dev, 8);
    if (!rc) rc = cm_buf_add(record, &ino, 8);
    if (!rc) rc = cm_buf_add(record, &ct, 8);
    if (!rc) rc = cm_buf_add(record, &l32, 4);
    if (!rc && len) rc = cm_buf_add(record, names, len);
    return rc;
}
