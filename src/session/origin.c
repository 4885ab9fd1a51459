/*
 * origin.c — a session entry's origin, delivery route and group fields as
 * QuantumClaw 2026.3.22 derives them from an inbound message (origin.h;
 * its src/config/sessions/metadata.ts, group.ts, src/utils/delivery-context.ts).
 */
#include <ctype.h>
#include <errno.h>

#include "../base/utf8.h"
#include "origin.h"

/* A field's longest value in code points: names and titles come from chat
 * senders, and every entry of the store is rewritten with each change. */
#define FIELD_MAX_CHARS 512

static bool has(const char *s)
{
    return s && *s;
}

/* s trimmed of ASCII blanks, cut to FIELD_MAX_CHARS code points and made
 * valid UTF-8 (an invalid byte is U+FFFD), appended to out; nothing when
 * blank. */
static cm_rc trimmed(buf *out, const char *s)
{
    if (!s) return CM_OK;
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    n = cm_utf8_prefix_chars(s, n, FIELD_MAX_CHARS, NULL);
    return n ? cm_utf8_repair(out, s, n) : CM_OK;
}

/* normalizeHyphenSlug: lower case, every run of bytes outside
 * [a-z0-9#@._+-] one "-", runs of "-" one, "-" and "." cut at both ends. A
 * multi-byte character is a run of such bytes, as its code point is. */
static cm_rc slug(buf *out, const char *s)
{
    cm_rc rc = CM_OK;
    buf t = BUF_INIT;
    bool dash = false;
    for (const char *p = s ? s : ""; *p && !rc; p++) {
        unsigned char c = (unsigned char)tolower((unsigned char)*p);
        bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '#' || c == '@' ||
                  c == '.' || c == '_' || c == '+';
        if (ok) {
            rc = cm_buf_addc(&t, (char)c);
            dash = false;
        } else if (!dash) { /* '-' itself joins the run */
            rc = cm_buf_addc(&t, '-');
            dash = true;
        }
    }
    if (!rc && t.len) {
        size_t a = 0, b = t.len;
        while (a < b && (t.data[a] == '-' || t.data[a] == '.'))
            a++;
        while (b > a && (t.data[b - 1] == '-' || t.data[b - 1] == '.'))
            b--;
        if (b > a) rc = cm_buf_add(out, t.data + a, b - a);
    }
    cm_buf_release(&t);
    return rc;
}

cm_rc cm_session_group_display_name(buf *out, const char *channel, const char *subject,
                                    const char *group_channel, const char *id)
{
    cm_rc rc = CM_OK;
    buf prov = BUF_INIT, raw = BUF_INIT, tok = BUF_INIT;
    CHECK(trimmed(&prov, channel));
    for (size_t i = 0; i < prov.len; i++)
        prov.data[i] = (char)tolower((unsigned char)prov.data[i]);
    if (!prov.len) CHECK(cm_buf_adds(&prov, "group"));
    CHECK(trimmed(&raw, group_channel));
    if (!raw.len) CHECK(trimmed(&raw, subject));
    if (!raw.len) CHECK(trimmed(&raw, id));
    CHECK(slug(&tok, raw.data));
    const char *t = tok.data ? tok.data : "";
    if (!has(group_channel))
        while (*t == '#')
            t++;
    if (!*t) {
        rc = cm_buf_adds(out, prov.data);
        goto out;
    }
    bool plain = *t != '@' && *t != '#' && strncmp(t, "g-", 2) && !strchr(t, '#');
    rc = cm_buf_printf(out, "%s:%s%s", prov.data, plain ? "g-" : "", t);
out:
    cm_buf_release(&prov);
    cm_buf_release(&raw);
    cm_buf_release(&tok);
    return rc;
}

/* A thread id as QuantumClaw's Telegram gives it: a number when it is one. */
static json_t *thread_value(const char *t)
{
    char *end;
    errno = 0;
    long long v = strtoll(t, &end, 10);
    if (!errno && end != t && !*end && (isdigit((unsigned char)*t) || *t == '-'))
        return json_integer(v);
    return json_string(t);
}

static bool put(json_t *o, const char *k, json_t *v)
{
    return v && !json_object_set_new(o, k, v);
}

json_t *cm_session_origin_patch(const json_t *entry, const session_origin *o)
{
    json_t *patch = NULL, *origin = NULL, *dc = NULL;
    buf to = BUF_INIT, from = BUF_INIT, gid = BUF_INIT, chan = BUF_INIT, label = BUF_INIT,
        subj = BUF_INIT, name = BUF_INIT, peer = BUF_INIT, thr = BUF_INIT, acc = BUF_INIT;
    bool ok = false;
    if (!o || !has(o->channel) || !has(o->peer)) return NULL;
    const char *ct = has(o->chat_type) && (!strcmp(o->chat_type, "group") ||
                                           !strcmp(o->chat_type, "channel"))
                         ? o->chat_type
                         : "direct";
    bool group = strcmp(ct, "direct") != 0;
    if (trimmed(&acc, o->account)) goto out;
    const char *account = acc.len ? acc.data : "default";
    const char *thread = has(o->thread) ? o->thread : NULL;
    if (trimmed(&chan, o->channel) || !chan.len || trimmed(&peer, o->peer) || !peer.len ||
        (thread && trimmed(&thr, thread)))
        goto out;
    thread = thr.len ? thr.data : NULL;
    for (size_t i = 0; i < chan.len; i++)
        chan.data[i] = (char)tolower((unsigned char)chan.data[i]);
    if (cm_buf_printf(&to, "%s:%s", chan.data, peer.data)) goto out;
    if (group) {
        if (cm_buf_printf(&gid, "%s", peer.data) ||
            (thread && cm_buf_printf(&gid, ":topic:%s", thread)))
            goto out;
        for (size_t i = 0; i < gid.len; i++)
            gid.data[i] = (char)tolower((unsigned char)gid.data[i]);
        if (cm_buf_printf(&from, "%s:group:%s", chan.data, gid.data)) goto out;
    } else if (cm_buf_adds(&from, to.data)) {
        goto out;
    }
    if (trimmed(&label, o->label) || trimmed(&subj, o->subject)) goto out;
    if (!(patch = json_object())) goto out;

    /* origin: the entry's, with this message's fields over it (mergeOrigin) */
    json_t *prev = json_object_get(entry, "origin");
    origin = json_is_object(prev) ? json_deep_copy(prev) : json_object();
    if (!origin) goto out;
    if ((label.len && !put(origin, "label", json_string(label.data))) ||
        !put(origin, "provider", json_string(chan.data)) ||
        !put(origin, "surface", json_string(chan.data)) ||
        !put(origin, "chatType", json_string(ct)) ||
        !put(origin, "from", json_string(from.data)) || !put(origin, "to", json_string(to.data)) ||
        !put(origin, "accountId", json_string(account)) ||
        (thread && !put(origin, "threadId", thread_value(thread))))
        goto out;

    /* the delivery route (normalizeSessionDeliveryFields) */
    if (!(dc = json_pack("{s:s,s:s,s:s}", "channel", chan.data, "to", to.data, "accountId",
                         account)) ||
        (thread && !put(dc, "threadId", thread_value(thread))))
        goto out;

    /* groups (deriveGroupSessionPatch): a "#name" title of a channel-capable
     * surface is its groupChannel, any other its subject */
    if (group) {
        bool hash_title = subj.len && subj.data[0] == '#' &&
                          (!strcmp(ct, "channel") || !strcmp(chan.data, "telegram"));
        const char *gch = hash_title ? subj.data : NULL;
        const char *sub = !hash_title && subj.len ? subj.data : NULL;
        if (!put(patch, "chatType", json_string(ct)) ||
            !put(patch, "channel", json_string(chan.data)) ||
            !put(patch, "groupId", json_string(gid.data)) ||
            (sub && !put(patch, "subject", json_string(sub))) ||
            (gch && !put(patch, "groupChannel", json_string(gch))))
            goto out;
        const char *esub = json_string_value(json_object_get(entry, "subject"));
        const char *egch = json_string_value(json_object_get(entry, "groupChannel"));
        if (cm_session_group_display_name(&name, chan.data, sub ? sub : esub, gch ? gch : egch,
                                          gid.data) ||
            !put(patch, "displayName", json_string(name.data)))
            goto out;
    }
    if (json_object_set(patch, "origin", origin) || json_object_set(patch, "deliveryContext", dc) ||
        !put(patch, "lastChannel", json_string(chan.data)) ||
        !put(patch, "lastTo", json_string(to.data)) ||
        !put(patch, "lastAccountId", json_string(account)) ||
        !put(patch, "lastThreadId", thread ? thread_value(thread) : json_null()))
        goto out;
    ok = true;
out:
    json_decref(origin);
    json_decref(dc);
    cm_buf_release(&to);
    cm_buf_release(&from);
    cm_buf_release(&gid);
    cm_buf_release(&chan);
    cm_buf_release(&label);
    cm_buf_release(&subj);
    cm_buf_release(&name);
    cm_buf_release(&peer);
    cm_buf_release(&thr);
    cm_buf_release(&acc);
    if (!ok) {
        json_decref(patch);
        patch = NULL;
    }
    return patch;
}
