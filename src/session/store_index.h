/*
 * store_index.h — this process's index of each sessions.json it uses: the
 * file parsed once and kept in memory, shared by every thread, and re-read
 * only when its identity (device, inode, size, mtime) shows that another
 * process — QuantumClaw or another clawmem — replaced it. A turn's cost is
 * then independent of the number of entries.
 *
 * An entry object never changes once it is in the index: an update puts a
 * changed copy in its place, so references handed out (to readers, to the
 * writer's snapshot) stay valid and unchanged.
 *
 * Writing keeps QuantumClaw's protocol (base/lockfile: the directory's flock,
 * then the `sessions.json.lock` sidecar; temp + fsync + rename), and runs
 * session.maintenance (maintenance.h) each time, as QuantumClaw's save does.
 * Under the lock the file is re-checked: if another process wrote it, it is
 * re-read and this process's unwritten changes are applied over it (fields
 * of an entry changed here win; an entry created, reset or deleted here
 * wins whole; a change to an entry that the other process removed is
 * dropped).
 *
 * An update is "durable" (written before the call returns, the change
 * applied to the file's current content under the lock) or, with flush_ms >
 * 0, "deferred": applied in memory, appended to the store's journal
 * (store_wal.h) and fdatasynced before the call returns, and written,
 * coalesced with every other change, by a writer thread at least flush_ms
 * later (cm_store_ix_sync writes at once). A crash loses no deferred change
 * that returned: the next process to open the store replays the journal.
 * The writer waits at least 99 times its last write's length between two
 * writes (at most 30 s), so rewriting a large store takes at most 1% of
 * its time; 9 times it once the store's journal has grown to an eighth of
 * the store's size. A write serialises only the entries changed since the
 * last one (the first write after a read of the file: since that read, the
 * unchanged entries' text copied as the file had it), and writes the file
 * in pieces, each pushed to the disk before the next
 * (cm_lockfile_replace_paced), so that the turns' fdatasyncs never wait
 * behind the whole file. Thread-safe throughout; the index's mutex guards
 * memory only (never held for a copy of the whole store, except after a
 * failed write: store_ix_stats.locked_copies).
 */
#ifndef CM_STORE_INDEX_H
#define CM_STORE_INDEX_H

#include <jansson.h>

#include "../base/log.h"
#include "../config/config.h"

typedef struct store_ix store_ix;

typedef struct store_ix_opts {
    cm_session_maint maint;
    int64_t flush_ms; /* 0 (default): every update is durable */
    cm_logger log;    /* maintenance warnings; fn NULL: none */
} store_ix_opts;

typedef struct store_ix_stats {
    int64_t loads;  /* times the file was parsed */
    int64_t writes; /* times it was written */
    int64_t formatted; /* entries whose text the writes made (the others' copied) */
    int64_t pruned, capped, warnings, rotations;
    /* whole copies of the store made under the index's mutex (every turn
     * waits meanwhile): only when a write failed, never after a read */
    int64_t locked_copies;
    /* the writer's (or an exit's) writes of the store that failed in a
     * row, since the last that did not */
    int64_t failed_writes;
} store_ix_stats;

/* The index of the store at path (made on first use, kept until the process
 * ends). Does not read the file. */
cm_rc cm_store_ix_get(const char *path, store_ix **out, char *err, size_t errlen);

/* Sets the store's options (every later write uses them). */
void cm_store_ix_configure(store_ix *ix, const store_ix_opts *o);

/* Re-reads the file when it is not what the index last saw (a missing or
 * empty file is an empty store; CM_ECORRUPT names file:line:column). */
cm_rc cm_store_ix_refresh(store_ix *ix, char *err, size_t errlen);

/* A new reference to key's entry (exact key; read-only), or NULL. */
json_t *cm_store_ix_entry(store_ix *ix, const char *key);

/* A new object holding every entry (shared, read-only). */
json_t *cm_store_ix_snapshot(store_ix *ix);

/* fn gets a private copy of key's entry in *entry (NULL when there is none)
 * and may change it, replace it or set it to NULL (removal); it runs under
 * the index's mutex, so it must do no I/O. now_ms is the time maintenance
 * uses. durable: see above (a deferred update whose journal cannot be
 * written is made durable). fn's error is returned as is. */
typedef cm_rc (*store_ix_fn)(json_t **entry, void *ctx, char *err, size_t errlen);
cm_rc cm_store_ix_update(store_ix *ix, const char *key, bool durable, int64_t now_ms,
                         store_ix_fn fn, void *ctx, char *err, size_t errlen);

/* Writes the store's unwritten changes now (nothing to do: CM_OK). */
cm_rc cm_store_ix_sync(store_ix *ix, char *err, size_t errlen);

/* cm_store_ix_sync of every store, then the writer thread stops (it starts
 * again on the next deferred update). For process exit and tests. */
cm_rc cm_store_ix_sync_all(char *err, size_t errlen);

void cm_store_ix_stats_get(store_ix *ix, store_ix_stats *out);

/* The writer's least wait between two writes (see above): 99 times took_ms
 * (the last write's length; before any write, the longest read's), 9
 * times it once a store's journal holds journal_bytes >= an eighth of its
 * store_bytes (or the store is empty); at most 30 s. */
int64_t cm_store_ix_gap_ms(int64_t took_ms, uint64_t journal_bytes, int64_t store_bytes);

#endif
