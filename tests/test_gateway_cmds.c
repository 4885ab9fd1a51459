/*
 * test_gateway_cmds.c — the session commands through the running gateway:
 * a Telegram chat (fake_telegram.c) to the real agents over a model
 * stand-in (a fakeserver handler) that plays the agent (with reasoning when
 * asked), the memory flush (it writes every courier code it sees) and the
 * summariser. /compact flushes, then compacts, and answers as 2026.3.22
 * does; a failing flush does not stop it; a group member not authorized
 * for commands gets nothing. /think sets thinkingLevel and the next request
 * asks for that reasoning_effort; /reasoning stream puts the reasoning in a
 * preview of its own above the answer; /reasoning on sends it first.
 * /model shows, sets (in full, by alias, the closest allowed) and clears
 * the session's model as 2026.3.22 does, and the next turn asks it;
 * /models lists; both behind the same gate.
 */
#include <dirent.h>
#include <jansson.h>
#include <pthread.h>
#include <unistd.h>

#include "../src/agent/session_cmds.h"
#include "../src/tools/status_card.h"
#include "../src/base/fs.h"
#include "../src/gateway/channels/telegram.h"
#include "../src/gateway/core/runtime.h"
#include "../src/gateway/gateway_int.h"
#include "../src/session/sessions.h"
#include "fake_telegram.h"
#include "fakeserver.h"
#include "test.h"

#define GEAR "\xe2\x9a\x99\xef\xb8\x8f"

/* ---- the model stand-in ---------------------------------------------------- */

typedef struct standin {
    pthread_mutex_t mu;
    bool flush_fails; /* flush requests answered 404 */
    const char *why;  /* the turns' reasoning (reasoning_content first), or NULL */
    int flushes, summaries, turns;
    char order[64]; /* 'F' flush, 'S' summary, 'T' turn */
    int n;
    char *last_summary; /* the last summary request's body */
    char *last_turn;    /* the last turn request's body */
} standin;

static void sse_str(buf *b, const char *field, const char *text, const char *finish)
{
    json_t *t = json_string(text);
    char *q = json_dumps(t, JSON_ENCODE_ANY);
    cm_buf_printf(b, "data: {\"choices\":[{\"index\":0,\"delta\":{\"%s\":%s}%s%s%s}]}\n\n", field,
                  q, finish ? ",\"finish_reason\":\"" : "", finish ? finish : "",
                  finish ? "\"" : "");
    free(q);
    json_decref(t);
}

static char *sse_end(buf *b, size_t *len)
{
    cm_buf_adds(b, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":"
                   "10,\"total_tokens\":110}}\n\ndata: [DONE]\n\n");
    *len = b->len;
    return cm_buf_detach(b);
}

static bool standin_answer(void *ctx, const char *method, const char *path, const char *body,
                           size_t body_len, int *status, const char **ctype, char **out,
                           size_t *out_len)
{
    standin *s = ctx;
    (void)method;
    if (!strstr(path, "/chat/completions")) return false;
    json_t *doc = json_loadb(body, body_len, 0, NULL);
    json_t *msgs = json_object_get(doc, "messages");
    const char *sys = json_string_value(json_object_get(json_array_get(msgs, 0), "content"));
    const char *last_role =
        json_string_value(json_object_get(json_array_get(msgs, json_array_size(msgs) - 1), "role"));
    bool flush = sys && strstr(sys, "Session nearing compaction");
    bool summary = sys && strstr(sys, "You write the working memory");
    buf b = BUF_INIT;
    pthread_mutex_lock(&s->mu);
    *ctype = "text/event-stream";
    *status = 200;
    char tag;
    if (flush && s->flush_fails) {
        tag = 'F';
        s->flushes++;
        *status = 404;
        *ctype = "application/json";
        cm_buf_adds(&b, "{\"error\":{\"message\":\"no such route\"}}");
        *out_len = b.len;
        *out = cm_buf_detach(&b);
    } else if (flush && last_role && !strcmp(last_role, "tool")) {
        tag = 'f';
        sse_str(&b, "content", "NO_REPLY", "stop");
        *out = sse_end(&b, out_len);
    } else if (flush) { /* every courier code in the conversation, once */
        tag = 'F';
        s->flushes++;
        buf note = BUF_INIT;
        cm_buf_adds(&note, "- Courier codes:");
        for (const char *p = body; (p = strstr(p, "BLUEHERON-")) != NULL; p += 10) {
            char code[32];
            snprintf(code, sizeof code, "%.*s", (int)(10 + strspn(p + 10, "0123456789")), p);
            if (!strstr(note.data, code)) cm_buf_printf(&note, " %s", code);
        }
        json_t *args = json_pack("{s:s}", "text", note.data);
        char *aj = json_dumps(args, JSON_COMPACT);
        json_t *q = json_string(aj);
        char *qs = json_dumps(q, JSON_ENCODE_ANY);
        cm_buf_printf(&b,
                      "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,"
                      "\"id\":\"w1\",\"function\":{\"name\":\"memory_write\",\"arguments\":%s}}]},"
                      "\"finish_reason\":\"tool_calls\"}]}\n\n",
                      qs);
        free(qs);
        json_decref(q);
        free(aj);
        json_decref(args);
        cm_buf_release(&note);
        *out = sse_end(&b, out_len);
    } else if (summary) {
        tag = 'S';
        s->summaries++;
        free(s->last_summary);
        s->last_summary = cm_strndup(body, body_len);
        sse_str(&b, "content", "## Goal\nKeep the courier codes.", "stop");
        *out = sse_end(&b, out_len);
    } else {
        tag = 'T';
        s->turns++;
        free(s->last_turn);
        s->last_turn = cm_strndup(body, body_len);
        if (s->why) {
            sse_str(&b, "reasoning_content", s->why, NULL);
            sse_str(&b, "reasoning_content", "\nthen answer briefly", NULL);
        }
        sse_str(&b, "content", "Noted.", "stop");
        *out = sse_end(&b, out_len);
    }
    if (s->n < (int)sizeof s->order - 1) s->order[s->n++] = tag;
    pthread_mutex_unlock(&s->mu);
    json_decref(doc);
    return true;
}

/* ---- the world: Telegram → runtime → agents → stand-in --------------------- */

typedef struct cworld {
    tgfake f;
    fake_server *tg, *model;
    char tg_url[64], model_url[64];
    char *dir, *ws, *state;
    json_t *cfg;
    standin si;
    gw_agents *ag;
    gw_runtime *rt;
    gw_channel *ch;
    int updates;
} cworld;

static bool cw_start(cworld *w, const char *extra)
{
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->si.mu, NULL);
    tgfake_init(&w->f);
    w->tg = fake_start(4, w->tg_url);
    fake_handler(w->tg, tgfake_handler, &w->f);
    w->model = fake_start(8, w->model_url);
    fake_handler(w->model, standin_answer, &w->si);
    w->dir = tmp_dir();
    w->ws = cm_strdup(path_in(w->dir, "ws"));
    w->state = cm_strdup(path_in(w->dir, "state"));
    write_file(w->dir, "ws/MEMORY.md", "# Facts\n");
    char cfg[4096];
    snprintf(cfg, sizeof cfg,
             "{\"agents\":{\"defaults\":{\"model\":\"openai/gpt-t\","
             "\"memorySearch\":{\"provider\":\"none\"}}},"
             "\"models\":{\"providers\":{\"openai\":{\"baseUrl\":\"%s/v1\","
             "\"apiKey\":\"sk-test-cmds-0001\",\"models\":[{\"id\":\"gpt-t\","
             "\"reasoning\":true}]}}},"
             "\"tools\":{\"allow\":[\"group:memory\"]},"
             "\"channels\":{\"telegram\":{\"botToken\":\"%s\",\"apiRoot\":\"%s\","
             "\"dmPolicy\":\"pairing\",\"allowFrom\":[\"43\"],\"groupPolicy\":\"open\","
             "\"groupAllowFrom\":[\"43\"],\"groups\":{\"-5\":{\"requireMention\":false}},"
             "\"timeoutSeconds\":5}},\"messages\":{\"inbound\":{\"debounceMs\":0}}}",
             w->model_url, TGFAKE_TOKEN, w->tg_url);
    w->cfg = json_loads(cfg, 0, NULL);
    json_t *x = extra ? json_loads(extra, 0, NULL) : NULL;
    if (x) json_object_update_recursive(w->cfg, x);
    json_decref(x);
    char *text = json_dumps(w->cfg, JSON_INDENT(1));
    write_file(w->dir, "state/quantumclaw.json", text);
    free(text);
    cm_options o = {NULL, w->ws, NULL, w->state, NULL, NULL, 1};
    char err[512];
    if (cm_gw_agents_new(&o, &w->ag)) return false;
    gw_runtime_opts ro = {w->cfg, w->state, cm_gw_agents_run, w->ag, NULL, NULL, 2, true, 0, NULL, NULL};
    if (cm_gw_runtime_new(&ro, &w->rt, err, sizeof err) ||
        cm_gw_telegram_open(w->cfg, NULL, w->state, &w->ch, err, sizeof err) ||
        cm_gw_runtime_add_channel(w->rt, w->ch, NULL, NULL, err, sizeof err) ||
        cm_gw_runtime_start(w->rt, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "gateway: %s", err);
        return false;
    }
    return true;
}

static void cw_stop(cworld *w)
{
    cm_gw_runtime_free(w->rt);
    if (w->ch) w->ch->ops->close(w->ch);
    cm_gw_agents_free(w->ag);
    json_decref(w->cfg);
    atomic_store(&w->f.stop, 1);
    fake_stop(w->tg);
    fake_stop(w->model);
    tgfake_release(&w->f);
    free(w->si.last_summary);
    free(w->si.last_turn);
    pthread_mutex_destroy(&w->si.mu);
    free(w->ws);
    free(w->state);
}

/* A message from sender in chat (private chat 77, else the group -5), then
 * (bounded) until it is journaled and every run has ended. */
static bool cw_say(cworld *w, int sender, bool group, const char *text)
{
    int id = ++w->updates;
    json_t *u = json_pack("{s:i,s:{s:i,s:{s:i},s:{s:i,s:s},s:s}}", "update_id", id, "message",
                          "message_id", 10 + id, "from", "id", sender, "chat", "id",
                          group ? -5 : 77, "type", group ? "group" : "private", "text", text);
    char *s = json_dumps(u, JSON_COMPACT);
    tgfake_add_update(&w->f, s);
    free(s);
    json_decref(u);
    int accepted = 0;
    for (int i = 0; i < 1000 && accepted < id; i++) {
        cm_gw_runtime_tick(w->rt);
        json_t *st = cm_gw_runtime_status(w->rt);
        accepted = (int)json_integer_value(json_object_get(st, "accepted"));
        json_decref(st);
        if (accepted < id) usleep(10000);
    }
    for (int i = 0; i < 600; i++) { /* 60 s at most: a loaded machine */
        cm_gw_runtime_tick(w->rt);
        if (cm_gw_runtime_wait_idle(w->rt, 100)) return accepted >= id;
    }
    return false;
}

/* The text of the last sendMessage (a new string, "" when none). */
static char *cw_last_sent(cworld *w)
{
    pthread_mutex_lock(&w->f.mu);
    const char *t = json_string_value(
        json_object_get(json_array_get(w->f.sent, json_array_size(w->f.sent) - 1), "text"));
    char *s = cm_strdup(t ? t : "");
    pthread_mutex_unlock(&w->f.mu);
    return s;
}

static int cw_sent(cworld *w)
{
    return tgfake_count(&w->f, "sendMessage");
}

/* Every note under ws/memory/ (whatever day the flush wrote), concatenated. */
static char *cw_notes(cworld *w)
{
    buf all = BUF_INIT;
    cm_buf_adds(&all, "");
    DIR *d = opendir(path_in(w->ws, "memory"));
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        buf b = BUF_INIT;
        char err[256], rel[300];
        snprintf(rel, sizeof rel, "memory/%s", e->d_name);
        if (!cm_fs_read_file(path_in(w->ws, rel), 1 << 20, &b, err, sizeof err))
            cm_buf_add(&all, b.data, b.len);
        cm_buf_release(&b);
    }
    if (d) closedir(d);
    return cm_buf_detach(&all);
}

/* The entry of key as on disk, every pending change written (new reference). */
static json_t *cw_entry(cworld *w, const char *key)
{
    char err[256];
    cm_session_store_sync(NULL, err, sizeof err);
    json_t *doc = json_load_file(path_in(w->state, "agents/main/sessions/sessions.json"), 0, NULL);
    json_t *e = json_incref(json_object_get(doc, key));
    json_decref(doc);
    return e;
}

static char *cw_transcript(cworld *w, const char *key)
{
    json_t *e = cw_entry(w, key);
    buf b = BUF_INIT;
    char err[256];
    const char *f = json_string_value(json_object_get(e, "sessionFile"));
    if (f) cm_fs_read_file(f, 1 << 24, &b, err, sizeof err);
    json_decref(e);
    if (!b.data) cm_buf_adds(&b, "");
    return cm_buf_detach(&b);
}

static int order_of(cworld *w, char tag)
{
    for (int i = 0; i < w->si.n; i++)
        if (w->si.order[i] == tag) return i;
    return -1;
}

/* ---- /compact ---------------------------------------------------------------- */

TEST(gw_cmd_compact_flushes_then_compacts)
{
    cworld w;
    if (!cw_start(&w, NULL)) return;
    EXPECT(cw_say(&w, 43, false, "Remember courier code BLUEHERON-1 for route 1."));
    EXPECT(cw_say(&w, 43, false, "Remember courier code BLUEHERON-2 for route 2."));
    EXPECT_INT(w.si.turns, 2);
    EXPECT(cw_say(&w, 43, false, "/compact keep the route numbers"));
    /* the flush first, with the whole history, then the summary */
    EXPECT(order_of(&w, 'F') > order_of(&w, 'T'));
    EXPECT(order_of(&w, 'F') < order_of(&w, 'S'));
    EXPECT_INT(w.si.summaries, 1);
    EXPECT_INT(w.si.turns, 2); /* the command is no turn */
    EXPECT_CONTAINS(w.si.last_summary ? w.si.last_summary : "", "keep the route numbers");
    char *notes = cw_notes(&w);
    EXPECT_CONTAINS(notes, "BLUEHERON-1");
    EXPECT_CONTAINS(notes, "BLUEHERON-2");
    free(notes);
    /* 2026.3.22's answer: "⚙️ Compacted (<before> → <after>) • Context <after>/200k (<pct>%)"
     */
    char *r = cw_last_sent(&w);
    EXPECT(!strncmp(r, GEAR " Compacted (", strlen(GEAR " Compacted (")));
    EXPECT_CONTAINS(r, " \xe2\x86\x92 ");
    EXPECT_CONTAINS(r, ") \xe2\x80\xa2 Context ");
    EXPECT_CONTAINS(r, "/200k (");
    EXPECT(r[0] && r[strlen(r) - 1] == ')');
    free(r);
    /* the compacted messages stay in the transcript, after them the record */
    char *tr = cw_transcript(&w, "agent:main:main");
    EXPECT_CONTAINS(tr, "BLUEHERON-1 for route 1.");
    EXPECT_CONTAINS(tr, "\"type\":\"compaction\"");
    free(tr);
    json_t *e = cw_entry(&w, "agent:main:main");
    EXPECT_INT((int)json_integer_value(json_object_get(e, "compactionCount")), 1);
    json_decref(e);
    cw_stop(&w);
}

TEST(gw_cmd_compact_failing_flush_does_not_block)
{
    cworld w;
    if (!cw_start(&w, NULL)) return;
    EXPECT(cw_say(&w, 43, false, "Remember courier code BLUEHERON-7 for route 7."));
    EXPECT(cw_say(&w, 43, false, "And BLUEHERON-8 for route 8."));
    w.si.flush_fails = true;
    EXPECT(cw_say(&w, 43, false, "/compact"));
    EXPECT_INT(w.si.flushes, 1); /* tried, failed */
    EXPECT_INT(w.si.summaries, 1);
    EXPECT(order_of(&w, 'F') < order_of(&w, 'S'));
    char *r = cw_last_sent(&w);
    EXPECT(!strncmp(r, GEAR " Compacted (", strlen(GEAR " Compacted (")));
    free(r);
    char *notes = cw_notes(&w);
    EXPECT(strstr(notes, "BLUEHERON-7") == NULL);
    free(notes);
    cw_stop(&w);
}

TEST(gw_cmd_compact_only_for_senders_authorized_for_commands)
{
    cworld w;
    if (!cw_start(&w, NULL)) return;
    /* 44 may talk in the open group, but is in no allowlist: no answer, no model call */
    int sent = cw_sent(&w);
    EXPECT(cw_say(&w, 44, true, "/compact"));
    EXPECT_INT(cw_sent(&w), sent);
    EXPECT_INT(w.si.n, 0);
    EXPECT(cw_say(&w, 44, true, "/think high"));
    EXPECT_INT(cw_sent(&w), sent);
    json_t *e = cw_entry(&w, "agent:main:telegram:group:-5");
    EXPECT(!json_object_get(e, "thinkingLevel"));
    json_decref(e);
    /* 43 (groupAllowFrom) is answered: the group has no session yet */
    EXPECT(cw_say(&w, 43, true, "/compact"));
    EXPECT_INT(cw_sent(&w), sent + 1);
    char *r = cw_last_sent(&w);
    EXPECT_STR(r, GEAR " Compaction unavailable (missing session id).");
    free(r);
    /* a session with nothing to summarise yet */
    EXPECT(cw_say(&w, 43, false, "/think low"));
    EXPECT(cw_say(&w, 43, false, "/compact"));
    r = cw_last_sent(&w);
    EXPECT_STR(r, GEAR " Compaction skipped: no real conversation messages \xe2\x80\xa2 Context "
                       "?/200k");
    free(r);
    EXPECT_INT(w.si.summaries, 0);
    cw_stop(&w);
}

/* /new, /reset, /queue, /stop and the abort words through the same gate as
 * /compact (2026.3.22's rejectUnauthorizedCommand): from 44 (open group, in
 * no allowlist) nothing is answered, no model is asked, the session is not
 * reset, its queue mode not set; 43 (groupAllowFrom) is answered. */
TEST(gw_cmd_new_queue_stop_only_for_senders_authorized_for_commands)
{
    cworld w;
    if (!cw_start(&w, NULL)) return;
    const char *key = "agent:main:telegram:group:-5";
    EXPECT(cw_say(&w, 43, true, "hello"));
    int sent = cw_sent(&w), asked = w.si.n;
    EXPECT(asked > 0);
    json_t *e = cw_entry(&w, key);
    char *sid = cm_strdup(json_string_value(json_object_get(e, "sessionId")));
    json_decref(e);
    EXPECT(sid && *sid);
    static const char *const refused[] = {"/new", "/reset", "/new hello there", "/reset now",
                                          "/queue followup", "/queue reset", "/stop", "stop"};
    for (size_t i = 0; i < ARRAY_LEN(refused); i++) {
        EXPECT(cw_say(&w, 44, true, refused[i]));
        if (cw_sent(&w) != sent || w.si.n != asked)
            test_fail(__FILE__, __LINE__, "%s from an unauthorized sender was answered or run",
                      refused[i]);
    }
    e = cw_entry(&w, key);
    EXPECT_STR(json_string_value(json_object_get(e, "sessionId")), sid); /* not reset */
    EXPECT(!json_string_value(json_object_get(e, "queueMode")));
    json_decref(e);
    /* the same commands from 43 are answered */
    EXPECT(cw_say(&w, 43, true, "/queue followup"));
    EXPECT_INT(cw_sent(&w), sent + 1);
    char *r = cw_last_sent(&w);
    EXPECT_CONTAINS(r, "Queue mode set to followup");
    free(r);
    EXPECT(cw_say(&w, 43, true, "/stop"));
    r = cw_last_sent(&w);
    EXPECT_STR(r, GEAR " Agent was aborted.");
    free(r);
    EXPECT(cw_say(&w, 43, true, "/reset"));
    e = cw_entry(&w, key);
    const char *nsid = json_string_value(json_object_get(e, "sessionId"));
    EXPECT(nsid && strcmp(nsid, sid) != 0); /* a new session */
    json_decref(e);
    free(sid);
    cw_stop(&w);
}

/* ---- /think and /reasoning --------------------------------------------------- */

TEST(gw_cmd_think_sets_the_level_the_model_is_asked_for)
{
    cworld w;
    if (!cw_start(&w, NULL)) return;
    EXPECT(cw_say(&w, 43, false, "hello"));
    /* a reasoning model's default: low */
    EXPECT_CONTAINS(w.si.last_turn, "\"reasoning_effort\":\"low\"");
    EXPECT(cw_say(&w, 43, false, "/think"));
    char *r = cw_last_sent(&w);
    EXPECT_STR(r, "Current thinking level: low.\nOptions: off, minimal, low, medium, high, "
                  "adaptive.");
    free(r);
    EXPECT(cw_say(&w, 43, false, "/think loud"));
    r = cw_last_sent(&w);
    EXPECT_STR(r, "Unrecognized thinking level \"loud\". Valid levels: off, minimal, low, medium, "
                  "high, adaptive.");
    free(r);
    EXPECT(cw_say(&w, 43, false, "/think: ultrathink"));
    r = cw_last_sent(&w);
    EXPECT_STR(r, "Thinking level set to high.");
    free(r);
    json_t *e = cw_entry(&w, "agent:main:main");
    EXPECT_STR(json_string_value(json_object_get(e, "thinkingLevel")), "high");
    json_decref(e);
    EXPECT_INT(w.si.turns, 1);
    EXPECT(cw_say(&w, 43, false, "and now?"));
    EXPECT_CONTAINS(w.si.last_turn, "\"reasoning_effort\":\"high\"");
    char *tr = cw_transcript(&w, "agent:main:main");
    EXPECT_CONTAINS(tr, "\"thinkingLevel\":\"low\"");
    EXPECT_CONTAINS(tr, "\"thinkingLevel\":\"high\"");
    free(tr);
    EXPECT(cw_say(&w, 43, false, "/t off"));
    r = cw_last_sent(&w);
    EXPECT_STR(r, "Thinking disabled.");
    free(r);
    EXPECT(cw_say(&w, 43, false, "quiet now"));
    EXPECT(strstr(w.si.last_turn, "reasoning_effort") == NULL);
    /* more than a level after it: an ordinary message */
    EXPECT(cw_say(&w, 43, false, "/think about the dog"));
    EXPECT_INT(w.si.turns, 4);
    cw_stop(&w);
}

TEST(gw_cmd_reasoning_stream_is_previewed_before_the_answer)
{
    cworld w;
    if (!cw_start(&w, NULL)) return;
    EXPECT(cw_say(&w, 43, false, "/reasoning stream"));
    char *r = cw_last_sent(&w);
    EXPECT_STR(r, GEAR " Reasoning stream enabled (Telegram only).");
    free(r);
    json_t *e = cw_entry(&w, "agent:main:main");
    EXPECT_STR(json_string_value(json_object_get(e, "reasoningLevel")), "stream");
    json_decref(e);
    w.si.why = "first weigh what the user asked for";
    int before = tgfake_count(&w.f, NULL);
    EXPECT(cw_say(&w, 43, false, "what now?"));
    /* the reasoning's preview, then the answer in a message of its own; the
     * reasoning is kept (never deleted) */
    int n = tgfake_count(&w.f, NULL), reasoning_at = -1, answer_at = -1;
    for (int i = before; i < n; i++) {
        pthread_mutex_lock(&w.f.mu);
        json_t *c = json_incref(json_array_get(w.f.calls, (size_t)i));
        pthread_mutex_unlock(&w.f.mu);
        const char *m = json_string_value(json_object_get(c, "method"));
        const char *t = json_string_value(json_object_get(json_object_get(c, "params"), "text"));
        if (!strcmp(m, "sendMessage") && t && strstr(t, "Reasoning:") && reasoning_at < 0)
            reasoning_at = i;
        if ((!strcmp(m, "sendMessage") || !strcmp(m, "editMessageText")) && t &&
            strstr(t, "Noted."))
            answer_at = i;
        if (!strcmp(m, "editMessageText") && t && strstr(t, "Reasoning:"))
            EXPECT_CONTAINS(t, "then answer briefly");
        json_decref(c);
    }
    EXPECT(reasoning_at >= 0);
    EXPECT(answer_at > reasoning_at);
    EXPECT_INT(tgfake_count(&w.f, "deleteMessage"), 0);
    char *last = cw_last_sent(&w);
    EXPECT(strstr(last, "Reasoning:") == NULL);
    free(last);
    cw_stop(&w);
}

TEST(gw_cmd_reasoning_on_sends_the_reasoning_first)
{
    cworld w;
    if (!cw_start(&w, NULL)) return;
    EXPECT(cw_say(&w, 43, false, "/reasoning on"));
    char *r = cw_last_sent(&w);
    EXPECT_STR(r, GEAR " Reasoning visibility enabled.");
    free(r);
    w.si.why = "think first";
    int sent = cw_sent(&w);
    EXPECT(cw_say(&w, 43, false, "why?"));
    EXPECT_INT(cw_sent(&w), sent + 2);
    pthread_mutex_lock(&w.f.mu);
    const char *why =
        json_string_value(json_object_get(json_array_get(w.f.sent, (size_t)sent), "text"));
    const char *ans =
        json_string_value(json_object_get(json_array_get(w.f.sent, (size_t)sent + 1), "text"));
    EXPECT_CONTAINS(why ? why : "", "Reasoning:");
    EXPECT_CONTAINS(why ? why : "", "think first");
    EXPECT_CONTAINS(ans ? ans : "", "Noted.");
    pthread_mutex_unlock(&w.f.mu);
    EXPECT_INT(tgfake_count(&w.f, "editMessageText"), 0);
    EXPECT(cw_say(&w, 43, false, "/reasoning"));
    r = cw_last_sent(&w);
    EXPECT_STR(r, "Current reasoning level: on.\nOptions: on, off, stream.");
    free(r);
    cw_stop(&w);
}

/* /think and sessions.patch read a level through one function, as
 * 2026.3.22's normalizeThinkLevel: trimmed, any case, blanks, '-' and '_'
 * ignored for adaptive and xhigh. */
TEST(gw_cmd_think_levels_parse_as_the_reference)
{
    EXPECT_STR(cm_agent_think_parse(" Think-Hard "), "low");
    EXPECT_STR(cm_agent_think_parse("ULTRATHINK"), "high");
    EXPECT_STR(cm_agent_think_parse(" extra_high "), "xhigh");
    EXPECT_STR(cm_agent_think_parse("Auto"), "adaptive");
    EXPECT_STR(cm_agent_think_parse("on"), "low");
    EXPECT(!cm_agent_think_parse("lots"));
    EXPECT(!cm_agent_think_parse("high five"));
    EXPECT(!cm_agent_think_parse(""));
}

/* ---- /status, /whoami, /help ------------------------------------------------- */

/* Answered by the gateway and the agent without a model, in 2026.3.22's
 * lines: /status's card (the model, how it authenticates, the last turn's
 * tokens, the context, the session, the options, the queue with the
 * settings /queue set), /whoami's identity (a group's chat), /help's card
 * and /commands' list;
 * with more words after them, an ordinary turn; from a sender not
 * authorized for commands, nothing. */
TEST(gw_cmd_status_whoami_help_answer_without_a_model)
{
    cworld w;
    if (!cw_start(&w, NULL)) return;
    EXPECT(cw_say(&w, 43, false, "hello"));
    int asked = w.si.n, sent = cw_sent(&w);
    EXPECT(cw_say(&w, 43, false, "/status"));
    EXPECT_INT(cw_sent(&w), sent + 1);
    char *r = cw_last_sent(&w);
    EXPECT(strstr(r, "\xf0\x9f\xa6\x9e QuantumClaw 2026.3.22 (clawmem ") == r);
    EXPECT_CONTAINS(r, "\n\xf0\x9f\xa7\xa0 Model: openai/gpt-t \xc2\xb7 \xf0\x9f\x94\x91 api-key "
                       "(models.json)\n");
    EXPECT_CONTAINS(r, "\n\xf0\x9f\xa7\xae Tokens: 100 in / 10 out \xc2\xb7 \xf0\x9f\x92\xb5 Cost: "
                       "$0.0000\n");
    EXPECT_CONTAINS(r, "\n\xf0\x9f\x93\x9a Context: 100/200k (0%) \xc2\xb7 \xf0\x9f\xa7\xb9 "
                       "Compactions: 0\n");
    EXPECT_CONTAINS(r, "\n\xf0\x9f\xa7\xb5 Session: agent:main:main \xe2\x80\xa2 updated just now\n");
    EXPECT_CONTAINS(r, "\n" GEAR " Runtime: direct \xc2\xb7 Think: low\n");
    EXPECT(strstr(r, "\n\xf0\x9f\xaa\xa2 Queue: collect (depth 0)") != NULL);
    EXPECT(strstr(r, "sk-test-cmds") == NULL); /* never the key */
    free(r);
    EXPECT_INT(w.si.n, asked); /* no model asked */
    EXPECT(cw_say(&w, 43, false, "/queue followup debounce:2s"));
    EXPECT(cw_say(&w, 43, false, "/reasoning on"));
    EXPECT(cw_say(&w, 43, false, "/status"));
    r = cw_last_sent(&w);
    EXPECT_CONTAINS(r, "Think: low \xc2\xb7 Reasoning: on\n");
    EXPECT_CONTAINS(r, "\xf0\x9f\xaa\xa2 Queue: followup (depth 0 \xc2\xb7 debounce 2s \xc2\xb7 cap "
                       "20 \xc2\xb7 drop summarize)");
    free(r);
    EXPECT(cw_say(&w, 43, false, "/whoami"));
    r = cw_last_sent(&w);
    EXPECT_STR(r, "\xf0\x9f\xa7\xad Identity\nChannel: telegram\nUser id: 43\nAllowFrom: 43");
    free(r);
    EXPECT(cw_say(&w, 43, true, "/id"));
    r = cw_last_sent(&w);
    EXPECT_STR(r, "\xf0\x9f\xa7\xad Identity\nChannel: telegram\nUser id: 43\n"
                  "Chat: telegram:group:-5\nAllowFrom: 43");
    free(r);
    EXPECT(cw_say(&w, 43, true, "/status"));
    r = cw_last_sent(&w);
    EXPECT_CONTAINS(r, "Session: agent:main:telegram:group:-5 \xe2\x80\xa2 no activity\n");
    EXPECT_CONTAINS(r, "\n\xf0\x9f\x91\xa5 Activation: mention \xc2\xb7 \xf0\x9f\xaa\xa2 Queue: ");
    free(r);
    EXPECT(cw_say(&w, 43, false, "/help"));
    r = cw_last_sent(&w);
    EXPECT(strstr(r, "\xe2\x84\xb9\xef\xb8\x8f Help\n\nSession\n/new  |  /reset") == r);
    EXPECT_CONTAINS(r, "\nOptions\n/think <level>  |  /model <id>  |  /reasoning on|off|stream  |  "
                       "/queue <mode>\n");
    EXPECT_CONTAINS(r, "\nStatus\n/status  |  /whoami\n\nMore: /commands for full list");
    free(r);
    EXPECT(cw_say(&w, 43, false, "/commands"));
    r = cw_last_sent(&w);
    EXPECT(strstr(r, "\xe2\x84\xb9\xef\xb8\x8f Slash commands\n\nSession\n/stop - ") == r);
    EXPECT_CONTAINS(r, "\n/think (/thinking, /t) - Set thinking level.\n");
    EXPECT_CONTAINS(r, "\n/reasoning (/reason) - Toggle reasoning visibility.\n/model - Show or "
                       "set the model.\n/models - List model providers or provider models.\n"
                       "/queue - Adjust queue settings.\n");
    EXPECT_CONTAINS(r, "\n/whoami (/id) - Show your sender id.");
    free(r);
    EXPECT_INT(w.si.n, asked);
    /* not in a group's allowlist: nothing; with words after them: a turn */
    sent = cw_sent(&w);
    static const char *const refused[] = {"/status", "/whoami", "/id", "/help", "/commands"};
    for (size_t i = 0; i < ARRAY_LEN(refused); i++)
        EXPECT(cw_say(&w, 44, true, refused[i]));
    EXPECT_INT(cw_sent(&w), sent);
    EXPECT_INT(w.si.n, asked);
    EXPECT(cw_say(&w, 43, false, "/status of the project?"));
    EXPECT_INT(w.si.turns, 2);
    cw_stop(&w);
}

/* 2026.3.22's formatTimeAgo, rounding as Math.round does. */
TEST(gw_cmd_status_time_ago_as_the_reference)
{
    static const struct {
        int64_t ms;
        const char *want;
    } cases[] = {{0, "just now"},          {29499, "just now"},   {30000, "1m ago"},
                 {59 * 60000, "59m ago"},  {3570000, "1h ago"},   {47 * 3600000LL, "47h ago"},
                 {48 * 3600000LL, "2d ago"}, {-1, "unknown"}};
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        char out[32];
        cm_status_time_ago(cases[i].ms, out);
        EXPECT_STR(out, cases[i].want);
    }
}

/* ---- /model and /models ------------------------------------------------------ */

/* The model of the last turn request the stand-in saw ("" when none). */
static char *cw_turn_model(cworld *w)
{
    json_t *doc = w->si.last_turn ? json_loads(w->si.last_turn, 0, NULL) : NULL;
    const char *m = json_string_value(json_object_get(doc, "model"));
    char *s = cm_strdup(m ? m : "");
    json_decref(doc);
    return s;
}

#define MODEL_CFG                                                                                  \
    "{\"models\":{\"providers\":{\"openai\":{\"models\":[{\"id\":\"gpt-t\",\"reasoning\":true},"   \
    "{\"id\":\"gpt-u\"},{\"id\":\"gpt-x\"}]}}},"                                                   \
    "\"agents\":{\"defaults\":{\"models\":{\"openai/gpt-t\":{},"                                   \
    "\"openai/gpt-u\":{\"alias\":\"Quick\"}}}}}"

/* /model shows the session's model and how to switch, answered without a
 * model; /model <ref> writes providerOverride/modelOverride as 2026.3.22
 * does and the next turn asks that model; an alias; a model outside
 * agents.defaults.models is refused and nothing changes; the default
 * model clears the override. */
TEST(gw_cmd_model_shows_sets_and_clears_the_session_model)
{
    cworld w;
    if (!cw_start(&w, MODEL_CFG)) return;
    const char *key = "agent:main:main";
    EXPECT(cw_say(&w, 43, false, "hello"));
    int asked = w.si.n;
    EXPECT(cw_say(&w, 43, false, "/model"));
    char *r = cw_last_sent(&w);
    EXPECT_STR(r, "Current: openai/gpt-t\nSwitch: /model <provider/model>\n"
                  "Browse: /models (providers) or /models <provider> (models)\n"
                  "More: /model status");
    free(r);
    EXPECT_INT(w.si.n, asked);
    /* in full */
    EXPECT(cw_say(&w, 43, false, "/model openai/gpt-u"));
    r = cw_last_sent(&w);
    EXPECT_STR(r, "Model set to openai/gpt-u.");
    free(r);
    json_t *e = cw_entry(&w, key);
    EXPECT_STR(json_string_value(json_object_get(e, "providerOverride")), "openai");
    EXPECT_STR(json_string_value(json_object_get(e, "modelOverride")), "gpt-u");
    EXPECT(!json_object_get(e, "model")); /* the last run's model goes with the switch */
    json_decref(e);
    EXPECT_INT(w.si.n, asked);
    EXPECT(cw_say(&w, 43, false, "/model"));
    r = cw_last_sent(&w);
    EXPECT(strstr(r, "Current: openai/gpt-u\n") == r);
    free(r);
    EXPECT(cw_say(&w, 43, false, "and now?"));
    r = cw_turn_model(&w);
    EXPECT_STR(r, "gpt-u");
    free(r);
    /* /status shows it */
    EXPECT(cw_say(&w, 43, false, "/status"));
    r = cw_last_sent(&w);
    EXPECT_CONTAINS(r, "\n\xf0\x9f\xa7\xa0 Model: openai/gpt-u \xc2\xb7 ");
    free(r);
    /* not allowed: refused, nothing changes */
    asked = w.si.n;
    EXPECT(cw_say(&w, 43, false, "/model anthropic/claude-opus-4-6"));
    r = cw_last_sent(&w);
    EXPECT_STR(r, "Model \"anthropic/claude-opus-4-6\" is not allowed. Use /models to list "
                  "providers, or /models <provider> to list models.");
    free(r);
    e = cw_entry(&w, key);
    EXPECT_STR(json_string_value(json_object_get(e, "modelOverride")), "gpt-u");
    json_decref(e);
    EXPECT(cw_say(&w, 43, false, "/model 2"));
    r = cw_last_sent(&w);
    EXPECT(strstr(r, "Numeric model selection is not supported in chat.\n") == r);
    free(r);
    EXPECT_INT(w.si.n, asked);
    /* the default model clears the override */
    EXPECT(cw_say(&w, 43, false, "/model openai/gpt-t"));
    r = cw_last_sent(&w);
    EXPECT_STR(r, "Model reset to default (openai/gpt-t).");
    free(r);
    e = cw_entry(&w, key);
    EXPECT(!json_object_get(e, "providerOverride"));
    EXPECT(!json_object_get(e, "modelOverride"));
    json_decref(e);
    EXPECT(cw_say(&w, 43, false, "again"));
    r = cw_turn_model(&w);
    EXPECT_STR(r, "gpt-t");
    free(r);
    /* an alias, any case */
    EXPECT(cw_say(&w, 43, false, "/model quick"));
    r = cw_last_sent(&w);
    EXPECT_STR(r, "Model set to Quick (openai/gpt-u).");
    free(r);
    e = cw_entry(&w, key);
    EXPECT_STR(json_string_value(json_object_get(e, "modelOverride")), "gpt-u");
    json_decref(e);
    /* "@profile" pins one of the provider's auth profiles; another's is refused */
    write_file(w.state, "agents/main/agent/auth-profiles.json",
               "{\"version\":1,\"profiles\":{\"openai:work\":{\"type\":\"api_key\","
               "\"provider\":\"openai\",\"key\":\"sk-work-0002\"},\"anthropic:me\":{\"type\":"
               "\"api_key\",\"provider\":\"anthropic\",\"key\":\"sk-ant-0003\"}}}");
    EXPECT(cw_say(&w, 43, false, "/model openai/gpt-u@openai:work"));
    r = cw_last_sent(&w);
    EXPECT_STR(r, "Model set to openai/gpt-u. Auth profile set to openai:work.");
    free(r);
    e = cw_entry(&w, key);
    EXPECT_STR(json_string_value(json_object_get(e, "authProfileOverride")), "openai:work");
    EXPECT_STR(json_string_value(json_object_get(e, "authProfileOverrideSource")), "user");
    json_decref(e);
    EXPECT(cw_say(&w, 43, false, "/model quick@anthropic:me"));
    r = cw_last_sent(&w);
    EXPECT_STR(r, "Auth profile \"anthropic:me\" is for anthropic, not openai.");
    free(r);
    EXPECT(cw_say(&w, 43, false, "/model quick@nobody"));
    r = cw_last_sent(&w);
    EXPECT_STR(r, "Auth profile \"nobody\" not found.");
    free(r);
    e = cw_entry(&w, key);
    EXPECT_STR(json_string_value(json_object_get(e, "authProfileOverride")), "openai:work");
    json_decref(e);
    /* a switch without one unpins it */
    EXPECT(cw_say(&w, 43, false, "/model quick"));
    e = cw_entry(&w, key);
    EXPECT(!json_object_get(e, "authProfileOverride"));
    json_decref(e);
    /* more than one word: an ordinary turn */
    asked = w.si.turns;
    EXPECT(cw_say(&w, 43, false, "/model quick please"));
    EXPECT_INT(w.si.turns, asked + 1);
    cw_stop(&w);
}

/* An override agents.defaults.models does not allow (set before the list
 * changed) is none: /status and /model show the default, and the next
 * turn asks the default and clears it from the entry, as 2026.3.22 does. */
TEST(gw_cmd_model_override_outside_the_allowlist_is_cleared)
{
    cworld w;
    if (!cw_start(&w, MODEL_CFG)) return;
    const char *key = "agent:main:main";
    EXPECT(cw_say(&w, 43, false, "hello"));
    session_store st;
    memset(&st, 0, sizeof st);
    char err[256];
    json_t *patch = json_pack("{s:s,s:s}", "providerOverride", "openai", "modelOverride", "gpt-x");
    EXPECT_INT(cm_session_store_read(&st, path_in(w.state, "agents/main/sessions/sessions.json"),
                                     err, sizeof err),
               CM_OK);
    EXPECT_INT(cm_session_touch(&st, key, patch, cm_wall_ms(), NULL, err, sizeof err), CM_OK);
    cm_session_store_release(&st);
    json_decref(patch);
    EXPECT(cw_say(&w, 43, false, "/status"));
    char *r = cw_last_sent(&w);
    EXPECT_CONTAINS(r, "\n\xf0\x9f\xa7\xa0 Model: openai/gpt-t \xc2\xb7 ");
    free(r);
    EXPECT(cw_say(&w, 43, false, "/model"));
    r = cw_last_sent(&w);
    EXPECT(strstr(r, "Current: openai/gpt-t\n") == r);
    free(r);
    EXPECT(cw_say(&w, 43, false, "which one?"));
    r = cw_turn_model(&w);
    EXPECT_STR(r, "gpt-t");
    free(r);
    json_t *e = cw_entry(&w, key);
    EXPECT(!json_object_get(e, "modelOverride"));
    EXPECT(!json_object_get(e, "providerOverride"));
    json_decref(e);
    cw_stop(&w);
}

/* /models lists the providers, /models <provider> the models (2026.3.22's
 * layout), /model list is /models; a sender not authorized for commands
 * gets nothing and changes nothing. */
TEST(gw_cmd_models_lists_and_model_is_gated)
{
    cworld w;
    if (!cw_start(&w, MODEL_CFG)) return;
    EXPECT(cw_say(&w, 43, false, "/models"));
    char *r = cw_last_sent(&w);
    EXPECT_STR(r, "Providers:\n- openai (2)\n\nUse: /models <provider>\n"
                  "Switch: /model <provider/model>");
    free(r);
    EXPECT(cw_say(&w, 43, false, "/model list"));
    r = cw_last_sent(&w);
    EXPECT(strstr(r, "Providers:\n- openai (2)\n") == r);
    free(r);
    EXPECT(cw_say(&w, 43, false, "/models OpenAI"));
    r = cw_last_sent(&w);
    EXPECT_STR(r, "Models (openai \xc2\xb7 \xf0\x9f\x94\x91 api-key (models.json)) \xe2\x80\x94 "
                  "showing 1-2 of 2 (page 1/1)\n- openai/gpt-t\n- openai/gpt-u\n\n"
                  "Switch: /model <provider/model>\nAll: /models openai all");
    free(r);
    EXPECT(cw_say(&w, 43, false, "/models anthropic"));
    r = cw_last_sent(&w);
    EXPECT_STR(r, "Unknown provider: anthropic\n\nAvailable providers:\n- openai\n\n"
                  "Use: /models <provider>");
    free(r);
    EXPECT_INT(w.si.n, 0);
    /* 44: in the open group, in no allowlist */
    int sent = cw_sent(&w);
    EXPECT(cw_say(&w, 44, true, "/model openai/gpt-u"));
    EXPECT(cw_say(&w, 44, true, "/model"));
    EXPECT(cw_say(&w, 44, true, "/models"));
    EXPECT_INT(cw_sent(&w), sent);
    EXPECT_INT(w.si.n, 0);
    json_t *e = cw_entry(&w, "agent:main:telegram:group:-5");
    EXPECT(!json_object_get(e, "modelOverride"));
    json_decref(e);
    /* 43 in the group: the group's session */
    EXPECT(cw_say(&w, 43, true, "/model quick"));
    EXPECT_INT(cw_sent(&w), sent + 1);
    e = cw_entry(&w, "agent:main:telegram:group:-5");
    EXPECT_STR(json_string_value(json_object_get(e, "modelOverride")), "gpt-u");
    json_decref(e);
    cw_stop(&w);
}

/* /model status names each provider's endpoint as a message may show a
 * URL (cm_redact_url): the key a baseUrl carries in its userinfo or its
 * query reaches no chat. */
TEST(gw_cmd_model_status_shows_no_key_of_an_endpoint)
{
    cworld w;
    if (!cw_start(&w, "{\"models\":{\"providers\":{\"azure\":{\"baseUrl\":"
                      "\"https://ops:pw-leak-4401@llm.example/v1?api-key=key-leak-4402\","
                      "\"api\":\"openai-completions\",\"models\":[{\"id\":\"gpt-z\"}]}}}}"))
        return;
    EXPECT(cw_say(&w, 43, false, "/model status"));
    char *r = cw_last_sent(&w);
    EXPECT_CONTAINS(r, "[azure] endpoint: https://llm.example/v1 api: openai-completions");
    EXPECT(!strstr(r, "leak-440"));
    free(r);
    cw_stop(&w);
}
