/*
 * dir_records.h — directory records (file_list.h's dir_record layout: dev,
 * ino, ctime in ns, the names' length, then the names NUL-terminated in a
 * row) for discover.c's walk: written for a directory whose ctime is old
 * enough, parsed and looked up when the next walk decides whether to read
 * a directory again, compared by the no-change check.
 */
#ifndef CM_DIR_RECORDS_H
#define CM_DIR_RECORDS_H

#include <sys/stat.h>
#include <sys/types.h>

#include "../base/buf.h"

/* One parsed record; names points into the parsed bytes. */
typedef struct hint_dir {
    uint64_t dev, ino;
    int64_t ctime_ns;
    const char *names; /* len bytes, n NUL-terminated names */
    uint32_t len;
    size_t n;
} hint_dir;

/* Whether the file system last asked about keeps ctime (one per thread). */
typedef struct dir_fs_cache {
    dev_t dev;
    bool known, ok;
} dir_fs_cache;

/* Parses the records at p (n bytes) into *out (malloc'd, sorted by dev and
 * ino) and *count; records that do not parse leave none (*out NULL, 0: the
 * walk reads every directory). CM_ENOMEM only. */
cm_rc cm_dir_records_parse(const void *p, size_t n, hint_dir **out, size_t *count);

/* The record of (key->dev, key->ino) in v[0..n) as parsed, or NULL. */
const hint_dir *cm_dir_records_find(const hint_dir *v, size_t n, const hint_dir *key);

/* Whether two sets of records hold the same directories, ctimes and names,
 * in any order (records that do not parse are never the same as any, even
 * each other; two empty sets are). */
bool cm_discover_records_same(const void *a, size_t alen, const void *b, size_t blen);

/* A stat's ctime in ns since the epoch. */
int64_t cm_dir_ctime_ns(const struct stat *st);

/* Whether the file system of the directory fd (device dev) is one whose
 * ctime is known to change with every entry added, removed or renamed (a
 * FUSE or network file system may report a fixed or a cached one): only
 * those get records. One fstatfs per device change, kept in c. */
bool cm_dir_ctime_kept(dir_fs_cache *c, int fd, dev_t dev);

/* Sorts the n names (NUL-terminated in a row) of names by strcmp. */
cm_rc cm_dir_sort_names(buf *names, size_t n);

/* Appends to record the record of a directory (its stat ds, the names'
 * len bytes); one over 4 GiB of names is not recorded (read next time). */
cm_rc cm_dir_record_add(buf *record, const struct stat *ds, const char *names, size_t len);

/* "." or "..". */
bool cm_dir_is_dot(const char *name);

#endif
