/*
 * files_stat.h — the stat snapshot of an SQLite index (files_stat.c): every
 * files row's (path, mtime, size) packed into one meta row, so that the
 * no-change check reads one value instead of stepping through the files
 * table row by row. Triggers on the files table delete the snapshot in the
 * transaction that changes any row, whoever writes (an older clawmem too,
 * once the triggers exist), so a snapshot that is there matches the table;
 * they drop the term counts' mark (term_rows.h) too.
 * Included by store.h.
 */
#ifndef CM_FILES_STAT_H
#define CM_FILES_STAT_H

#include "store.h"

/* The meta key of the snapshot (a BLOB, see files_stat.c for its layout). */
#define STORE_FILES_STAT_KEY "clawmem_files_stat_v1"

/* The triggers on files (and the term counts' table their bodies write,
 * term_rows.h): each drops the snapshot and the term counts' mark, as every
 * write of chunks comes with a write of their file's row. IF NOT EXISTS: an
 * index's older triggers (the snapshot only) stay until cm_term_rows_fill
 * puts these in their place. */
#define STORE_FILES_TRIGGER(name, event)                                                           \
    "CREATE TRIGGER IF NOT EXISTS " name " AFTER " event " ON files BEGIN DELETE FROM meta WHERE " \
    "key = '" STORE_FILES_STAT_KEY "'; DELETE FROM term_rows WHERE term = ''; END;"
#define STORE_FILES_TRIGGERS_SQL                                                                   \
    "CREATE TABLE IF NOT EXISTS term_rows(term TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT "     \
    "ROWID;" STORE_FILES_TRIGGER("files_stat_ins", "INSERT")                                       \
        STORE_FILES_TRIGGER("files_stat_upd", "UPDATE")                                            \
            STORE_FILES_TRIGGER("files_stat_del", "DELETE")

/* The snapshot as one read holds it: p (n bytes) while the statement q
 * stays on its row (a read transaction of the index: close it before any
 * write); p NULL when there is none or it does not parse. dirs/dirs_len:
 * its directory records (file_list.h's dir_record; may be empty). */
typedef struct store_snap {
    sqlite3_stmt *q;
    const unsigned char *p, *dirs;
    size_t n, head, dirs_len;
    uint64_t count;
} store_snap;

/* Reads the snapshot into *snap (zeroed: none, a PostgreSQL store, or a
 * value that does not parse, which is then left to the files table).
 * Close it with cm_store_files_stat_close. */
cm_rc cm_store_files_stat_open(store *s, store_snap *snap, char *err, size_t errlen);
void cm_store_files_stat_close(store_snap *snap);

/* Calls fn(ctx, path, mtime_ns, size) for every entry of the snapshot held
 * (NULL: read it now), in table order, until fn returns false; *used is
 * false (and fn never called) when there is no valid snapshot. Copies
 * nothing. */
cm_rc cm_store_files_stat_each(store *s, const store_snap *held, store_file_fn fn, void *ctx,
                               bool *used, char *err, size_t errlen);

/* Writes the snapshot when the index has none (or always, with replace),
 * creating the triggers that drop it first (one write transaction; the
 * caller holds the writer lock and no transaction is open), with dirs (dlen
 * bytes, may be 0): directory records of a walk (file_list.h's dir_record),
 * kept as they are and dropped with the snapshot. They need not come from
 * the walk the rows came from: each names a directory's device, inode and
 * ctime, and is used only while the directory still has them. Nothing for a
 * PostgreSQL or read-only store, or when the snapshot is there and replace
 * is false. *wrote (may be NULL) tells whether it wrote. */
cm_rc cm_store_files_stat_refresh(store *s, const void *dirs, size_t dlen, bool replace,
                                  bool *wrote, char *err, size_t errlen);

#endif
