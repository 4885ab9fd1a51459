/*
 * journal.h — the gateway's durable record of accepted inbound messages,
 * <stateDir>/gateway/journal.jsonl: one JSON line per event, appended whole
 * ({"j":"in",…} fsynced before the message counts as accepted; {"j":"run"}
 * when a run takes it; {"j":"done","status":…} once it is answered;
 * {"j":"seen","key","ts","kv":2} the dedupe key of a recently answered one).
 * A failed append leaves the file as it was (cut back to its length before
 * the line); when even that fails the journal refuses appends until a later
 * one manages it. Opening replays the file — a torn line is skipped (a whole
 * line glued after it is still read), never the lines after it — then
 * rewrites it with only the unanswered entries and the recent dedupe keys
 * (temp + fsync + rename); cm_gw_journal_compact does the same while it runs.
 * Accepts stop (CM_ERATELIMIT) once the unanswered entries or the file reach
 * their limits, far below what a replay reads, so whatever was acknowledged
 * can always be replayed. One writer process: the file is locked (flock)
 * while open. Thread safe.
 */
#ifndef CM_GW_JOURNAL_H
#define CM_GW_JOURNAL_H

#include <jansson.h>
#include <sys/types.h>

#include "inbound.h"

/* The largest journal replayed at open. */
#define GW_JOURNAL_MAX_BYTES (512u << 20)
/* Bytes of accepted, unanswered messages before accepts are refused; the
 * file may grow to twice that (answered lines not yet compacted away). */
#define GW_JOURNAL_PENDING_MAX (64u << 20)

typedef struct gw_journal gw_journal;

/* Opens (creating) <state_dir>/gateway/journal.jsonl. *pending receives a
 * new array of the unanswered entries, oldest first: {"id","ts","runs",
 * "msg":{channel, account, peer, session, thread, messageId, sender,
 * senderName, senderUsername, chatTitle, text, group, media, mentioned,
 * timestamp}}; *seen a new array of {"key","ts"}: dedupe keys
 * (as cm_gw_dedupe_key writes them; a key persisted by an older version is
 * cm_gw_dedupe_key_legacy's) of answered messages younger than keep_ms at
 * now_ms. CM_EBUSY when another gateway holds the journal. */
cm_rc cm_gw_journal_open(const char *state_dir, int64_t now_ms, int64_t keep_ms, gw_journal **out,
                         json_t **pending, json_t **seen, char *err, size_t errlen);
/* Closes the files; writes nothing (a crash loses nothing more). */
void cm_gw_journal_close(gw_journal *j);

/* The accept limit in bytes of unanswered entries (0: GW_JOURNAL_PENDING_MAX);
 * the file limit is twice it. */
void cm_gw_journal_set_limit(gw_journal *j, uint64_t pending_max);

/* The write and truncate calls, the fsync of a compaction's new file and
 * the accepts' fdatasync (tests inject failures and stalls); NULL members:
 * the system's. */
typedef struct gw_journal_io {
    ssize_t (*write)(int fd, const void *p, size_t n);
    int (*truncate)(int fd, off_t len);
    int (*fsync)(int fd);
    int (*datasync)(int fd);
} gw_journal_io;
void cm_gw_journal_set_io(gw_journal *j, const gw_journal_io *io);

/* Appends m as accepted at ts and fsyncs; *id receives its entry id.
 * CM_ERATELIMIT (nothing written) while the unanswered entries or the file
 * are at their limit: answered messages and a compaction make room;
 * CM_ETOOBIG when m alone exceeds the limit; CM_EIO when it could not be
 * written (the file is left as it was). */
cm_rc cm_gw_journal_accept(gw_journal *j, const gw_msg *m, int64_t ts, uint64_t *id, char *err,
                           size_t errlen);

/* Records that a run took entry id (not fsynced). */
cm_rc cm_gw_journal_run(gw_journal *j, uint64_t id);

/* Records entry id as answered with status ("answered", "failed",
 * "dropped", "denied", …); the backlog shrinks by one. */
cm_rc cm_gw_journal_done(gw_journal *j, uint64_t id, const char *status);

/* Rewrites the file with the unanswered entries and recent dedupe keys
 * (temp + fsync + rename) when answered lines are at least half of it, or
 * always with force. The file is read and the temp written without the
 * journal's lock (accepts go on); the lines appended meanwhile are copied
 * over under it. Only one runs at a time (another caller returns CM_OK at
 * once). Call it with no lock of the caller held: it does file I/O. */
cm_rc cm_gw_journal_compact(gw_journal *j, int64_t now_ms, bool force, char *err, size_t errlen);

typedef struct gw_journal_stats {
    uint64_t bytes;       /* the file's length */
    uint64_t live_bytes;  /* the lines of unanswered entries */
    size_t backlog;       /* unanswered entries */
    size_t torn;          /* torn lines skipped at open */
    uint64_t compactions; /* since open */
    bool broken;          /* a failed append could not be cut back: appends refused */
    bool unrewritten;     /* no room to rewrite it at open: kept as it was */
} gw_journal_stats;
void cm_gw_journal_stats(gw_journal *j, gw_journal_stats *st);

/* Entries accepted and not yet done. */
size_t cm_gw_journal_backlog(gw_journal *j);

/* A journal entry's message as a gw_msg borrowing msg's strings. */
void cm_gw_journal_msg(const json_t *msg, gw_msg *m);

#endif
