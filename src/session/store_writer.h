/*
 * store_writer.h — writing a session store (store_index.h): the registry of
 * this process's stores, the text of a write (only the entries changed since
 * the last one formatted), the write under the store's lock, and the writer
 * thread that writes deferred changes, coalesced, at least flush_ms later and
 * at least the gap after the last write (cm_store_ix_gap_ms). The public
 * functions defined in store_writer.c (cm_store_ix_get, cm_store_ix_sync,
 * cm_store_ix_sync_all, cm_store_ix_gap_ms) are declared in store_index.h;
 * this header is store_index.c's way in. Not for other files.
 */
#ifndef CM_STORE_WRITER_H
#define CM_STORE_WRITER_H

#include "../base/lockfile.h"
#include "store_index.h"

/* Writes ix's unwritten changes (and runs maintenance); the store's lock l
 * is held. Changes that could not be written stay unwritten. */
cm_rc cm_store_writer_flush(store_ix *ix, lockfile *l, char *err, size_t errlen);

/* A deferred change is waiting: the writer writes it within flush_ms, or
 * the gap after the last write (soon: the shorter one). Starts the writer
 * thread when it is not running. */
void cm_store_writer_schedule(int64_t flush_ms, bool soon);

/* A read of a store took took_ms (the gap before the first write). */
void cm_store_writer_note_read(int64_t took_ms);

/* Whether a store's journal of journal_bytes asks for the shorter gap. */
bool cm_store_writer_journal_big(uint64_t journal_bytes, int64_t store_bytes);

#endif
