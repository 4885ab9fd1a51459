/*
 * maintenance.h — session.maintenance as QuantumClaw 2026.3.22 applies it
 * each time it writes sessions.json (src/config/sessions/store.ts
 * saveSessionStoreUnlocked, store-maintenance.ts, disk-budget.ts):
 *
 *  - "warn": nothing is removed; a warning when a session being written
 *    would be pruned (updatedAt older than pruneAfter) or capped (not among
 *    the maxEntries most recently updated), and when the sessions directory
 *    is over maxDiskBytes.
 *  - "enforce": entries idle past pruneAfter are removed (entries without
 *    updatedAt are kept), then all but the maxEntries most recently updated
 *    (no updatedAt: removed first); their transcripts, unless another entry
 *    still uses the session id, are archived as `.deleted.<stamp>`;
 *    `.deleted.` archives older than pruneAfter and `.reset.` archives older
 *    than resetArchiveRetention are deleted; sessions.json is backed up as
 *    `sessions.json.bak.<ms>` when over rotateBytes (the 3 newest backups
 *    kept; QuantumClaw renames it, clawmem links it, so that sessions.json
 *    is never missing, see cm_session_maint_written); then the disk
 *    budget: the oldest archives and unreferenced transcripts, then the
 *    least recently updated entries other than the sessions being written
 *    (and their transcripts), until the directory is under highWaterBytes.
 *
 * Time is passed in; warnings go to the logger. Entries are removed from the
 * store object in place and listed in the result.
 */
#ifndef CM_SESSION_MAINT_H
#define CM_SESSION_MAINT_H

#include <jansson.h>

#include "../base/log.h"
#include "../config/config.h"

typedef struct maint_result {
    json_t *removed; /* key -> the entry removed (new object; the caller decrefs) */
    int64_t pruned, capped, budget_entries, budget_files, archives_deleted;
    bool warned;      /* a warning was logged */
    bool rotated;     /* sessions.json was backed up */
    char *backup;     /* that backup's path, until cm_session_maint_written */
    bool over_budget; /* the directory is over maxDiskBytes (after cleanup: over highWaterBytes) */
} maint_result;

/* The entry part of maintenance on store (before it is written): prune and
 * cap ("enforce"), or the active-session warning ("warn"). active: the keys
 * being written (an object; borrowed, may be NULL). r is initialised here;
 * release it with cm_session_maint_result_release. */
cm_rc cm_session_maint_entries(json_t *store, const cm_session_maint *m, int64_t now_ms,
                               const json_t *active, const cm_logger *lg, maint_result *r);

/* The file part, under the store's lock, before the new store text is
 * written to store_path ("enforce": archives of removed entries, old
 * archives deleted, rotation; both modes: the disk budget, which may remove
 * more entries from store — *rewrite is then set and the text must be made
 * again). store_bytes: the length of the text about to be written. */
void cm_session_maint_files(json_t *store, const char *store_path, const cm_session_maint *m,
                            int64_t now_ms, const json_t *active, size_t store_bytes,
                            const cm_logger *lg, maint_result *r, bool *rewrite);

/* After the write of the store that cm_session_maint_files prepared: the
 * backup it made is removed again when the store was not written (the store
 * is still what it backed up), else the backups past the 3 newest go. */
void cm_session_maint_written(const char *store_path, maint_result *r, bool written);

void cm_session_maint_result_release(maint_result *r);

#endif
