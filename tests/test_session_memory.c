/*
 * test_session_memory.c — session memory search over transcripts: indexing,
 * the watcher following transcripts (and waiting longer for them), decay by
 * message times, private keys redacted, one index per agent, rebuild logs on
 * the caller's thread and small growth needing no lock.
 */
#include <dirent.h>
#include <signal.h>
#include <sys/file.h>

#include "../src/base/fs.h"
#include "../src/session/extract.h"
#include "test.h"

/* ---- session memory search ---- */

static cm_engine *open_engine(const char *state, const char *ws, bool sessions)
{
    char cfg[256];
    snprintf(cfg, sizeof cfg, "%s/quantumclaw.json", state);
    write_file("/", cfg,
               sessions ? "{agents:{defaults:{memorySearch:{sources:['memory','sessions'],"
                          "experimental:{sessionMemory:true}}}}}"
                        : "{}");
    cm_options o = {NULL, ws, cfg, state, NULL, NULL, 0};
    cm_engine *e = NULL;
    char err[512];
    if (cm_engine_open(&o, &e, err, sizeof err)) test_fail(__FILE__, __LINE__, "open: %s", err);
    return e;
}

static char *search_json(cm_engine *e, const char *q)
{
    char *js = NULL, err[512];
    cm_search_opts so = {10, 0, 0};
    char serr[512];
    cm_engine_sync(e, 0, NULL, NULL, NULL, serr, sizeof serr);
    if (cm_memory_search(e, q, &so, &js, err, sizeof err)) return NULL;
    return js;
}

static void append_msgs(const char *state, const char *ws, int n, const char *word)
{
    cm_options o = {NULL, ws, NULL, state, NULL, NULL, 0};
    cm_sessions *s = NULL;
    char err[512], *js = NULL;
    if (cm_sessions_open(&o, &s, err, sizeof err)) return;
    for (int i = 0; i < n; i++) {
        char t[128];
        snprintf(t, sizeof t, "message %d about %s", i, word);
        cm_sessions_append(s, "main", i % 2 ? "assistant" : "user", t, &js, err, sizeof err);
        cm_free(js);
    }
    cm_sessions_close(s);
}

TEST(session_memory_search_indexes_transcripts)
{
    char *d = tmp_dir();
    char *state = cm_strdup(path_in(d, "state")), *ws = cm_strdup(path_in(d, "ws"));
    write_file(d, "ws/MEMORY.md", "# Facts\n\n- nothing about fish\n");
    write_file(d, "state/quantumclaw.json", "{}");
    append_msgs(state, ws, 2, "bluefin");
    /* sessions off: no session hits */
    cm_engine *e = open_engine(state, ws, false);
    char *js = search_json(e, "bluefin");
    EXPECT(js && strstr(js, "sessions/") == NULL);
    cm_free(js);
    cm_engine_close(e);
    /* on: the transcript's text, lines mapped to the JSONL lines */
    e = open_engine(state, ws, true);
    js = search_json(e, "bluefin");
    EXPECT_CONTAINS(js, "\"source\":\"sessions\"");
    EXPECT_CONTAINS(js, "\"path\":\"sessions/");
    EXPECT_CONTAINS(js, "\"startLine\":2,\"endLine\":3");
    EXPECT_CONTAINS(js, "User: message 0 about bluefin");
    cm_free(js);
    /* memory_get never reads a transcript: session hits are snippets only */
    char err[512];
    EXPECT_INT(cm_memory_get(e, "sessions/x.jsonl", 0, 0, &js, err, sizeof err), CM_EPATH);
    /* 49 more lines: under deltaMessages (50), not indexed yet */
    append_msgs(state, ws, 49, "mackerel");
    js = search_json(e, "mackerel");
    EXPECT(js && strstr(js, "mackerel") == NULL);
    cm_free(js);
    /* one more: 50 lines, indexed */
    append_msgs(state, ws, 1, "mackerel");
    js = search_json(e, "mackerel");
    EXPECT_CONTAINS(js, "about mackerel");
    cm_free(js);
    /* a reset archives the transcript: its hits go; the new one is indexed */
    cm_options o = {NULL, ws, NULL, state, NULL, NULL, 0};
    cm_sessions *s = NULL;
    char *out = NULL;
    EXPECT_INT(cm_sessions_open(&o, &s, err, sizeof err), CM_OK);
    EXPECT_INT(cm_sessions_reset(s, "main", &out, err, sizeof err), CM_OK);
    cm_free(out);
    cm_sessions_close(s);
    append_msgs(state, ws, 1, "halibut");
    js = search_json(e, "mackerel");
    EXPECT(js && strstr(js, "mackerel") == NULL);
    cm_free(js);
    js = search_json(e, "halibut");
    EXPECT_CONTAINS(js, "about halibut");
    cm_free(js);
    /* a transcript that shrank was rewritten: indexed again at once */
    DIR *dir = opendir(path_in(state, "agents/main/sessions"));
    EXPECT(dir != NULL);
    struct dirent *de;
    while (dir && (de = readdir(dir))) {
        size_t nl = strlen(de->d_name);
        if (nl < 6 || strcmp(de->d_name + nl - 6, ".jsonl") != 0) continue;
        char rel[512];
        snprintf(rel, sizeof rel, "agents/main/sessions/%s", de->d_name);
        buf text = BUF_INIT;
        EXPECT_INT(cm_fs_read_file(path_in(state, rel), 1 << 20, &text, err, sizeof err), CM_OK);
        char *at = strstr(text.data, "halibut");
        EXPECT(at != NULL);
        if (at) { /* "halibut" -> "tuna": three bytes shorter */
            memcpy(at, "tuna", 4);
            memmove(at + 4, at + 7, strlen(at + 7) + 1);
            write_file(state, rel, text.data);
        }
        cm_buf_release(&text);
    }
    if (dir) closedir(dir);
    js = search_json(e, "tuna");
    EXPECT_CONTAINS(js, "about tuna");
    cm_free(js);
    cm_engine_close(e);
    free(state);
    free(ws);
}

#include "../src/index/watch.h"

/* The watcher follows the sessions dir when transcripts are indexed: a
 * transcript's append is a change, the store's other files are not, and a
 * sessions dir that is a symlink is not followed. */
TEST(session_memory_watcher_follows_transcripts)
{
    char *d = tmp_dir();
    write_file(d, "ws/MEMORY.md", "x\n");
    write_file(d, "sessions/a.jsonl", "{}\n");
    static const char *src[] = {"memory", "sessions"};
    cm_config c = {0};
    char *ws = cm_strdup(path_in(d, "ws")), *sd = cm_strdup(path_in(d, "sessions"));
    char *link = cm_strdup(path_in(d, "link"));
    c.workspace = ws;
    c.sessions_dir = sd;
    c.sources.v = (char **)src;
    c.sources.n = 2;
    char err[256];
    for (int on = 0; on < 2; on++) {
        c.session_memory = on;
        watcher *w = NULL;
        EXPECT_INT(cm_watcher_open(&c, NULL, &w, err, sizeof err), CM_OK);
        write_file(d, "sessions/a.jsonl", "{}\n{}\n");
        EXPECT_INT((cm_watcher_read(w) & WATCH_SESSIONS) != 0, on);
        write_file(d, "sessions/sessions.json", "{}");
        write_file(d, "sessions/a.jsonl.lock", "{}");
        EXPECT_INT(cm_watcher_read(w) & (WATCH_CHANGED | WATCH_SESSIONS), 0);
        cm_watcher_close(w);
    }
    /* a sessions dir that is not there yet: rescans instead of events */
    c.session_memory = 1;
    char *notyet = cm_strdup(path_in(d, "not-yet"));
    c.sessions_dir = notyet;
    watcher *nw = NULL;
    EXPECT_INT(cm_watcher_open(&c, NULL, &nw, err, sizeof err), CM_OK);
    EXPECT(cm_watcher_degraded(nw));
    cm_watcher_close(nw);
    free(notyet);
    c.sessions_dir = sd;
    EXPECT_INT(cm_watcher_open(&c, NULL, &nw, err, sizeof err), CM_OK);
    EXPECT(!cm_watcher_degraded(nw));
    cm_watcher_close(nw);
    /* a link in place of the sessions dir is not followed */
    write_file(d, "other/b.jsonl", "{}\n");
    c.sessions_dir = link;
    EXPECT(symlink(path_in(d, "other"), c.sessions_dir) == 0);
    watcher *w = NULL;
    EXPECT_INT(cm_watcher_open(&c, NULL, &w, err, sizeof err), CM_OK);
    write_file(d, "other/b.jsonl", "{}\n{}\n");
    EXPECT_INT(cm_watcher_read(w) & (WATCH_CHANGED | WATCH_SESSIONS), 0);
    cm_watcher_close(w);
    free(ws);
    free(sd);
    free(link);
}

/* A transcript hit decays by the time of its newest message, not by when the
 * file was last written: two transcripts written just now, one of them a
 * conversation from 60 days ago (two half-lives of 30 days). */
TEST(session_memory_decay_uses_message_times)
{
    char *d = tmp_dir();
    char *state = cm_strdup(path_in(d, "state")), *ws = cm_strdup(path_in(d, "ws"));
    write_file(d, "ws/MEMORY.md", "# Facts\n");
    int64_t now = 1800000000; /* unix s */
    for (int k = 0; k < 2; k++) {
        int64_t ms = (now - (k ? 60 : 0) * 86400) * 1000;
        char line[512], rel[128];
        snprintf(line, sizeof line,
                 "{\"type\":\"session\",\"version\":3,\"id\":\"s%d\",\"timestamp\":\"x\",\"cwd\":"
                 "\"/\"}\n"
                 "{\"type\":\"message\",\"id\":\"m%d\",\"parentId\":null,\"timestamp\":\"x\","
                 "\"message\":{\"role\":\"user\",\"content\":\"the walrus named "
                 "%s\",\"timestamp\":%lld}}\n",
                 k, k, k ? "Old" : "New", (long long)ms);
        snprintf(rel, sizeof rel, "agents/main/sessions/s%d.jsonl", k);
        write_file(state, rel, line);
    }
    write_file(d, "state/quantumclaw.json",
               "{agents:{defaults:{memorySearch:{sources:['memory','sessions'],"
               "experimental:{sessionMemory:true},query:{hybrid:{temporalDecay:{enabled:true,"
               "halfLifeDays:30}}}}}}}");
    cm_options o = {NULL, ws, path_in(state, "quantumclaw.json"), state, NULL, NULL, 0};
    cm_engine *e = NULL;
    char err[512], *js = NULL;
    EXPECT_INT(cm_engine_open(&o, &e, err, sizeof err), CM_OK);
    EXPECT_INT(cm_engine_sync(e, 0, NULL, NULL, NULL, err, sizeof err), CM_OK);
    cm_search_opts so = {10, 0, now};
    EXPECT_INT(cm_memory_search(e, "walrus", &so, &js, err, sizeof err), CM_OK);
    json_t *root = json_loads(js ? js : "", 0, NULL), *res = json_object_get(root, "results");
    EXPECT_INT(json_array_size(res), 2);
    double s_new = 0, s_old = 0;
    for (size_t i = 0; i < json_array_size(res); i++) {
        json_t *h = json_array_get(res, i);
        const char *snip = json_string_value(json_object_get(h, "snippet"));
        double sc = json_number_value(json_object_get(h, "score"));
        if (snip && strstr(snip, "New")) s_new = sc;
        if (snip && strstr(snip, "Old")) s_old = sc;
    }
    EXPECT(s_new > 0 && s_old > 0);
    EXPECT(s_old < s_new * 0.3 && s_old > s_new * 0.2); /* 0.25: two half-lives */
    json_decref(root);
    cm_free(js);
    cm_engine_close(e);
    free(state);
    free(ws);
}

/* PEM private keys as QuantumClaw 2026.3.22 redacts them (expected strings
 * taken from its redactSensitiveText): a block of several lines keeps its
 * first and last line, a one-line block (every transcript message, once its
 * whitespace is collapsed) becomes "***", lower-case markers are masked as a
 * token; and a transcript message with a key stays one line. */
TEST(session_redaction_of_private_keys)
{
    static const char *const cases[][2] = {
        {"a -----BEGIN RSA PRIVATE KEY----- AAA -----END RSA PRIVATE KEY----- b", "a *** b"},
        {"x\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\nabc\n-----END RSA PRIVATE KEY-----\ny",
         "x\n-----BEGIN RSA PRIVATE KEY-----\n\xe2\x80\xa6redacted\xe2\x80\xa6\n-----END RSA "
         "PRIVATE "
         "KEY-----\ny"},
        {"-----begin rsa private key----- zzz -----end rsa private key-----",
         "-----b\xe2\x80\xa6----"},
        {"-----BEGIN RSA PRIVATE KEY----------END RSA PRIVATE KEY-----",
         "-----BEGIN RSA PRIVATE KEY----------END RSA PRIVATE KEY-----"},
        {"no end -----BEGIN RSA PRIVATE KEY----- AAA",
         "no end -----BEGIN RSA PRIVATE KEY----- AAA"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        buf out = BUF_INIT;
        EXPECT_INT(cm_session_redact(cases[i][0], strlen(cases[i][0]), &out), CM_OK);
        EXPECT_STR(out.data, cases[i][1]);
        cm_buf_release(&out);
    }
    /* A key named in a key=value line: its body goes too (QuantumClaw's
     * order masks only the BEGIN marker and keeps the body). */
    static const char *const named[] = {
        "key: -----BEGIN RSA PRIVATE KEY-----\nMIIEsecretbody\nmore\n-----END RSA PRIVATE KEY-----",
        "SSH_PRIVATE_KEY=-----BEGIN OPENSSH PRIVATE KEY----- MIIEsecretbody "
        "-----END OPENSSH PRIVATE KEY-----",
    };
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
        buf out = BUF_INIT;
        EXPECT_INT(cm_session_redact(named[i], strlen(named[i]), &out), CM_OK);
        EXPECT(out.data && !strstr(out.data, "secretbody"));
        cm_buf_release(&out);
    }
    const char *t =
        "{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":\"mine:\\n"
        "-----BEGIN RSA PRIVATE KEY-----\\nMIIEpAIB\\n-----END RSA PRIVATE KEY-----\"}}\n";
    session_doc d;
    EXPECT_INT(cm_session_extract(t, strlen(t), &d), CM_OK);
    EXPECT_INT(d.n, 1);
    EXPECT_STR(d.text.data, "User: mine: ***");
    cm_session_doc_release(&d);
}

/* Per-agent isolation: agent "ops" sharing the state dir (and even the
 * workspace) with "main" indexes only its own transcripts. */
TEST(session_memory_is_per_agent)
{
    char *d = tmp_dir();
    char *state = cm_strdup(path_in(d, "state")), *ws = cm_strdup(path_in(d, "ws"));
    write_file(d, "ws/MEMORY.md", "# Facts\n");
    write_file(d, "state/quantumclaw.json",
               "{agents:{defaults:{memorySearch:{sources:['memory','sessions'],"
               "experimental:{sessionMemory:true}}}}}");
    append_msgs(state, ws, 2, "narwhal"); /* main's session */
    char err[512], *js = NULL, *out = NULL;
    cm_options oo = {"ops", ws, NULL, state, NULL, NULL, 0};
    cm_sessions *s = NULL;
    EXPECT_INT(cm_sessions_open(&oo, &s, err, sizeof err), CM_OK);
    EXPECT_INT(cm_sessions_append(s, "main", "user", "the ops agent talks about a manatee", &out,
                                  err, sizeof err),
               CM_OK);
    cm_free(out);
    cm_sessions_close(s);
    cm_search_opts so = {10, 0, 0};
    const char *agents[] = {"main", "ops"};
    for (int a = 0; a < 2; a++) {
        cm_options o = {agents[a], ws, NULL, state, NULL, NULL, 0};
        cm_engine *e = NULL;
        EXPECT_INT(cm_engine_open(&o, &e, err, sizeof err), CM_OK);
        EXPECT_INT(cm_engine_sync(e, 0, NULL, NULL, NULL, err, sizeof err), CM_OK);
        EXPECT_INT(cm_memory_search(e, "narwhal", &so, &js, err, sizeof err), CM_OK);
        EXPECT_INT(strstr(js, "about narwhal") != NULL, a == 0);
        cm_free(js);
        EXPECT_INT(cm_memory_search(e, "manatee", &so, &js, err, sizeof err), CM_OK);
        EXPECT_INT(strstr(js, "manatee") != NULL, a == 1);
        cm_free(js);
        cm_engine_close(e);
    }
    free(state);
    free(ws);
}

#include <pthread.h>

typedef struct session_watch {
    cm_engine *e;
    volatile int stop;
    int syncs;
    pthread_t tid;
} session_watch;

static void session_watch_synced(void *ctx, cm_rc rc, const cm_sync_stats *st, const char *err)
{
    (void)st;
    (void)err;
    if (!rc) __atomic_add_fetch(&((session_watch *)ctx)->syncs, 1, __ATOMIC_SEQ_CST);
}

static void *session_watch_run(void *arg)
{
    session_watch *t = arg;
    cm_watch_opts o = {&t->stop, -1, 20, session_watch_synced, t, 800};
    char err[512];
    cm_engine_watch(t->e, &o, err, sizeof err);
    return NULL;
}

static int session_watch_syncs(session_watch *t)
{
    return __atomic_load_n(&t->syncs, __ATOMIC_SEQ_CST);
}

/* The watcher waits longer for transcripts (QuantumClaw's 5 s; 800 ms here)
 * than for Markdown (20 ms here): appended messages are indexed after that
 * wait, not at once, and a Markdown change still syncs at its own pace. */
TEST(session_memory_watch_waits_longer_for_transcripts)
{
    char *d = tmp_dir();
    char *state = cm_strdup(path_in(d, "state")), *ws = cm_strdup(path_in(d, "ws"));
    write_file(d, "ws/MEMORY.md", "# Facts\n");
    append_msgs(state, ws, 1, "start");
    session_watch t = {open_engine(state, ws, true), 0, 0, 0};
    pthread_create(&t.tid, NULL, session_watch_run, &t);
    int64_t until = cm_now_ms() + 10000;
    while (session_watch_syncs(&t) < 1 && cm_now_ms() < until)
        usleep(10000);
    EXPECT(session_watch_syncs(&t) >= 1); /* the first sync */
    int s0 = session_watch_syncs(&t);
    int64_t t0 = cm_now_ms();
    append_msgs(state, ws, 60, "walrus"); /* over deltaMessages: indexed when synced */
    usleep(300000);
    if (cm_now_ms() - t0 < 700) EXPECT_INT(session_watch_syncs(&t), s0); /* still waiting */
    until = cm_now_ms() + 10000;
    while (session_watch_syncs(&t) == s0 && cm_now_ms() < until)
        usleep(10000);
    EXPECT(session_watch_syncs(&t) > s0);
    EXPECT(cm_now_ms() - t0 >= 750);
    cm_engine *reader = open_engine(state, ws, true); /* an engine is one thread's */
    char *js = search_json(reader, "walrus");
    EXPECT_CONTAINS(js, "about walrus");
    cm_free(js);
    cm_engine_close(reader);
    int s1 = session_watch_syncs(&t);
    int64_t t1 = cm_now_ms();
    write_file(d, "ws/MEMORY.md", "# Facts\n\n- a new fact\n");
    until = cm_now_ms() + 10000;
    while (session_watch_syncs(&t) == s1 && cm_now_ms() < until)
        usleep(5000);
    EXPECT(session_watch_syncs(&t) > s1);
    EXPECT(cm_now_ms() - t1 < 700); /* Markdown: its own 20 ms debounce */
    __atomic_store_n(&t.stop, 1, __ATOMIC_RELEASE);
    pthread_join(t.tid, NULL);
    cm_engine_close(t.e);
    free(state);
    free(ws);
}

/* The rebuild's reader thread never calls the caller's log callback: its
 * warnings are logged by the writer, on the thread that called. */
static pthread_t log_caller;

static int log_elsewhere, log_seen;

static void log_thread_check(void *ctx, cm_log_level level, const char *msg)
{
    (void)ctx;
    (void)level;
    if (strstr(msg, "invalid UTF-8")) log_seen++;
    if (!pthread_equal(pthread_self(), log_caller)) log_elsewhere++;
}

TEST(session_rebuild_logs_on_the_callers_thread)
{
    char *d = tmp_dir();
    char *state = cm_strdup(path_in(d, "state")), *ws = cm_strdup(path_in(d, "ws"));
    write_file(d, "ws/MEMORY.md", "# Facts\n");
    for (int i = 0; i < 80; i++) {
        char n[64];
        snprintf(n, sizeof n, "ws/memory/n%02d.md", i);
        write_file(d, n, i == 70 ? "bad \xff utf8\n" : "note\n");
    }
    write_file(d, "state/quantumclaw.json", "{}");
    cm_options o = {NULL, ws, NULL, state, log_thread_check, NULL, 0};
    cm_engine *e = NULL;
    char err[512];
    EXPECT_INT(cm_engine_open(&o, &e, err, sizeof err), CM_OK);
    log_caller = pthread_self();
    EXPECT_INT(cm_engine_sync(e, CM_SYNC_FORCE, NULL, NULL, NULL, err, sizeof err), CM_OK);
    EXPECT_INT(log_seen, 1);
    EXPECT_INT(log_elsewhere, 0);
    cm_engine_close(e);
    free(state);
    free(ws);
}

/* A transcript that grew less than the delta is no change to the read-only
 * check: a search's sync needs no writer lock for it (here held by someone
 * else), and status does not count it as dirty. */
TEST(session_memory_small_growth_needs_no_lock)
{
    char *d = tmp_dir();
    char *state = cm_strdup(path_in(d, "state")), *ws = cm_strdup(path_in(d, "ws"));
    write_file(d, "ws/MEMORY.md", "# Facts\n");
    append_msgs(state, ws, 2, "start");
    cm_engine *e = open_engine(state, ws, true);
    char err[512];
    cm_sync_stats st;
    EXPECT_INT(cm_engine_sync(e, 0, NULL, NULL, &st, err, sizeof err), CM_OK);
    int fd = open(path_in(state, "memory/main.clawmem.sqlite.lock"), O_RDWR);
    EXPECT(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0);
    append_msgs(state, ws, 1, "tiny"); /* below deltaBytes and deltaMessages */
    EXPECT_INT(cm_engine_sync(e, CM_SYNC_NOWAIT, NULL, NULL, &st, err, sizeof err), CM_OK);
    EXPECT_INT(st.files_indexed, 0);
    char *js = NULL;
    EXPECT_INT(cm_engine_status(e, 1, &js, err, sizeof err), CM_OK);
    EXPECT_CONTAINS(js, "\"dirtyFiles\":0");
    cm_free(js);
    if (fd >= 0) close(fd);
    cm_engine_close(e);
    free(state);
    free(ws);
}
