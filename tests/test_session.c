/*
 * test_session.c — the session layer (src/session): QuantumClaw's key
 * grammar, transcripts in pi-coding-agent's format (header, records chained
 * by parentId, torn lines skipped and repaired), and appends from several
 * processes and under kill -9.
 */
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../src/base/fs.h"
#include "../src/session/keys.h"
#include "../src/session/transcript.h"
#include "test.h"

#define T0 1800000000000LL

static char *key_of(const char *agent, const char *channel, const char *account, const char *kind,
                    const char *peer, const char *thread, session_dm_scope scope, bool global,
                    const json_t *links)
{
    session_route r;
    memset(&r, 0, sizeof r);
    r.agent_id = agent;
    r.channel = channel;
    r.account_id = account;
    r.peer_kind = kind;
    r.peer_id = peer;
    r.thread_id = thread;
    r.dm_scope = scope;
    r.global = global;
    r.identity_links = links;
    buf b = BUF_INIT;
    if (cm_session_key_for(&b, &r)) return NULL;
    if (!b.data) cm_buf_adds(&b, "");
    return cm_buf_detach(&b);
}

#define KEY(want, a, ch, acct, kind, peer, thread, ...)                                            \
    KEYX(want, a, ch, acct, kind, peer, thread, __VA_ARGS__ + 0, false, NULL)
#define KEYX(want, ...)                                                                            \
    do {                                                                                           \
        char *k_ = key_of(__VA_ARGS__);                                                            \
        bool ok_ = k_ && !strcmp(k_, want);                                                        \
        if (!ok_) test_fail(__FILE__, __LINE__, "key: got %s, want %s", k_, want);                 \
        free(k_);                                                                                  \
        if (!ok_) return;                                                                          \
    } while (0)

TEST(session_keys_follow_the_grammar)
{
    /* Direct chats collapse to the main key unless dmScope says otherwise. */
    KEY("agent:main:main", "main", "telegram", "acct", "direct", "12345", NULL, SESSION_DM_MAIN);
    KEY("agent:main:direct:12345", "main", "telegram", "acct", "direct", "12345", NULL,
        SESSION_DM_PER_PEER);
    KEY("agent:main:telegram:direct:12345", "Main", "Telegram", "acct", "direct", "12345", NULL,
        SESSION_DM_PER_CHANNEL_PEER);
    KEY("agent:ops:telegram:bot-1:direct:alice", "Ops", "telegram", "Bot 1", "direct", "Alice",
        NULL, SESSION_DM_PER_ACCOUNT_CHANNEL_PEER);
    KEY("agent:main:telegram:default:direct:x", "main", "telegram", NULL, "direct", "x", NULL,
        SESSION_DM_PER_ACCOUNT_CHANNEL_PEER);
    /* A direct chat without a peer id is the main session. */
    KEY("agent:main:main", "main", "telegram", NULL, "direct", "", NULL, SESSION_DM_PER_PEER);
    /* Groups and channels get their own; unknown parts say so. */
    KEY("agent:main:telegram:group:-100123", "main", "telegram", NULL, "group", "-100123", NULL);
    KEY("agent:main:unknown:channel:unknown", "main", NULL, NULL, "channel", NULL, NULL);
    /* Threads and topics append a suffix. */
    KEY("agent:main:telegram:group:-100123:thread:77", "main", "telegram", NULL, "group", "-100123",
        "77");
    /* Agent ids are normalised as QuantumClaw does. */
    KEY("agent:my-bot:main", "My Bot!", NULL, NULL, "direct", "x", NULL);
    KEY("agent:main:main", "", NULL, NULL, "direct", "x", NULL);
    KEY("agent:_x:main", "_x", NULL, NULL, "direct", "x", NULL);
    /* session.scope global */
    KEYX("global", "main", "telegram", NULL, "group", "1", NULL, SESSION_DM_MAIN, true, NULL);
    /* identityLinks collapse a person's ids on several channels. */
    json_t *links = json_pack("{s:[s,s]}", "alice", "telegram:111", "222");
    KEYX("agent:main:direct:alice", "main", "telegram", NULL, "direct", "111", NULL,
         SESSION_DM_PER_PEER, false, links);
    KEYX("agent:main:http:direct:alice", "main", "http", NULL, "direct", "222", NULL,
         SESSION_DM_PER_CHANNEL_PEER, false, links);
    KEYX("agent:main:direct:333", "main", "telegram", NULL, "direct", "333", NULL,
         SESSION_DM_PER_PEER, false, links);
    json_decref(links);

    buf b = BUF_INIT;
    EXPECT_INT(cm_session_store_key(&b, "main", "MAIN"), CM_OK);
    EXPECT_STR(b.data, "agent:main:main");
    cm_buf_reset(&b);
    EXPECT_INT(cm_session_store_key(&b, "ops", "Telegram:Group:42"), CM_OK);
    EXPECT_STR(b.data, "agent:ops:telegram:group:42");
    cm_buf_reset(&b);
    EXPECT_INT(cm_session_store_key(&b, "ops", "Agent:Main:Direct:Bob"), CM_OK);
    EXPECT_STR(b.data, "agent:main:direct:bob");
    cm_buf_reset(&b);
    EXPECT_INT(cm_session_key_agent(&b, "agent:Ops:main"), CM_OK);
    EXPECT_STR(b.data, "ops");
    cm_buf_release(&b);
    EXPECT_INT(cm_session_chat_of("agent:main:telegram:group:1"), SESSION_CHAT_GROUP);
    EXPECT_INT(cm_session_chat_of("agent:main:discord:channel:1:thread:2"), SESSION_CHAT_CHANNEL);
    EXPECT_INT(cm_session_chat_of("agent:main:direct:bob"), SESSION_CHAT_DIRECT);
    EXPECT_INT(cm_session_chat_of("agent:main:main"), SESSION_CHAT_UNKNOWN);
    EXPECT_INT(cm_session_dm_scope_parse("per-channel-peer"), SESSION_DM_PER_CHANNEL_PEER);
    EXPECT_INT(cm_session_dm_scope_parse("nope"), -1);
}

typedef struct collected {
    json_t *records; /* array of [line, record] */
} collected;

static bool collect(void *ctx, int line, json_t *rec)
{
    collected *c = ctx;
    json_array_append_new(c->records, json_pack("[i,O]", line, rec));
    return true;
}

static json_t *read_all(const char *path)
{
    collected c = {json_array()};
    char err[256];
    if (cm_transcript_read(path, 1 << 26, collect, &c, err, sizeof err) != CM_OK) {
        json_decref(c.records);
        return NULL;
    }
    return c.records;
}

TEST(session_transcript_format_and_chain)
{
    char *d = tmp_dir();
    buf p = BUF_INIT;
    EXPECT(cm_transcript_id_valid("3f2a9c1e-0000-4000-8000-000000000001"));
    EXPECT(!cm_transcript_id_valid("../etc"));
    EXPECT(!cm_transcript_id_valid(".hidden"));
    EXPECT_INT(cm_transcript_path(&p, d, "abc", "a b/c"), CM_OK);
    EXPECT(strstr(p.data, "/abc-topic-a%20b%2Fc.jsonl") != NULL);
    cm_buf_reset(&p);
    EXPECT_INT(cm_transcript_path(&p, d, "sess-1", NULL), CM_OK);
    char err[256], id1[40], id2[40], id3[40];
    json_t *u = cm_transcript_user_message("What is the dog called?", T0);
    json_t *m = json_pack("{s:o}", "message", u);
    EXPECT_INT(
        cm_transcript_append(p.data, "sess-1", "/home/x", "message", m, T0, id1, err, sizeof err),
        CM_OK);
    json_decref(m);
    m = json_pack("{s:o}", "message",
                  cm_transcript_assistant_message("Biscuit.", "openai-completions", "openai",
                                                  "gpt-x", "stop", T0 + 5));
    EXPECT_INT(cm_transcript_append(p.data, "sess-1", "/home/x", "message", m, T0 + 5, id2, err,
                                    sizeof err),
               CM_OK);
    json_decref(m);
    m = json_pack("{s:s,s:s,s:i}", "summary", "They talked about the dog.", "firstKeptEntryId", id2,
                  "tokensBefore", 1234);
    EXPECT_INT(cm_transcript_append(p.data, "sess-1", "/home/x", "compaction", m, T0 + 9, id3, err,
                                    sizeof err),
               CM_OK);
    json_decref(m);
    EXPECT_INT((int)strlen(id1), 8);

    /* Byte for byte the shape pi-coding-agent writes. */
    buf text = BUF_INIT;
    EXPECT_INT(cm_fs_read_file(p.data, 1 << 20, &text, err, sizeof err), CM_OK);
    char want[2048];
    snprintf(want, sizeof want,
             "{\"type\":\"session\",\"version\":3,\"id\":\"sess-1\",\"timestamp\":\"2027-01-15T08:"
             "00:00.000Z\",\"cwd\":\"/home/x\"}\n"
             "{\"type\":\"message\",\"id\":\"%s\",\"parentId\":null,\"timestamp\":\"2027-01-15T08:"
             "00:00.000Z\","
             "\"message\":{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"What is "
             "the dog called?\"}],\"timestamp\":1800000000000}}\n",
             id1);
    EXPECT(strncmp(text.data, want, strlen(want)) == 0);
    if (strncmp(text.data, want, strlen(want)) != 0)
        test_fail(__FILE__, __LINE__, "got:\n%s", text.data);
    EXPECT_CONTAINS(text.data, "\"parentId\":\"");
    cm_buf_release(&text);
    struct stat st;
    EXPECT(stat(p.data, &st) == 0 && (st.st_mode & 0777) == 0600);

    json_t *all = read_all(p.data);
    EXPECT_INT(json_array_size(all), 4);
    json_t *r2 = json_array_get(json_array_get(all, 2), 1),
           *r3 = json_array_get(json_array_get(all, 3), 1);
    EXPECT_STR(json_string_value(json_object_get(r2, "parentId")), id1);
    EXPECT_STR(json_string_value(json_object_get(r3, "parentId")), id2);
    EXPECT_STR(json_string_value(json_object_get(r3, "firstKeptEntryId")), id2);
    EXPECT_INT(json_integer_value(json_array_get(json_array_get(all, 3), 0)), 4);
    json_decref(all);

    /* A torn last line is skipped by readers and cut by the next append. */
    FILE *f = fopen(p.data, "a");
    fputs("{\"type\":\"message\",\"id\":\"torn", f);
    fclose(f);
    all = read_all(p.data);
    EXPECT_INT(json_array_size(all), 4);
    json_decref(all);
    m = json_pack("{s:o}", "message", cm_transcript_user_message("next", T0 + 20));
    char id4[40];
    EXPECT_INT(cm_transcript_append(p.data, "sess-1", "/home/x", "message", m, T0 + 20, id4, err,
                                    sizeof err),
               CM_OK);
    json_decref(m);
    all = read_all(p.data);
    EXPECT_INT(json_array_size(all), 5);
    EXPECT_STR(
        json_string_value(json_object_get(json_array_get(json_array_get(all, 4), 1), "parentId")),
        id3);
    json_decref(all);
    cm_buf_release(&p);
}

static int appender(const char *path, int n, int who)
{
    char err[256], text[64];
    for (int i = 0; i < n; i++) {
        snprintf(text, sizeof text, "p%d-%d", who, i);
        json_t *m = json_pack("{s:o}", "message", cm_transcript_user_message(text, T0 + i));
        cm_rc rc =
            cm_transcript_append(path, "s", "/", "message", m, T0 + i, NULL, err, sizeof err);
        json_decref(m);
        if (rc) {
            fprintf(stderr, "appender: %s\n", err);
            return 1;
        }
    }
    return 0;
}

/* The records of path with their ids and parents checked as a chain
 * (each parentId the previous record's id, null after the header), then
 * removed: what is left compares across two files. NULL when the chain
 * is broken. */
static json_t *unchained(const char *path)
{
    json_t *all = read_all(path), *out = json_array();
    const char *prev = NULL;
    size_t i;
    json_t *lr;
    json_array_foreach(all, i, lr)
    {
        json_t *r = json_deep_copy(json_array_get(lr, 1));
        if (i > 0) {
            const char *parent = json_string_value(json_object_get(r, "parentId"));
            if (!json_is_string(json_object_get(r, "id")) ||
                (prev ? !parent || strcmp(parent, prev) : !json_is_null(json_object_get(r, "parentId")))) {
                json_decref(r);
                json_decref(out);
                out = NULL;
                break;
            }
            prev = json_string_value(json_object_get(json_array_get(lr, 1), "id"));
            json_object_del(r, "id");
            json_object_del(r, "parentId");
        }
        json_array_append_new(out, r);
    }
    json_decref(all);
    return out;
}

/* A turn's records in one append (cm_transcript_note_turn, the context read
 * whole) are the records the model notes and the per-message appends wrote
 * (same types, fields, timestamps, a parent chain): at a session's start
 * (no file yet), on later turns, after a /think change; and append_all
 * cuts a torn last line and chains from the last complete record. */
TEST(session_transcript_turn_records_in_one_append)
{
    char *d = tmp_dir();
    buf a = BUF_INIT, b = BUF_INIT;
    cm_fs_join(&a, d, "old.jsonl");
    cm_fs_join(&b, d, "new.jsonl");
    char err[256];
    const char *levels[] = {"off", "off", "high", "high"};
    for (int turn = 0; turn < 4; turn++) {
        int64_t now = T0 + turn * 1000;
        transcript_model m = {"openai", "gpt-x", "openai-completions", levels[turn]};
        json_t *msgs = json_pack("[o,o]", cm_transcript_user_message("hi", now),
                                 cm_transcript_assistant_message("hello", "openai-completions",
                                                                 "openai", "gpt-x", "stop", now));
        /* the old way: the model records, then one append per message */
        EXPECT_INT(cm_transcript_note_model(a.data, "s", "/w", &m, NULL, now, err, sizeof err),
                   CM_OK);
        size_t i;
        json_t *msg;
        json_array_foreach(msgs, i, msg)
        {
            json_t *f = json_pack("{s:O}", "message", msg);
            EXPECT_INT(cm_transcript_append(a.data, "s", "/w", "message", f, now, NULL, err,
                                            sizeof err),
                       CM_OK);
            json_decref(f);
        }
        /* the new: the context read whole (no file: none), one append */
        json_t *recent = json_array();
        json_t *all = turn ? read_all(b.data) : json_array();
        json_t *lr;
        json_array_foreach(all, i, lr)
            json_array_append(recent, json_array_get(lr, 1));
        json_decref(all);
        EXPECT_INT(cm_transcript_note_turn(b.data, "s", "/w", &m, recent, true, msgs, now, err,
                                           sizeof err),
                   CM_OK);
        json_decref(recent);
        json_decref(msgs);
        json_t *ua = unchained(a.data), *ub = unchained(b.data);
        EXPECT(ua && ub);
        EXPECT(json_equal(ua, ub));
        json_decref(ua);
        json_decref(ub);
    }
    /* 1 header + model_change, thinking, snapshot + 2 + 2 + thinking + 2 + 2 */
    json_t *all = read_all(b.data);
    EXPECT_INT(json_array_size(all), 1 + 3 + 2 + 2 + 1 + 2 + 2);
    json_decref(all);
    /* no model reached: the messages alone; a torn line cut, the chain kept */
    FILE *f = fopen(b.data, "a");
    fputs("{\"type\":\"message\",\"id\":\"torn", f);
    fclose(f);
    json_t *msgs = json_pack("[o]", cm_transcript_user_message("again", T0 + 9000));
    EXPECT_INT(cm_transcript_note_turn(b.data, "s", "/w", NULL, NULL, false, msgs, T0 + 9000, err,
                                       sizeof err),
               CM_OK);
    json_decref(msgs);
    json_t *ub = unchained(b.data);
    EXPECT(ub != NULL);
    EXPECT_INT(json_array_size(ub), 1 + 3 + 2 + 2 + 1 + 2 + 2 + 1);
    json_decref(ub);
    /* append_all: n records, id_out the last one's; n == 0 writes nothing */
    json_t *f1 = json_pack("{s:s}", "summary", "one"), *f2 = json_pack("{s:s}", "summary", "two");
    transcript_entry e[2] = {{"custom", f1}, {"custom", f2}};
    char last[40];
    struct stat st0, st1;
    EXPECT(stat(b.data, &st0) == 0);
    EXPECT_INT(cm_transcript_append_all(b.data, "s", "/w", e, 0, T0, last, err, sizeof err), CM_OK);
    EXPECT(stat(b.data, &st1) == 0 && st1.st_size == st0.st_size);
    EXPECT_INT(cm_transcript_append_all(b.data, "s", "/w", e, 2, T0, last, err, sizeof err), CM_OK);
    all = read_all(b.data);
    json_t *lastrec = json_array_get(json_array_get(all, json_array_size(all) - 1), 1);
    EXPECT_STR(json_string_value(json_object_get(lastrec, "id")), last);
    EXPECT_STR(json_string_value(json_object_get(lastrec, "summary")), "two");
    json_decref(all);
    json_decref(f1);
    json_decref(f2);
    cm_buf_release(&a);
    cm_buf_release(&b);
}

TEST(session_transcript_concurrent_appends_and_kill9)
{
    char *d = tmp_dir();
    char *path = cm_strdup(path_in(d, "sessions/s.jsonl"));
    enum { PROCS = 4, EACH = 100 };
    pid_t kids[PROCS];
    for (int k = 0; k < PROCS; k++)
        if ((kids[k] = fork()) == 0) _exit(appender(path, EACH, k));
    for (int k = 0; k < PROCS; k++) {
        int status;
        waitpid(kids[k], &status, 0);
        EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    json_t *all = read_all(path);
    EXPECT_INT(json_array_size(all), 1 + PROCS * EACH); /* one header, every message */
    /* One chain: each record's parent is the record before it. */
    for (size_t i = 2; i < json_array_size(all); i++) {
        json_t *prev = json_array_get(json_array_get(all, i - 1), 1);
        json_t *cur = json_array_get(json_array_get(all, i), 1);
        EXPECT_STR(json_string_value(json_object_get(cur, "parentId")),
                   json_string_value(json_object_get(prev, "id")));
    }
    json_decref(all);
    /* kill -9 at random points: whatever is on disk reads, and the next
     * append repairs and goes on. */
    for (int round = 0; round < 10; round++) {
        pid_t pid = fork();
        if (pid == 0) _exit(appender(path, 100000, 9));
        struct timespec ts = {0, (long)(1 + round % 5) * 1000000L};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        EXPECT_INT(appender(path, 1, 10 + round), 0);
        all = read_all(path);
        size_t n = json_array_size(all);
        json_t *last = json_array_get(json_array_get(all, n - 1), 1);
        char want[32];
        snprintf(want, sizeof want, "p%d-0", 10 + round);
        json_t *content = json_object_get(json_object_get(last, "message"), "content");
        EXPECT_STR(json_string_value(json_object_get(json_array_get(content, 0), "text")), want);
        json_decref(all);
    }
    /* Every line of the file is whole JSON now. */
    buf text = BUF_INIT;
    char err[256];
    EXPECT_INT(cm_fs_read_file(path, 1 << 26, &text, err, sizeof err), CM_OK);
    int lines = 0, good = 0;
    for (char *s = text.data, *e; s && *s; s = e + 1) {
        e = strchr(s, '\n');
        EXPECT(e != NULL);
        json_t *j = json_loadb(s, (size_t)(e - s), 0, NULL);
        lines++;
        good += j != NULL;
        json_decref(j);
    }
    EXPECT_INT(good, lines);
    cm_buf_release(&text);
    free(path);
}

/* ---- sessions.json ---- */

#include "../src/session/sessions.h"

static bool open_store(session_store *s, const char *state)
{
    buf p = BUF_INIT;
    char err[256];
    cm_session_store_path(&p, state, "main");
    cm_rc rc = cm_session_store_read(s, p.data, err, sizeof err);
    cm_buf_release(&p);
    if (rc) test_fail(__FILE__, __LINE__, "store: %s", err);
    return rc == CM_OK;
}

static json_t *store_file(const char *state)
{
    buf p = BUF_INIT;
    cm_session_store_path(&p, state, "main");
    json_t *j = json_load_file(p.data, 0, NULL);
    cm_buf_release(&p);
    return j;
}

TEST(session_store_entries_round_trip)
{
    char *state = tmp_dir();
    /* A store as 2026.3.22 writes it, with fields clawmem does not know. */
    write_file(state, "agents/main/sessions/sessions.json",
               "{\n  \"agent:main:main\": {\n    \"sessionId\": "
               "\"0d4f6f2e-1b1a-4c39-9f53-3a1b3f6f0a11\",\n"
               "    \"updatedAt\": 1799999999000,\n    \"systemSent\": true,\n    "
               "\"thinkingLevel\": \"high\",\n"
               "    \"compactionCount\": 2,\n    \"memoryFlushCompactionCount\": 2,\n"
               "    \"memoryFlushAt\": 1799999990000,\n    \"memoryFlushContextHash\": "
               "\"0123456789abcdef\",\n"
               "    \"totalTokens\": 150000,\n    \"authProfileOverride\": \"openai:a\",\n"
               "    \"authProfileOverrideSource\": \"auto\",\n"
               "    \"deliveryContext\": {\"channel\": \"telegram\", \"to\": \"123\"}\n  }\n}");
    session_store s;
    if (!open_store(&s, state)) return;
    char err[256], id[160];
    EXPECT(cm_session_store_get(&s, "AGENT:Main:MAIN") != NULL);
    /* touch: an existing entry keeps its id; updatedAt never goes back. */
    json_t *patch = json_pack("{s:s,s:I}", "label", "home", "updatedAt", (json_int_t)1);
    EXPECT_INT(cm_session_touch(&s, "agent:main:main", patch, T0, id, err, sizeof err), CM_OK);
    json_decref(patch);
    EXPECT_STR(id, "0d4f6f2e-1b1a-4c39-9f53-3a1b3f6f0a11");
    json_t *e = cm_session_store_get(&s, "agent:main:main");
    EXPECT_INT(json_integer_value(json_object_get(e, "updatedAt")), T0);
    EXPECT_STR(json_string_value(json_object_get(json_object_get(e, "deliveryContext"), "channel")),
               "telegram");
    EXPECT_STR(json_string_value(json_object_get(e, "label")), "home");

    /* A new key gets a session. */
    EXPECT_INT(cm_session_touch(&s, "Agent:Main:Telegram:Group:42", NULL, T0, id, err, sizeof err),
               CM_OK);
    EXPECT_INT((int)strlen(id), 36);
    e = cm_session_store_get(&s, "agent:main:telegram:group:42");
    EXPECT(e != NULL);
    EXPECT_STR(json_string_value(json_object_get(e, "chatType")), "group");
    EXPECT_INT(json_integer_value(json_object_get(e, "compactionCount")), 0);
    buf tp = BUF_INIT;
    EXPECT_INT(cm_session_transcript_of(&s, e, &tp), CM_OK);
    EXPECT_CONTAINS(tp.data, "/agents/main/sessions/");
    EXPECT_CONTAINS(tp.data, id);
    cm_buf_release(&tp);

    /* compaction: count + 1, fresh tokens, the automatic pin dropped. */
    EXPECT_INT(cm_session_compacted(&s, "agent:main:main", 42000, T0 + 1, err, sizeof err), CM_OK);
    e = cm_session_store_get(&s, "agent:main:main");
    EXPECT_INT(json_integer_value(json_object_get(e, "compactionCount")), 3);
    EXPECT_INT(json_integer_value(json_object_get(e, "totalTokens")), 42000);
    EXPECT(json_is_true(json_object_get(e, "totalTokensFresh")));
    EXPECT(json_object_get(e, "authProfileOverride") == NULL);
    EXPECT_INT(cm_session_compacted(&s, "agent:main:nobody", 1, T0, err, sizeof err), CM_ENOTFOUND);

    /* reset: the transcript archived, a new id, counters cleared, settings kept. */
    buf path = BUF_INIT;
    e = cm_session_store_get(&s, "agent:main:main"); /* every update refreshes the store */
    EXPECT_INT(cm_session_transcript_of(&s, e, &path), CM_OK);
    json_t *m = json_pack("{s:o}", "message", cm_transcript_user_message("hi", T0));
    EXPECT_INT(cm_transcript_append(path.data, "0d4f6f2e-1b1a-4c39-9f53-3a1b3f6f0a11", "/",
                                    "message", m, T0, NULL, err, sizeof err),
               CM_OK);
    json_decref(m);
    EXPECT_INT(cm_session_reset(&s, "agent:main:main", T0 + 2, id, err, sizeof err), CM_OK);
    EXPECT(strcmp(id, "0d4f6f2e-1b1a-4c39-9f53-3a1b3f6f0a11") != 0);
    EXPECT(access(path.data, F_OK) != 0);
    char stamp[32], arch[2048];
    cm_session_archive_stamp(T0 + 2, stamp);
    EXPECT_STR(stamp, "2027-01-15T08-00-00.002Z");
    snprintf(arch, sizeof arch, "%s.reset.%s", path.data, stamp);
    EXPECT(access(arch, F_OK) == 0);
    e = cm_session_store_get(&s, "agent:main:main");
    EXPECT_STR(json_string_value(json_object_get(e, "sessionId")), id);
    EXPECT_INT(json_integer_value(json_object_get(e, "compactionCount")), 0);
    EXPECT(json_object_get(e, "memoryFlushCompactionCount") == NULL);
    EXPECT(json_object_get(e, "memoryFlushContextHash") == NULL);
    EXPECT(json_object_get(e, "totalTokens") == NULL);
    EXPECT(json_is_false(json_object_get(e, "systemSent"))); /* 2026.3.22's new session */
    EXPECT(json_is_false(json_object_get(e, "abortedLastRun")));
    EXPECT_STR(json_string_value(json_object_get(e, "thinkingLevel")), "high");
    cm_buf_release(&path);

    /* delete: gone, transcript archived as deleted. */
    e = cm_session_store_get(&s, "agent:main:telegram:group:42");
    cm_session_transcript_of(&s, e, &path);
    write_file("/", path.data, "{}\n");
    EXPECT_INT(cm_session_delete(&s, "agent:main:telegram:group:42", T0 + 3, err, sizeof err),
               CM_OK);
    EXPECT(cm_session_store_get(&s, "agent:main:telegram:group:42") == NULL);
    cm_session_archive_stamp(T0 + 3, stamp);
    snprintf(arch, sizeof arch, "%s.deleted.%s", path.data, stamp);
    EXPECT(access(arch, F_OK) == 0);
    EXPECT_INT(cm_session_delete(&s, "agent:main:telegram:group:42", T0 + 3, err, sizeof err),
               CM_ENOTFOUND);
    cm_buf_release(&path);
    cm_session_store_release(&s);

    /* On disk: two-space indent as QuantumClaw writes it, nothing lost. */
    json_t *disk = store_file(state);
    EXPECT(disk != NULL);
    EXPECT_STR(
        json_string_value(json_object_get(json_object_get(disk, "agent:main:main"), "label")),
        "home");
    json_decref(disk);
    buf text = BUF_INIT;
    EXPECT_INT(cm_fs_read_file(path_in(state, "agents/main/sessions/sessions.json"), 1 << 20, &text,
                               err, sizeof err),
               CM_OK);
    EXPECT(strncmp(text.data, "{\n  \"agent:main:main\": {\n    \"sessionId\": ", 42) == 0);
    cm_buf_release(&text);

    /* A damaged store is an error naming the place. */
    write_file(state, "agents/main/sessions/sessions.json", "{\"a\": [1,");
    session_store bad;
    buf p = BUF_INIT;
    cm_session_store_path(&p, state, "main");
    EXPECT_INT(cm_session_store_read(&bad, p.data, err, sizeof err), CM_ECORRUPT);
    EXPECT_CONTAINS(err, "sessions.json:1:");
    cm_buf_release(&p);
}

static int updater(const char *state, int who, int n)
{
    session_store s;
    buf p = BUF_INIT;
    char err[256], key[64];
    cm_session_store_path(&p, state, "main");
    if (cm_session_store_read(&s, p.data, err, sizeof err)) return 1;
    snprintf(key, sizeof key, "agent:main:http:direct:p%d", who);
    for (int i = 0; i < n; i++) {
        json_t *patch = json_pack("{s:i}", "n", i);
        cm_rc rc = cm_session_touch(&s, key, patch, T0 + i, NULL, err, sizeof err);
        json_decref(patch);
        if (rc) {
            fprintf(stderr, "updater: %s\n", err);
            return 1;
        }
    }
    cm_session_store_release(&s);
    cm_buf_release(&p);
    return 0;
}

TEST(session_store_eight_processes_lose_nothing)
{
    char *state = tmp_dir();
    enum { PROCS = 8, EACH = 200 };
    pid_t kids[PROCS];
    for (int k = 0; k < PROCS; k++)
        if ((kids[k] = fork()) == 0) _exit(updater(state, k, EACH));
    for (int k = 0; k < PROCS; k++) {
        int status;
        waitpid(kids[k], &status, 0);
        EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    json_t *disk = store_file(state);
    EXPECT_INT(json_object_size(disk), PROCS);
    for (int k = 0; k < PROCS; k++) {
        char key[64];
        snprintf(key, sizeof key, "agent:main:http:direct:p%d", k);
        EXPECT_INT(json_integer_value(json_object_get(json_object_get(disk, key), "n")), EACH - 1);
    }
    json_decref(disk);
    /* kill -9 mid-update: the old or the new store, always whole. */
    for (int round = 0; round < 12; round++) {
        pid_t pid = fork();
        if (pid == 0) _exit(updater(state, 100 + round, 100000));
        struct timespec ts = {0, (long)(2 + round % 7) * 1000000L};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        disk = store_file(state);
        EXPECT(json_is_object(disk));
        json_decref(disk);
        EXPECT_INT(updater(state, 0, 1), 0); /* the dead writer's lock is no obstacle */
    }
}

/* ---- the memory flush decision ---- */

#include "../src/session/flush.h"

TEST(session_flush_settings_and_prompts)
{
    flush_settings s;
    char err[256];
    EXPECT_INT(cm_flush_settings_init(&s, NULL, err, sizeof err), CM_OK);
    EXPECT(s.enabled);
    EXPECT_INT(s.soft_threshold, 4000);
    EXPECT_INT(s.reserve_floor, 20000);
    EXPECT_INT(s.reserve_tokens, 20000); /* max(16384, the floor) */
    EXPECT_INT(s.keep_recent, 20000);
    EXPECT_INT(s.force_bytes, 2097152);
    EXPECT(strncmp(s.prompt, "Write any lasting notes to memory/YYYY-MM-DD.md", 47) == 0);
    EXPECT_CONTAINS(s.prompt, "APPEND new content only");
    EXPECT_CONTAINS(s.system_prompt, "Session nearing compaction.");
    EXPECT_CONTAINS(s.system_prompt, "read-only during this flush");
    EXPECT_CONTAINS(s.system_prompt, "NO_REPLY");
    cm_flush_settings_release(&s);
    json_t *cfg =
        json_loads("{\"agents\":{\"defaults\":{\"compaction\":{\"reserveTokensFloor\":1000,"
                   "\"memoryFlush\":{\"enabled\":true,\"softThresholdTokens\":500,"
                   "\"forceFlushTranscriptBytes\":\"1.5mb\",\"prompt\":\"Save notes.\"}}}}}",
                   0, NULL);
    EXPECT_INT(cm_flush_settings_init(&s, cfg, err, sizeof err), CM_OK);
    EXPECT_INT(s.reserve_floor, 1000);
    EXPECT_INT(s.reserve_tokens, 16384); /* pi-coding-agent's default over a lower floor */
    EXPECT_INT(s.soft_threshold, 500);
    EXPECT_INT(s.force_bytes, 1572864);
    EXPECT(strncmp(s.prompt, "Save notes.\n\nStore durable memories only in memory/YYYY-MM-DD.md",
                   64) == 0);
    EXPECT_CONTAINS(s.prompt, "start with NO_REPLY");
    buf p = BUF_INIT;
    EXPECT_INT(cm_flush_prompt_for(s.prompt, T0, NULL, &p), CM_OK);
    EXPECT_CONTAINS(p.data, "memory/2027-01-15.md");
    EXPECT(strstr(p.data, "YYYY") == NULL);
    EXPECT_CONTAINS(p.data, "\nCurrent time: Friday, January 15, 2027 08:00 (UTC)");
    cm_buf_reset(&p);
    EXPECT_INT(cm_flush_target_path(T0 + 12 * 3600 * 1000LL, "Pacific/Kiritimati", &p), CM_OK);
    EXPECT_STR(p.data, "memory/2027-01-16.md"); /* UTC+14: already the next day there */
    cm_buf_reset(&p);
    EXPECT_INT(cm_flush_target_path(T0 + 12 * 3600 * 1000LL, NULL, &p), CM_OK);
    EXPECT_STR(p.data, "memory/2027-01-15.md");
    cm_buf_release(&p);
    cm_flush_settings_release(&s);
    json_decref(cfg);
    EXPECT(cm_flush_is_silent("NO_REPLY"));
    EXPECT(cm_flush_is_silent("  no_reply\n"));
    EXPECT(!cm_flush_is_silent("NO_REPLY."));
    EXPECT(!cm_flush_is_silent("Saved. NO_REPLY"));
    EXPECT(!cm_flush_is_silent(""));
}

TEST(session_flush_context_hash_matches_quantumclaw)
{
    /* The value QuantumClaw 2026.3.22's computeContextHash gives for these
     * messages (computed with its algorithm under Node). */
    json_t *msgs =
        json_loads("[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"first\"}]},"
                   "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"Biscuit "
                   "\\\"the dog\\\"\\nline\"}]},"
                   "{\"role\":\"toolResult\",\"content\":[{\"type\":\"text\",\"text\":\"x\"}]},"
                   "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"\xc3\xbc"
                   "n\xc3\xaf"
                   "code \xe6\x97\xa5\xe6\x9c\xac"
                   "\"}]},"
                   "{\"role\":\"user\",\"content\":\"and the cat?\"}]",
                   0, NULL);
    EXPECT(msgs != NULL);
    char h[17];
    cm_flush_context_hash(msgs, h);
    EXPECT_STR(h, "42fa58c13961121b");
    json_decref(msgs);
}

static flush_decision decide(const flush_settings *s, json_t *entry, const char *transcript,
                             const char *prompt, bool writable)
{
    flush_input in = {entry, transcript, prompt, 200000, writable, false};
    flush_decision d;
    cm_flush_decide(s, &in, &d);
    return d;
}

TEST(session_flush_decision_table)
{
    flush_settings s;
    char err[256];
    EXPECT_INT(cm_flush_settings_init(&s, NULL, err, sizeof err), CM_OK);
    json_t *e = json_pack("{s:i,s:b,s:i}", "totalTokens", 175999, "totalTokensFresh", 1,
                          "compactionCount", 1);
    flush_decision d = decide(&s, e, NULL, NULL, true);
    EXPECT_INT(d.threshold, 176000);
    EXPECT(!d.due); /* below */
    json_object_set_new(e, "totalTokens", json_integer(176000));
    d = decide(&s, e, NULL, NULL, true);
    EXPECT(d.due); /* at */
    EXPECT_INT(d.tokens, 176000);
    json_object_set_new(e, "totalTokens", json_integer(175990));
    d = decide(&s, e, NULL, "0123456789012345678901234567890123456789", true);
    EXPECT(d.due); /* the new prompt's estimate (10 tokens) takes it over */
    d = decide(&s, e, NULL, "0123456789012345678901234567890123456789", false);
    EXPECT(!d.due);
    EXPECT_CONTAINS(d.why, "not writable");
    /* once per compaction cycle */
    json_object_set_new(e, "totalTokens", json_integer(190000));
    json_object_set_new(e, "memoryFlushCompactionCount", json_integer(1));
    d = decide(&s, e, NULL, NULL, true);
    EXPECT(!d.due);
    EXPECT_CONTAINS(d.why, "already flushed");
    json_object_set_new(e, "compactionCount", json_integer(2)); /* a new cycle */
    EXPECT(decide(&s, e, NULL, NULL, true).due);
    /* a stale persisted count: the transcript's last usage counts */
    char *dir = tmp_dir();
    const char *tp = path_in(dir, "s.jsonl");
    char *tpath = cm_strdup(tp);
    write_file(
        dir, "s.jsonl",
        "{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"x\",\"cwd\":\"/\"}\n"
        "{\"type\":\"message\",\"id\":\"a\",\"parentId\":null,\"timestamp\":\"x\",\"message\":{"
        "\"role\":\"user\",\"content\":\"hi\"}}\n"
        "{\"type\":\"message\",\"id\":\"b\",\"parentId\":\"a\",\"timestamp\":\"x\",\"message\":{"
        "\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"yo\"}],"
        "\"usage\":{\"input\":160000,\"output\":2000,\"cacheRead\":15000,\"cacheWrite\":0,"
        "\"totalTokens\":177000}}}\n"
        "{\"type\":\"message\",\"id\":\"c\",\"parentId\":\"b\",\"timestamp\":\"x\",\"message\":{"
        "\"role\":\"assistant\",\"content\":[],\"usage\":{\"input\":0,\"output\":0}}}\n");
    json_t *stale = json_pack("{s:i,s:b,s:i}", "totalTokens", 1000, "totalTokensFresh", 0,
                              "compactionCount", 0);
    d = decide(&s, stale, tpath, NULL, true);
    EXPECT(d.due);
    EXPECT_INT(d.tokens, 177000); /* 160000 + 15000 prompt, + 2000 output */
    /* the same context as the last flush is not flushed again */
    json_object_set_new(stale, "memoryFlushContextHash", json_string(d.context_hash));
    d = decide(&s, stale, tpath, NULL, true);
    EXPECT(!d.due);
    EXPECT_CONTAINS(d.why, "not changed");
    d = decide(&s, stale, tpath, "a new question", true);
    EXPECT(d.due); /* a new prompt is new context */
    /* a large transcript forces it below the threshold */
    s.force_bytes = 100;
    json_t *small =
        json_pack("{s:i,s:b,s:i}", "totalTokens", 10, "totalTokensFresh", 1, "compactionCount", 0);
    write_file(
        dir, "t2.jsonl",
        "{\"type\":\"session\",\"version\":3,\"id\":\"t2\",\"timestamp\":\"x\",\"cwd\":\"/\"}\n"
        "{\"type\":\"message\",\"id\":\"a\",\"parentId\":null,\"timestamp\":\"x\",\"message\":{"
        "\"role\":\"user\",\"content\":\"hello there\"}}\n");
    char *t2 = cm_strdup(path_in(dir, "t2.jsonl"));
    d = decide(&s, small, t2, NULL, true);
    EXPECT(d.due);
    EXPECT_CONTAINS(d.why, "forceFlushTranscriptBytes");
    s.force_bytes = 100000;
    EXPECT(!decide(&s, small, t2, NULL, true).due);
    s.force_bytes = 100;
    s.enabled = false;
    EXPECT(!decide(&s, small, t2, NULL, true).due);
    free(t2);
    json_decref(small);
    json_decref(stale);
    json_decref(e);
    free(tpath);
    cm_flush_settings_release(&s);
}

TEST(session_flush_counts_the_incoming_message_and_tool_outputs)
{
    flush_settings s;
    char err[256];
    EXPECT_INT(cm_flush_settings_init(&s, NULL, err, sizeof err), CM_OK);
    /* no usage known yet: a long first message alone reaches the threshold */
    json_t *e = json_pack("{s:i}", "compactionCount", 0);
    char *big = malloc(4 * 176000 + 1);
    memset(big, 'w', 4 * 176000);
    big[4 * 176000] = 0;
    flush_decision d = decide(&s, e, NULL, big, true);
    EXPECT(d.due);
    EXPECT_INT(d.tokens, 176000);
    free(big);
    /* tool outputs written after the last usage (a turn cut short) count */
    char *dir = tmp_dir();
    buf t = BUF_INIT;
    cm_buf_adds(
        &t, "{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"x\",\"cwd\":\"/\"}\n"
            "{\"type\":\"message\",\"id\":\"b\",\"parentId\":null,\"timestamp\":\"x\","
            "\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"toolCall\","
            "\"id\":\"c1\",\"name\":\"memory_get\",\"arguments\":{}}],\"usage\":{\"input\":"
            "170000,\"output\":100}}}\n"
            "{\"type\":\"message\",\"id\":\"c\",\"parentId\":\"b\",\"timestamp\":\"x\","
            "\"message\":{\"role\":\"toolResult\",\"toolCallId\":\"c1\",\"content\":\"");
    for (int i = 0; i < 24000; i++)
        cm_buf_addc(&t, 'r');
    cm_buf_adds(&t, "\"}}\n");
    write_file(dir, "s.jsonl", t.data);
    cm_buf_release(&t);
    char *tp = cm_strdup(path_in(dir, "s.jsonl"));
    d = decide(&s, e, tp, "next", true);
    EXPECT(d.due);
    EXPECT_INT(d.tokens, 170000 + 100 + 6001 + 1); /* usage, output, tool output, prompt */
    free(tp);
    json_decref(e);
    cm_flush_settings_release(&s);
}

/* ---- what session memory search indexes ---- */

#include "../src/session/extract.h"

TEST(session_extract_matches_quantumclaw)
{
    /* tests/data/session-extract.jsonl: user and assistant messages with
     * string and block content, thinking, tool calls, a tool result, a
     * compaction record, blank, garbage and whitespace-only messages, and
     * secrets. The expected text, line map and hash are what QuantumClaw
     * 2026.3.22's extraction and redaction give for it (run under Node). */
    buf in = BUF_INIT;
    char err[256];
    EXPECT_INT(cm_fs_read_file("tests/data/session-extract.jsonl", 1 << 20, &in, err, sizeof err),
               CM_OK);
    session_doc d;
    EXPECT_INT(cm_session_extract(in.data, in.len, &d), CM_OK);
    EXPECT_STR(d.text.data, "User: What is the dog called? My key is sk-abc\xe2\x80\xa6wxyz\n"
                            "Assistant: Biscuit. Really sure.\n"
                            "User: PASSWORD=*** ok");
    EXPECT_INT(d.n, 3);
    EXPECT_INT(d.line_map[0], 2);
    EXPECT_INT(d.line_map[1], 5);
    EXPECT_INT(d.line_map[2], 9);
    EXPECT_INT(d.ts[0], 1800000000000LL);
    EXPECT_INT(d.ts[1], 1800000001000LL);
    EXPECT_STR(d.hash, "ac340f41185d8bdde797713629830fe26c6bd035cd6d1246c5a4ffb76a2ff7ad");
    cm_session_doc_release(&d);
    cm_buf_release(&in);
}

TEST(session_redaction_matches_quantumclaw)
{
    /* Each input with what QuantumClaw 2026.3.22's redactSensitiveText
     * ("tools" mode, default patterns) returns for it. */
    static const char *const cases[][2] = {
        {"my OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwx and token: abc, Authorization: Bearer "
         "abcdefghijklmnopqrstuvwxyz0123 bot123456789:AAbbccddeeffgghhiijjkkll "
         "ghp_abcdefghijklmnopqrstuvwxyz \"password\": \"hunter2\" --api-key \"k123\"",
         "my OPENAI_API_KEY=sk-abc\xe2\x80\xa6uvwx and token: *** Authorization: Bearer "
         "abcdef\xe2\x80\xa6"
         "0123 bot123456\xe2\x80\xa6kkll ghp_ab\xe2\x80\xa6wxyz \"password\": "
         "\"***\" --api-key \"***\""},
        {"password = \xe6\x97\xa5\xe6\x9c\xacxoxb---token=:\xc3\xa9"
         "bot=--token=",
         "password = \xe6\x97\xa5\xe6\x9c\xacxoxb\xe2\x80\xa6ken="},
        {"nothing to see here, just the word token and key.",
         "nothing to see here, just the word token and key."},
        {"before\n-----BEGIN RSA PRIVATE KEY-----\nMIIabc\ndef\n-----END RSA PRIVATE "
         "KEY-----\nafter",
         "before\n-----BEGIN RSA PRIVATE KEY-----\n\xe2\x80\xa6redacted\xe2\x80\xa6\n-----END RSA "
         "PRIVATE KEY-----\nafter"},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        buf out = BUF_INIT;
        EXPECT_INT(cm_session_redact(cases[i][0], strlen(cases[i][0]), &out), CM_OK);
        if (strcmp(out.data, cases[i][1]) != 0)
            test_fail(__FILE__, __LINE__, "case %zu:\n  got:  %s\n  want: %s", i, out.data,
                      cases[i][1]);
        cm_buf_release(&out);
    }
}

/* ---- the command ---- */

TEST(session_cli_drives_the_store)
{
    char *d = tmp_dir();
    char *state = cm_strdup(path_in(d, "state")), *ws = cm_strdup(path_in(d, "ws"));
    write_file(d, "ws/MEMORY.md", "# facts\n");
    const char *base[] = {"--state-dir", state, "--workspace", ws, "sessions", NULL};
#define SESS(...)                                                                                  \
    ({                                                                                             \
        const char *a_[] = {base[0], base[1], base[2], base[3], base[4], __VA_ARGS__, NULL};       \
        run_clawmem(NULL, a_);                                                                     \
    })
    run_result r = SESS("append", "main", "--role", "user", "Remember: the wifi is Biscuit5G");
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.out, "appended ");
    run_result_release(&r);
    r = SESS("append", "telegram:group:-100", "--role", "assistant", "Noted.", "--json");
    EXPECT_INT(r.status, 0);
    json_t *j = json_loads(r.out, 0, NULL);
    EXPECT_STR(json_string_value(json_object_get(j, "key")), "agent:main:telegram:group:-100");
    json_decref(j);
    run_result_release(&r);
    r = SESS("list", "--json");
    EXPECT_INT(r.status, 0);
    j = json_loads(r.out, 0, NULL);
    EXPECT_INT(json_array_size(json_object_get(j, "sessions")), 2);
    json_decref(j);
    run_result_release(&r);
    r = SESS("show", "agent:main:main", "--json");
    EXPECT_INT(r.status, 0);
    j = json_loads(r.out, 0, NULL);
    json_t *recs = json_object_get(j, "records");
    EXPECT_INT(json_array_size(recs), 2); /* the header and the message */
    EXPECT_STR(json_string_value(json_object_get(json_array_get(recs, 0), "type")), "session");
    json_decref(j);
    run_result_release(&r);
    /* an assistant message no model wrote: QuantumClaw's delivery-mirror shape */
    r = SESS("show", "agent:main:telegram:group:-100", "--json");
    j = json_loads(r.out, 0, NULL);
    json_t *am = json_object_get(json_array_get(json_object_get(j, "records"), 1), "message");
    EXPECT_STR(json_string_value(json_object_get(am, "api")), "openai-responses");
    EXPECT_STR(json_string_value(json_object_get(am, "provider")), "openclaw");
    EXPECT_STR(json_string_value(json_object_get(am, "model")), "delivery-mirror");
    json_decref(j);
    run_result_release(&r);
    r = SESS("show", "main");
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.out, "user: Remember: the wifi is Biscuit5G");
    run_result_release(&r);
    r = SESS("flush", "main", "--dry-run", "--context-window", "30000", "--prompt", "hi");
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.out, "Memory flush due: no");
    EXPECT_CONTAINS(r.out, "threshold 6000");
    run_result_release(&r);
    r = SESS("compact", "main"); /* one message: nothing to compact yet */
    EXPECT_INT(r.status, 1);
    EXPECT_CONTAINS(r.err, "sessions compact");
    run_result_release(&r);
    r = SESS("reset", "main");
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.out, "starts again");
    run_result_release(&r);
    r = SESS("show", "main", "--json");
    j = json_loads(r.out, 0, NULL);
    EXPECT_INT(json_array_size(json_object_get(j, "records")), 0);
    json_decref(j);
    run_result_release(&r);
    r = SESS("delete", "telegram:group:-100");
    EXPECT_INT(r.status, 0);
    run_result_release(&r);
    r = SESS("delete", "telegram:group:-100");
    EXPECT_INT(r.status, 1);
    EXPECT_CONTAINS(r.err, "no session agent:main:telegram:group:-100");
    run_result_release(&r);
    r = SESS("append", "main", "--role", "system", "x");
    EXPECT_INT(r.status, 1);
    EXPECT_CONTAINS(r.err, "user or assistant");
    run_result_release(&r);
    r = SESS("bogus");
    EXPECT_INT(r.status, 1);
    run_result_release(&r);
#undef SESS
    free(state);
    free(ws);
}

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

/* A torn last record longer than the 16 MiB look-back (a crash while a big
 * record was written) is cut off alone: the records before it stay. */
TEST(session_transcript_long_torn_line_keeps_the_rest)
{
    char *d = tmp_dir();
    buf p = BUF_INIT;
    cm_transcript_path(&p, d, "s1", NULL);
    char err[256], id[40];
    for (int i = 0; i < 3; i++) {
        json_t *m = json_pack("{s:o}", "message",
                              cm_transcript_user_message("keep me", 1800000000000LL + i));
        EXPECT_INT(cm_transcript_append(p.data, "s1", "/x", "message", m, 1800000000000LL + i, id,
                                        err, sizeof err),
                   CM_OK);
        json_decref(m);
    }
    size_t n = 17u << 20;
    char *junk = malloc(n);
    memset(junk, 'x', n);
    junk[0] = '{';
    int fd = open(p.data, O_WRONLY | O_APPEND);
    EXPECT(fd >= 0 && write(fd, junk, n) == (ssize_t)n);
    if (fd >= 0) close(fd);
    free(junk);
    json_t *m = json_pack("{s:o}", "message", cm_transcript_user_message("next", 1800000000100LL));
    EXPECT_INT(cm_transcript_append(p.data, "s1", "/x", "message", m, 1800000000100LL, id, err,
                                    sizeof err),
               CM_OK);
    json_decref(m);
    buf t = BUF_INIT;
    EXPECT_INT(cm_fs_read_file(p.data, 64 << 20, &t, err, sizeof err), CM_OK);
    int keep = 0;
    for (const char *q = t.data; q && (q = strstr(q, "keep me")); q++)
        keep++;
    EXPECT_INT(keep, 3);
    EXPECT_CONTAINS(t.data, "\"next\"");
    EXPECT(t.len < 4096); /* the torn 17 MiB are gone */
    cm_buf_release(&t);
    cm_buf_release(&p);
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

/* cm_flush_is_prompt knows the flush prompts the runtime makes (the seed's
 * and a configured one, the date filled in), not the hint's template or a
 * user's text. */
TEST(session_flush_is_prompt_recognises_flush_turns)
{
    flush_settings s;
    char err[256];
    buf p = BUF_INIT;
    EXPECT_INT(cm_flush_settings_init(&s, NULL, err, sizeof err), CM_OK);
    EXPECT_INT(cm_flush_prompt_for(s.prompt, T0, "Europe/Berlin", &p), CM_OK);
    EXPECT(cm_flush_is_prompt(p.data));
    EXPECT(!cm_flush_is_prompt(s.prompt)); /* the template: no date yet */
    cm_flush_settings_release(&s);
    json_t *cfg = json_loads("{\"agents\":{\"defaults\":{\"compaction\":{\"memoryFlush\":{"
                             "\"prompt\":\"Save notes.\"}}}}}",
                             0, NULL);
    EXPECT_INT(cm_flush_settings_init(&s, cfg, err, sizeof err), CM_OK);
    cm_buf_reset(&p);
    EXPECT_INT(cm_flush_prompt_for(s.prompt, T0, NULL, &p), CM_OK);
    EXPECT(cm_flush_is_prompt(p.data));
    EXPECT(!cm_flush_is_prompt("Save notes."));
    EXPECT(!cm_flush_is_prompt("Store durable memories only in memory/notes.md (create memory/ "
                               "if needed)."));
    EXPECT(!cm_flush_is_prompt("Store durable memories only in memory/2027-01"));
    EXPECT(!cm_flush_is_prompt(""));
    EXPECT(!cm_flush_is_prompt(NULL));
    cm_flush_settings_release(&s);
    json_decref(cfg);
    cm_buf_release(&p);
}
