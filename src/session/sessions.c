/*
 * sessions.c — sessions.json (sessions.h).
 */
#include <ctype.h>
#include <errno.h>
#include <unistd.h>

#include "../base/fs.h"
#include "../base/jnum.h"
#include "../base/lockfile.h"
#include "keys.h"
#include "sessions.h"
#include "transcript.h"
#include "../base/caps.h"

#define STORE_MAX CM_CAP_SESSIONS_FILE

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
    memset(s, 0, sizeof *s);
}

static cm_rc read_doc(const char *path, json_t **out, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf b = BUF_INIT;
    *out = NULL;
    rc = cm_fs_read_file(path, STORE_MAX, &b, err, errlen);
    if (rc == CM_ENOTFOUND || (!rc && b.len == 0)) {
        *out = json_object();
        rc = *out ? CM_OK : cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
        goto out;
    }
    if (rc) goto out;
    json_error_t je;
    *out = json_loadb(b.data, b.len, 0, &je);
    if (!json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        FAIL(CM_ECORRUPT, "%s:%d:%d: not a session store (%s)", path, je.line, je.column,
             je.text[0] ? "a JSON object is expected" : "not JSON");
    }
out:
    cm_buf_release(&b);
    return rc;
}

cm_rc cm_session_store_read(session_store *s, const char *path, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    memset(s, 0, sizeof *s);
    if (!(s->path = cm_strdup(path)) || !(s->dir = cm_fs_dirname(path)))
        FAIL(CM_ENOMEM, "out of memory");
    CHECK(read_doc(path, &s->doc, err, errlen));
out:
    if (rc) cm_session_store_release(s);
    return rc;
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
    json_t *e = norm_key(&k, key) ? NULL : json_object_get(s->doc, k.data);
    cm_buf_release(&k);
    return json_is_object(e) ? e : NULL;
}

cm_rc cm_session_store_update(session_store *s, int64_t now, session_update_fn fn, void *ctx,
                              char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    lockfile l;
    json_t *doc = NULL;
    char *text = NULL;
    bool changed = false;
    CHECK(cm_lockfile_take(&l, s->path, LOCKFILE_REPLACE, NULL, err, errlen));
    rc = read_doc(s->path, &doc, err, errlen);
    if (!rc) rc = fn(doc, s->dir, ctx, now, &changed, err, errlen);
    if (!rc && changed) {
        /* QuantumClaw's JSON.stringify(store, null, 2): no final newline. */
        text = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        rc = text ? cm_lockfile_replace(&l, text, strlen(text), err, errlen)
                  : cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    }
    cm_lockfile_release(&l);
    if (rc) goto out;
    json_decref(s->doc);
    s->doc = doc;
    doc = NULL;
out:
    json_decref(doc);
    free(text);
    return rc;
}

void cm_session_archive_stamp(int64_t ms, char out[32])
{
    cm_transcript_iso(ms, out);
    for (char *p = out; *p; p++)
        if (*p == ':') *p = '-';
}

/* The transcript path of an entry in dir (see cm_session_transcript_of). */
static cm_rc transcript_of(const char *dir, const json_t *entry, buf *out)
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
    return transcript_of(s->dir, entry, out);
}

/* Renames the entry's transcript to <file>.<reason>.<stamp>, if it exists. */
static void archive(const char *dir, const json_t *entry, const char *reason, int64_t now)
{
    buf from = BUF_INIT, to = BUF_INIT;
    char stamp[32];
    cm_session_archive_stamp(now, stamp);
    if (!transcript_of(dir, entry, &from) &&
        !cm_buf_printf(&to, "%s.%s.%s", from.data, reason, stamp))
        rename(from.data, to.data); /* ENOENT: nothing was written yet */
    cm_buf_release(&from);
    cm_buf_release(&to);
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
    const char *key;
    const json_t *patch;
    enum { TOUCH, RESET, DELETE, COMPACTED } what;
    int64_t tokens_after;
    char id[160];
    bool missing;
} touch_ctx;

static cm_rc touch_fn(json_t *store, const char *dir, void *vctx, int64_t now, bool *changed,
                      char *err, size_t errlen)
{
    touch_ctx *c = vctx;
    cm_rc rc = CM_OK;
    buf k = BUF_INIT;
    if (norm_key(&k, c->key)) FAIL(CM_ENOMEM, "out of memory");
    if (!k.len) FAIL(CM_EINVAL, "an empty session key");
    json_t *e = json_object_get(store, k.data);
    if (e && !json_is_object(e))
        FAIL(CM_ECORRUPT, "session %s: the entry is not an object", k.data);
    if (c->what == DELETE) {
        if (!e) {
            c->missing = true;
            goto out;
        }
        archive(dir, e, "deleted", now);
        json_object_del(store, k.data);
        *changed = true;
        goto out;
    }
    if (!e) {
        if (c->what == COMPACTED) {
            c->missing = true;
            goto out;
        }
        e = json_object();
        session_chat chat = cm_session_chat_of(k.data);
        if (!e || new_session(e, dir, c->id) ||
            json_object_set_new(e, "compactionCount", json_integer(0)) ||
            json_object_set_new(e, "chatType",
                                json_string(chat == SESSION_CHAT_GROUP     ? "group"
                                            : chat == SESSION_CHAT_CHANNEL ? "channel"
                                                                           : "direct")) ||
            json_object_set_new(store, k.data, e)) {
            json_decref(e);
            FAIL(CM_ENOMEM, "out of memory");
        }
    } else if (c->what == RESET) {
        archive(dir, e, "reset", now);
        if (new_session(e, dir, c->id)) FAIL(CM_ENOMEM, "out of memory");
        for (size_t i = 0; per_session_fields[i]; i++)
            json_object_del(e, per_session_fields[i]);
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
    const char *pk;
    json_t *pv;
    json_object_foreach((json_t *)c->patch, pk, pv)
    {
        if (!strcmp(pk, "updatedAt")) continue;
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
    *changed = true;
out:
    cm_buf_release(&k);
    return rc;
}

cm_rc cm_session_touch(session_store *s, const char *key, const json_t *patch, int64_t now,
                       char id_out[160], char *err, size_t errlen)
{
    touch_ctx c = {key, patch, TOUCH, 0, "", false};
    cm_rc rc = cm_session_store_update(s, now, touch_fn, &c, err, errlen);
    if (!rc && id_out) snprintf(id_out, 160, "%s", c.id);
    return rc;
}

cm_rc cm_session_reset(session_store *s, const char *key, int64_t now, char id_out[160], char *err,
                       size_t errlen)
{
    touch_ctx c = {key, NULL, RESET, 0, "", false};
    cm_rc rc = cm_session_store_update(s, now, touch_fn, &c, err, errlen);
    if (!rc && id_out) snprintf(id_out, 160, "%s", c.id);
    return rc;
}

cm_rc cm_session_delete(session_store *s, const char *key, int64_t now, char *err, size_t errlen)
{
    touch_ctx c = {key, NULL, DELETE, 0, "", false};
    cm_rc rc = cm_session_store_update(s, now, touch_fn, &c, err, errlen);
    if (!rc && c.missing) rc = cm_seterr(err, errlen, CM_ENOTFOUND, "no session %s", key);
    return rc;
}

cm_rc cm_session_compacted(session_store *s, const char *key, int64_t tokens_after, int64_t now,
                           char *err, size_t errlen)
{
    touch_ctx c = {key, NULL, COMPACTED, tokens_after, "", false};
    cm_rc rc = cm_session_store_update(s, now, touch_fn, &c, err, errlen);
    if (!rc && c.missing) rc = cm_seterr(err, errlen, CM_ENOTFOUND, "no session %s", key);
    return rc;
}
