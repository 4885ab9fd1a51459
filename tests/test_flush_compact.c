/*
 * test_flush_compact.c — the memory flush never loses to compaction: a
 * model stand-in (a fakeserver handler) answers OpenAI's
 * context_length_exceeded past a request size, and otherwise plays the
 * agent, the flush (it writes every courier code it sees) and the
 * summariser. Each compaction path — on overflow, after a turn, asked for —
 * flushes first, once per cycle; a flush that fails or overflows does not
 * stop the turn.
 */
#include <jansson.h>
#include <pthread.h>

#include "../src/agent/session_turn.h"
#include "../src/base/fs.h"
#include "../src/session/sessions.h"
#include "fakeserver.h"
#include "test.h"

#define T0 1800000000000LL /* 2027-01-15 08:00 UTC */

static int64_t fc_clock(void *ctx)
{
    (void)ctx;
    return T0;
}

/* What the stand-in saw and how it behaves. */
typedef struct standin {
    pthread_mutex_t mu;
    size_t limit;     /* a body over this many bytes overflows; 0: no limit */
    bool flush_fails; /* flush requests answered 404 */
    int flushes, summaries, turns, overflows;
    int order[64]; /* 'F' flush, 'S' summary, 'T' turn, 'O' overflow */
    int n;
    size_t last_turn_bytes; /* the body size of the last turn answered */
    size_t last_turn_sys;   /* the length of that turn's system prompt */
    int extra_usage;        /* added to the prompt tokens a turn reports */
} standin;

static char *sse(const char *text, const char *call_args, size_t prompt_tokens, size_t *len)
{
    buf b = BUF_INIT;
    if (call_args) {
        json_t *a = json_string(call_args);
        char *q = json_dumps(a, JSON_ENCODE_ANY);
        cm_buf_printf(&b,
                      "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,"
                      "\"id\":\"w1\",\"function\":{\"name\":\"memory_write\",\"arguments\":%s}}]},"
                      "\"finish_reason\":\"tool_calls\"}]}\n\n",
                      q);
        free(q);
        json_decref(a);
    } else {
        json_t *t = json_string(text);
        char *q = json_dumps(t, JSON_ENCODE_ANY);
        cm_buf_printf(&b,
                      "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%s},"
                      "\"finish_reason\":\"stop\"}]}\n\n",
                      q);
        free(q);
        json_decref(t);
    }
    cm_buf_printf(&b,
                  "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":%zu,\"completion_tokens\":"
                  "10,\"total_tokens\":%zu}}\n\ndata: [DONE]\n\n",
                  prompt_tokens, prompt_tokens + 10);
    *len = b.len;
    return cm_buf_detach(&b);
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
    pthread_mutex_lock(&s->mu);
    *ctype = "text/event-stream";
    *status = 200;
    char tag;
    if (s->limit && body_len > s->limit) {
        tag = 'O';
        s->overflows++;
        *status = 400;
        *ctype = "application/json";
        buf e = BUF_INIT;
        cm_buf_printf(&e,
                      "{\"error\":{\"message\":\"This model's maximum context length is %zu "
                      "tokens. However, your messages resulted in %zu tokens. Please reduce the "
                      "length of the messages.\",\"type\":\"invalid_request_error\",\"param\":"
                      "\"messages\",\"code\":\"context_length_exceeded\"}}",
                      s->limit / 4, body_len / 4);
        *out_len = e.len;
        *out = cm_buf_detach(&e);
    } else if (flush && s->flush_fails) {
        tag = 'F';
        s->flushes++;
        *status = 404;
        *ctype = "application/json";
        *out = cm_strdup("{\"error\":{\"message\":\"no such route\"}}");
        *out_len = strlen(*out);
    } else if (flush && last_role && !strcmp(last_role, "tool")) {
        tag = 'F';
        *out = sse("NO_REPLY", NULL, body_len / 4, out_len);
    } else if (flush) {
        /* every courier code in the conversation, once */
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
        *out = sse(NULL, aj, body_len / 4, out_len);
        free(aj);
        json_decref(args);
        cm_buf_release(&note);
    } else if (summary) {
        tag = 'S';
        s->summaries++;
        *out = sse("## Goal\nKeep the courier codes.", NULL, body_len / 4, out_len);
    } else {
        tag = 'T';
        s->turns++;
        s->last_turn_bytes = body_len;
        s->last_turn_sys = sys ? strlen(sys) : 0;
        *out = sse("Noted.", NULL, body_len / 4 + (size_t)s->extra_usage, out_len);
    }
    if (s->n < (int)ARRAY_LEN(s->order)) s->order[s->n++] = tag;
    pthread_mutex_unlock(&s->mu);
    json_decref(doc);
    return true;
}

typedef struct fc_world {
    fake_server *fs;
    char base[64];
    char *dir, *ws, *state;
    json_t *cfg;
    cm_engine *eng;
    llm_runner *runner;
    char store[2048];
    agent_ctx a;
    standin si;
    tool_policy tools; /* the memory tools only: the sizes below assume them */
} fc_world;

static bool fc_start(fc_world *w, const char *models_json)
{
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->si.mu, NULL);
    w->fs = fake_start(8, w->base);
    fake_handler(w->fs, standin_answer, &w->si);
    w->dir = tmp_dir();
    w->ws = cm_strdup(path_in(w->dir, "ws"));
    w->state = cm_strdup(path_in(w->dir, "state"));
    write_file(w->dir, "ws/MEMORY.md", "# Facts\n");
    char cfg[4096];
    snprintf(cfg, sizeof cfg,
             "{\"agents\":{\"defaults\":{\"model\":\"openai/gpt-t\"}},"
             "\"models\":{\"providers\":{\"openai\":{\"baseUrl\":\"%s/v1\","
             "\"apiKey\":\"sk-test-flush-0001\",\"models\":%s}}}}",
             w->base, models_json ? models_json : "[]");
    w->cfg = json_loads(cfg, 0, NULL);
    cm_options o = {NULL, w->ws, NULL, w->state, NULL, NULL, 1};
    char err[512];
    write_file(w->dir, "state/quantumclaw.json", "{}");
    if (cm_engine_open(&o, &w->eng, err, sizeof err) ||
        cm_engine_sync(w->eng, 0, NULL, NULL, NULL, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "engine: %s", err);
        return false;
    }
    llm_runner_opts ro = {w->cfg, w->state, "main", fc_clock, NULL};
    if (cm_llm_runner_open(&ro, &w->runner, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "runner: %s", err);
        return false;
    }
    snprintf(w->store, sizeof w->store, "%s/agents/main/sessions/sessions.json", w->state);
    json_t *pol = json_loads("{\"tools\":{\"allow\":[\"group:memory\"]}}", 0, NULL);
    cm_tool_policy_init(&w->tools, pol, "main");
    json_decref(pol);
    w->a = (agent_ctx){w->cfg, w->state,  "main",    w->store, w->ws,
                       w->eng, w->runner, true,      fc_clock, NULL, &w->tools, NULL, NULL};
    return true;
}

static void fc_stop(fc_world *w)
{
    cm_tool_policy_release(&w->tools);
    cm_llm_runner_close(w->runner);
    cm_engine_close(w->eng);
    json_decref(w->cfg);
    fake_stop(w->fs);
    pthread_mutex_destroy(&w->si.mu);
    free(w->ws);
    free(w->state);
}

/* "Remember courier code BLUEHERON-<i>" with pad bytes of other words. */
static void code_turn(fc_world *w, int i, size_t pad)
{
    buf m = BUF_INIT;
    cm_buf_printf(&m, "Remember courier code BLUEHERON-%d for route %d.", i, i);
    for (size_t k = 0; k < pad / 8; k++)
        cm_buf_adds(&m, " parcel.");
    agent_reply r;
    char err[512];
    EXPECT_INT(cm_agent_session_turn(&w->a, "main", m.data, NULL, NULL, NULL, &r, err, sizeof err),
               CM_OK);
    cm_agent_reply_release(&r);
    cm_buf_release(&m);
}

static char *today_note(fc_world *w)
{
    buf b = BUF_INIT;
    char err[256];
    cm_fs_read_file(path_in(w->dir, "ws/memory/2027-01-15.md"), 1 << 20, &b, err, sizeof err);
    if (!b.data) cm_buf_adds(&b, "");
    return cm_buf_detach(&b);
}

static char *transcript_text(fc_world *w)
{
    session_store s;
    char err[256];
    buf b = BUF_INIT;
    if (cm_session_store_read(&s, w->store, err, sizeof err) == CM_OK) {
        const char *f = json_string_value(
            json_object_get(cm_session_store_get(&s, "agent:main:main"), "sessionFile"));
        if (f) cm_fs_read_file(f, 1 << 24, &b, err, sizeof err);
        cm_session_store_release(&s);
    }
    if (!b.data) cm_buf_adds(&b, "");
    return cm_buf_detach(&b);
}

/* Where tag first appears in the stand-in's log (-1: never). */
static int first_of(fc_world *w, char tag)
{
    for (int i = 0; i < w->si.n; i++)
        if (w->si.order[i] == tag) return i;
    return -1;
}

/* Four turns about courier codes; the limit then set just above the last
 * turn's request so that the next, longer message overflows. */
static void four_codes(fc_world *w, size_t headroom)
{
    for (int i = 1; i <= 4; i++)
        code_turn(w, i, 800);
    pthread_mutex_lock(&w->si.mu);
    w->si.limit = w->si.last_turn_bytes + headroom;
    pthread_mutex_unlock(&w->si.mu);
}

TEST(flush_before_compaction_on_overflow)
{
    fc_world w;
    if (!fc_start(&w, NULL)) return;
    four_codes(&w, 1500);
    /* The fifth message overflows: flush (all four codes), compact, retry. */
    buf m = BUF_INIT;
    cm_buf_adds(&m, "Now read this long manifest:");
    for (int k = 0; k < 300; k++)
        cm_buf_adds(&m, " crate.");
    agent_reply r;
    char err[512];
    EXPECT_INT(cm_agent_session_turn(&w.a, "main", m.data, NULL, NULL, NULL, &r, err, sizeof err),
               CM_OK);
    EXPECT_STR(r.text, "Noted.");
    EXPECT(r.compacted);
    EXPECT(r.flushed);
    cm_agent_reply_release(&r);
    cm_buf_release(&m);
    char *note = today_note(&w);
    for (int i = 1; i <= 4; i++) {
        char code[32];
        snprintf(code, sizeof code, "BLUEHERON-%d", i);
        EXPECT_CONTAINS(note, code);
    }
    free(note);
    /* overflow, then the flush, then the summary */
    EXPECT(first_of(&w, 'O') >= 0);
    EXPECT(first_of(&w, 'O') < first_of(&w, 'F'));
    EXPECT(first_of(&w, 'F') < first_of(&w, 'S'));
    EXPECT_INT(w.si.flushes, 1);
    /* the compacted messages stay in the transcript file */
    char *tr = transcript_text(&w);
    EXPECT_CONTAINS(tr, "Remember courier code BLUEHERON-1 for route 1.");
    EXPECT_CONTAINS(tr, "\"type\":\"compaction\"");
    free(tr);
    json_t *hist = NULL;
    session_store st;
    EXPECT_INT(cm_session_store_read(&st, w.store, err, sizeof err), CM_OK);
    json_t *e = cm_session_store_get(&st, "agent:main:main");
    EXPECT_INT(json_integer_value(json_object_get(e, "compactionCount")), 1);
    EXPECT_INT(json_integer_value(json_object_get(e, "memoryFlushCompactionCount")), 0);
    EXPECT_INT(cm_agent_session_history(json_string_value(json_object_get(e, "sessionFile")), &hist,
                                        err, sizeof err),
               CM_OK);
    cm_session_store_release(&st);
    /* the model's view no longer holds the first code */
    char *hs = json_dumps(hist, 0);
    EXPECT(strstr(hs, "BLUEHERON-1 for route") == NULL);
    free(hs);
    json_decref(hist);
    fc_stop(&w);
}

TEST(flush_failing_does_not_block_the_turn)
{
    fc_world w;
    if (!fc_start(&w, NULL)) return;
    four_codes(&w, 1500);
    w.si.flush_fails = true;
    buf m = BUF_INIT;
    cm_buf_adds(&m, "Now read this long manifest:");
    for (int k = 0; k < 300; k++)
        cm_buf_adds(&m, " crate.");
    agent_reply r;
    char err[512];
    EXPECT_INT(cm_agent_session_turn(&w.a, "main", m.data, NULL, NULL, NULL, &r, err, sizeof err),
               CM_OK);
    EXPECT_STR(r.text, "Noted.");
    EXPECT(r.compacted);
    EXPECT(!r.flushed);
    EXPECT_INT(w.si.flushes, 1); /* tried once, failed, then the summary */
    EXPECT(first_of(&w, 'F') < first_of(&w, 'S'));
    cm_agent_reply_release(&r);
    cm_buf_release(&m);
    char *note = today_note(&w);
    EXPECT_STR(note, "");
    free(note);
    fc_stop(&w);
}

TEST(flush_of_an_overflowing_history_gets_the_recent_part)
{
    fc_world w;
    if (!fc_start(&w, NULL)) return;
    for (int i = 1; i <= 8; i++)
        code_turn(&w, i, 800);
    /* even the history alone is now over the model's limit */
    pthread_mutex_lock(&w.si.mu);
    /* (the turn's system prompt aside: its size is not the history's) */
    w.si.limit = w.si.last_turn_bytes - w.si.last_turn_sys - 1500;
    pthread_mutex_unlock(&w.si.mu);
    agent_reply r;
    char err[512];
    EXPECT_INT(cm_agent_session_turn(&w.a, "main", "And the next code?", NULL, NULL, NULL, &r, err,
                                     sizeof err),
               CM_OK);
    EXPECT(r.flushed);
    EXPECT(r.compacted);
    EXPECT_STR(r.text, "Noted.");
    cm_agent_reply_release(&r);
    char *note = today_note(&w);
    EXPECT_CONTAINS(note, "BLUEHERON-8"); /* the most recent part */
    EXPECT(strstr(note, "BLUEHERON-1") == NULL);
    free(note);
    EXPECT(w.si.overflows >= 2); /* the turn's, then the flush's whole history */
    fc_stop(&w);
}

TEST(flush_before_compact_command_once_per_cycle)
{
    fc_world w;
    if (!fc_start(&w, NULL)) return;
    code_turn(&w, 1, 0);
    code_turn(&w, 2, 0);
    agent_reply r;
    char err[512];
    EXPECT_INT(cm_agent_session_compact(&w.a, "main", &r, err, sizeof err), CM_OK);
    EXPECT(r.compacted);
    EXPECT(r.flushed);
    EXPECT_STR(r.text, "");
    cm_agent_reply_release(&r);
    EXPECT(first_of(&w, 'F') >= 0 && first_of(&w, 'F') < first_of(&w, 'S'));
    char *note = today_note(&w);
    EXPECT_CONTAINS(note, "BLUEHERON-1");
    EXPECT_CONTAINS(note, "BLUEHERON-2");
    free(note);
    /* a new cycle: a forced flush, then /compact does not flush again */
    code_turn(&w, 3, 0);
    EXPECT_INT(cm_agent_session_flush(&w.a, "main", NULL, true, &r, err, sizeof err), CM_OK);
    EXPECT(r.flushed);
    cm_agent_reply_release(&r);
    int flushes = w.si.flushes;
    EXPECT_INT(cm_agent_session_compact(&w.a, "main", &r, err, sizeof err), CM_OK);
    EXPECT(r.compacted);
    EXPECT(!r.flushed);
    EXPECT_INT(w.si.flushes, flushes);
    cm_agent_reply_release(&r);
    fc_stop(&w);
}

TEST(flush_before_compaction_after_a_turn)
{
    /* A 30,000-token model: past 10,000 tokens after a turn, compaction. */
    fc_world w;
    if (!fc_start(&w, "[{\"id\":\"gpt-t\",\"contextWindow\":30000}]")) return;
    code_turn(&w, 1, 0);
    EXPECT_INT(w.si.flushes, 0);
    w.si.extra_usage = 12000; /* the second turn reports 12,000 tokens more */
    code_turn(&w, 2, 0);
    EXPECT_INT(w.si.summaries, 1);
    EXPECT_INT(w.si.flushes, 1);
    EXPECT(first_of(&w, 'F') >= 0 && first_of(&w, 'F') < first_of(&w, 'S'));
    char *note = today_note(&w);
    EXPECT_CONTAINS(note, "BLUEHERON-1");
    EXPECT_CONTAINS(note, "BLUEHERON-2");
    free(note);
    fc_stop(&w);
}
