/*
 * sessions.c — sessions.json (sessions.h).
 */
#include <ctype.h>
#include <errno.h>
#include <unistd.h>

#include "../base/fs.h"
#include "../base/jnum.h"
#include "keys.h"
#include "sessions.h"
#include "store_index.h"
#include "transcript.h"
#include "../base/caps.h"


cm_rc cm_session_store_path(buf *out, const char *state_dir, const char *agent_id)
{
    cm_rc rc = cm_buf_printf(out, "%s/agents/", state_dir);
    if (!rc) rc = cm_session_agent_id(out, agent_id);
    if (!rc) rc = cm_buf_adds(out, "/sessions/sessions.json");
    return rc;
}

void cm_session_store_release(session_store *s)
{
    free(s->path);
    free(s->dir);
    json_decref(s->doc);
    json_decref(s->old);
    memset(s, 0, sizeof *s);
}

cm_rc cm_session_store_read(session_store *s, const char *path, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    memset(s, 0, sizeof *s);
    if (!(s->path = cm_strdup(path)) || !(s->dir = cm_fs_dirname(path)) ||
        !(s->doc = json_object()) || !(s->old = json_array()))
        FAIL(CM_ENOMEM, "out of memory");
    CHECK(cm_store_ix_get(path, &s->ix, err, errlen));
    CHECK(cm_store_ix_refresh(s->ix, err, errlen));
out:
    if (rc) cm_session_store_release(s);
    return rc;
}

cm_rc cm_session_store_configure(const char *path, const session_store_config *c, char *err,
                                 size_t errlen)
{
    store_ix *ix;
    cm_rc rc = cm_store_ix_get(path, &ix, err, errlen);
    if (rc) return rc;
    store_ix_opts o = {c->maint, c->flush_ms, c->log};
    cm_store_ix_configure(ix, &o);
    return CM_OK;
}

cm_rc cm_session_store_sync(const char *path, char *err, size_t errlen)
{
    if (!path) return cm_store_ix_sync_all(err, errlen);
    store_ix *ix;
    cm_rc rc = cm_store_ix_get(path, &ix, err, errlen);
    return rc ? rc : cm_store_ix_sync(ix, err, errlen);
}

static cm_rc norm_key(buf *out, const char *key)
{
    cm_rc rc = CM_OK;
    const char *p = key ? key : "";
    while (isspace((unsigned char)*p))
        p++;
    size_t n = strlen(p);
    while (n && isspace((unsigned char)p[n - 1]))
        n--;
    for (size_t i = 0; i < n && !rc; i++)
        rc = cm_buf_addc(out, (char)tolower((unsigned char)p[i]));
    return rc;
}

json_t *cm_session_store_get(const session_store *s, const char *key)
{
    buf k = BUF_INIT;
    json_t *e = NULL;
    if (norm_key(&k, key) || !k.len) goto out;
    if ((e = json_object_get(s->doc, k.data))) goto out;
    e = cm_store_ix_entry(s->ix, k.data);
    if (e && json_object_set_new(s->doc, k.data, e)) e = NULL;
out:
    cm_buf_release(&k);
    return json_is_object(e) ? e : NULL;
}

json_t *cm_session_store_snapshot(const session_store *s)
{
    return cm_store_ix_snapshot(s->ix);
}

/* After an update through s: the entries looked at so far stay alive (their
 * callers may still hold them) but are looked up afresh. */
static void forget(session_store *s)
{
    if (!json_object_size(s->doc)) return;
    json_t *fresh = json_object();
    if (!fresh || json_array_append_new(s->old, s->doc)) {
        json_decref(fresh);
        return; /* out of memory: keep the old view */
    }
    s->doc = fresh;
}

void cm_session_archive_stamp(int64_t ms, char out[32])
{
    cm_transcript_iso(ms, out);
    for (char *p = out; *p; p++)
        if (*p == ':') *p = '-';
}

cm_rc cm_session_transcript_in(const char *dir, const json_t *entry, buf *out)
{
    const char *file = json_string_value(json_object_get(entry, "sessionFile"));
    size_t dl = strlen(dir);
    if (file && !strncmp(file, dir, dl) && file[dl] == '/' && !strstr(file + dl, "/..") &&
        !strchr(file + dl + 1, '/'))
        return cm_buf_adds(out, file);
    const char *id = json_string_value(json_object_get(entry, "sessionId"));
    if (!cm_transcript_id_valid(id)) return CM_ENOTFOUND;
    return cm_transcript_path(out, dir, id, NULL);
}

cm_rc cm_session_transcript_of(const session_store *s, const json_t *entry, buf *out)
{
    return cm_session_transcript_in(s->dir, entry, out);
}

/* The archive name of the entry's transcript (<file>.<reason>.<stamp>) into
 * from/to; the rename is done once the store is written. */
static void archive_names(const char *dir, const json_t *entry, const char *reason, int64_t now,
                          buf *from, buf *to)
{
    char stamp[32];
    cm_session_archive_stamp(now, stamp);
    cm_buf_reset(from);
    cm_buf_reset(to);
    if (cm_session_transcript_in(dir, entry, from) ||
        cm_buf_printf(to, "%s.%s.%s", from->data, reason, stamp)) {
        cm_buf_reset(from);
        cm_buf_reset(to);
    }
}

/* Sets a fresh sessionId and sessionFile on entry. */
static cm_rc new_session(json_t *entry, const char *dir, char id_out[160])
{
    char id[37];
    cm_transcript_uuid(id);
    buf p = BUF_INIT;
    cm_rc rc = cm_transcript_path(&p, dir, id, NULL);
    if (!rc && (json_object_set_new(entry, "sessionId", json_string(id)) ||
                json_object_set_new(entry, "sessionFile", json_string(p.data))))
        rc = CM_ENOMEM;
    if (!rc && id_out) snprintf(id_out, 160, "%s", id);
    cm_buf_release(&p);
    return rc;
}

static void set_updated(json_t *entry, int64_t now)
{
    json_t *u = json_object_get(entry, "updatedAt");
    int64_t prev = cm_jnum_int64(u, 0, CM_JNUM_MS_MAX, 0);
    json_object_set_new(entry, "updatedAt", json_integer(prev > now ? prev : now));
}

static const char *const per_session_fields[] = {"memoryFlushCompactionCount",
                                                 "memoryFlushAt",
                                                 "memoryFlushContextHash",
                                                 "totalTokens",
                                                 "totalTokensFresh",
                                                 "inputTokens",
                                                 "outputTokens",
                                                 "cacheRead",
                                                 "cacheWrite",
                                                 "estimatedCostUsd",
                                                 "contextTokens",
                                                 "systemSent",
                                                 "abortedLastRun",
                                                 "authProfileOverride",
                                                 "authProfileOverrideSource",
                                                 "authProfileOverrideCompactionCount",
                                                 NULL};

typedef struct touch_ctx {
    const char *key; /* normalised */
    const char *dir;
    const json_t *patch;
    enum { TOUCH, RESET, DELETE, COMPACTED } what;
    int64_t tokens_after, now;
    char id[160];
    bool missing;
    buf from, to; /* a transcript to archive once written */
} touch_ctx;

static cm_rc touch_fn(json_t **ep, void *vctx, char *err, size_t errlen)
{
    touch_ctx *c = vctx;
    cm_rc rc = CM_OK;
    json_t *e = *ep;
    int64_t now = c->now;
    if (e && !json_is_object(e)) FAIL(CM_ECORRUPT, "session %s: the entry is not an object", c->key);
    if (c->what == DELETE) {
        if (!e) {
            c->missing = true;
            goto out;
        }
        archive_names(c->dir, e, "deleted", now, &c->from, &c->to);
        json_decref(e);
        *ep = NULL;
        goto out;
    }
    if (!e) {
        if (c->what == COMPACTED) {
            c->missing = true;
            goto out;
        }
        e = json_object();
        session_chat chat = cm_session_chat_of(c->key);
        if (!e || new_session(e, c->dir, c->id) ||
            json_object_set_new(e, "systemSent", json_false()) ||
            json_object_set_new(e, "abortedLastRun", json_false()) ||
            json_object_set_new(e, "compactionCount", json_integer(0)) ||
            json_object_set_new(e, "chatType",
                                json_string(chat == SESSION_CHAT_GROUP     ? "group"
                                            : chat == SESSION_CHAT_CHANNEL ? "channel"
                                                                           : "direct"))) {
            json_decref(e);
            FAIL(CM_ENOMEM, "out of memory");
        }
        *ep = e;
    } else if (c->what == RESET) {
        archive_names(c->dir, e, "reset", now, &c->from, &c->to);
        if (new_session(e, c->dir, c->id)) FAIL(CM_ENOMEM, "out of memory");
        for (size_t i = 0; per_session_fields[i]; i++)
            json_object_del(e, per_session_fields[i]);
        json_object_set_new(e, "systemSent", json_false());
        json_object_set_new(e, "abortedLastRun", json_false());
        json_object_set_new(e, "compactionCount", json_integer(0));
    } else if (c->what == COMPACTED) {
        json_t *cc = json_object_get(e, "compactionCount");
        json_object_set_new(
            e, "compactionCount",
            json_integer(cm_jnum_int64(cc, 0, INT32_MAX, 0) + 1));
        if (c->tokens_after > 0) {
            json_object_set_new(e, "totalTokens", json_integer(c->tokens_after));
            json_object_set_new(e, "totalTokensFresh", json_true());
            json_object_del(e, "inputTokens");
            json_object_del(e, "outputTokens");
            json_object_del(e, "cacheRead");
            json_object_del(e, "cacheWrite");
        }
        const char *src = json_string_value(json_object_get(e, "authProfileOverrideSource"));
        if (src && !strcmp(src, "auto")) {
            json_object_del(e, "authProfileOverride");
            json_object_del(e, "authProfileOverrideSource");
            json_object_del(e, "authProfileOverrideCompactionCount");
        }
    }
    /* a turn's auto pin is decided on the entry it read at its start: a pin
     * the user set since (/model <model>@<profile>, answered beside the
     * running turn) stays, as the turn would have kept it */
    const char *ps = json_string_value(json_object_get(c->patch, "authProfileOverrideSource"));
    const char *es = json_string_value(json_object_get(e, "authProfileOverrideSource"));
    bool keep_pin = ps && !strcmp(ps, "auto") && es && !strcmp(es, "user");
    const char *pk;
    json_t *pv;
    json_object_foreach((json_t *)c->patch, pk, pv)
    {
        if (!strcmp(pk, "updatedAt")) continue;
        if (keep_pin && !strncmp(pk, "authProfileOverride", strlen("authProfileOverride")))
            continue;
        if (json_is_null(pv))
            json_object_del(e, pk);
        else if (json_object_set(e, pk, pv))
            FAIL(CM_ENOMEM, "out of memory");
    }
    set_updated(e, now);
    json_t *pu = json_object_get(c->patch, "updatedAt");
    if (json_is_number(pu)) set_updated(e, cm_jnum_int64(pu, 0, CM_JNUM_MS_MAX, 0));
    if (!c->id[0])
        snprintf(c->id, sizeof c->id, "%s",
                 json_string_value(json_object_get(e, "sessionId")) ?: "");
out:
    return rc;
}

/* One change to key's entry through s; bookkeeping (deferrable) may wait
 * for the writer. */
static cm_rc change(session_store *s, const char *key, touch_ctx *c, bool deferrable,
                    char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf k = BUF_INIT;
    if (norm_key(&k, key)) FAIL(CM_ENOMEM, "out of memory");
    if (!k.len) FAIL(CM_EINVAL, "an empty session key");
    c->key = k.data;
    c->dir = s->dir;
    rc = cm_store_ix_update(s->ix, k.data, !deferrable, c->now, touch_fn, c, err, errlen);
    forget(s);
    if (!rc && c->from.len) rename(c->from.data, c->to.data); /* ENOENT: nothing written yet */
out:
    c->key = NULL;
    cm_buf_release(&c->from);
    cm_buf_release(&c->to);
    cm_buf_release(&k);
    return rc;
}

cm_rc cm_session_touch(session_store *s, const char *key, const json_t *patch, int64_t now,
                       char id_out[160], char *err, size_t errlen)
{
    touch_ctx c = {.patch = patch, .what = TOUCH, .now = now};
    cm_rc rc = change(s, key, &c, false, err, errlen);
    if (!rc && id_out) snprintf(id_out, 160, "%s", c.id);
    return rc;
}

cm_rc cm_session_note(session_store *s, const char *key, const json_t *patch, int64_t now,
                      char id_out[160], char *err, size_t errlen)
{
    touch_ctx c = {.patch = patch, .what = TOUCH, .now = now};
    cm_rc rc = change(s, key, &c, true, err, errlen);
    if (!rc && id_out) snprintf(id_out, 160, "%s", c.id);
    return rc;
}

cm_rc cm_session_reset(session_store *s, const char *key, int64_t now, char id_out[160], char *err,
                       size_t errlen)
{
    touch_ctx c = {.what = RESET, .now = now};
    cm_rc rc = change(s, key, &c, false, err, errlen);
    if (!rc && id_out) snprintf(id_out, 160, "%s", c.id);
    return rc;
}

cm_rc cm_session_delete(session_store *s, const char *key, int64_t now, char *err, size_t errlen)
{
    touch_ctx c = {.what = DELETE, .now = now};
    cm_rc rc = change(s, key, &c, false, err, errlen);
    if (!rc && c.missing) rc = cm_seterr(err, errlen, CM_ENOTFOUND, "no session %s", key);
    return rc;
}

cm_rc cm_session_compacted(session_store *s, const char *key, int64_t tokens_after, int64_t now,
                           char *err, size_t errlen)
{
    touch_ctx c = {.what = COMPACTED, .tokens_after = tokens_after, .now = now};
    /* bookkeeping, as a turn's usage is: the transcript's compaction record
     * is the truth, so this goes through the journal and the writer rather
     * than a whole rewrite of the store per compaction (a 1M-message soak
     * with 10,000 sessions compacting crawled at ~9 turns/s behind 12 MB
     * rewrites under the store's lock) */
    cm_rc rc = change(s, key, &c, true, err, errlen);
    if (!rc && c.missing) rc = cm_seterr(err, errlen, CM_ENOTFOUND, "no session %s", key);
    return rc;
}
