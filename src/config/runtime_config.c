/*
 * runtime_config.c — the table of the runtime's keys (path, kind, 2026.3.22's
 * range or choices, destination) and the walk that applies it: once per file
 * at load (errors with that file's line:col, the result thrown away) and once
 * over the merged config into the snapshot the runtime reads. channels.<name>
 * and each of its accounts go through one table of their own; agents.list[]
 * is read by hand (an array of objects).
 */
#include <math.h>
#include <strings.h>

#include "config_int.h"
#include "runtime_config.h"

typedef enum rkind {
    R_BOOL,    /* int: -1, 0, 1 */
    R_INT,     /* int64 in [min, max] */
    R_STR,     /* char * */
    R_ENUM,    /* int: index in choices */
    R_MAPINT,  /* cm_rt_map of integers in [min, max] */
    R_MAPENUM, /* cm_rt_map of indexes in choices */
    R_MODEL,   /* char *: a string, or an object's "primary" string */
    R_OBJ,     /* const json_t *: an object (borrowed) */
    R_IDLIST,  /* const json_t *: an array of strings and numbers (borrowed) */
    R_STREAM,  /* int: CM_RT_STREAM_*: a boolean or one of choices */
    R_BYTES,   /* int64: a nonnegative integer or a byte size string ("2mb") */
} rkind;

typedef struct rfield {
    const char *path; /* dot-separated, from the table's base */
    rkind kind;
    double min, max;
    const char *choices; /* "a|b|c" */
    size_t off;
} rfield;

#define SAFE_INT 9007199254740991.0
#define POS      1, SAFE_INT
#define NONNEG   0, SAFE_INT
#define TYPING   "never|instant|thinking|message"
#define QMODE    "steer|followup|collect|steer-backlog|steer+backlog|queue|interrupt"

#define AT(m) offsetof(cm_rtcfg, m)
static const rfield top[] = {
    {"messages.responsePrefix", R_STR, 0, 0, NULL, AT(messages.response_prefix)},
    {"messages.ackReaction", R_STR, 0, 0, NULL, AT(messages.ack_reaction)},
    {"messages.ackReactionScope", R_ENUM, 0, 0, "group-mentions|group-all|direct|all|off|none",
     AT(messages.ack_reaction_scope)},
    {"messages.removeAckAfterReply", R_BOOL, 0, 0, NULL, AT(messages.remove_ack_after_reply)},
    {"messages.queue.mode", R_ENUM, 0, 0, QMODE, AT(messages.queue_mode)},
    {"messages.queue.byChannel", R_MAPENUM, 0, 0, QMODE, AT(messages.queue_by_channel)},
    {"messages.queue.debounceMs", R_INT, NONNEG, NULL, AT(messages.queue_debounce_ms)},
    {"messages.queue.debounceMsByChannel", R_MAPINT, NONNEG, NULL,
     AT(messages.queue_debounce_by_channel)},
    {"messages.queue.cap", R_INT, POS, NULL, AT(messages.queue_cap)},
    {"messages.queue.drop", R_ENUM, 0, 0, "old|new|summarize", AT(messages.queue_drop)},
    {"messages.inbound.debounceMs", R_INT, NONNEG, NULL, AT(messages.inbound_debounce_ms)},
    {"messages.inbound.byChannel", R_MAPINT, NONNEG, NULL, AT(messages.inbound_by_channel)},
    {"messages.groupChat.historyLimit", R_INT, POS, NULL, AT(messages.group_history_limit)},

    {"session.scope", R_ENUM, 0, 0, "per-sender|global", AT(session.scope)},
    {"session.dmScope", R_ENUM, 0, 0, "main|per-peer|per-channel-peer|per-account-channel-peer",
     AT(session.dm_scope)},
    {"session.identityLinks", R_OBJ, 0, 0, NULL, AT(session.identity_links)},
    {"session.idleMinutes", R_INT, POS, NULL, AT(session.idle_minutes)},
    {"session.reset.mode", R_ENUM, 0, 0, "daily|idle", AT(session.reset_mode)},
    {"session.reset.atHour", R_INT, 0, 23, NULL, AT(session.reset_at_hour)},
    {"session.reset.idleMinutes", R_INT, POS, NULL, AT(session.reset_idle_minutes)},
    {"session.mainKey", R_STR, 0, 0, NULL, AT(session.main_key)},
    {"session.typingIntervalSeconds", R_INT, POS, NULL, AT(session.typing_interval_s)},
    {"session.typingMode", R_ENUM, 0, 0, TYPING, AT(session.typing_mode)},

    {"agents.defaults.model", R_MODEL, 0, 0, NULL, AT(defaults.model)},
    {"agents.defaults.workspace", R_STR, 0, 0, NULL, AT(defaults.workspace)},
    {"agents.defaults.userTimezone", R_STR, 0, 0, NULL, AT(defaults.user_timezone)},
    {"agents.defaults.envelopeTimezone", R_STR, 0, 0, NULL, AT(defaults.envelope_timezone)},
    {"agents.defaults.envelopeTimestamp", R_ENUM, 0, 0, "on|off", AT(defaults.envelope_timestamp)},
    {"agents.defaults.thinkingDefault", R_ENUM, 0, 0, "off|minimal|low|medium|high|xhigh|adaptive",
     AT(defaults.thinking_default)},
    {"agents.defaults.timeoutSeconds", R_INT, POS, NULL, AT(defaults.timeout_s)},
    {"agents.defaults.contextTokens", R_INT, POS, NULL, AT(defaults.context_tokens)},
    {"agents.defaults.typingIntervalSeconds", R_INT, POS, NULL, AT(defaults.typing_interval_s)},
    {"agents.defaults.typingMode", R_ENUM, 0, 0, TYPING, AT(defaults.typing_mode)},
    {"agents.defaults.humanDelay.mode", R_ENUM, 0, 0, "off|natural|custom",
     AT(defaults.human_delay_mode)},
    {"agents.defaults.humanDelay.minMs", R_INT, NONNEG, NULL, AT(defaults.human_delay_min_ms)},
    {"agents.defaults.humanDelay.maxMs", R_INT, NONNEG, NULL, AT(defaults.human_delay_max_ms)},
    {"agents.defaults.blockStreamingDefault", R_ENUM, 0, 0, "off|on",
     AT(defaults.block_streaming_default)},
    {"agents.defaults.blockStreamingBreak", R_ENUM, 0, 0, "text_end|message_end",
     AT(defaults.block_streaming_break)},
    {"agents.defaults.blockStreamingChunk.minChars", R_INT, POS, NULL, AT(defaults.chunk_min)},
    {"agents.defaults.blockStreamingChunk.maxChars", R_INT, POS, NULL, AT(defaults.chunk_max)},
    {"agents.defaults.blockStreamingChunk.breakPreference", R_ENUM, 0, 0,
     "paragraph|newline|sentence", AT(defaults.chunk_break)},
    {"agents.defaults.blockStreamingCoalesce.minChars", R_INT, POS, NULL,
     AT(defaults.coalesce_min)},
    {"agents.defaults.blockStreamingCoalesce.maxChars", R_INT, POS, NULL,
     AT(defaults.coalesce_max)},
    {"agents.defaults.blockStreamingCoalesce.idleMs", R_INT, NONNEG, NULL,
     AT(defaults.coalesce_idle_ms)},

    {"agents.defaults.compaction.mode", R_ENUM, 0, 0, "default|safeguard",
     AT(defaults.compaction_mode)},
    {"agents.defaults.compaction.reserveTokens", R_INT, NONNEG, NULL, AT(defaults.reserve_tokens)},
    {"agents.defaults.compaction.keepRecentTokens", R_INT, POS, NULL,
     AT(defaults.keep_recent_tokens)},
    {"agents.defaults.compaction.reserveTokensFloor", R_INT, NONNEG, NULL,
     AT(defaults.reserve_tokens_floor)},
    {"agents.defaults.compaction.memoryFlush.enabled", R_BOOL, 0, 0, NULL,
     AT(defaults.flush_enabled)},
    {"agents.defaults.compaction.memoryFlush.softThresholdTokens", R_INT, NONNEG, NULL,
     AT(defaults.flush_soft_threshold)},
    {"agents.defaults.compaction.memoryFlush.forceFlushTranscriptBytes", R_BYTES, NONNEG, NULL,
     AT(defaults.flush_force_bytes)},
    {"agents.defaults.compaction.memoryFlush.prompt", R_STR, 0, 0, NULL, AT(defaults.flush_prompt)},
    {"agents.defaults.compaction.memoryFlush.systemPrompt", R_STR, 0, 0, NULL,
     AT(defaults.flush_system_prompt)},

    {"gateway.port", R_INT, POS, NULL, AT(gateway.port)},
    {"gateway.bind", R_ENUM, 0, 0, "auto|lan|loopback|custom|tailnet", AT(gateway.bind)},
    {"gateway.auth.mode", R_ENUM, 0, 0, "none|token|password|trusted-proxy", AT(gateway.auth_mode)},
    {"gateway.controlUi.enabled", R_BOOL, 0, 0, NULL, AT(gateway.control_ui_enabled)},
    {"gateway.reload.mode", R_ENUM, 0, 0, "off|restart|hot|hybrid", AT(gateway.reload_mode)},
    {"gateway.reload.debounceMs", R_INT, NONNEG, NULL, AT(gateway.reload_debounce_ms)},
};
#undef AT

/* TelegramAccountSchemaBase's keys the runtime reads (channels.<name> and
 * channels.<name>.accounts.<id>; the other channels share them). */
#define AT(m) offsetof(cm_rt_chan, m)
static const rfield chan_fields[] = {
    {"enabled", R_BOOL, 0, 0, NULL, AT(enabled)},
    {"dmPolicy", R_ENUM, 0, 0, "pairing|allowlist|open|disabled", AT(dm_policy)},
    {"groupPolicy", R_ENUM, 0, 0, "open|disabled|allowlist", AT(group_policy)},
    {"replyToMode", R_ENUM, 0, 0, "off|first|all", AT(reply_to_mode)},
    {"chunkMode", R_ENUM, 0, 0, "length|newline", AT(chunk_mode)},
    {"textChunkLimit", R_INT, POS, NULL, AT(text_chunk_limit)},
    {"historyLimit", R_INT, NONNEG, NULL, AT(history_limit)},
    {"streaming", R_STREAM, 0, 0, "off|partial|block|progress", AT(streaming)},
    {"streamMode", R_ENUM, 0, 0, "off|partial|block", AT(stream_mode)},
    {"blockStreaming", R_BOOL, 0, 0, NULL, AT(block_streaming)},
    {"responsePrefix", R_STR, 0, 0, NULL, AT(response_prefix)},
    {"ackReaction", R_STR, 0, 0, NULL, AT(ack_reaction)},
    {"apiRoot", R_STR, 0, 0, NULL, AT(api_root)},
    {"groups", R_OBJ, 0, 0, NULL, AT(groups)},
    {"allowFrom", R_IDLIST, 0, 0, NULL, AT(allow_from)},
    {"groupAllowFrom", R_IDLIST, 0, 0, NULL, AT(group_allow_from)},
};
#undef AT

bool cm_rt_map_get(const cm_rt_map *m, const char *key, int64_t *val)
{
    for (size_t i = 0; key && i < m->n; i++)
        if (!strcmp(m->key[i], key)) {
            *val = m->val[i];
            return true;
        }
    return false;
}

static void map_release(cm_rt_map *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->key[i]);
    free(m->key);
    free(m->val);
    memset(m, 0, sizeof *m);
}

static cm_rc map_add(cm_rt_map *m, const char *k, int64_t v)
{
    char **nk = realloc(m->key, (m->n + 1) * sizeof *nk);
    if (!nk) return CM_ENOMEM;
    m->key = nk;
    int64_t *nv = realloc(m->val, (m->n + 1) * sizeof *nv);
    if (!nv) return CM_ENOMEM;
    m->val = nv;
    if (!(m->key[m->n] = cm_strdup(k))) return CM_ENOMEM;
    m->val[m->n++] = v;
    return CM_OK;
}

/* Index of s in choices "a|b|c", or -1. */
static int choice_index(const char *choices, const char *s)
{
    size_t n = strlen(s);
    int i = 0;
    for (const char *p = choices;; i++) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && !memcmp(p, s, n)) return i;
        if (!bar) return -1;
        p = bar + 1;
    }
}

/* An integer in [min, max] as zod's int() with its bounds, else cm_config_bad. */
static cm_rc get_int(ctx *c, const json_t *parent, const char *key, const char *path,
                     const json_t *v, double min, double max, int64_t *out)
{
    char what[160];
    if (!json_is_number(v)) return cm_config_bad(c, parent, key, path, "expected a number");
    double d = json_number_value(v);
    if (!isfinite(d) || d != floor(d)) {
        snprintf(what, sizeof what, "expected an integer, got %g", d);
        return cm_config_bad(c, parent, key, path, what);
    }
    if (!(d >= min && d <= max)) {
        if (max == SAFE_INT)
            snprintf(what, sizeof what, "expected an integer of at least %g, got %g", min, d);
        else
            snprintf(what, sizeof what, "expected an integer between %g and %g, got %g", min, max,
                     d);
        return cm_config_bad(c, parent, key, path, what);
    }
    *out = (int64_t)d;
    return CM_OK;
}

static cm_rc get_enum(ctx *c, const json_t *parent, const char *key, const char *path,
                      const json_t *v, const char *choices, int *out)
{
    char what[256], shown[80];
    int i = json_is_string(v) ? choice_index(choices, json_string_value(v)) : -1;
    if (i < 0) {
        snprintf(what, sizeof what, "expected one of %s, got %s", choices,
                 cm_config_value_text(v, path, shown, sizeof shown));
        return cm_config_bad(c, parent, key, path, what);
    }
    *out = i;
    return CM_OK;
}

static cm_rc set_str(char **dst, const char *s)
{
    return cm_config_set_str(dst, s);
}

/* Applies the value v of parent's member key (its path in the file) to base. */
static cm_rc apply(ctx *c, const rfield *f, const json_t *parent, const char *key, const json_t *v,
                   const char *path, void *base)
{
    void *dst = (char *)base + f->off;
    cm_rc rc = CM_OK;
    switch (f->kind) {
    case R_BOOL:
        if (!json_is_boolean(v))
            return cm_config_bad(c, parent, key, path, "expected true or false");
        *(int *)dst = json_is_true(v);
        return CM_OK;
    case R_INT:
        return get_int(c, parent, key, path, v, f->min, f->max, dst);
    case R_BYTES:
        if (json_is_string(v)) {
            if (!cm_config_byte_size(json_string_value(v), dst))
                return cm_config_bad(c, parent, key, path,
                                     "expected a byte size like 2mb (b, kb, mb, gb, tb)");
            return CM_OK;
        }
        return get_int(c, parent, key, path, v, f->min, f->max, dst);
    case R_STR:
        if (!json_is_string(v)) return cm_config_bad(c, parent, key, path, "expected a string");
        return set_str(dst, json_string_value(v));
    case R_ENUM:
        return get_enum(c, parent, key, path, v, f->choices, dst);
    case R_STREAM:
        if (json_is_boolean(v)) {
            *(int *)dst = json_is_true(v) ? CM_RT_STREAM_TRUE : CM_RT_STREAM_FALSE;
            return CM_OK;
        }
        return get_enum(c, parent, key, path, v, f->choices, dst);
    case R_MODEL: {
        const json_t *p = v;
        if (json_is_object(v)) {
            p = json_object_get(v, "primary");
            if (!p) return CM_OK;
            char sub[768];
            snprintf(sub, sizeof sub, "%s.primary", path);
            if (!json_is_string(p)) return cm_config_bad(c, v, "primary", sub, "expected a string");
        } else if (!json_is_string(v)) {
            return cm_config_bad(c, parent, key, path, "expected a string or an object");
        }
        return set_str(dst, json_string_value(p));
    }
    case R_OBJ:
        if (!json_is_object(v)) return cm_config_bad(c, parent, key, path, "expected an object");
        *(const json_t **)dst = v;
        return CM_OK;
    case R_IDLIST: {
        if (!json_is_array(v)) return cm_config_bad(c, parent, key, path, "expected an array");
        size_t i;
        const json_t *e;
        json_array_foreach(v, i, e)
        {
            if (json_is_string(e) || json_is_number(e)) continue;
            int line = 0, col = 0;
            char shown[80];
            if (cm_json5_where(c->doc, v, NULL, i, &line, &col))
                return cm_seterr(c->err, c->errlen, CM_ECONFIG,
                                 "%s:%d:%d: %s[%zu]: expected a string or a number, got %s",
                                 c->file, line, col, path, i,
                                 cm_config_value_text(e, path, shown, sizeof shown));
            return cm_seterr(c->err, c->errlen, CM_ECONFIG,
                             "%s: %s[%zu]: expected a string or a number", c->file, path, i);
        }
        *(const json_t **)dst = v;
        return CM_OK;
    }
    case R_MAPINT:
    case R_MAPENUM: {
        if (!json_is_object(v)) return cm_config_bad(c, parent, key, path, "expected an object");
        cm_rt_map *m = dst;
        map_release(m);
        const char *k;
        json_t *e;
        json_object_foreach((json_t *)v, k, e)
        {
            char sub[768];
            snprintf(sub, sizeof sub, "%s.%.200s", path, k);
            int64_t x = 0;
            int ix = 0;
            if (f->kind == R_MAPINT)
                rc = get_int(c, v, k, sub, e, f->min, f->max, &x);
            else if (!(rc = get_enum(c, v, k, sub, e, f->choices, &ix)))
                x = ix;
            if (!rc) rc = map_add(m, k, x);
            if (rc) return rc;
        }
        return CM_OK;
    }
    }
    return rc;
}

/* Walks table over the object at base_path in root ("" is root itself). */
static cm_rc walk(ctx *c, const json_t *obj, const char *base_path, const rfield *table, size_t n,
                  void *base)
{
    for (size_t i = 0; i < n; i++) {
        const rfield *f = &table[i];
        const json_t *parent = obj;
        const char *p = f->path;
        char key[64], path[512];
        for (;;) {
            const char *dot = strchr(p, '.');
            size_t len = dot ? (size_t)(dot - p) : strlen(p);
            size_t klen = CM_MIN(len, sizeof key - 1); /* cut as snprintf would */
            memcpy(key, p, klen);
            key[klen] = 0;
            const json_t *v = json_object_get(parent, key);
            if (!v) break; /* most fields are absent: no path to format */
            size_t plen = (size_t)(p - f->path) + len;
            snprintf(path, sizeof path, "%s%s%.*s", base_path, *base_path ? "." : "", (int)plen,
                     f->path);
            if (!dot) {
                cm_rc rc = apply(c, f, parent, key, v, path, base);
                if (rc) return rc;
                break;
            }
            if (!json_is_object(v))
                return cm_config_bad(c, parent, key, path, "expected an object");
            parent = v;
            p = dot + 1;
        }
    }
    return CM_OK;
}

static void chan_init(cm_rt_chan *ch)
{
    memset(ch, 0, sizeof *ch);
    ch->enabled = ch->block_streaming = -1;
    ch->dm_policy = ch->group_policy = ch->reply_to_mode = ch->chunk_mode = -1;
    ch->streaming = ch->stream_mode = -1;
    ch->text_chunk_limit = ch->history_limit = CM_RT_UNSET;
}

static void chan_release(cm_rt_chan *ch)
{
    free(ch->channel), free(ch->account);
    free(ch->response_prefix), free(ch->ack_reaction), free(ch->api_root);
}

/* The channel level's values where the account has none. */
static cm_rc chan_inherit(cm_rt_chan *a, const cm_rt_chan *ch)
{
#define INH(f, unset)                                                                              \
    if (a->f == (unset)) a->f = ch->f
    INH(enabled, -1);
    INH(block_streaming, -1);
    INH(dm_policy, -1);
    INH(group_policy, -1);
    INH(reply_to_mode, -1);
    INH(chunk_mode, -1);
    INH(streaming, -1);
    INH(stream_mode, -1);
    INH(text_chunk_limit, CM_RT_UNSET);
    INH(history_limit, CM_RT_UNSET);
    INH(groups, NULL);
    INH(allow_from, NULL);
    INH(group_allow_from, NULL);
#undef INH
    if (!a->response_prefix && ch->response_prefix &&
        set_str(&a->response_prefix, ch->response_prefix))
        return CM_ENOMEM;
    if (!a->ack_reaction && ch->ack_reaction && set_str(&a->ack_reaction, ch->ack_reaction))
        return CM_ENOMEM;
    if (!a->api_root && ch->api_root && set_str(&a->api_root, ch->api_root)) return CM_ENOMEM;
    return CM_OK;
}

static cm_rc chan_push(cm_rtcfg *cfg, cm_rt_chan *ch)
{
    cm_rt_chan *nv = realloc(cfg->chans, (cfg->nchans + 1) * sizeof *nv);
    if (!nv) return CM_ENOMEM;
    cfg->chans = nv;
    cfg->chans[cfg->nchans++] = *ch;
    return CM_OK;
}

/* channels.<name> and its accounts. */
static cm_rc read_channels(ctx *c, const json_t *root, cm_rtcfg *cfg)
{
    const json_t *chs = json_object_get(root, "channels");
    if (!chs) return CM_OK;
    if (!json_is_object(chs))
        return cm_config_bad(c, root, "channels", "channels", "expected an object");
    const char *name;
    json_t *o;
    json_object_foreach((json_t *)chs, name, o)
    {
        char path[512];
        snprintf(path, sizeof path, "channels.%.200s", name);
        /* Only the channels clawmem runs: the others (slack, discord, …) are
         * QuantumClaw's, with shapes of their own (slack's streamMode is
         * replace|status_final|append), and no message of theirs comes here. */
        if (!json_is_object(o) || (strcmp(name, "telegram") && strcmp(name, "http"))) continue;
        cm_rt_chan ch;
        chan_init(&ch);
        cm_rc rc = walk(c, o, path, chan_fields, ARRAY_LEN(chan_fields), &ch);
        if (!rc && !(ch.channel = cm_strdup(name))) rc = CM_ENOMEM;
        if (!rc) rc = chan_push(cfg, &ch);
        if (rc) {
            chan_release(&ch);
            return rc;
        }
        size_t level = cfg->nchans - 1;
        const json_t *accs = json_object_get(o, "accounts");
        if (accs && !json_is_object(accs)) {
            snprintf(path, sizeof path, "channels.%.200s.accounts", name);
            return cm_config_bad(c, o, "accounts", path, "expected an object");
        }
        const char *an;
        json_t *ao;
        json_object_foreach((json_t *)accs, an, ao)
        {
            snprintf(path, sizeof path, "channels.%.200s.accounts.%.200s", name, an);
            if (json_is_null(ao)) continue;
            if (!json_is_object(ao)) return cm_config_bad(c, accs, an, path, "expected an object");
            cm_rt_chan a;
            chan_init(&a);
            rc = walk(c, ao, path, chan_fields, ARRAY_LEN(chan_fields), &a);
            if (!rc && (!(a.channel = cm_strdup(name)) || !(a.account = cm_strdup(an))))
                rc = CM_ENOMEM;
            if (!rc) rc = chan_inherit(&a, &cfg->chans[level]);
            if (!rc) rc = chan_push(cfg, &a);
            if (rc) {
                chan_release(&a);
                return rc;
            }
        }
    }
    return CM_OK;
}

/* agents.list[]: id, default, identity.{name,emoji}, model. */
static cm_rc read_agents(ctx *c, const json_t *root, cm_rtcfg *cfg)
{
    const json_t *list = json_object_get(json_object_get(root, "agents"), "list");
    if (!json_is_array(list)) return CM_OK; /* its kind is config.c's to check */
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e)
    {
        if (!json_is_object(e)) continue;
        static const rfield af[] = {
            {"id", R_STR, 0, 0, NULL, offsetof(cm_rt_agent, id)},
            {"default", R_BOOL, 0, 0, NULL, offsetof(cm_rt_agent, is_default)},
            {"identity.name", R_STR, 0, 0, NULL, offsetof(cm_rt_agent, name)},
            {"identity.emoji", R_STR, 0, 0, NULL, offsetof(cm_rt_agent, emoji)},
            {"model", R_MODEL, 0, 0, NULL, offsetof(cm_rt_agent, model)},
        };
        char path[64];
        snprintf(path, sizeof path, "agents.list[%zu]", i);
        cm_rt_agent a = {.is_default = -1};
        cm_rc rc = walk(c, e, path, af, ARRAY_LEN(af), &a);
        cm_rt_agent *nv = rc ? NULL : realloc(cfg->agents, (cfg->nagents + 1) * sizeof *nv);
        if (!rc && !nv) rc = CM_ENOMEM;
        if (rc) {
            free(a.id), free(a.name), free(a.emoji), free(a.model);
            return rc;
        }
        cfg->agents = nv;
        cfg->agents[cfg->nagents++] = a;
    }
    return CM_OK;
}

static void rtcfg_init(cm_rtcfg *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cm_rt_messages *m = &cfg->messages;
    m->ack_reaction_scope = m->remove_ack_after_reply = m->queue_mode = m->queue_drop = -1;
    m->queue_debounce_ms = m->queue_cap = m->inbound_debounce_ms = CM_RT_UNSET;
    m->group_history_limit = CM_RT_UNSET;
    cm_rt_session *s = &cfg->session;
    s->scope = s->dm_scope = s->typing_mode = s->reset_mode = -1;
    s->typing_interval_s = s->idle_minutes = s->reset_at_hour = s->reset_idle_minutes = CM_RT_UNSET;
    cm_rt_agent_defaults *d = &cfg->defaults;
    d->thinking_default = d->typing_mode = d->human_delay_mode = d->envelope_timestamp = -1;
    d->block_streaming_default = d->block_streaming_break = d->chunk_break = -1;
    d->timeout_s = d->context_tokens = d->typing_interval_s = CM_RT_UNSET;
    d->human_delay_min_ms = d->human_delay_max_ms = CM_RT_UNSET;
    d->chunk_min = d->chunk_max = d->coalesce_min = d->coalesce_max = CM_RT_UNSET;
    d->coalesce_idle_ms = CM_RT_UNSET;
    d->compaction_mode = d->flush_enabled = -1;
    d->reserve_tokens = d->keep_recent_tokens = d->reserve_tokens_floor = CM_RT_UNSET;
    d->flush_soft_threshold = d->flush_force_bytes = CM_RT_UNSET;
    cfg->gateway.port = CM_RT_UNSET;
    cfg->gateway.bind = cfg->gateway.auth_mode = cfg->gateway.control_ui_enabled = -1;
    cfg->gateway.reload_mode = -1;
    cfg->gateway.reload_debounce_ms = CM_RT_UNSET;
}

static void rtcfg_release(cm_rtcfg *cfg)
{
    free(cfg->messages.response_prefix), free(cfg->messages.ack_reaction);
    map_release(&cfg->messages.queue_by_channel);
    map_release(&cfg->messages.queue_debounce_by_channel);
    map_release(&cfg->messages.inbound_by_channel);
    free(cfg->session.main_key);
    free(cfg->defaults.model), free(cfg->defaults.workspace), free(cfg->defaults.user_timezone);
    free(cfg->defaults.envelope_timezone);
    free(cfg->defaults.flush_prompt), free(cfg->defaults.flush_system_prompt);
    for (size_t i = 0; i < cfg->nagents; i++) {
        cm_rt_agent *a = &cfg->agents[i];
        free(a->id), free(a->name), free(a->emoji), free(a->model);
    }
    free(cfg->agents);
    for (size_t i = 0; i < cfg->nchans; i++)
        chan_release(&cfg->chans[i]);
    free(cfg->chans);
    json_decref(cfg->root);
    memset(cfg, 0, sizeof *cfg);
}

/* Reads root's runtime keys into cfg (initialised). */
static cm_rc read_all(ctx *c, const json_t *root, cm_rtcfg *cfg)
{
    cm_rc rc = walk(c, root, "", top, ARRAY_LEN(top), cfg);
    if (!rc) rc = read_channels(c, root, cfg);
    if (!rc) rc = read_agents(c, root, cfg);
    return rc;
}

cm_rc cm_config_check_runtime(ctx *c, const json_t *root)
{
    cm_rtcfg scratch;
    rtcfg_init(&scratch);
    cm_rc rc = json_is_object(root) ? read_all(c, root, &scratch) : CM_OK;
    rtcfg_release(&scratch);
    return rc;
}

cm_rc cm_rtcfg_from_json(const json_t *root, cm_rtcfg **out, char *err, size_t errlen)
{
    *out = NULL;
    cm_rtcfg *cfg = malloc(sizeof *cfg);
    if (!cfg) return cm_seterr(err, errlen, CM_ENOMEM, "out of memory reading the config");
    rtcfg_init(cfg);
    json5_doc none = {0}; /* no positions: a merged tree */
    ctx c = {&none, "config", NULL, NULL, err, errlen, false, NULL, NULL};
    cm_rc rc = CM_OK;
    if (root) {
        if (!json_is_object(root)) {
            rc = cm_seterr(err, errlen, CM_ECONFIG, "config: expected an object at the top");
        } else {
            cfg->root = json_incref((json_t *)root);
            rc = read_all(&c, root, cfg);
        }
    } else if (!(cfg->root = json_object())) {
        rc = CM_ENOMEM;
    }
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory reading the config");
    if (rc) {
        rtcfg_release(cfg);
        free(cfg);
        return rc;
    }
    cfg->refs = 1;
    *out = cfg;
    return CM_OK;
}

cm_rtcfg *cm_rtcfg_ref(cm_rtcfg *c)
{
    if (c) __atomic_fetch_add(&c->refs, 1, __ATOMIC_RELAXED);
    return c;
}

void cm_rtcfg_unref(cm_rtcfg *c)
{
    if (!c || __atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) > 0) return;
    rtcfg_release(c);
    free(c);
}

const cm_rt_chan *cm_rtcfg_chan(const cm_rtcfg *c, const char *channel, const char *account)
{
    static const cm_rt_chan none = {.enabled = -1,
                                    .block_streaming = -1,
                                    .dm_policy = -1,
                                    .group_policy = -1,
                                    .reply_to_mode = -1,
                                    .chunk_mode = -1,
                                    .streaming = -1,
                                    .stream_mode = -1,
                                    .text_chunk_limit = CM_RT_UNSET,
                                    .history_limit = CM_RT_UNSET};
    const cm_rt_chan *level = NULL;
    const char *acc = account ? account : "default";
    for (size_t i = 0; c && channel && i < c->nchans; i++) {
        const cm_rt_chan *ch = &c->chans[i];
        if (strcmp(ch->channel, channel)) continue;
        if (!ch->account)
            level = ch;
        else if (!strcmp(ch->account, acc))
            return ch;
    }
    return level ? level : &none;
}

const cm_rt_agent *cm_rtcfg_agent(const cm_rtcfg *c, const char *agent_id)
{
    for (size_t i = 0; c && agent_id && i < c->nagents; i++)
        if (c->agents[i].id && !strcasecmp(c->agents[i].id, agent_id)) return &c->agents[i];
    return NULL;
}

const char *cm_rtcfg_model(const cm_rtcfg *c, const char *agent_id)
{
    const cm_rt_agent *a = cm_rtcfg_agent(c, agent_id);
    if (a && a->model) return a->model;
    return c ? c->defaults.model : NULL;
}
