/*
 * session_tools.c — sessions_list, sessions_history, session_status and
 * agents_list (session_tools.h). Results are the reference's JSON, indented
 * by two spaces as its jsonResult writes them.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../base/utf8.h"
#include "../session/extract.h"
#include "../session/keys.h"
#include "../session/sessions.h"
#include "session_tools.h"
#include "status_card.h"

typedef enum { VIS_SELF, VIS_TREE, VIS_AGENT, VIS_ALL } visibility;

static visibility visibility_of(const json_t *cfg)
{
    const char *v =
        json_string_value(json_object_get(json_object_get(json_object_get(cfg, "tools"),
                                                          "sessions"),
                                          "visibility"));
    char low[16] = "";
    for (size_t i = 0; v && v[i] && i < sizeof low - 1; i++)
        low[i] = (char)tolower((unsigned char)v[i]);
    return !strcmp(low, "self") ? VIS_SELF : !strcmp(low, "agent") ? VIS_AGENT
                                         : !strcmp(low, "all")     ? VIS_ALL
                                                                   : VIS_TREE;
}

/* The store key a tool argument names: "main" the agent's main key,
 * "current" (or nothing) the caller's, else the key as the store keeps it. */
static cm_rc target_key(const session_tool_env *env, const char *arg, buf *out)
{
    if (!arg || !*arg || !strcmp(arg, "current"))
        return env->session_key ? cm_buf_adds(out, env->session_key)
                                : cm_session_main_key(out, env->agent_id);
    return cm_session_store_key(out, env->agent_id, arg);
}

/* Whether the caller may see the session key (a store key). */
static bool visible(const session_tool_env *env, const char *key, const char **why)
{
    visibility v = visibility_of(env->config);
    buf own = BUF_INIT, agent = BUF_INIT, mine = BUF_INIT;
    bool ok = false;
    if (target_key(env, NULL, &own) || cm_session_key_agent(&agent, key) ||
        cm_session_agent_id(&mine, env->agent_id)) {
        *why = "out of memory";
    } else if (strcmp(agent.data, mine.data) != 0) {
        *why = "Session history visibility is restricted to this agent's sessions "
               "(tools.agentToAgent is not supported by clawmem).";
    } else if ((v == VIS_SELF || v == VIS_TREE) && strcmp(key, own.data) != 0) {
        *why = v == VIS_SELF ? "Session visibility is restricted to the current session "
                               "(tools.sessions.visibility=self)."
                             : "Session visibility is restricted to the current session tree "
                               "(tools.sessions.visibility=tree).";
    } else {
        ok = true;
    }
    cm_buf_release(&own);
    cm_buf_release(&agent);
    cm_buf_release(&mine);
    return ok;
}

static cm_rc dump(json_t *j, buf *out)
{
    if (!j) return CM_ENOMEM;
    char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(j);
    if (!s) return CM_ENOMEM;
    cm_rc rc = cm_buf_adds(out, s);
    free(s);
    return rc;
}

static cm_rc forbidden(buf *out, const char *why)
{
    return dump(json_pack("{s:s,s:s}", "status", "forbidden", "error", why), out);
}

static const char *kind_of(const char *key, const char *main_key)
{
    if (!strcmp(key, main_key)) return "main";
    const char *rest = key;
    if (!strncmp(key, "agent:", 6) && (rest = strchr(key + 6, ':'))) rest++;
    else rest = key;
    if (!strncmp(rest, "cron:", 5)) return "cron";
    if (!strncmp(rest, "hook:", 5)) return "hook";
    if (!strncmp(rest, "node-", 5) || !strncmp(rest, "node:", 5)) return "node";
    if (strstr(key, ":group:") || strstr(key, ":channel:")) return "group";
    return "other";
}

/* Copies the listed members of e that are of the right JSON type into row. */
static void copy_fields(json_t *row, const json_t *e)
{
    static const char *const strs[] = {"label",         "displayName", "sessionId",
                                       "model",         "status",      "thinkingLevel",
                                       "verboseLevel",  "sendPolicy",  "lastChannel",
                                       "lastTo",        "lastAccountId"};
    static const char *const nums[] = {"updatedAt", "contextTokens", "totalTokens",
                                       "estimatedCostUsd", "startedAt", "endedAt", "runtimeMs"};
    static const char *const bools[] = {"systemSent", "abortedLastRun"};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        json_t *v = json_object_get(e, strs[i]);
        if (json_is_string(v)) json_object_set(row, strs[i], v);
    }
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        json_t *v = json_object_get(e, nums[i]);
        if (json_is_number(v)) json_object_set(row, nums[i], v);
    }
    for (size_t i = 0; i < sizeof bools / sizeof bools[0]; i++) {
        json_t *v = json_object_get(e, bools[i]);
        if (json_is_boolean(v)) json_object_set(row, bools[i], v);
    }
}

static long num_arg(const json_t *args, const char *key, long min, long dflt)
{
    const json_t *v = json_object_get(args, key);
    if (!json_is_number(v)) return dflt;
    double d = json_number_value(v);
    if (!(d >= (double)min)) return min; /* NaN too */
    return d > 1e9 ? 1000000000L : (long)d;
}

/* ---- transcripts, from their end ------------------------------------------- */

/* The message records of the last SESSION_TOOLS_TAIL_BYTES of the transcript
 * path, oldest first, as a new array (empty when the file is missing). */
static json_t *tail_messages(const char *path)
{
    json_t *msgs = json_array();
    buf b = BUF_INIT;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (!msgs || fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) goto out;
    off_t from = st.st_size > (off_t)SESSION_TOOLS_TAIL_BYTES
                     ? st.st_size - (off_t)SESSION_TOOLS_TAIL_BYTES
                     : 0;
    if (cm_buf_grow(&b, (size_t)(st.st_size - from) + 1)) goto out;
    for (off_t at = from; at < st.st_size;) {
        ssize_t got = pread(fd, b.data + b.len, (size_t)(st.st_size - at), at);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        b.len += (size_t)got;
        at += got;
    }
    b.data[b.len] = 0;
    char *p = b.data;
    if (from > 0) { /* the first line may be cut: skip it */
        char *nl = memchr(p, '\n', b.len);
        p = nl ? nl + 1 : b.data + b.len;
    }
    while (p < b.data + b.len) {
        char *nl = memchr(p, '\n', (size_t)(b.data + b.len - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(b.data + b.len - p);
        json_t *rec = json_loadb(p, n, 0, NULL);
        const char *type = json_string_value(json_object_get(rec, "type"));
        json_t *m = json_object_get(rec, "message");
        if (type && !strcmp(type, "message") && json_is_object(m)) json_array_append(msgs, m);
        json_decref(rec);
        p += n + 1;
    }
out:
    if (fd >= 0) close(fd);
    cm_buf_release(&b);
    return msgs;
}

/* A text cut to SESSION_TOOLS_TEXT_MAX_CHARS code points with the reference's
 * "…(truncated)…", secrets masked; sets *cut, *redacted. */
static json_t *history_text(const char *s, bool *cut, bool *redacted)
{
    buf masked = BUF_INIT, o = BUF_INIT;
    json_t *j = NULL;
    if (cm_session_redact(s, strlen(s), &masked)) goto out;
    if (strcmp(masked.data, s) != 0) *redacted = true;
    size_t i = cm_utf8_prefix_chars(masked.data, masked.len, SESSION_TOOLS_TEXT_MAX_CHARS, NULL);
    if (cm_buf_add(&o, masked.data, i)) goto out;
    if (i < masked.len) {
        *cut = true;
        if (cm_buf_adds(&o, "\n…(truncated)…")) goto out;
    }
    j = json_stringn(o.data, o.len);
out:
    cm_buf_release(&masked);
    cm_buf_release(&o);
    return j;
}

/* The message m as sessions_history shows it (a new object). */
static json_t *history_message(const json_t *m, bool *cut, bool *redacted)
{
    json_t *e = json_deep_copy(m);
    json_t *c = json_object_get(e, "content");
    if (json_is_string(c)) json_object_set_new(e, "content", history_text(json_string_value(c), cut, redacted));
    size_t i;
    json_t *b;
    json_array_foreach(c, i, b)
    {
        const char *t = json_string_value(json_object_get(b, "text"));
        if (t) json_object_set_new(b, "text", history_text(t, cut, redacted));
        const char *th = json_string_value(json_object_get(b, "thinking"));
        if (th) json_object_set_new(b, "thinking", history_text(th, cut, redacted));
        if (json_object_get(b, "thinkingSignature")) {
            json_object_del(b, "thinkingSignature");
            *cut = true;
        }
    }
    return e;
}

static size_t json_bytes(const json_t *j)
{
    char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
    size_t n = s ? strlen(s) : 0;
    free(s);
    return n;
}

/* ---- the tools ---------------------------------------------------------------- */

cm_rc cm_tool_sessions_list(const session_tool_env *env, const json_t *args, buf *out, char *err,
                            size_t errlen)
{
    cm_rc rc = CM_OK;
    session_store st = {0};
    buf main_key = BUF_INIT, tp = BUF_INIT;
    json_t *rows = json_array(), *all = NULL;
    if (!rows) FAIL(CM_ENOMEM, "out of memory");
    CHECK(cm_session_store_read(&st, env->store_path, err, errlen));
    CHECK(cm_session_main_key(&main_key, env->agent_id));
    long limit = num_arg(args, "limit", 1, 0), active = num_arg(args, "activeMinutes", 1, 0);
    long msg_limit = num_arg(args, "messageLimit", 0, 0);
    if (msg_limit > 20) msg_limit = 20;
    const json_t *kinds = json_object_get(args, "kinds");
    const char *key;
    json_t *e;
    if (!(all = cm_session_store_snapshot(&st))) FAIL(CM_ENOMEM, "out of memory");
    json_object_foreach(all, key, e)
    {
        const char *why;
        if (!json_is_object(e) || !visible(env, key, &why)) continue;
        const char *kind = kind_of(key, main_key.data);
        if (json_array_size(kinds)) {
            bool want = false;
            size_t i;
            json_t *k;
            json_array_foreach(kinds, i, k)
            {
                const char *s = json_string_value(k);
                if (s && !strcasecmp(s, kind)) want = true;
            }
            if (!want) continue;
        }
        json_t *upd = json_object_get(e, "updatedAt");
        if (active && (!json_is_number(upd) ||
                       json_number_value(upd) < (double)(env->now_ms - active * 60000)))
            continue;
        const char *ch = json_string_value(json_object_get(e, "channel"));
        if (!ch) ch = json_string_value(json_object_get(e, "lastChannel"));
        char derived[64] = "unknown";
        if (!strcmp(kind, "cron") || !strcmp(kind, "hook") || !strcmp(kind, "node"))
            ch = "internal";
        if (!ch && !strcmp(kind, "group")) { /* agent:<id>:<channel>:group:… */
            const char *rest = strchr(key + 6, ':');
            size_t n = rest ? strcspn(rest + 1, ":") : 0;
            if (n && n < sizeof derived) snprintf(derived, sizeof derived, "%.*s", (int)n, rest + 1);
        }
        json_t *row = json_pack("{s:s,s:s,s:s}", "key", strcmp(key, main_key.data) ? key : "main",
                                "kind", kind, "channel", ch ? ch : derived);
        if (!row) FAIL(CM_ENOMEM, "out of memory");
        copy_fields(row, e);
        cm_buf_reset(&tp);
        if (!cm_session_transcript_of(&st, e, &tp) && tp.len)
            json_object_set_new(row, "transcriptPath", json_string(tp.data));
        if (msg_limit > 0 && tp.len) {
            json_t *msgs = tail_messages(tp.data), *last = json_array();
            size_t n = json_array_size(msgs), from = n > (size_t)msg_limit ? n - (size_t)msg_limit : 0;
            bool cut = false, red = false;
            for (size_t i = from; i < n; i++) {
                const char *role =
                    json_string_value(json_object_get(json_array_get(msgs, i), "role"));
                if (role && (!strcmp(role, "toolResult") || !strcmp(role, "tool"))) continue;
                json_array_append_new(last, history_message(json_array_get(msgs, i), &cut, &red));
            }
            json_object_set_new(row, "messages", last);
            json_decref(msgs);
        }
        json_array_append_new(rows, row);
    }
    /* newest first, then the limit */
    size_t n = json_array_size(rows);
    for (size_t i = 1; i < n; i++) /* insertion sort by updatedAt, descending */
        for (size_t k = i; k > 0; k--) {
            double a = json_number_value(json_object_get(json_array_get(rows, k - 1), "updatedAt"));
            double b = json_number_value(json_object_get(json_array_get(rows, k), "updatedAt"));
            if (a >= b) break;
            json_t *x = json_incref(json_array_get(rows, k));
            json_array_remove(rows, k);
            json_array_insert_new(rows, k - 1, x);
        }
    while (limit && json_array_size(rows) > (size_t)limit)
        json_array_remove(rows, json_array_size(rows) - 1);
    rc = dump(json_pack("{s:I,s:O}", "count", (json_int_t)json_array_size(rows), "sessions", rows),
              out);
    if (rc) FAIL(rc, "out of memory");
out:
    json_decref(rows);
    json_decref(all);
    cm_session_store_release(&st);
    cm_buf_release(&main_key);
    cm_buf_release(&tp);
    return rc;
}

cm_rc cm_tool_sessions_history(const session_tool_env *env, const json_t *args, buf *out,
                               char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    session_store st = {0};
    buf key = BUF_INIT, tp = BUF_INIT;
    json_t *all = NULL, *items = json_array();
    const char *arg = json_string_value(json_object_get(args, "sessionKey"));
    const char *why;
    if (!items) FAIL(CM_ENOMEM, "out of memory");
    if (!arg || !*arg) FAIL(CM_EINVAL, "sessionKey required");
    CHECK(target_key(env, arg, &key));
    if (!visible(env, key.data, &why)) {
        rc = forbidden(out, why);
        goto out;
    }
    CHECK(cm_session_store_read(&st, env->store_path, err, errlen));
    json_t *e = cm_session_store_get(&st, key.data);
    if (!e) {
        rc = dump(json_pack("{s:s,s:s}", "status", "error", "error", "Session not found"), out);
        goto out;
    }
    CHECK(cm_session_transcript_of(&st, e, &tp));
    all = tail_messages(tp.data);
    bool tools = json_is_true(json_object_get(args, "includeTools"));
    long limit = num_arg(args, "limit", 1, 200);
    if (limit > 1000) limit = 1000;
    size_t n = json_array_size(all), from = n > (size_t)limit ? n - (size_t)limit : 0;
    bool cut = false, red = false, dropped = false;
    size_t total = 2;
    for (size_t i = from; i < n; i++) {
        json_t *m = json_array_get(all, i);
        const char *role = json_string_value(json_object_get(m, "role"));
        if (!tools && role && (!strcmp(role, "toolResult") || !strcmp(role, "tool"))) continue;
        json_array_append_new(items, history_message(m, &cut, &red));
    }
    /* the newest messages that fit the byte cap */
    for (size_t i = 0; i < json_array_size(items); i++)
        total += json_bytes(json_array_get(items, i)) + 1;
    while (json_array_size(items) > 1 && total > SESSION_TOOLS_HISTORY_MAX_BYTES) {
        total -= json_bytes(json_array_get(items, 0)) + 1;
        json_array_remove(items, 0);
        dropped = true;
    }
    if (total > SESSION_TOOLS_HISTORY_MAX_BYTES) {
        json_array_clear(items);
        json_array_append_new(items, json_pack("{s:s,s:s}", "role", "assistant", "content",
                                               "[sessions_history omitted: message too large]"));
        dropped = true;
        total = json_bytes(items);
    }
    rc = dump(json_pack("{s:s,s:O,s:b,s:b,s:b,s:b,s:I}", "sessionKey",
                        strcmp(arg, "main") ? key.data : "main", "messages", items, "truncated",
                        dropped || cut, "droppedMessages", dropped, "contentTruncated", cut,
                        "contentRedacted", red, "bytes", (json_int_t)total),
              out);
    if (rc) FAIL(rc, "out of memory");
out:
    json_decref(all);
    json_decref(items);
    cm_session_store_release(&st);
    cm_buf_release(&key);
    cm_buf_release(&tp);
    return rc;
}

/* The session_status card (status_card.h) as 2026.3.22's tool writes it:
 * the user's time, the session's model (its override, else the configured
 * primary), its tokens, context, options and queue mode; the credential
 * label and the cost are the /status command's (the runner knows them). */
cm_rc cm_tool_session_status(const session_tool_env *env, const json_t *args, buf *out,
                             char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    session_store st = {0};
    buf key = BUF_INIT, model = BUF_INIT, queue = BUF_INIT;
    const char *why;
    if (json_is_string(json_object_get(args, "model")))
        FAIL(CM_EINVAL, "session_status cannot change the model in clawmem; the user can send "
                        "/model");
    CHECK(target_key(env, json_string_value(json_object_get(args, "sessionKey")), &key));
    if (!visible(env, key.data, &why)) FAIL(CM_EINVAL, "%s", why);
    CHECK(cm_session_store_read(&st, env->store_path, err, errlen));
    const json_t *e = cm_session_store_get(&st, key.data);
    if (!e) FAIL(CM_ENOTFOUND, "Unknown sessionKey: %s", key.data);
    const json_t *dflt = json_object_get(json_object_get(env->config, "agents"), "defaults");
    const json_t *m = json_object_get(dflt, "model");
    const char *po = json_string_value(json_object_get(e, "providerOverride"));
    const char *mo = json_string_value(json_object_get(e, "modelOverride"));
    const char *primary = json_is_string(m) ? json_string_value(m)
                                            : json_string_value(json_object_get(m, "primary"));
    if (po && *po && mo && *mo)
        rc = cm_buf_printf(&model, "%s/%s", po, mo);
    else
        rc = cm_buf_adds(&model, primary && *primary ? primary : "anthropic/claude-opus-4-6");
    const char *qm = json_string_value(json_object_get(e, "queueMode"));
    if (!qm || !*qm)
        qm = json_string_value(json_object_get(
            json_object_get(json_object_get(env->config, "messages"), "queue"), "mode"));
    if (!rc)
        rc = cm_buf_printf(&queue, "\xf0\x9f\xaa\xa2 Queue: %s", qm && *qm ? qm : "collect");
    if (rc) FAIL(CM_ENOMEM, "out of memory");
    const char *fmt = json_string_value(json_object_get(dflt, "timeFormat"));
    char when[96], line[160];
    cm_status_user_time(env->now_ms, env->time_zone, fmt && !strcmp(fmt, "24"), when);
    snprintf(line, sizeof line, "\xf0\x9f\x95\x92 Time: %s (%s)", when,
             env->time_zone && *env->time_zone ? env->time_zone : "UTC");
    const char *think = json_string_value(json_object_get(e, "thinkingLevel"));
    const char *td = json_string_value(json_object_get(dflt, "thinkingDefault"));
    double ctx = json_number_value(json_object_get(e, "contextTokens"));
    status_card_in in = {.config = env->config,
                         .entry = e,
                         .session_key = key.data,
                         .model = model.data,
                         .thinking = think && *think ? think : td && *td ? td : "off",
                         .context_tokens = ctx > 0 ? (int64_t)ctx : 200000,
                         .time_line = line,
                         .queue_line = queue.data,
                         .now_ms = env->now_ms};
    CHECK(cm_status_card(&in, out) ? cm_seterr(err, errlen, CM_ENOMEM, "out of memory") : CM_OK);
out:
    cm_session_store_release(&st);
    cm_buf_release(&key);
    cm_buf_release(&model);
    cm_buf_release(&queue);
    return rc;
}

cm_rc cm_tool_agents_list(const session_tool_env *env, const json_t *args, buf *out, char *err,
                          size_t errlen)
{
    (void)args;
    cm_rc rc = CM_OK;
    buf me = BUF_INIT;
    json_t *agents = json_array();
    if (!agents || cm_session_agent_id(&me, env->agent_id)) FAIL(CM_ENOMEM, "out of memory");
    const json_t *list = json_object_get(json_object_get(env->config, "agents"), "list");
    const json_t *name = NULL;
    bool configured = false;
    size_t i;
    json_t *a;
    json_array_foreach(list, i, a)
    {
        buf id = BUF_INIT;
        if (cm_session_agent_id(&id, json_string_value(json_object_get(a, "id")))) continue;
        if (!strcmp(id.data, me.data)) {
            configured = true;
            name = json_object_get(a, "name");
        }
        cm_buf_release(&id);
    }
    /* clawmem runs no sub-agents: the caller is the one agent it can target */
    json_t *row = json_pack("{s:s,s:b}", "id", me.data, "configured", configured);
    if (row && json_is_string(name)) json_object_set_new(row, "name", json_string(json_string_value(name)));
    json_array_append_new(agents, row);
    rc = dump(json_pack("{s:s,s:b,s:O}", "requester", me.data, "allowAny", 0, "agents", agents),
              out);
    if (rc) FAIL(rc, "out of memory");
out:
    json_decref(agents);
    cm_buf_release(&me);
    return rc;
}

/* ---- sessions_send ---------------------------------------------------------- */

static cm_rc send_error(buf *out, const char *status, const char *why, const char *key)
{
    json_t *j = json_pack("{s:s,s:s}", "status", status, "error", why);
    if (j && key) json_object_set_new(j, "sessionKey", json_string(key));
    return dump(j, out);
}

cm_rc cm_tool_sessions_send(const session_tool_env *env, const json_t *args, session_send_fn send,
                            void *ctx, buf *out, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    session_store st = {0};
    buf key = BUF_INIT;
    json_t *all = NULL;
    const char *why;
    const json_t *m = json_object_get(args, "message");
    const char *text = json_string_value(m);
    const char *skey = json_string_value(json_object_get(args, "sessionKey"));
    const char *label = json_string_value(json_object_get(args, "label"));
    const char *agent = json_string_value(json_object_get(args, "agentId"));
    if (!send) FAIL(CM_EINVAL, "sessions_send: no gateway runs this agent");
    if (!text) FAIL(CM_EINVAL, "message required");
    if (json_string_length(m) != strlen(text)) FAIL(CM_EINVAL, "message holds a NUL byte");
    if (json_string_length(m) > SESSION_TOOLS_SEND_MAX_BYTES)
        FAIL(CM_ETOOBIG, "message is longer than %d bytes", SESSION_TOOLS_SEND_MAX_BYTES);
    if (skey && !*skey) skey = NULL;
    if (label && !*label) label = NULL;
    if (skey && label) {
        rc = send_error(out, "error", "Provide either sessionKey or label (not both).", NULL);
        goto out;
    }
    if (!skey && !label) {
        rc = send_error(out, "error", "Either sessionKey or label is required", NULL);
        goto out;
    }
    if (agent && *agent && strcasecmp(agent, env->agent_id ? env->agent_id : "main")) {
        rc = send_error(out, "forbidden",
                        "Agent-to-agent messaging is disabled (tools.agentToAgent is not "
                        "supported by clawmem).",
                        NULL);
        goto out;
    }
    CHECK(cm_session_store_read(&st, env->store_path, err, errlen));
    if (label) { /* the visible session whose entry has that label */
        const char *k;
        json_t *e;
        if (!(all = cm_session_store_snapshot(&st))) FAIL(CM_ENOMEM, "out of memory");
        json_object_foreach(all, k, e)
        {
            const char *l = json_string_value(json_object_get(e, "label"));
            if (l && !strcmp(l, label) && visible(env, k, &why)) {
                CHECK(cm_buf_adds(&key, k));
                break;
            }
        }
        if (!key.len) {
            buf msg = BUF_INIT;
            rc = cm_buf_printf(&msg, "No session found with label: %.200s", label);
            if (!rc) rc = send_error(out, "error", msg.data, NULL);
            cm_buf_release(&msg);
            goto out;
        }
    } else {
        CHECK(target_key(env, skey, &key));
    }
    if (!visible(env, key.data, &why)) {
        rc = send_error(out, "forbidden", why, key.data);
        goto out;
    }
    if (!cm_session_store_get(&st, key.data)) {
        rc = send_error(out, "error", "Session not found", key.data);
        goto out;
    }
    /* timeoutSeconds: a finite number, floored, at least 0; default 30 */
    const json_t *ts = json_object_get(args, "timeoutSeconds");
    double secs = json_is_number(ts) ? json_number_value(ts) : 30;
    if (!(secs >= 0)) secs = 0; /* negative or NaN */
    if (secs > SESSION_TOOLS_SEND_MAX_WAIT_S) secs = SESSION_TOOLS_SEND_MAX_WAIT_S;
    int64_t wait_ms = (int64_t)secs * 1000;
    char run_id[64] = "", serr[256] = "";
    char *reply = NULL;
    cm_rc sr = send(ctx, key.data, text, wait_ms, run_id, sizeof run_id, &reply, serr, sizeof serr);
    if (sr && !run_id[0]) FAIL(sr, "%s", serr); /* not queued */
    json_t *j = json_pack("{s:s,s:s}", "runId", run_id, "status",
                          sr == CM_ETIMEOUT ? "timeout"
                          : sr              ? "error"
                          : wait_ms         ? "ok"
                                            : "accepted");
    if (j && sr && sr != CM_ETIMEOUT)
        json_object_set_new(j, "error", json_string(serr[0] ? serr : "agent error"));
    if (j && !sr && wait_ms && reply) json_object_set_new(j, "reply", json_string(reply));
    if (j) json_object_set_new(j, "sessionKey", json_string(key.data));
    free(reply);
    rc = dump(j, out);
out:
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    json_decref(all);
    cm_session_store_release(&st);
    cm_buf_release(&key);
    return rc;
}

static const cm_tool_def send_def = {
    "sessions_send", "Session Send",
    "Send a message into another session. Use sessionKey or label to identify the target.",
    "{\"type\":\"object\",\"properties\":{"
    "\"sessionKey\":{\"type\":\"string\"},"
    "\"label\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":512},"
    "\"agentId\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64},"
    "\"message\":{\"type\":\"string\"},"
    "\"timeoutSeconds\":{\"type\":\"number\",\"minimum\":0}},\"required\":[\"message\"]}",
    NULL, 0};

const cm_tool_def *cm_tool_sessions_send_def(void)
{
    return &send_def;
}

static const cm_tool_def defs[] = {
    {"agents_list", "Agents",
     "List OpenClaw agent ids you can target with `sessions_spawn` when `runtime=\"subagent\"` "
     "(based on subagent allowlists).",
     "{\"type\":\"object\",\"properties\":{}}", NULL, 1},
    {"sessions_list", "Sessions", "List sessions with optional filters and last messages.",
     "{\"type\":\"object\",\"properties\":{"
     "\"kinds\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
     "\"limit\":{\"type\":\"number\",\"minimum\":1},"
     "\"activeMinutes\":{\"type\":\"number\",\"minimum\":1},"
     "\"messageLimit\":{\"type\":\"number\",\"minimum\":0}}}",
     NULL, 1},
    {"sessions_history", "Session History", "Fetch message history for a session.",
     "{\"type\":\"object\",\"properties\":{"
     "\"sessionKey\":{\"type\":\"string\"},"
     "\"limit\":{\"type\":\"number\",\"minimum\":1},"
     "\"includeTools\":{\"type\":\"boolean\"}},\"required\":[\"sessionKey\"]}",
     NULL, 1},
    {"session_status", "Session Status",
     "Show a /status-equivalent session status card (usage + time + cost when available). Use "
     "for model-use questions (📊 session_status).",
     "{\"type\":\"object\",\"properties\":{"
     "\"sessionKey\":{\"type\":\"string\"},\"model\":{\"type\":\"string\"}}}",
     NULL, 1},
};

const cm_tool_def *cm_tool_session_defs(size_t *n)
{
    *n = sizeof defs / sizeof defs[0];
    return defs;
}
