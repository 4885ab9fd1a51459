/*
 * store_wal.h — the journal of sessions.json's deferred changes (used by
 * store_index.c only).
 *
 * A deferred change (a turn's bookkeeping, a new session's entry) is applied
 * in memory and written to sessions.json later, coalesced with others. So
 * that a crash loses none of them, each is first appended as one JSON line
 * to a journal file beside the store and fdatasynced before the update
 * returns:
 *
 *   <dir>/.<store name>.clawmem-wal.<pid>.<generation>
 *   {"s":<seq>,"k":"<key>","p":{<changed fields; null: removed>}}
 *   {"s":<seq>,"k":"<key>","e":<the whole entry, or null: removed>}
 *
 * The owning process holds an flock() on each of its journal files while it
 * lives. A write of sessions.json starts a new generation (changes recorded
 * after its snapshot go to the new file) and unlinks the older files once
 * the store holding their changes is renamed into place and fsynced. When
 * the write fails the files stay, but no more of them than a few however
 * long writes keep failing (a nearly full disk): the generation goes on
 * being appended to when nothing was journaled during the write, and past
 * four files every unwritten change is restated, at its current value, in
 * the newest one and the older files go. A
 * process that opens the store replays every journal file no live process
 * holds (a crashed writer's), in order, over the file it read, and writes
 * the result. QuantumClaw never reads these files; sessions.json itself is
 * unchanged in format and lock protocol.
 */
#ifndef CM_STORE_WAL_H
#define CM_STORE_WAL_H

#include <jansson.h>

#include "../base/buf.h"

typedef struct store_wal_file {
    int fd;     /* -1 once closed */
    char *name; /* its path */
    int users;  /* appends in progress (guarded by the index's mutex) */
    /* group commit (guarded by the index's mutex): lines written, lines
     * covered by a finished fdatasync, one in progress */
    uint64_t written, synced;
    /* lines whose write had begun (a ticket each); the lines begun up to
     * sync_failed may have met an fdatasync that failed, and a later one on
     * the same file does not report the error again */
    uint64_t begun, sync_failed;
    bool syncing;
    struct store_wal_file *next;
} store_wal_file;

/* Creates generation gen's journal file of the store at store_path, locked
 * and its name fsynced into the directory. */
cm_rc cm_store_wal_open(const char *store_path, int64_t gen, store_wal_file **out, char *err,
                        size_t errlen);

/* Appends one line (text, with its newline), not yet synced (a failed
 * write is cut back off). */
cm_rc cm_store_wal_write(store_wal_file *w, const char *text, size_t n, char *err, size_t errlen);

/* fdatasync of w, through cm_store_wal_datasync (fdatasync; tests inject
 * failures and stalls). */
cm_rc cm_store_wal_sync(store_wal_file *w, char *err, size_t errlen);
extern int (*cm_store_wal_datasync)(int fd);

/* Closes w's descriptor (its lock goes with it); unlink: the file too. */
void cm_store_wal_close(store_wal_file *w, bool unlink_it);
void cm_store_wal_free(store_wal_file *w);

/* The line of a change of key: patch (a field patch) or, when patch is
 * NULL, the whole entry e (NULL: removal). Appended to out. */
cm_rc cm_store_wal_line(buf *out, int64_t seq, const char *key, const json_t *patch,
                        const json_t *e);

/* The journal files of the store at store_path that no live process holds:
 * their records (parsed lines, in generation then sequence order) appended
 * to *records (an array), their files (closed, for unlinking after the next
 * write) prepended to *files. A torn last line is skipped. */
cm_rc cm_store_wal_recover(const char *store_path, json_t *records, store_wal_file **files,
                           char *err, size_t errlen);

#endif
