/*
 * journal.h — the gateway's durable record of accepted inbound messages,
 * <stateDir>/gateway/journal.jsonl: one JSON line per event, appended whole
 * ({"j":"in",…} fsynced before the message counts as accepted; {"j":"run"}
 * when a run takes it; {"j":"done","status":…} once it is answered).
 * Opening replays the file: the messages without "done" are handed back to
 * be answered, and the dedupe keys of recently answered ones are kept, then
 * the file is rewritten with only those (temp + fsync + rename). One writer
 * process: the file is locked (flock) while open. Thread safe.
 */
#ifndef CM_GW_JOURNAL_H
#define CM_GW_JOURNAL_H

#include <jansson.h>

#include "inbound.h"

typedef struct gw_journal gw_journal;

/* Opens (creating) <state_dir>/gateway/journal.jsonl. *pending receives a
 * new array of the unanswered entries, oldest first: {"id","ts","runs",
 * "msg":{channel, account, peer, session, thread, messageId, sender, text,
 * group, media, mentioned}}; *seen a new array of {"key","ts"}: dedupe keys
 * of answered messages younger than keep_ms at now_ms. CM_EBUSY when
 * another gateway holds the journal. */
cm_rc cm_gw_journal_open(const char *state_dir, int64_t now_ms, int64_t keep_ms, gw_journal **out,
                         json_t **pending, json_t **seen, char *err, size_t errlen);
void cm_gw_journal_close(gw_journal *j);

/* Appends m as accepted at ts and fsyncs; *id receives its entry id. */
cm_rc cm_gw_journal_accept(gw_journal *j, const gw_msg *m, int64_t ts, uint64_t *id, char *err,
                           size_t errlen);

/* Records that a run took entry id (not fsynced). */
cm_rc cm_gw_journal_run(gw_journal *j, uint64_t id);

/* Records entry id as answered with status ("answered", "failed",
 * "dropped", "denied", …); the backlog shrinks by one. */
cm_rc cm_gw_journal_done(gw_journal *j, uint64_t id, const char *status);

/* Entries accepted and not yet done. */
size_t cm_gw_journal_backlog(gw_journal *j);

/* A journal entry's message as a gw_msg borrowing msg's strings. */
void cm_gw_journal_msg(const json_t *msg, gw_msg *m);

#endif
