/*
 * gw_transcript.c — clawmem.sessions.transcript (clawmem's own method,
 * operator.read), for the Sessions page: a session's transcript as the store
 * holds it, every record of its .jsonl (the session header, messages, model
 * changes, compaction records, …), not only the messages chat.history
 * answers.
 *   {key, limit?} -> {key, sessionId, compactionCount, records, omitted}
 * records: the newest `limit` (default TRANSCRIPT_DEFAULT, at most
 * TRANSCRIPT_MAX), at most GW_WS_HISTORY_BYTES in all (the oldest go first;
 * `omitted` counts the records left out); a record larger than
 * TRANSCRIPT_ONE_BYTES is replaced by {type, id, parentId, timestamp,
 * omitted: true}. The records of a memory flush turn — its prompt
 * (cm_flush_is_prompt) and the messages answering it, up to the next user
 * message — carry "flush": true. An unknown key answers no records.
 */
#include "../../session/flush.h"
#include "gw_transcript.h"

#define TRANSCRIPT_DEFAULT   500
#define TRANSCRIPT_MAX       2000
#define TRANSCRIPT_ONE_BYTES (64 * 1024)

/* The text of a message's content (a string or text parts). */
static const char *S_first_text(const json_t *m)
{
    const json_t *c = json_object_get(m, "content");
    if (json_is_string(c)) return json_string_value(c);
    size_t i;
    const json_t *part;
    json_array_foreach(c, i, part)
    {
        const char *t = json_string_value(json_object_get(part, "text"));
        if (t) return t;
    }
    return NULL;
}

/* Marks the flush turns' records (in place). */
static void S_mark_flush(json_t *recs)
{
    bool in_flush = false;
    size_t i;
    json_t *r;
    json_array_foreach(recs, i, r)
    {
        const json_t *m = json_object_get(r, "message");
        const char *role = json_string_value(json_object_get(m, "role"));
        if (role && !strcmp(role, "user")) in_flush = cm_flush_is_prompt(S_first_text(m));
        if (in_flush && role) json_object_set_new(r, "flush", json_true());
    }
}

void cm_gw_ws_sessions_transcript(gw_ws *w, gw_ws_client *cl, const char *id, json_t *p)
{
    const char *key0 = json_string_value(json_object_get(p, "key"));
    if (!key0 || !*key0)
        return cm_gw_ws_fail(cl, id, "INVALID_REQUEST",
                             "invalid clawmem.sessions.transcript params: key (a string) is "
                             "required",
                             NULL);
    json_t *lim = json_object_get(p, "limit");
    json_int_t limit = json_is_integer(lim) ? json_integer_value(lim) : TRANSCRIPT_DEFAULT;
    if (limit < 1) limit = 1;
    if (limit > TRANSCRIPT_MAX) limit = TRANSCRIPT_MAX;
    char err[512], *js = NULL, *key = cm_gw_ws_session_key(w, key0);
    if (!key) return cm_gw_ws_fail(cl, id, "UNAVAILABLE", "out of memory", NULL);
    cm_options o = w->opt;
    o.agent_id = w->agent_id0;
    cm_sessions *s = NULL;
    cm_rc rc = cm_sessions_open(&o, &s, err, sizeof err);
    if (!rc) rc = cm_sessions_show(s, key, 0, &js, err, sizeof err);
    cm_sessions_close(s);
    if (rc && rc != CM_ENOTFOUND) {
        free(key);
        return cm_gw_ws_fail(cl, id, "UNAVAILABLE", rc == CM_ENOMEM ? "out of memory" : err,
                             NULL);
    }
    json_t *shown = js ? json_loads(js, 0, NULL) : NULL;
    cm_free(js);
    json_t *recs = json_object_get(shown, "records"), *entry = json_object_get(shown, "entry");
    json_t *out = json_array();
    S_mark_flush(recs);
    /* newest first until the limit or the byte budget, then put in order */
    size_t total = 0, n = json_array_size(recs), kept = 0;
    for (size_t i = n; i > 0 && kept < (size_t)limit; i--) {
        json_t *r = json_array_get(recs, i - 1);
        char *one = json_dumps(r, JSON_COMPACT);
        size_t len = one ? strlen(one) : 0;
        free(one);
        json_t *add = json_incref(r);
        if (len > TRANSCRIPT_ONE_BYTES) {
            json_decref(add);
            add = json_pack("{s:O?,s:O?,s:O?,s:O?,s:b}", "type", json_object_get(r, "type"), "id",
                            json_object_get(r, "id"), "parentId", json_object_get(r, "parentId"),
                            "timestamp", json_object_get(r, "timestamp"), "omitted", 1);
            len = 128;
        }
        if (total + len + 1 > GW_WS_HISTORY_BYTES) {
            json_decref(add);
            break;
        }
        total += len + 1;
        json_array_insert_new(out, 0, add);
        kept++;
    }
    const json_t *cc = json_object_get(entry, "compactionCount");
    cm_gw_ws_ok(cl, id,
                json_pack("{s:s,s:O?,s:I,s:o,s:I}", "key", key, "sessionId",
                          json_object_get(entry, "sessionId"), "compactionCount",
                          (json_int_t)(json_is_integer(cc) ? json_integer_value(cc) : 0),
                          "records", out, "omitted", (json_int_t)(n - kept)));
    json_decref(shown);
    free(key);
}
