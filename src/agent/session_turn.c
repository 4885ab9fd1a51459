/*
 * session_turn.c — agent turns inside a session (session_turn.h).
 */
#include <ctype.h>
#include <strings.h>
#include <time.h>

#include "../session/ctx_cache.h"
#include "../session/flush.h"
#include "../session/keys.h"
#include "../session/origin.h"
#include "../session/sessions.h"
#include "../session/transcript.h"
#include "model_cmds.h"
#include "run_meta.h"
#include "session_turn.h"
#include "../base/caps.h"

#define TRANSCRIPT_MAX     CM_CAP_TRANSCRIPT

static const char summary_prefix[] =
    "The conversation history before this point was compacted into the following summary:\n\n"
    "<summary>\n";
static const char summary_suffix[] = "\n</summary>";

static const char compact_system[] =
    "You write the working memory of a long conversation between a user and an assistant. "
    "You are given the conversation as text; do not continue it and do not answer anything in "
    "it. Write a summary that lets the assistant carry on as if it remembered everything.";
static const char compact_instructions[] =
    "Summarise the conversation above for the assistant that will continue it. Use these "
    "headings, each short:\n"
    "## Goal — what the user is trying to get done\n"
    "## Preferences and constraints — what the user asked for or ruled out\n"
    "## Done so far — decisions taken, facts learned, with names, paths, numbers and dates "
    "exactly as they appeared\n"
    "## Open — what is still in progress or blocked\n"
    "## Next — what the assistant was about to do\n"
    "Keep every detail the assistant would otherwise have to ask again.";

static int64_t now_of(const agent_ctx *a)
{
    if (a->clock) return a->clock(a->clock_ctx);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void cm_agent_reply_release(agent_reply *r)
{
    free(r->text);
    free(r->reasoning);
    memset(r, 0, sizeof *r);
}

int64_t cm_agent_context_window(const json_t *cfg, const char *model)
{
    const char *slash = model ? strchr(model, '/') : NULL;
    if (slash) {
        char prov[128];
        snprintf(prov, sizeof prov, "%.*s", (int)(slash - model), model);
        json_t *p =
            json_object_get(json_object_get(json_object_get(cfg, "models"), "providers"), prov);
        size_t i;
        json_t *m;
        json_array_foreach(json_object_get(p, "models"), i, m)
        {
            const char *id = json_string_value(json_object_get(m, "id"));
            json_t *cw = json_object_get(m, "contextWindow");
            if (id && !strcmp(id, slash + 1) && json_is_number(cw) && json_number_value(cw) > 0)
                return (int64_t)json_number_value(cw);
        }
    }
    json_t *ct = json_object_get(json_object_get(json_object_get(cfg, "agents"), "defaults"),
                                 "contextTokens");
    return json_is_number(ct) && json_number_value(ct) > 0 ? (int64_t)json_number_value(ct)
                                                           : 200000;
}

/* ---- history ---- */

/* The records the model's context is made of: from the last compaction's
 * first kept record on (cm_transcript_context_offset), so a turn reads the
 * same whatever the transcript's length; every record when there is no
 * compaction. *whole (may be NULL): they were read from the file's start
 * (every record it has, none when it does not exist yet). Parsed once per
 * session and kept (ctx_cache.h): a turn parses the lines appended since
 * the last one; the records are shared, read-only. */
static cm_rc read_records(const char *path, json_t **out, bool *whole, char *err, size_t errlen)
{
    bool w = true;
    cm_rc rc = cm_ctx_cache_read(path, TRANSCRIPT_MAX, out, &w, err, errlen);
    if (whole) *whole = w;
    return rc;
}

/* Index of the last compaction record, or -1. */
static long last_compaction(const json_t *recs)
{
    for (size_t i = json_array_size(recs); i-- > 0;) {
        const char *t = json_string_value(json_object_get(json_array_get(recs, i), "type"));
        if (t && !strcmp(t, "compaction")) return (long)i;
    }
    return -1;
}

/* The index where the context starts: the first kept record of the last
 * compaction (or 0), and that compaction's index in *comp (-1: none). */
static size_t context_start(const json_t *recs, long *comp)
{
    *comp = last_compaction(recs);
    if (*comp < 0) return 0;
    const char *kept =
        json_string_value(json_object_get(json_array_get(recs, (size_t)*comp), "firstKeptEntryId"));
    for (size_t i = 0; kept && i < (size_t)*comp; i++)
        if (!strcmp(json_string_value(json_object_get(json_array_get(recs, i), "id")) ?: "", kept))
            return i;
    return (size_t)*comp + 1;
}

static json_t *summary_message(const char *summary, json_t *ts)
{
    buf b = BUF_INIT;
    if (cm_buf_printf(&b, "%s%s%s", summary_prefix, summary ? summary : "", summary_suffix)) {
        cm_buf_release(&b);
        return NULL;
    }
    json_t *m =
        json_pack("{s:s,s:[{s:s,s:s}]}", "role", "user", "content", "type", "text", "text", b.data);
    if (m && ts) json_object_set(m, "timestamp", ts);
    cm_buf_release(&b);
    return m;
}

/* The model's view of recs: after the last compaction, its summary then the
 * kept messages; every message record otherwise. */
static json_t *history_of(const json_t *recs)
{
    json_t *out = json_array();
    long comp;
    size_t start = context_start(recs, &comp);
    if (comp >= 0) {
        json_t *c = json_array_get(recs, (size_t)comp);
        json_array_append_new(out, summary_message(json_string_value(json_object_get(c, "summary")),
                                                   json_object_get(c, "timestamp")));
    }
    for (size_t i = start; i < json_array_size(recs); i++) {
        json_t *r = json_array_get(recs, i);
        const char *t = json_string_value(json_object_get(r, "type"));
        if (t && !strcmp(t, "message") && json_object_get(r, "message"))
            json_array_append(out, json_object_get(r, "message"));
    }
    return out;
}

cm_rc cm_agent_session_history(const char *transcript, json_t **out, char *err, size_t errlen)
{
    json_t *recs;
    cm_rc rc = read_records(transcript, &recs, NULL, err, errlen);
    *out = rc ? NULL : history_of(recs);
    json_decref(recs);
    return rc ? rc : *out ? CM_OK : cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
}

/* ---- the session ---- */

typedef struct session {
    session_store st;
    char key[1100], sid[160];
    buf transcript;
} session;

static void session_release(session *s)
{
    cm_session_store_release(&s->st);
    cm_buf_release(&s->transcript);
}

/* Opens key's session: the entry noted (created when create; start, when
 * not NULL, makes the patch of that first change from the entry as it was,
 * NULL when missing), the transcript's path found. */
typedef json_t *(*start_fn)(const json_t *entry, void *ctx);
static cm_rc session_open_with(agent_ctx *a, const char *key, bool create, start_fn start,
                               void *start_ctx, int64_t now, session *s, char *err,
                               size_t errlen)
{
    cm_rc rc = CM_OK;
    json_t *patch = NULL;
    memset(s, 0, sizeof *s);
    buf k = BUF_INIT;
    if (!key || !*key || strlen(key) > 1000)
        return cm_seterr(err, errlen, CM_EINVAL, "a session key is needed");
    if (cm_session_store_key(&k, a->agent_id, key))
        return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    snprintf(s->key, sizeof s->key, "%s", k.data);
    cm_buf_release(&k);
    key = s->key;
    CHECK(cm_session_store_read(&s->st, a->store_path, err, errlen));
    json_t *e = cm_session_store_get(&s->st, key);
    if (!create && !e) FAIL(CM_ENOTFOUND, "no session %s", key);
    if (start && !(patch = start(e, start_ctx))) FAIL(CM_ENOMEM, "out of memory");
    CHECK(cm_session_note(&s->st, key, patch, now, s->sid, err, errlen));
    e = cm_session_store_get(&s->st, key);
    if (cm_session_transcript_of(&s->st, e, &s->transcript))
        FAIL(CM_ECORRUPT, "session %s has no valid sessionId", key);
out:
    json_decref(patch);
    if (rc) session_release(s);
    return rc;
}

static cm_rc session_open(agent_ctx *a, const char *key, bool create, session *s, char *err,
                          size_t errlen)
{
    return session_open_with(a, key, create, NULL, NULL, now_of(a), s, err, errlen);
}

/* A run's records after it: what QuantumClaw writes about its model before
 * the messages (cm_transcript_note_model; nothing when no model was
 * reached), then the messages, in one append (cm_transcript_note_turn).
 * recs: the context's records read for it; whole: they are the whole file. */
static cm_rc record_run(agent_ctx *a, session *s, const llm_outcome *oc, const json_t *recs,
                        bool whole, const json_t *msgs, int64_t now, char *err, size_t errlen)
{
    const char *slash = strchr(oc->model, '/');
    char prov[192];
    transcript_model m;
    if (slash) {
        snprintf(prov, sizeof prov, "%.*s", (int)(slash - oc->model), oc->model);
        m = (transcript_model){
            prov, slash + 1, oc->api[0] ? oc->api : "openai-completions",
            cm_agent_thinking_level(a->config, cm_session_store_get(&s->st, s->key), oc->model)};
    }
    return cm_transcript_note_turn(s->transcript.data, s->sid, a->workspace, slash ? &m : NULL,
                                   recs, whole, msgs, now, err, errlen);
}

/* A run's lifecycle in the entry, as QuantumClaw's gateway keeps it: at
 * the start status "running", startedAt, endedAt and runtimeMs removed,
 * abortedLastRun false, systemSent true (the system prompt goes out); at
 * the end (status "done", "failed" or "killed") endedAt, runtimeMs and
 * abortedLastRun (true when killed). Added to patch. */
static cm_rc lifecycle(json_t *patch, const char *status, int64_t started, int64_t now)
{
    bool start = !strcmp(status, "running");
    bool killed = !strcmp(status, "killed");
    if (json_object_set_new(patch, "status", json_string(status)) ||
        json_object_set_new(patch, "startedAt", json_integer(started)) ||
        json_object_set_new(patch, "endedAt", start ? json_null() : json_integer(now)) ||
        json_object_set_new(patch, "runtimeMs",
                            start ? json_null() : json_integer(now > started ? now - started : 0)) ||
        json_object_set_new(patch, "abortedLastRun", json_boolean(killed)) ||
        (start && json_object_set_new(patch, "systemSent", json_true())))
        return CM_ENOMEM;
    return CM_OK;
}

/* A turn's first change to the entry (made as its session is opened, in
 * the same change that creates a new one): the origin and delivery route of
 * its message (when the caller tells it) and the run's start. */
typedef struct start_ctx {
    const agent_inbound *ib;
    int64_t started;
} start_ctx;

static json_t *start_patch(const json_t *entry, void *vctx)
{
    const start_ctx *c = vctx;
    const agent_inbound *ib = c->ib;
    json_t *p = NULL;
    if (ib && ib->channel && ib->peer) {
        session_origin so = {ib->channel, ib->account_id,         ib->peer,         ib->thread_id,
                             ib->chat_type, ib->conversation_label, ib->group_subject};
        p = cm_session_origin_patch(entry, &so);
    }
    if (!p) p = json_object();
    if (p && lifecycle(p, "running", c->started, c->started)) {
        json_decref(p);
        p = NULL;
    }
    return p;
}

/* Notes the end of a run that did not complete (failed or killed). */
static void record_end(agent_ctx *a, session *s, const char *status, int64_t started)
{
    char e[256];
    json_t *p = json_object();
    if (p && !lifecycle(p, status, started, now_of(a)))
        cm_session_note(&s->st, s->key, p, now_of(a), NULL, e, sizeof e);
    json_decref(p);
}

/* The entry after a turn: token counts, model, the automatic pin, the
 * run's end, contextTokens and estimatedCostUsd. */
static cm_rc record_turn(agent_ctx *a, session *s, const agent_turn_out *t, const llm_pin *pin,
                         int64_t started, int64_t now, char *err, size_t errlen)
{
    const llm_usage *u = &t->usage;
    int64_t prompt = u->input + u->cache_read + u->cache_write;
    const char *model = t->outcome.model, *slash = strchr(model, '/');
    char prov[192];
    snprintf(prov, sizeof prov, "%.*s", slash ? (int)(slash - model) : 0, model);
    json_t *patch = json_pack(
        "{s:I,s:b,s:I,s:I,s:I,s:I,s:s,s:s}", "totalTokens", (json_int_t)prompt, "totalTokensFresh",
        prompt > 0, "inputTokens", (json_int_t)u->input, "outputTokens", (json_int_t)u->output,
        "cacheRead", (json_int_t)u->cache_read, "cacheWrite", (json_int_t)u->cache_write, "model",
        slash ? slash + 1 : model, "modelProvider", prov);
    if (!patch || lifecycle(patch, "done", started, now) ||
        json_object_set_new(patch, "contextTokens",
                            json_integer(cm_agent_context_tokens(a->config, model))))
        goto oom;
    json_t *e = cm_session_store_get(&s->st, s->key);
    double cost;
    if (cm_agent_run_cost(a->config, model, u, &cost)) {
        json_t *prev = json_object_get(e, "estimatedCostUsd");
        if (json_is_number(prev) && json_number_value(prev) > 0) cost += json_number_value(prev);
        if (json_object_set_new(patch, "estimatedCostUsd", json_real(cost))) goto oom;
    }
    const char *src = json_string_value(json_object_get(e, "authProfileOverrideSource"));
    if (pin && pin->profile[0] && !(src && !strcmp(src, "user"))) {
        json_t *cc = json_object_get(e, "compactionCount");
        json_object_set_new(patch, "authProfileOverride", json_string(pin->profile));
        json_object_set_new(patch, "authProfileOverrideSource", json_string("auto"));
        json_object_set_new(patch, "authProfileOverrideCompactionCount",
                            json_integer(json_is_integer(cc) ? json_integer_value(cc) : 0));
    }
    cm_rc rc = cm_session_note(&s->st, s->key, patch, now, NULL, err, errlen);
    json_decref(patch);
    return rc;
oom:
    json_decref(patch);
    return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
}

/* The session's pin from its entry. */
static void pin_of(const json_t *e, llm_pin *pin)
{
    memset(pin, 0, sizeof *pin);
    const char *p = json_string_value(json_object_get(e, "authProfileOverride"));
    const char *src = json_string_value(json_object_get(e, "authProfileOverrideSource"));
    if (p) snprintf(pin->profile, sizeof pin->profile, "%s", p);
    pin->user = src && !strcmp(src, "user");
}

/* About 4 characters a token: a message's content as JSON. */
static int64_t estimate_tokens(const json_t *msg)
{
    char *t = json_dumps(json_object_get(msg, "content"), JSON_COMPACT | JSON_ENCODE_ANY);
    int64_t n = t ? (int64_t)(strlen(t) + 3) / 4 : 0;
    free(t);
    return n;
}

/* ---- the memory flush ---- */

#define FLUSH_TRIMS 5 /* shorter histories tried when the flush itself overflows */

typedef enum flush_mode {
    FLUSH_IF_DUE,           /* before a turn: when cm_flush_decide says so */
    FLUSH_FORCE,            /* asked for: whenever memory is writable (an error otherwise) */
    FLUSH_BEFORE_COMPACTION /* a compaction follows: once per cycle, when enabled and writable */
} flush_mode;

/* The most recent part of hist (a new array) of about max_tokens, starting
 * at a user message so a tool call and its result stay together; always
 * shorter than hist (empty when no later user message starts one). */
static json_t *recent_part(const json_t *hist, int64_t max_tokens)
{
    size_t n = json_array_size(hist), from = n;
    int64_t sum = 0;
    for (size_t i = n; i-- > 0;) {
        sum += estimate_tokens(json_array_get(hist, i));
        if (sum > max_tokens) break;
        from = i;
    }
    if (from == 0) from = 1; /* strictly shorter */
    while (from < n) {
        const char *role = json_string_value(json_object_get(json_array_get(hist, from), "role"));
        if (role && !strcmp(role, "user")) break;
        from++;
    }
    json_t *out = json_array();
    for (size_t i = from; out && i < n; i++)
        json_array_append(out, json_array_get(hist, i));
    return out;
}

static cm_rc flush_locked(agent_ctx *a, session *s, const char *prompt, flush_mode mode,
                          agent_reply *out, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    flush_settings fs = {0};
    json_t *recs = NULL, *hist = NULL;
    agent_turn_out t = {0};
    buf target = BUF_INIT, fprompt = BUF_INIT;
    CHECK(cm_flush_settings_init(&fs, a->config, err, errlen));
    json_t *e = cm_session_store_get(&s->st, s->key);
    llm_turn probe = {NULL, false, NULL};
    buf chain = BUF_INIT;
    cm_llm_runner_chain(a->runner, &probe, &chain);
    char first[192] = "";
    snprintf(first, sizeof first, "%.*s", (int)strcspn(chain.data, ","), chain.data);
    cm_buf_release(&chain);
    bool can_write = a->writable && a->engine && cm_engine_writable(a->engine);
    flush_input in = {
        e, s->transcript.data, prompt, cm_agent_context_window(a->config, first), can_write, false};
    flush_decision d;
    cm_flush_decide(&fs, &in, &d);
    if (mode == FLUSH_IF_DUE && !d.due) goto out;
    if (mode == FLUSH_FORCE && !can_write)
        FAIL(CM_EINVAL, "the memory flush needs a writable workspace and memory writes enabled");
    if (mode == FLUSH_BEFORE_COMPACTION) {
        json_t *cc = json_object_get(e, "compactionCount"),
               *fc = json_object_get(e, "memoryFlushCompactionCount");
        if (!fs.enabled || !can_write ||
            (json_is_integer(fc) &&
             json_integer_value(fc) == (json_is_integer(cc) ? json_integer_value(cc) : 0)))
            goto out; /* off, or already flushed in this cycle */
    }
    int64_t now = now_of(a);
    const char *tz = json_string_value(json_object_get(
        json_object_get(json_object_get(a->config, "agents"), "defaults"), "userTimezone"));
    if (cm_flush_target_path(now, tz, &target) || cm_flush_prompt_for(fs.prompt, now, tz, &fprompt))
        FAIL(CM_ENOMEM, "out of memory");
    bool whole = false;
    CHECK(read_records(s->transcript.data, &recs, &whole, err, errlen));
    hist = history_of(recs);
    llm_pin pin;
    pin_of(e, &pin);
    agent_tools tools = {.engine = a->engine,
                         .session_key = s->key,
                         .allow_write = true,
                         .write_only_to = target.data}; /* the flush writes only there */
    agent_turn_in ti = {a->runner,
                        {NULL, false, &pin},
                        fs.system_prompt,
                        hist,
                        fprompt.data,
                        now,
                        0,
                        NULL,
                        NULL,
                        NULL,
                        NULL,
                        NULL,
                        NULL,
                        NULL};
    /* the whole history first; when even that overflows the model, the
     * most recent part that fits (half as much each time) */
    int64_t budget = 0;
    for (size_t i = 0; i < json_array_size(hist); i++)
        budget += estimate_tokens(json_array_get(hist, i));
    for (int trim = 0;; trim++) {
        cm_agent_turn_out_release(&t);
        rc = cm_agent_turn_run(&tools, &ti, &t, err, errlen);
        if (rc != CM_ETOOBIG || trim == FLUSH_TRIMS || !json_array_size(hist)) break;
        budget /= 2;
        json_t *shorter = recent_part(hist, budget);
        if (!shorter) FAIL(CM_ENOMEM, "out of memory");
        json_decref(hist);
        ti.history = hist = shorter;
    }
    if (rc) goto out;
    CHECK(record_run(a, s, &t.outcome, recs, whole, t.messages, now, err, errlen));
    /* the bookkeeping: once per compaction cycle, and the context it saw */
    char hash[17] = "";
    json_t *tail = cm_flush_transcript_tail(s->transcript.data, 10);
    if (json_array_size(tail)) cm_flush_context_hash(tail, hash);
    json_decref(tail);
    e = cm_session_store_get(&s->st, s->key);
    json_t *cc = json_object_get(e, "compactionCount");
    json_t *patch =
        json_pack("{s:I,s:I}", "memoryFlushAt", (json_int_t)now_of(a), "memoryFlushCompactionCount",
                  (json_int_t)(json_is_integer(cc) ? json_integer_value(cc) : 0));
    if (patch && hash[0]) json_object_set_new(patch, "memoryFlushContextHash", json_string(hash));
    rc = patch ? cm_session_note(&s->st, s->key, patch, now_of(a), NULL, err, errlen) : CM_ENOMEM;
    json_decref(patch);
    if (rc) goto out;
    out->flushed = true;
    out->tool_calls += t.tool_calls;
out:
    cm_agent_turn_out_release(&t);
    json_decref(recs);
    json_decref(hist);
    cm_flush_settings_release(&fs);
    cm_buf_release(&target);
    cm_buf_release(&fprompt);
    return rc;
}

cm_rc cm_agent_session_flush(agent_ctx *a, const char *key, const char *prompt, bool force,
                             agent_reply *out, char *err, size_t errlen)
{
    session s;
    memset(out, 0, sizeof *out);
    cm_rc rc = session_open(a, key, false, &s, err, errlen);
    if (!rc) rc = flush_locked(a, &s, prompt, force ? FLUSH_FORCE : FLUSH_IF_DUE, out, err, errlen);
    if (!out->text) out->text = cm_strdup("");
    session_release(&s);
    return rc;
}

/* ---- compaction ---- */

/* The conversation as text for the summariser (so it does not continue it). */
static cm_rc serialize(const json_t *recs, size_t from, size_t to, buf *out)
{
    cm_rc rc = CM_OK;
    for (size_t i = from; i < to && !rc; i++) {
        json_t *r = json_array_get(recs, i);
        const char *t = json_string_value(json_object_get(r, "type"));
        json_t *m = json_object_get(r, "message");
        if (!t || strcmp(t, "message") || !m) continue;
        const char *role = json_string_value(json_object_get(m, "role"));
        json_t *content = json_object_get(m, "content");
        const char *label = !role                        ? "?"
                            : !strcmp(role, "user")      ? "User"
                            : !strcmp(role, "assistant") ? "Assistant"
                                                         : "Tool result";
        rc = cm_buf_printf(out, "[%s]: ", label);
        if (json_is_string(content)) {
            if (!rc) rc = cm_buf_adds(out, json_string_value(content));
        } else {
            size_t k;
            json_t *b;
            json_array_foreach(content, k, b)
            {
                const char *bt = json_string_value(json_object_get(b, "type"));
                if (!rc && bt && !strcmp(bt, "text"))
                    rc = cm_buf_printf(out, "%s ",
                                       json_string_value(json_object_get(b, "text")) ?: "");
                if (!rc && bt && !strcmp(bt, "toolCall")) {
                    char *args =
                        json_dumps(json_object_get(b, "arguments"), JSON_COMPACT | JSON_ENCODE_ANY);
                    rc = cm_buf_printf(out, "(calls %s %s) ",
                                       json_string_value(json_object_get(b, "name")) ?: "",
                                       args ? args : "{}");
                    free(args);
                }
            }
        }
        if (!rc) rc = cm_buf_addc(out, '\n');
    }
    return rc;
}

/* Where a compaction of recs (the context from start) cuts: the first kept
 * record, a user message; n (the records' count) when there is nothing
 * before one to summarise. Walks back from the end until keep_recent tokens
 * (compaction.keepRecentTokens) are kept, then back to a user message: the
 * cut never separates a call and its result (pi-coding-agent may cut inside
 * a turn and summarise its prefix apart; clawmem keeps the whole turn). */
static size_t compact_cut(const json_t *recs, size_t start, int64_t keep_recent)
{
    size_t n = json_array_size(recs);
    int64_t kept = 0;
    size_t cut = n;
    for (size_t i = n; i-- > start;) {
        json_t *m = json_object_get(json_array_get(recs, i), "message");
        if (!m) continue;
        kept += estimate_tokens(m);
        if (kept >= keep_recent) {
            cut = i;
            break;
        }
    }
    if (cut == n) cut = start; /* everything fits: keep only from the last user message */
    size_t at = n;
    for (size_t i = cut == start ? n : cut + 1; i-- > start;) {
        json_t *m = json_object_get(json_array_get(recs, i), "message");
        const char *role = json_string_value(json_object_get(m, "role"));
        if (role && !strcmp(role, "user")) {
            at = i;
            break;
        }
    }
    return at <= start ? n : at;
}

static cm_rc compact_locked(agent_ctx *a, session *s, const char *instructions,
                            int64_t keep_recent, agent_reply *out, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    json_t *recs = NULL;
    buf text = BUF_INIT;
    llm_response resp = {0};
    int64_t before = 0;
    CHECK(read_records(s->transcript.data, &recs, NULL, err, errlen));
    long comp;
    size_t start = context_start(recs, &comp), n = json_array_size(recs);
    size_t at = compact_cut(recs, start, keep_recent);
    if (at == n) {
        out->skipped = "no real conversation messages";
        FAIL(CM_EINVAL, "session %s has nothing to compact yet", s->key);
    }
    for (size_t i = start; i < n; i++) {
        json_t *m = json_object_get(json_array_get(recs, i), "message");
        if (m) before += estimate_tokens(m);
    }
    const char *prev =
        comp >= 0
            ? json_string_value(json_object_get(json_array_get(recs, (size_t)comp), "summary"))
            : NULL;
    CHECK(cm_buf_adds(&text, "<conversation>\n") ? CM_ENOMEM : CM_OK);
    if (serialize(recs, start, at, &text) || cm_buf_adds(&text, "</conversation>\n\n"))
        FAIL(CM_ENOMEM, "out of memory");
    if (prev && cm_buf_printf(&text,
                              "<previous-summary>\n%s\n</previous-summary>\n\nFold the previous "
                              "summary into the new one.\n\n",
                              prev))
        FAIL(CM_ENOMEM, "out of memory");
    if (cm_buf_adds(&text, compact_instructions)) FAIL(CM_ENOMEM, "out of memory");
    if (instructions && *instructions &&
        cm_buf_printf(&text, "\n\nThe user asked this summary to pay attention to:\n%s",
                      instructions))
        FAIL(CM_ENOMEM, "out of memory");
    llm_message um = {LLM_USER, text.data, NULL, 0, NULL, NULL, false, NULL, 0, NULL, NULL, NULL};
    llm_request rq = {NULL, compact_system, &um,  1,    NULL, 0,    0,   true,
                      NULL, NULL,           NULL, NULL, NULL, NULL, NULL, 0, NULL, false,
                      false, false};
    json_t *e = cm_session_store_get(&s->st, s->key);
    llm_pin pin;
    pin_of(e, &pin);
    llm_turn lt = {NULL, false, &pin};
    llm_outcome oc;
    CHECK(cm_llm_run(a->runner, &lt, &rq, NULL, NULL, &resp, &oc, err, errlen));
    if (!resp.text.len) FAIL(CM_EIO, "the model returned an empty summary");
    const char *first_kept = json_string_value(json_object_get(json_array_get(recs, at), "id"));
    json_t *f = json_pack("{s:s,s:s,s:I}", "summary", resp.text.data, "firstKeptEntryId",
                          first_kept ? first_kept : "", "tokensBefore", (json_int_t)before);
    int64_t now = now_of(a);
    rc = f ? cm_transcript_append(s->transcript.data, s->sid, a->workspace, "compaction", f, now,
                                  NULL, err, errlen)
           : CM_ENOMEM;
    json_decref(f);
    if (rc) goto out;
    int64_t after =
        (int64_t)(resp.text.len + strlen(summary_prefix) + strlen(summary_suffix) + 3) / 4;
    for (size_t i = at; i < n; i++) {
        json_t *m = json_object_get(json_array_get(recs, i), "message");
        if (m) after += estimate_tokens(m);
    }
    CHECK(cm_session_compacted(&s->st, s->key, after, now, err, errlen));
    out->compacted = true;
    out->tokens_before = before;
    out->tokens_after = after;
out:
    cm_llm_response_release(&resp);
    json_decref(recs);
    cm_buf_release(&text);
    return rc;
}

/* Every compaction (before a turn's retry, after a turn, asked for) comes
 * after the memory flush of its cycle, run with the history it is about to
 * summarise; a flush that fails does not stop the compaction. */
static cm_rc compact_flushed(agent_ctx *a, session *s, const char *instructions, agent_reply *out,
                             char *err, size_t errlen)
{
    char ferr[512];
    agent_reply fr = {0};
    json_t *recs = NULL;
    long comp;
    flush_settings fs;
    cm_rc rc = cm_flush_settings_init(&fs, a->config, err, errlen);
    if (rc) return rc;
    int64_t keep_recent = fs.keep_recent;
    cm_flush_settings_release(&fs);
    /* nothing to summarise: no flush either (it would only add its own turn) */
    rc = read_records(s->transcript.data, &recs, NULL, err, errlen);
    if (!rc && compact_cut(recs, context_start(recs, &comp), keep_recent) ==
                   json_array_size(recs)) {
        out->skipped = "no real conversation messages";
        rc = cm_seterr(err, errlen, CM_EINVAL, "session %s has nothing to compact yet", s->key);
    }
    json_decref(recs);
    if (rc) return rc;
    if (flush_locked(a, s, NULL, FLUSH_BEFORE_COMPACTION, &fr, ferr, sizeof ferr) == CM_OK &&
        fr.flushed)
        out->flushed = true;
    cm_agent_reply_release(&fr);
    return compact_locked(a, s, instructions, keep_recent, out, err, errlen);
}

cm_rc cm_agent_session_compact(agent_ctx *a, const char *key, agent_reply *out, char *err,
                               size_t errlen)
{
    return cm_agent_session_compact_with(a, key, NULL, out, err, errlen);
}

cm_rc cm_agent_session_compact_with(agent_ctx *a, const char *key, const char *instructions,
                                    agent_reply *out, char *err, size_t errlen)
{
    session s;
    memset(out, 0, sizeof *out);
    cm_rc rc = session_open(a, key, false, &s, err, errlen);
    if (!rc) rc = compact_flushed(a, &s, instructions, out, err, errlen);
    if (!out->text) out->text = cm_strdup("");
    session_release(&s);
    return rc;
}

/* ---- the turn ---- */

static bool first_message_time(void *ctx, int line, json_t *r)
{
    (void)line;
    json_t *ts = json_object_get(json_object_get(r, "message"), "timestamp");
    if (!json_is_integer(ts) || json_integer_value(ts) <= 0) return true;
    *(int64_t *)ctx = json_integer_value(ts);
    return false;
}

/* When the session started: its first message's timestamp (read from the
 * transcript's head, however long it is; from recs when they are the whole
 * file), else now. */
static int64_t session_start(const agent_ctx *a, const char *transcript, const json_t *recs,
                             bool whole)
{
    int64_t t = 0;
    char err[256];
    if (whole) {
        size_t i;
        json_t *r;
        json_array_foreach((json_t *)recs, i, r)
            if (!first_message_time(&t, (int)i + 1, r)) break;
    } else {
        cm_transcript_read_from(transcript, 0, SIZE_MAX, first_message_time, &t, err, sizeof err);
    }
    return t > 0 ? t : now_of(a);
}

/* The session's reasoningLevel (off when unset or unknown). */
static agent_reasoning reasoning_of(const json_t *entry)
{
    int r = cm_agent_reasoning_parse(json_string_value(json_object_get(entry, "reasoningLevel")));
    return r < 0 ? AGENT_REASONING_OFF : (agent_reasoning)r;
}

/* Reasoning streamed to the caller as the whole formatted draft so far. */
typedef struct reason_stream {
    buf raw, shown;
    llm_delta_fn fn;
    void *ctx;
} reason_stream;

static void on_reasoning(void *ctx, const char *text, size_t n)
{
    reason_stream *r = ctx;
    if (cm_buf_add(&r->raw, text, n)) return;
    cm_buf_reset(&r->shown);
    if (cm_agent_reasoning_format(r->raw.data, &r->shown) == CM_OK && r->shown.len)
        r->fn(r->ctx, r->shown.data, r->shown.len);
}

/* The reasoning effort of a turn's request to model (llm_request.effort). */
typedef struct effort_ctx {
    const json_t *config;
    char level[16]; /* the session's thinkingLevel ("": unset) */
} effort_ctx;

static const char *effort_of(void *ctx, const char *model)
{
    const effort_ctx *e = ctx;
    return cm_agent_thinking_effort(e->config, e->level[0] ? e->level : NULL, model);
}

cm_rc cm_agent_session_turn(agent_ctx *a, const char *key, const char *prompt, const char *model,
                            llm_delta_fn on_delta, void *ctx, agent_reply *out, char *err,
                            size_t errlen)
{
    agent_turn_opts o = {prompt, model, on_delta, ctx, NULL, NULL, NULL, NULL};
    return cm_agent_session_turn_opts(a, key, &o, out, err, errlen);
}

cm_rc cm_agent_session_turn_opts(agent_ctx *a, const char *key, const agent_turn_opts *o,
                                 agent_reply *out, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    session s;
    json_t *recs = NULL, *hist = NULL;
    agent_turn_out t = {0};
    buf sys = BUF_INIT;
    reason_stream rs = {BUF_INIT, BUF_INIT, o->on_reasoning, o->reasoning_ctx};
    const char *prompt = o->prompt, *model = o->model;
    int64_t started = 0;
    bool running = false; /* the entry says "running": its end is to be recorded */
    bool whole = false;   /* recs are the whole transcript */
    memset(out, 0, sizeof *out);
    /* the session, where the message came from and the run's start: one
     * change to the entry */
    started = now_of(a);
    start_ctx sc = {o->inbound, started};
    CHECK(session_open_with(a, key, true, start_patch, &sc, started, &s, err, errlen));
    running = true;
    out->reasoning_level = reasoning_of(cm_session_store_get(&s.st, s.key));
    /* the session's model override (/model, sessions.patch model, as
     * QuantumClaw keeps it: providerOverride + modelOverride) when the
     * caller gave none; one agents.defaults.models no longer allows is
     * cleared, as 2026.3.22 clears it */
    char ovr[320];
    if (!model) {
        json_t *reset = NULL;
        char rerr[256];
        CHECK(cm_agent_model_override(a, cm_session_store_get(&s.st, s.key), ovr, &reset));
        if (reset) cm_session_note(&s.st, s.key, reset, now_of(a), NULL, rerr, sizeof rerr);
        json_decref(reset);
        if (ovr[0]) model = ovr;
    }
    /* the memory flush before the turn, when due; its failure does not stop the turn */
    char ferr[512];
    agent_reply fr = {0};
    if (flush_locked(a, &s, prompt, FLUSH_IF_DUE, &fr, ferr, sizeof ferr) == CM_OK && fr.flushed)
        out->flushed = true;
    for (int attempt = 0;; attempt++) {
        json_decref(recs);
        json_decref(hist);
        cm_agent_turn_out_release(&t);
        CHECK(read_records(s.transcript.data, &recs, &whole, err, errlen));
        hist = history_of(recs);
        json_t *e = cm_session_store_get(&s.st, s.key);
        llm_pin pin;
        pin_of(e, &pin);
        agent_tools tools = {.engine = a->engine,
                             .session_key = s.key,
                             .allow_write = a->engine && cm_engine_writable(a->engine),
                             .workspace = a->workspace,
                             .fs_write = a->writable,
                             .policy = a->tools,
                             .store_path = a->store_path,
                             .config = a->config,
                             .agent_id = a->agent_id,
                             .now_ms = now_of(a),
                             .web = a->web,
                             .exec = a->exec,
                             .trusted = !o->inbound || o->inbound->trusted_sender,
                             .hooks = o->hooks};
        agent_prompt_in pi = {.config = a->config,
                              .workspace = a->workspace,
                              .agent_id = a->agent_id,
                              .session_key = s.key,
                              .session_start_ms = session_start(a, s.transcript.data, recs, whole),
                              .memory_tools = a->engine != NULL,
                              .memory_write = tools.allow_write,
                              .reasoning = out->reasoning_level,
                              .inbound = o->inbound};
        llm_tool_def offered[AGENT_TOOLS_MAX];
        const char *names[AGENT_TOOLS_MAX];
        pi.n_tools = cm_agent_tools_offered(&tools, offered, AGENT_TOOLS_MAX);
        for (size_t k = 0; k < pi.n_tools; k++)
            names[k] = offered[k].name;
        pi.tools = names;
        pi.model = model;
        cm_buf_reset(&sys);
        if (cm_agent_system_prompt(&pi, &sys)) FAIL(CM_ENOMEM, "out of memory");
        bool stream = out->reasoning_level == AGENT_REASONING_STREAM && rs.fn;
        /* the session's /think level, per model tried (run_meta.h) */
        effort_ctx ec = {a->config, ""};
        snprintf(ec.level, sizeof ec.level, "%s",
                 json_string_value(json_object_get(e, "thinkingLevel")) ?: "");
        agent_turn_in ti = {a->runner,
                            {model, false, &pin},
                            sys.data,
                            hist,
                            prompt,
                            now_of(a),
                            0,
                            o->on_delta,
                            o->ctx,
                            stream ? on_reasoning : NULL,
                            stream ? &rs : NULL,
                            o->hooks,
                            effort_of,
                            &ec};
        rc = cm_agent_turn_run(&tools, &ti, &t, err, errlen);
        if (rc == CM_ECANCELED && t.messages) {
            /* aborted: the user message and the completed steps stay */
            char aerr[256];
            record_run(a, &s, &t.outcome, recs, whole, t.messages, now_of(a), aerr, sizeof aerr);
            goto out; /* recorded as killed */
        }
        if (rc == CM_ETOOBIG && attempt == 0) {
            /* the prompt is over the context: compact, then once more */
            agent_reply cr = {0};
            char cerr[256];
            if (compact_flushed(a, &s, NULL, &cr, cerr, sizeof cerr) == CM_OK) {
                out->compacted = true;
                out->flushed |= cr.flushed;
                continue;
            }
            out->flushed |= cr.flushed;
            rc = CM_ETOOBIG; /* err still says the prompt was too long */
        }
        if (rc) goto out;
        int64_t now = now_of(a);
        CHECK(record_run(a, &s, &t.outcome, recs, whole, t.messages, now, err, errlen));
        CHECK(record_turn(a, &s, &t, &pin, started, now, err, errlen));
        running = false;
        break;
    }
    out->silent = cm_flush_is_silent(t.reply);
    out->text = cm_strdup(out->silent ? "" : t.reply);
    if (!out->text) FAIL(CM_ENOMEM, "out of memory");
    {
        buf why = BUF_INIT;
        if (out->reasoning_level == AGENT_REASONING_ON && !out->silent &&
            cm_agent_reasoning_format(t.reasoning, &why)) {
            cm_buf_release(&why);
            FAIL(CM_ENOMEM, "out of memory");
        }
        out->reasoning = why.data ? cm_buf_detach(&why) : cm_strdup("");
        if (!out->reasoning) FAIL(CM_ENOMEM, "out of memory");
    }
    snprintf(out->model, sizeof out->model, "%s", t.outcome.model);
    out->usage = t.usage;
    out->tool_calls = t.tool_calls;
    /* compaction when the context has grown past the window less the reserve
     * (pi-coding-agent's shouldCompact with QuantumClaw's reserveTokens) */
    flush_settings fs;
    if (cm_flush_settings_init(&fs, a->config, ferr, sizeof ferr) == CM_OK) {
        int64_t used = t.usage.input + t.usage.cache_read + t.usage.cache_write + t.usage.output;
        if (used > cm_agent_context_window(a->config, t.outcome.model) - fs.reserve_tokens) {
            agent_reply cr = {0};
            if (compact_flushed(a, &s, NULL, &cr, ferr, sizeof ferr) == CM_OK)
                out->compacted = true;
            out->flushed |= cr.flushed;
        }
        cm_flush_settings_release(&fs);
    }
out:
    if (running) record_end(a, &s, rc == CM_ECANCELED ? "killed" : "failed", started);
    if (!out->text) out->text = cm_strdup("");
    if (!out->reasoning) out->reasoning = cm_strdup("");
    cm_agent_turn_out_release(&t);
    json_decref(recs);
    json_decref(hist);
    session_release(&s);
    cm_buf_release(&sys);
    cm_buf_release(&rs.raw);
    cm_buf_release(&rs.shown);
    return rc;
}
