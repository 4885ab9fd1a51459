/*
 * session_api.c — the public session API (include/clawmem/session.h) over the
 * session layer: the config gives the state dir, the agent and the store
 * path; the rest is sessions.c, transcript.c and flush.c.
 */
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../base/fs.h"
#include "../config/config.h"
#include "flush.h"
#include "keys.h"
#include "sessions.h"
#include "transcript.h"

struct cm_sessions {
    cm_config cfg;
    char *store_path;
};

static void log_to(void *ctx, cm_log_level level, const char *msg)
{
    const cm_options *o = ctx;
    if (o->log) o->log(o->log_ctx, level, msg);
}

cm_rc cm_sessions_open(const cm_options *opt, cm_sessions **out, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf p = BUF_INIT;
    cm_sessions *s = calloc(1, sizeof *s);
    *out = NULL;
    if (!s) return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    cm_config_args a = {opt->agent_id, opt->workspace, opt->config_path, opt->state_dir};
    cm_logger lg = {log_to, (void *)opt};
    CHECK(cm_config_init(&a, &lg, &s->cfg, err, errlen));
    /* session.store: a path with {agentId} and ~ expanded */
    const char *custom =
        json_string_value(json_object_get(json_object_get(s->cfg.root, "session"), "store"));
    if (custom && *custom) {
        char *home = cm_fs_expand_home(custom);
        if (!home) FAIL(CM_ENOMEM, "out of memory");
        for (const char *q = home; *q && !rc;) {
            if (!strncmp(q, "{agentId}", 9)) {
                rc = cm_session_agent_id(&p, s->cfg.agent_id);
                q += 9;
            } else {
                rc = cm_buf_addc(&p, *q++);
            }
        }
        free(home);
        if (rc) FAIL(CM_ENOMEM, "out of memory");
        if (p.data[0] != '/') {
            buf abs = BUF_INIT;
            if (cm_fs_join(&abs, s->cfg.state_dir, p.data)) FAIL(CM_ENOMEM, "out of memory");
            cm_buf_release(&p);
            p = abs;
        }
    } else {
        CHECK(cm_session_store_path(&p, s->cfg.state_dir, s->cfg.agent_id));
    }
    s->store_path = cm_buf_detach(&p);
    *out = s;
    s = NULL;
out:
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    cm_buf_release(&p);
    cm_sessions_close(s);
    return rc;
}

void cm_sessions_close(cm_sessions *s)
{
    if (!s) return;
    cm_config_release(&s->cfg);
    free(s->store_path);
    free(s);
}

/* The store key for a key as the user wrote it. */
static cm_rc store_key(cm_sessions *s, const char *key, buf *out, char *err, size_t errlen)
{
    if (!key || !*key) return cm_seterr(err, errlen, CM_EINVAL, "a session key is needed");
    if (strlen(key) > 1024)
        return cm_seterr(err, errlen, CM_ETOOBIG, "the session key is too long");
    if (cm_session_store_key(out, s->cfg.agent_id, key))
        return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    return CM_OK;
}

static cm_rc dump(json_t *j, char **out, char *err, size_t errlen)
{
    *out = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(j);
    return *out ? CM_OK : cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
}

static int by_updated(const void *a, const void *b)
{
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    int64_t ux = json_integer_value(json_object_get(x, "updatedAt"));
    int64_t uy = json_integer_value(json_object_get(y, "updatedAt"));
    return ux < uy   ? 1
           : ux > uy ? -1
                     : strcmp(json_string_value(json_object_get(x, "key")),
                              json_string_value(json_object_get(y, "key")));
}

cm_rc cm_sessions_list(cm_sessions *s, char **json, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    session_store st = {0};
    json_t **rows = NULL, *out = NULL, *all = NULL;
    *json = NULL;
    CHECK(cm_session_store_read(&st, s->store_path, err, errlen));
    if (!(all = cm_session_store_snapshot(&st))) FAIL(CM_ENOMEM, "out of memory");
    size_t n = json_object_size(all), k = 0;
    rows = calloc(n ? n : 1, sizeof *rows);
    if (!rows) FAIL(CM_ENOMEM, "out of memory");
    const char *key;
    json_t *e;
    json_object_foreach(all, key, e)
    {
        if (!json_is_object(e)) continue;
        json_t *r = json_pack("{s:s}", "key", key);
        if (!r) FAIL(CM_ENOMEM, "out of memory");
        rows[k++] = r;
        static const char *const fields[] = {"sessionId",       "updatedAt",   "chatType",
                                             "compactionCount", "totalTokens", "label",
                                             "channel"};
        for (size_t f = 0; f < ARRAY_LEN(fields); f++) {
            json_t *v = json_object_get(e, fields[f]);
            if (v) json_object_set(r, fields[f], v);
        }
        buf tp = BUF_INIT;
        if (!cm_session_transcript_of(&st, e, &tp)) {
            struct stat sb;
            json_object_set_new(r, "transcript", json_string(tp.data));
            json_object_set_new(r, "transcriptBytes",
                                json_integer(stat(tp.data, &sb) == 0 ? (json_int_t)sb.st_size : 0));
        }
        cm_buf_release(&tp);
    }
    qsort(rows, k, sizeof *rows, by_updated);
    json_t *arr = json_array();
    for (size_t i = 0; i < k; i++) {
        json_array_append_new(arr, rows[i]);
        rows[i] = NULL;
    }
    out = json_pack("{s:s,s:o}", "store", s->store_path, "sessions", arr);
    rc = dump(out, json, err, errlen);
    out = NULL;
out:
    for (size_t i = 0; rows && i < n; i++)
        json_decref(rows[i]);
    free(rows);
    json_decref(out);
    json_decref(all);
    cm_session_store_release(&st);
    return rc;
}

typedef struct gather {
    json_t *all;
} gather;

static bool gather_fn(void *ctx, int line, json_t *rec)
{
    (void)line;
    json_array_append(((gather *)ctx)->all, rec);
    return true;
}

cm_rc cm_sessions_show(cm_sessions *s, const char *key, unsigned last, char **json, char *err,
                       size_t errlen)
{
    cm_rc rc = CM_OK;
    buf k = BUF_INIT, tp = BUF_INIT;
    session_store st = {0};
    gather g = {json_array()};
    *json = NULL;
    CHECK(store_key(s, key, &k, err, errlen));
    CHECK(cm_session_store_read(&st, s->store_path, err, errlen));
    json_t *e = cm_session_store_get(&st, k.data);
    if (!e) FAIL(CM_ENOTFOUND, "no session %s in %s", k.data, s->store_path);
    if (cm_session_transcript_of(&st, e, &tp))
        FAIL(CM_ECORRUPT, "session %s has no valid sessionId", k.data);
    rc = cm_transcript_read(tp.data, 1u << 30, gather_fn, &g, err, errlen);
    if (rc == CM_ENOTFOUND) rc = CM_OK; /* nothing written yet */
    if (rc) goto out;
    size_t n = json_array_size(g.all);
    if (last && n > last) {
        json_t *tail = json_array();
        for (size_t i = n - last; i < n; i++)
            json_array_append(tail, json_array_get(g.all, i));
        json_decref(g.all);
        g.all = tail;
    }
    rc = dump(json_pack("{s:s,s:O,s:s,s:O}", "key", k.data, "entry", e, "transcript", tp.data,
                        "records", g.all),
              json, err, errlen);
out:
    json_decref(g.all);
    cm_session_store_release(&st);
    cm_buf_release(&k);
    cm_buf_release(&tp);
    return rc;
}

cm_rc cm_sessions_append(cm_sessions *s, const char *key, const char *role, const char *text,
                         char **json, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf k = BUF_INIT, tp = BUF_INIT;
    session_store st = {0};
    json_t *fields = NULL;
    char sid[160], id[40];
    *json = NULL;
    if (!role || (strcmp(role, "user") && strcmp(role, "assistant")))
        return cm_seterr(err, errlen, CM_EINVAL, "the role is user or assistant");
    if (!text) text = "";
    CHECK(store_key(s, key, &k, err, errlen));
    CHECK(cm_session_store_read(&st, s->store_path, err, errlen));
    int64_t now = cm_wall_ms();
    CHECK(cm_session_touch(&st, k.data, NULL, now, sid, err, errlen));
    json_t *e = cm_session_store_get(&st, k.data);
    if (cm_session_transcript_of(&st, e, &tp))
        FAIL(CM_ECORRUPT, "session %s has no valid sessionId", k.data);
    json_t *msg = role[0] == 'u'
                      ? cm_transcript_user_message(text, now)
                      /* no model wrote it: QuantumClaw's delivery-mirror shape,
                       * which its readers never take for the session's model */
                      : cm_transcript_assistant_message(text, "openai-responses", "openclaw",
                                                        "delivery-mirror", "stop", now);
    fields = msg ? json_pack("{s:o}", "message", msg) : NULL;
    if (!fields) FAIL(CM_ENOMEM, "out of memory");
    CHECK(cm_transcript_append(tp.data, sid, s->cfg.workspace, "message", fields, now, id, err,
                               errlen));
    rc = dump(json_pack("{s:s,s:s,s:s}", "key", k.data, "sessionId", sid, "id", id), json, err,
              errlen);
out:
    json_decref(fields);
    cm_session_store_release(&st);
    cm_buf_release(&k);
    cm_buf_release(&tp);
    return rc;
}

cm_rc cm_sessions_reset(cm_sessions *s, const char *key, char **json, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf k = BUF_INIT;
    session_store st = {0};
    char sid[160];
    *json = NULL;
    CHECK(store_key(s, key, &k, err, errlen));
    CHECK(cm_session_store_read(&st, s->store_path, err, errlen));
    CHECK(cm_session_reset(&st, k.data, cm_wall_ms(), sid, err, errlen));
    rc = dump(json_pack("{s:s,s:s}", "key", k.data, "sessionId", sid), json, err, errlen);
out:
    cm_session_store_release(&st);
    cm_buf_release(&k);
    return rc;
}

cm_rc cm_sessions_delete(cm_sessions *s, const char *key, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf k = BUF_INIT;
    session_store st = {0};
    CHECK(store_key(s, key, &k, err, errlen));
    CHECK(cm_session_store_read(&st, s->store_path, err, errlen));
    CHECK(cm_session_delete(&st, k.data, cm_wall_ms(), err, errlen));
out:
    cm_session_store_release(&st);
    cm_buf_release(&k);
    return rc;
}

cm_rc cm_sessions_flush_check(cm_sessions *s, const char *key, const char *prompt,
                              long context_window, int writable, char **json, char *err,
                              size_t errlen)
{
    cm_rc rc = CM_OK;
    buf k = BUF_INIT, tp = BUF_INIT, target = BUF_INIT, fp = BUF_INIT;
    session_store st = {0};
    flush_settings fs = {0};
    *json = NULL;
    CHECK(store_key(s, key, &k, err, errlen));
    CHECK(cm_session_store_read(&st, s->store_path, err, errlen));
    CHECK(cm_flush_settings_init(&fs, s->cfg.root, err, errlen));
    json_t *e = cm_session_store_get(&st, k.data);
    if (!e) FAIL(CM_ENOTFOUND, "no session %s in %s", k.data, s->store_path);
    bool have_tp = cm_session_transcript_of(&st, e, &tp) == CM_OK;
    flush_input in = {e, have_tp ? tp.data : NULL, prompt, context_window, writable != 0, false};
    flush_decision d;
    cm_flush_decide(&fs, &in, &d);
    int64_t now = cm_wall_ms();
    const char *tz = json_string_value(json_object_get(
        json_object_get(json_object_get(s->cfg.root, "agents"), "defaults"), "userTimezone"));
    if (cm_flush_target_path(now, tz, &target) || cm_flush_prompt_for(fs.prompt, now, tz, &fp))
        FAIL(CM_ENOMEM, "out of memory");
    rc = dump(json_pack("{s:b,s:s,s:I,s:I,s:I,s:s,s:s,s:s,s:s}", "due", d.due, "reason", d.why,
                        "tokens", (json_int_t)d.tokens, "threshold", (json_int_t)d.threshold,
                        "transcriptBytes", (json_int_t)d.transcript_bytes, "contextHash",
                        d.context_hash, "targetPath", target.data, "prompt", fp.data,
                        "systemPrompt", fs.system_prompt),
              json, err, errlen);
out:
    cm_flush_settings_release(&fs);
    cm_session_store_release(&st);
    cm_buf_release(&k);
    cm_buf_release(&tp);
    cm_buf_release(&target);
    cm_buf_release(&fp);
    return rc;
}
