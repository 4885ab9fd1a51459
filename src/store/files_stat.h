/*
 * files_stat.h — the stat snapshot of an SQLite index (files_stat.c): every
 * files row's (path, mtime, size) packed into one meta row, so that the
 * no-change check reads one value instead of stepping through the files
 * table row by row. Triggers on the files table delete the snapshot in the
 * transaction that changes any row, whoever writes (an older clawmem too,
 * once the triggers exist), so a snapshot that is there matches the table.
 * Included by store.h.
 */
#ifndef CM_FILES_STAT_H
#define CM_FILES_STAT_H

#include "store.h"

/* The meta key of the snapshot (a BLOB, see files_stat.c for its layout). */
#define STORE_FILES_STAT_KEY "clawmem_files_stat_v1"

/* Calls fn(ctx, path, mtime_ns, size) for every entry of the snapshot, in
 * table order, until fn returns false; *used is false (and fn never
 * called) when the index has no valid snapshot: no row, a PostgreSQL store,
 * or a value that does not parse, which is then left to the files table.
 * Reads one meta row; copies nothing. */
cm_rc cm_store_files_stat_each(store *s, store_file_fn fn, void *ctx, bool *used, char *err,
                               size_t errlen);

/* Writes the snapshot when the index has none, creating the triggers that
 * drop it first (one write transaction; the caller holds the writer lock
 * and no transaction is open). Nothing for a PostgreSQL or read-only store,
 * or when the snapshot is there. *wrote (may be NULL) tells whether it
 * wrote. */
cm_rc cm_store_files_stat_refresh(store *s, bool *wrote, char *err, size_t errlen);

#endif
