/*
 * telegram.c — the Telegram Bot API channel (channel.h): getMe for the bot's
 * id and username, long-polling getUpdates in a thread of its own, each
 * message handed to the sink as a gw_msg, sendMessage for replies. The
 * update offset ({version, lastUpdateId, botId} in
 * <state_dir>/telegram/update-offset-<account>.json, as 2026.3.22 keeps it)
 * moves past an update only once the sink accepted it. 429 waits
 * parameters.retry_after; 5xx, network failures and unreadable answers are
 * retried with doubling backoff; an answer past TG_BODY_MAX counts as one
 * that cannot be read. The bot token is part of every request's
 * URL path, so every message built here goes through a redactor holding it.
 * Answers are read leniently (\u0000 and lone surrogates become U+FFFD); an
 * update that still cannot be read, or that the gateway refuses for good, is
 * skipped past with a log line so one odd update cannot stop the channel.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../base/fs.h"
#include "../../base/log.h"
#include "../../base/redact.h"
#include "../../base/utf8.h"
#include "../../config/secret.h"
#include "../../net/http.h"
#include "../../net/http_retry.h"
#include "telegram.h"
#include "telegram_send.h"
#include "../core/commands.h"

/* ---- config ---- */

/* The value of key for the account: accounts.<account>.<key>, else the
 * channel's own (accounts.default applies to the default account only). */
static const json_t *acct_get(const json_t *tg, const char *account, const char *key)
{
    const json_t *a = json_object_get(json_object_get(tg, "accounts"), account);
    const json_t *v = json_object_get(a, key);
    return v ? v : json_object_get(tg, key);
}

/* The bot token: botToken (a secret input), else tokenFile (a regular file,
 * no symbolic link), else $TELEGRAM_BOT_TOKEN for the default account. */
static cm_rc resolve_token(const json_t *root, const json_t *tg, const char *account, char **out,
                           char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    char why[256] = "";
    buf b = BUF_INIT;
    *out = NULL;
    const json_t *a = json_object_get(json_object_get(tg, "accounts"), account);
    const json_t *bt = json_object_get(a, "botToken"), *tf = json_object_get(a, "tokenFile");
    if (!bt && !tf) {
        bt = json_object_get(tg, "botToken");
        tf = json_object_get(tg, "tokenFile");
    }
    if (bt && !json_is_null(bt)) {
        secrets s = {{json_object_get(root, "secrets"), NULL}};
        if (cm_secret_resolve(&s, bt, out, why, sizeof why))
            FAIL(CM_ECONFIG, "channels.telegram botToken: %s", why);
    } else if (json_is_string(tf)) {
        char *p = cm_fs_expand_home(json_string_value(tf));
        if (!p) FAIL(CM_ENOMEM, "out of memory");
        char e2[320];
        rc = cm_fs_read_file(p, 4096, &b, e2, sizeof e2);
        free(p);
        if (rc) FAIL(CM_ECONFIG, "channels.telegram tokenFile: %s", e2);
        *out = cm_strdup(b.data);
    } else if (!strcmp(account, "default") && getenv("TELEGRAM_BOT_TOKEN")) {
        *out = cm_strdup(getenv("TELEGRAM_BOT_TOKEN"));
    } else {
        FAIL(CM_ECONFIG,
             "channels.telegram: no bot token for account \"%s\" (set botToken or tokenFile)",
             account);
    }
    if (!*out) FAIL(CM_ENOMEM, "out of memory");
    /* trimmed; a token is one line of printable ASCII */
    char *t = *out;
    size_t s = strspn(t, " \t\r\n"), n = strlen(t + s);
    memmove(t, t + s, n + 1);
    while (n && strchr(" \t\r\n", t[n - 1]))
        t[--n] = 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)t[i] <= ' ' || (unsigned char)t[i] >= 0x7f || t[i] == '/' ||
            t[i] == '?' || t[i] == '#')
            FAIL(CM_ECONFIG, "channels.telegram: the bot token has a character it cannot have");
    if (!n) FAIL(CM_ECONFIG, "channels.telegram: the bot token is empty");
out:
    if (rc && *out) {
        memset(*out, 0, strlen(*out));
        free(*out);
        *out = NULL;
    }
    cm_buf_release(&b);
    return rc;
}

/* ---- the wire ---- */

static void set_last_err(tg_chan *t, const char *msg)
{
    pthread_mutex_lock(&t->mu);
    snprintf(t->last_err, sizeof t->last_err, "%s", msg);
    pthread_mutex_unlock(&t->mu);
}

/* Writes msg into err with the token redacted. */
static cm_rc tg_err(const tg_chan *t, char *err, size_t errlen, cm_rc code, const char *msg)
{
    buf o = BUF_INIT;
    if (cm_redact_text(&t->red, msg, strlen(msg), 300, &o) == CM_OK)
        cm_seterr(err, errlen, code, "%s", o.data);
    else
        cm_seterr(err, errlen, code, "telegram: request failed");
    cm_buf_release(&o);
    return code;
}

typedef struct fetch_ctx {
    buf body;
    atomic_bool *watch; /* the transfer is dropped once it is set */
    bool too_big;       /* the answer passed TG_BODY_MAX: body holds its start */
} fetch_ctx;

static bool on_tick(http_fetch *f)
{
    fetch_ctx *c = f->ctx;
    return !atomic_load(c->watch);
}

static bool on_data(http_fetch *f, const char *p, size_t n)
{
    fetch_ctx *c = f->ctx;
    if (c->body.len + n > TG_BODY_MAX) {
        c->too_big = true;
        return false;
    }
    return cm_buf_add(&c->body, p, n) == CM_OK && !atomic_load(c->watch);
}

int64_t cm_gw_tg_first_update_id(const char *s)
{
    const char *p = strstr(s, "\"update_id\"");
    if (!p) return -1;
    p += 11;
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
        p++;
    if (*p++ != ':') return -1;
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
        p++;
    int64_t v = 0;
    if (*p < '0' || *p > '9') return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (INT64_MAX - 9) / 10) return -1;
        v = v * 10 + (*p - '0');
    }
    return v;
}

/* One attempt of method with params (a JSON object, may be NULL) within
 * limit_ms. CM_OK with r->result on {"ok":true}; otherwise a code and err
 * (token redacted): CM_ERATELIMIT (429), CM_EAUTH (401/403/404: the token),
 * CM_EIO (retryable when r->retryable), CM_ECANCELED (*watch was set). */
cm_rc cm_gw_tg_call(tg_chan *t, const char *method, const json_t *params, long limit_ms,
                    atomic_bool *watch, call_res *r, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf url = BUF_INIT, msg = BUF_INIT;
    char *body = NULL, ferr[512] = "";
    json_t *doc = NULL;
    cm_strlist hdr = {0};
    static const char *ctype = "Content-Type: application/json";
    fetch_ctx fc = {BUF_INIT, watch, false};
    memset(r, 0, sizeof *r);
    r->retry_after_ms = -1;
    r->first_id = -1;
    if (cm_buf_printf(&url, "%s/bot%s/%s", t->api_base, t->token, method))
        FAIL(CM_ENOMEM, "out of memory");
    body = params ? json_dumps(params, JSON_COMPACT) : cm_strdup("{}");
    if (!body) FAIL(CM_ENOMEM, "out of memory");
    hdr.v = (char **)&ctype;
    hdr.n = 1;
    http_fetch f = {0};
    f.url = url.data;
    f.headers = &hdr;
    f.body = body;
    f.body_len = strlen(body);
    f.timeout_ms = limit_ms;
    f.connect_timeout_ms = CM_MIN(limit_ms, 30000L);
    f.stall_ms = limit_ms + 1000; /* a long poll is quiet by design: the limit decides */
    f.on_data = on_data;
    f.on_tick = on_tick;
    f.ctx = &fc;
    rc = cm_http_fetch_run(&f, ferr, sizeof ferr);
    r->status = f.status;
    r->retry_after_ms = f.retry_after_ms;
    if (fc.too_big) {
        /* Too big to read: as an answer that is not JSON, so that the poll
         * asks for one update alone and, if that one is still too big,
         * skips past the update_id its start names. The engine reports the
         * dropped transfer as canceled, which the poll takes for a stop. */
        r->retryable = true;
        r->unreadable = f.status >= 200 && f.status < 300;
        if (r->unreadable) r->first_id = cm_gw_tg_first_update_id(fc.body.data);
        rc = cm_seterr(err, errlen, CM_EIO, "telegram %s: HTTP %ld, an answer larger than %u bytes",
                       method, f.status, TG_BODY_MAX);
        goto out;
    }
    if (rc == CM_ECANCELED) FAIL(CM_ECANCELED, "telegram %s: stopped", method);
    if (rc) {
        r->retryable = true;
        bool said = cm_buf_printf(&msg, "telegram %s: %s", method, ferr) == CM_OK;
        rc = tg_err(t, err, errlen, CM_EIO, said ? msg.data : "telegram: network failure");
        goto out;
    }
    cm_utf8_json_tolerate(fc.body.data, fc.body.len);
    doc = json_loadb(fc.body.data, fc.body.len, 0, NULL);
    if (!doc && f.status >= 200 && f.status < 300) {
        r->unreadable = true;
        r->first_id = cm_gw_tg_first_update_id(fc.body.data);
    }
    bool ok = json_is_true(json_object_get(doc, "ok"));
    if (f.status >= 200 && f.status < 300 && ok && json_object_get(doc, "result")) {
        r->result = json_incref(json_object_get(doc, "result"));
        goto out;
    }
    const char *desc = json_string_value(json_object_get(doc, "description"));
    json_t *ra = json_object_get(json_object_get(doc, "parameters"), "retry_after");
    if (json_is_integer(ra) && json_integer_value(ra) >= 0)
        r->retry_after_ms = (long)CM_MIN(json_integer_value(ra) * 1000, (json_int_t)TG_MAX_WAIT_MS);
    long code = f.status;
    if (json_is_integer(json_object_get(doc, "error_code")) && (code < 400 || code >= 600))
        code = (long)json_integer_value(json_object_get(doc, "error_code"));
    bool said = !doc ? cm_buf_printf(&msg, "telegram %s: HTTP %ld, an answer that is not JSON",
                                     method, f.status) == CM_OK
                     : cm_buf_printf(&msg, "telegram %s: HTTP %ld%s%s", method, code,
                                     desc ? ": " : "", desc ? desc : "") == CM_OK;
    cm_rc code_rc = CM_EIO;
    if (code == 429) {
        code_rc = CM_ERATELIMIT;
        r->retryable = true;
    } else if (code == 401 || code == 403 || code == 404) {
        code_rc = CM_EAUTH;
    } else if (code >= 500 || !doc || (code >= 200 && code < 300)) {
        r->retryable = true; /* a server fault, or a 2xx we could not read */
    }
    rc = tg_err(t, err, errlen, code_rc, said ? msg.data : "telegram: request failed");
out:
    json_decref(doc);
    cm_buf_release(&fc.body);
    if (url.data) memset(url.data, 0, url.len);
    cm_buf_release(&url);
    cm_buf_release(&msg);
    free(body);
    return rc;
}

/* Waits ms unless *watch is set first (stop or close); false then. */
bool cm_gw_tg_wait(tg_chan *t, long ms, atomic_bool *watch)
{
    struct timespec ts = cm_deadline_in(CLOCK_MONOTONIC, ms);
    pthread_mutex_lock(&t->mu);
    while (!atomic_load(watch))
        if (pthread_cond_timedwait(&t->cv, &t->mu, &ts) == ETIMEDOUT) break;
    pthread_mutex_unlock(&t->mu);
    return !atomic_load(watch);
}

/* The delay before retry number `attempt` (0-based) after a failure r: the
 * one retry policy's (net/http_retry.h), with Telegram's retry_after (or the
 * Retry-After header) honoured up to TG_MAX_WAIT_MS. */
long cm_gw_tg_retry_delay(const tg_chan *t, const call_res *r, int attempt)
{
    http_retry p = {.max_attempts = attempt + 2,
                    .backoff_ms = t->backoff_ms,
                    .max_backoff_ms = TG_MAX_BACKOFF_MS,
                    .max_retry_after_ms = TG_MAX_WAIT_MS};
    uint64_t seed = (uint64_t)cm_now_ms() ^ (uint64_t)(uintptr_t)r;
    return CM_MAX(cm_http_backoff_ms(&p, attempt + 1, r->retry_after_ms, &seed), 1L);
}

/* ---- the update offset ---- */

static void offset_load(tg_chan *t)
{
    buf b = BUF_INIT;
    char e[256];
    t->last_update = -1;
    if (cm_fs_read_file(t->offset_path, 4096, &b, e, sizeof e) == CM_OK) {
        json_t *d = json_loadb(b.data, b.len, 0, NULL);
        json_t *v = json_object_get(d, "version"), *id = json_object_get(d, "lastUpdateId");
        const char *bid = json_string_value(json_object_get(d, "botId"));
        bool ver = json_is_integer(v) && (json_integer_value(v) == 1 || json_integer_value(v) == 2);
        /* another bot's offset (or one of unknown bot) is not ours */
        bool same = json_integer_value(v) == 1
                        ? !t->bot_id[0]
                        : (bid && !strcmp(bid, t->bot_id)) || (!bid && !t->bot_id[0]);
        if (ver && same && json_is_integer(id) && json_integer_value(id) >= 0)
            t->last_update = (int64_t)json_integer_value(id);
        json_decref(d);
    }
    cm_buf_release(&b);
}

/* Writes the offset atomically (temporary file, fsync, rename). */
static cm_rc offset_save(tg_chan *t, int64_t id, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf tmp = BUF_INIT;
    char *dir = cm_fs_dirname(t->offset_path), *text = NULL;
    int fd = -1;
    json_t *d = json_pack("{s:i,s:I,s:s?}", "version", TG_OFFSET_VERSION, "lastUpdateId",
                          (json_int_t)id, "botId", t->bot_id[0] ? t->bot_id : NULL);
    if (!dir || !d || !(text = json_dumps(d, JSON_INDENT(2))) ||
        cm_buf_printf(&tmp, "%s.%ld.tmp", t->offset_path, (long)getpid()))
        FAIL(CM_ENOMEM, "out of memory");
    CHECK(cm_fs_mkdirs(dir, err, errlen));
    fd = open(tmp.data, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) FAIL(CM_EIO, "telegram: cannot write %s: %s", tmp.data, strerror(errno));
    size_t n = strlen(text);
    if (write(fd, text, n) != (ssize_t)n || write(fd, "\n", 1) != 1 || fsync(fd))
        FAIL(CM_EIO, "telegram: cannot write %s: %s", tmp.data, strerror(errno));
    close(fd);
    fd = -1;
    if (rename(tmp.data, t->offset_path))
        FAIL(CM_EIO, "telegram: cannot replace %s: %s", t->offset_path, strerror(errno));
    cm_fs_sync_dir(t->offset_path);
out:
    if (fd >= 0) close(fd);
    if (rc && tmp.data) unlink(tmp.data);
    cm_buf_release(&tmp);
    free(dir);
    free(text);
    json_decref(d);
    return rc;
}

/* ---- updates → gw_msg ---- */

static bool word_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* "@username" in text, any case, not inside a longer word (2026.3.22
 * hasStandaloneTelegramMention). */
static bool has_mention(const char *text, const char *username)
{
    size_t ul = strlen(username), tl = strlen(text);
    if (!ul) return false;
    for (size_t i = 0; i + 1 + ul <= tl; i++) {
        if (text[i] != '@' || strncasecmp(text + i + 1, username, ul) != 0) continue;
        bool prev = i > 0 && word_char(text[i - 1]), next = word_char(text[i + 1 + ul]);
        if (!prev && !next) return true;
    }
    return false;
}

/* text without its standalone "@username" mentions (malloc'ed; NULL: out
 * of memory). */
static char *without_mentions(const char *text, const char *username)
{
    size_t ul = strlen(username), tl = strlen(text), w = 0;
    char *out = malloc(tl + 1);
    if (!out) return NULL;
    for (size_t i = 0; i < tl;) {
        if (text[i] == '@' && i + 1 + ul <= tl && !strncasecmp(text + i + 1, username, ul) &&
            !(i > 0 && word_char(text[i - 1])) && !word_char(text[i + 1 + ul])) {
            i += 1 + ul;
            continue;
        }
        out[w++] = text[i++];
    }
    out[w] = 0;
    return out;
}

static const char *const forum_service[] = {
    "forum_topic_created",  "forum_topic_edited",         "forum_topic_closed",
    "forum_topic_reopened", "general_forum_topic_hidden", "general_forum_topic_unhidden"};

static bool mentions_bot(const tg_chan *t, const json_t *msg, const char *text)
{
    if (text && t->bot_username[0] && has_mention(text, t->bot_username)) return true;
    const json_t *ents = json_object_get(msg, "entities");
    if (!ents) ents = json_object_get(msg, "caption_entities");
    size_t i;
    json_t *e;
    json_array_foreach(ents, i, e)
    {
        const char *ty = json_string_value(json_object_get(e, "type"));
        json_t *uid = json_object_get(json_object_get(e, "user"), "id");
        if (ty && !strcmp(ty, "text_mention") && json_is_integer(uid) && t->bot_uid &&
            json_integer_value(uid) == t->bot_uid)
            return true;
    }
    /* a reply to one of the bot's own messages (not a forum service message) */
    const json_t *rt = json_object_get(msg, "reply_to_message");
    json_t *from = json_object_get(json_object_get(rt, "from"), "id");
    if (t->bot_uid && json_is_integer(from) && json_integer_value(from) == t->bot_uid) {
        for (size_t k = 0; k < ARRAY_LEN(forum_service); k++)
            if (json_object_get(rt, forum_service[k])) return false;
        return true;
    }
    return false;
}

static const char *media_placeholder(const json_t *msg)
{
    if (json_object_get(msg, "photo")) return "<media:image>";
    if (json_object_get(msg, "video") || json_object_get(msg, "video_note")) return "<media:video>";
    if (json_object_get(msg, "audio") || json_object_get(msg, "voice")) return "<media:audio>";
    if (json_object_get(msg, "document") || json_object_get(msg, "animation"))
        return "<media:document>";
    if (json_object_get(msg, "sticker")) return "<media:sticker>";
    return NULL;
}

/* An id of the Bot API (chat, message, user), which it documents as an
 * Integer, as text; "" for anything else. A string is not taken: it would
 * be cut at 31 bytes (two chats as one) and reach session keys and access
 * checks as the sender wrote it. */
static void id_str(const json_t *v, char *out, size_t n)
{
    out[0] = 0;
    if (json_is_integer(v)) snprintf(out, n, "%lld", (long long)json_integer_value(v));
}

cm_rc cm_gw_tg_deliver(tg_chan *t, const json_t *upd)
{
    const json_t *msg = json_object_get(upd, "message");
    bool post = false;
    if (!msg) {
        msg = json_object_get(upd, "channel_post");
        post = msg != NULL;
    }
    const json_t *chat = json_object_get(msg, "chat");
    if (!json_is_object(msg) || !json_is_object(chat)) return CM_OK;
    const char *type = json_string_value(json_object_get(chat, "type"));
    if (!type) return CM_OK;
    bool priv = !strcmp(type, "private");
    bool group = !strcmp(type, "group") || !strcmp(type, "supergroup") || !strcmp(type, "channel");
    if (!priv && !group) return CM_OK;
    const json_t *from = json_object_get(msg, "from");
    if (t->bot_uid && json_integer_value(json_object_get(from, "id")) == t->bot_uid)
        return CM_OK; /* our own message */
    const char *text = json_string_value(json_object_get(msg, "text"));
    if (!text) text = json_string_value(json_object_get(msg, "caption"));
    const char *ph = media_placeholder(msg);
    if ((!text || !*text) && !ph) return CM_OK; /* a service message: nothing to answer */
    char peer[32], mid[32], sender[32], thread[32] = "";
    id_str(json_object_get(chat, "id"), peer, sizeof peer);
    id_str(json_object_get(msg, "message_id"), mid, sizeof mid);
    id_str(json_object_get(from, "id"), sender, sizeof sender);
    if (!sender[0] && post) {
        const json_t *sc = json_object_get(msg, "sender_chat");
        id_str(json_object_get(sc ? sc : chat, "id"), sender, sizeof sender);
    }
    json_t *tid = json_object_get(msg, "message_thread_id");
    if (group && json_is_true(json_object_get(chat, "is_forum")))
        snprintf(thread, sizeof thread, "%lld",
                 json_is_integer(tid) ? (long long)json_integer_value(tid) : 1LL);
    else if (priv && json_is_integer(tid))
        snprintf(thread, sizeof thread, "%lld", (long long)json_integer_value(tid));
    /* a message without a usable chat or message id, or from a sender
     * without one: refused for good (logged and skipped past) */
    if (!peer[0] || !mid[0] || (from && !sender[0])) return CM_EINVAL;
    gw_msg m = {0};
    m.channel = "telegram";
    m.account = t->account;
    m.peer = peer;
    m.thread = thread[0] ? thread : NULL;
    m.message_id = mid;
    m.sender = sender[0] ? sender : NULL;
    m.text = text && *text ? text : ph;
    m.is_group = group;
    m.has_media = ph != NULL;
    m.mentioned = mentions_bot(t, msg, text);
    /* who wrote it: "first last" (else the username), as 2026.3.22 names a sender */
    buf name = BUF_INIT;
    const char *first = json_string_value(json_object_get(from, "first_name"));
    const char *last = json_string_value(json_object_get(from, "last_name"));
    if (cm_buf_printf(&name, "%s%s%s", first ? first : "", first && last ? " " : "",
                      last ? last : ""))
        return CM_ENOMEM;
    m.sender_name = name.len ? name.data : NULL;
    m.sender_username = json_string_value(json_object_get(from, "username"));
    m.chat_title = group ? json_string_value(json_object_get(chat, "title")) : NULL;
    json_t *date = json_object_get(msg, "date");
    if (json_is_integer(date) && json_integer_value(date) > 0 &&
        json_integer_value(date) < 253402300800LL)
        m.ts_ms = (int64_t)json_integer_value(date) * 1000;
    /* "/cmd@<our bot>" reaches the gateway as "/cmd"; another bot's stays */
    char *bare = NULL; /* bot_username: written by this thread (get_me) */
    if (cm_gw_command_unaddress(m.text, t->bot_username, &bare)) {
        cm_buf_release(&name);
        return CM_ENOMEM;
    }
    if (!bare && group && t->bot_username[0]) { /* "@bot stop": an abort, as 2026.3.22 */
        if (!(bare = without_mentions(m.text, t->bot_username))) {
            cm_buf_release(&name);
            return CM_ENOMEM;
        }
        if (!cm_gw_is_abort_request(bare)) {
            free(bare);
            bare = NULL;
        }
    }
    if (bare) m.text = bare;
    cm_rc rc = t->sink(t->ctx, &m);
    free(bare);
    cm_buf_release(&name);
    return rc;
}

/* ---- the polling thread ---- */

static cm_rc get_me(tg_chan *t, call_res *r, char *err, size_t errlen)
{
    cm_rc rc = cm_gw_tg_call(t, "getMe", NULL, t->req_ms, &t->stop, r, err, errlen);
    if (rc) return rc;
    const char *u = json_string_value(json_object_get(r->result, "username"));
    json_t *id = json_object_get(r->result, "id");
    pthread_mutex_lock(&t->mu); /* cm_gw_telegram_bot_username reads it */
    snprintf(t->bot_username, sizeof t->bot_username, "%s", u ? u : "");
    t->bot_uid = json_is_integer(id) ? (int64_t)json_integer_value(id) : 0;
    pthread_mutex_unlock(&t->mu);
    json_decref(r->result);
    r->result = NULL;
    return CM_OK;
}

static void *poll_main(void *arg)
{
    tg_chan *t = arg;
    int fails = 0;
    char err[512];
    bool have_me = t->bot_uid != 0;
    json_t *allowed = json_pack("[s,s]", "message", "channel_post");
    bool isolate = false; /* the last answer was unreadable: ask for one update */
    while (!atomic_load(&t->stop)) {
        call_res r;
        cm_rc rc;
        if (!have_me) {
            rc = get_me(t, &r, err, sizeof err);
            if (rc == CM_ECANCELED) break;
            if (rc) {
                set_last_err(t, err);
                if (!cm_gw_tg_wait(t, cm_gw_tg_retry_delay(t, &r, fails++), &t->stop)) break;
                continue;
            }
            have_me = true;
        }
        json_t *p = json_pack("{s:i,s:O}", "timeout", (int)t->poll_s, "allowed_updates", allowed);
        if (p && t->last_update >= 0)
            json_object_set_new(p, "offset", json_integer((json_int_t)(t->last_update + 1)));
        if (p && isolate) json_object_set_new(p, "limit", json_integer(1));
        rc = p ? cm_gw_tg_call(t, "getUpdates", p, t->poll_s * 1000 + t->req_ms, &t->stop, &r, err,
                               sizeof err)
               : CM_ENOMEM;
        json_decref(p);
        if (rc == CM_ECANCELED) break;
        if (rc && r.unreadable && isolate && r.first_id > t->last_update) {
            /* one update alone and still not JSON: skipped past */
            cm_logf(&t->log, CM_LOG_WARN, "telegram: update %lld cannot be read; skipped",
                    (long long)r.first_id);
            t->last_update = r.first_id;
            if (offset_save(t, r.first_id, err, sizeof err)) set_last_err(t, err);
            isolate = false;
            continue;
        }
        if (rc && r.unreadable) isolate = true;
        if (rc || !json_is_array(r.result)) {
            if (!rc) snprintf(err, sizeof err, "telegram getUpdates: the result is not a list");
            set_last_err(t, rc == CM_ENOMEM ? "telegram: out of memory" : err);
            json_decref(r.result);
            if (!cm_gw_tg_wait(t, cm_gw_tg_retry_delay(t, &r, fails++), &t->stop)) break;
            continue;
        }
        fails = 0;
        isolate = false;
        set_last_err(t, ""); /* polling works again */
        size_t i;
        json_t *u;
        bool refused = false;
        size_t fresh = 0;
        json_array_foreach(r.result, i, u)
        {
            json_t *uid = json_object_get(u, "update_id");
            /* INT64_MAX could not be confirmed (offset is the id plus one) */
            if (!json_is_integer(uid) || json_integer_value(uid) < 0 ||
                json_integer_value(uid) == INT64_MAX) {
                cm_logf(&t->log, CM_LOG_WARN, "%s",
                        "telegram: an update without a usable update_id; skipped");
                continue;
            }
            int64_t id = (int64_t)json_integer_value(uid);
            if (id <= t->last_update) continue; /* already accepted */
            fresh++;
            cm_rc drc = cm_gw_tg_deliver(t, u);
            if (drc == CM_EINVAL || drc == CM_ETOOBIG) { /* refused for good */
                cm_logf(&t->log, CM_LOG_WARN, "telegram: update %lld refused (%s); skipped",
                        (long long)id, cm_strerror(drc));
            } else if (drc) {
                refused = true; /* asked again from this update on */
                break;
            }
            t->last_update = id;
            if (offset_save(t, id, err, sizeof err)) set_last_err(t, err);
        }
        /* Updates but none new: a server that sends back what the offset
         * confirmed (or only ids it cannot take) is not asked again at once,
         * or the loop would spin. */
        bool stale = !fresh && json_array_size(r.result) > 0;
        json_decref(r.result);
        if (stale && !cm_gw_tg_wait(t, t->backoff_ms, &t->stop)) break;
        if (refused) {
            set_last_err(t, "telegram: the gateway did not accept an update; it is asked again");
            if (!cm_gw_tg_wait(t, t->backoff_ms, &t->stop)) break;
        }
    }
    json_decref(allowed);
    return NULL;
}

/* ---- the channel ops ---- */

static cm_rc tg_start(gw_channel *ch, gw_sink_fn sink, void *ctx, char *err, size_t errlen)
{
    tg_chan *t = (tg_chan *)ch;
    if (t->running) return cm_seterr(err, errlen, CM_EINVAL, "telegram: already started");
    if (!sink) return cm_seterr(err, errlen, CM_EINVAL, "telegram: no sink");
    t->sink = sink;
    t->ctx = ctx;
    atomic_store(&t->stop, false);
    /* a token Telegram refuses is reported now; other failures are retried */
    call_res r;
    char e[512];
    cm_rc rc = get_me(t, &r, e, sizeof e);
    if (rc == CM_EAUTH) return cm_seterr(err, errlen, rc, "%s", e);
    if (rc) set_last_err(t, e);
    if (pthread_create(&t->tid, NULL, poll_main, t))
        return cm_seterr(err, errlen, CM_EIO, "telegram: cannot start a thread");
    t->running = true;
    return CM_OK;
}

static void tg_stop(gw_channel *ch)
{
    tg_chan *t = (tg_chan *)ch;
    if (!t->running) return;
    pthread_mutex_lock(&t->mu);
    atomic_store(&t->stop, true);
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->tid, NULL);
    t->running = false;
}

static void tg_close(gw_channel *ch)
{
    tg_chan *t = (tg_chan *)ch;
    if (!t) return;
    pthread_mutex_lock(&t->mu);
    atomic_store(&t->closing, true);
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    tg_stop(ch);
    cm_gw_tg_signals_stop(t);
    if (t->token) memset(t->token, 0, strlen(t->token));
    free(t->token);
    free(t->api_base);
    free(t->account);
    free(t->offset_path);
    cm_redact_release(&t->red);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    free(t);
}

static const gw_channel_ops tg_ops = {
    "telegram", TG_TEXT_LIMIT,   tg_start,       cm_gw_tg_send,    tg_stop,
    tg_close,   cm_gw_tg_typing, cm_gw_tg_react, cm_gw_tg_preview, cm_gw_tg_unsend};

void cm_gw_telegram_set_clock(gw_channel *ch, int64_t (*clock)(void *ctx), void *ctx)
{
    tg_chan *t = (tg_chan *)ch;
    t->clock = clock;
    t->clock_ctx = ctx;
}

void cm_gw_telegram_last_error(gw_channel *ch, char *out, size_t n)
{
    tg_chan *t = (tg_chan *)ch;
    pthread_mutex_lock(&t->mu);
    snprintf(out, n, "%s", t->last_err);
    pthread_mutex_unlock(&t->mu);
}

void cm_gw_telegram_set_logger(gw_channel *ch, const cm_logger *lg)
{
    tg_chan *t = (tg_chan *)ch;
    if (lg) t->log = *lg;
}

void cm_gw_telegram_bot_username(gw_channel *ch, char *out, size_t n)
{
    tg_chan *t = (tg_chan *)ch;
    pthread_mutex_lock(&t->mu);
    snprintf(out, n, "%s", t->bot_username);
    pthread_mutex_unlock(&t->mu);
}

cm_rc cm_gw_telegram_open(const json_t *root, const char *account, const char *state_dir,
                          gw_channel **out, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    tg_chan *t = NULL;
    buf path = BUF_INIT;
    *out = NULL;
    const json_t *tg = json_object_get(json_object_get(root, "channels"), "telegram");
    if (!account || !*account) account = "default";
    if (!json_is_object(tg)) FAIL(CM_ECONFIG, "channels.telegram is not configured");
    if (!state_dir) FAIL(CM_EINVAL, "telegram: no state directory");
    if (!(t = calloc(1, sizeof *t))) FAIL(CM_ENOMEM, "out of memory");
    t->base.ops = &tg_ops;
    pthread_mutex_init(&t->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&t->cv, &ca);
    pthread_condattr_destroy(&ca);
    cm_redact_init(&t->red);
    t->last_update = -1;
    CHECK(resolve_token(root, tg, account, &t->token, err, errlen));
    if (cm_redact_add(&t->red, t->token)) FAIL(CM_ENOMEM, "out of memory");
    snprintf(t->bot_id, sizeof t->bot_id, "%.*s", (int)strcspn(t->token, ":"), t->token);
    for (const char *c = t->bot_id; *c; c++)
        if (*c < '0' || *c > '9') {
            t->bot_id[0] = 0;
            break;
        }
    /* apiRoot, QuantumClaw's key (the account's first); apiBaseUrl, which
     * QuantumClaw rejects, is still read (config/known_keys.c warns) */
    const json_t *acct = json_object_get(json_object_get(tg, "accounts"), account);
    const char *bkey = "apiRoot";
    const json_t *base = json_object_get(acct, "apiRoot");
    if (!base && (base = json_object_get(acct, "apiBaseUrl"))) bkey = "apiBaseUrl";
    if (!base && !(base = json_object_get(tg, "apiRoot")) &&
        (base = json_object_get(tg, "apiBaseUrl")))
        bkey = "apiBaseUrl";
    const char *b = json_string_value(base);
    if (base && (!b || (strncmp(b, "http://", 7) && strncmp(b, "https://", 8))))
        FAIL(CM_ECONFIG, "channels.telegram.%s: an http(s) URL is needed", bkey);
    if (!(t->api_base = cm_strdup(b ? b : TG_DEFAULT_BASE))) FAIL(CM_ENOMEM, "out of memory");
    for (size_t n = strlen(t->api_base); n > 8 && t->api_base[n - 1] == '/'; n--)
        t->api_base[n - 1] = 0;
    const json_t *ts = acct_get(tg, account, "timeoutSeconds");
    if (ts && (!json_is_number(ts) || json_number_value(ts) <= 0))
        FAIL(CM_ECONFIG, "channels.telegram.timeoutSeconds: a positive number is needed");
    t->req_ms = ts ? (long)(json_number_value(ts) * 1000) : TG_REQ_TIMEOUT_MS;
    if (t->req_ms < 1) t->req_ms = 1;
    /* the long poll is held at most that long too */
    t->poll_s = ts ? CM_MIN((long)TG_POLL_S, CM_MAX(0L, t->req_ms / 1000)) : TG_POLL_S;
    t->backoff_ms = cm_http_defaults(0).backoff_ms;
    if (!(t->account = cm_strdup(account))) FAIL(CM_ENOMEM, "out of memory");
    /* 2026.3.22 normalizes the account for the file name */
    if (cm_buf_printf(&path, "%s/telegram/update-offset-", state_dir))
        FAIL(CM_ENOMEM, "out of memory");
    for (const char *c = account; *c; c++) {
        bool ok = word_char(*c) || *c == '.' || *c == '-';
        if (cm_buf_addc(&path, ok ? *c : '_')) FAIL(CM_ENOMEM, "out of memory");
    }
    if (cm_buf_adds(&path, ".json")) FAIL(CM_ENOMEM, "out of memory");
    t->offset_path = cm_buf_detach(&path);
    offset_load(t);
    *out = &t->base;
out:
    if (rc && t) tg_close(&t->base);
    cm_buf_release(&path);
    return rc;
}
