/*
 * store_pg_files.h — a file's rows in the PostgreSQL store (store_pg_files.c),
 * and what the connection's code in store_pg.c shares with it. Not for other
 * callers: store_pg.h declares the store_pg_file_* functions of store.h.
 */
#ifndef CM_STORE_PG_FILES_H
#define CM_STORE_PG_FILES_H

#include "store_pg_int.h"

/* Writes the pending files' chunks and rows (a rebuild: one statement per
 * batch, sent without waiting for its result). */
cm_rc cm_store_pg_flush_files(store *s, char *err, size_t errlen);
/* Reads the result of the rebuild's batch in flight: its chunk and token
 * totals count, its failure is this call's. */
cm_rc cm_store_pg_collect_batch(store *s, char *err, size_t errlen);
/* Forgets the pending files, never sent. */
void cm_store_pg_drop_pending(struct store_pg *p);
/* Ends an open COPY as failed (a rollback; nothing of it is kept). */
void cm_store_pg_copy_abort(store *s);

#endif
