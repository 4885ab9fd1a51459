/*
 * test_session.c — the session layer (src/session): QuantumClaw's key
 * grammar, transcripts in pi-coding-agent's format (header, records chained
 * by parentId, torn lines skipped and repaired), appends from several
 * processes and under kill -9, and sessions.json read and updated by many.
 */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>

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

/* A turn decides its auto pin on the entry it read at its start; a pin the
 * user set meanwhile (/model <model>@<profile>, answered beside the running
 * turn) is not replaced by it, while the rest of the turn's bookkeeping is
 * written; with no user pin the auto pin is written as before. */
TEST(session_store_an_auto_pin_never_replaces_a_user_pin)
{
    char *state = tmp_dir();
    const char *key = "agent:main:main";
    session_store turn, cmd, look;
    char err[256];
    if (!open_store(&turn, state) || !open_store(&cmd, state)) return;
    EXPECT_INT(cm_session_touch(&turn, key, NULL, 1000, NULL, err, sizeof err), CM_OK);
    EXPECT(cm_session_store_get(&turn, key) != NULL); /* the turn's view of the entry */
    json_t *user = json_pack("{s:s,s:s}", "authProfileOverride", "openai:work",
                             "authProfileOverrideSource", "user");
    EXPECT_INT(cm_session_touch(&cmd, key, user, 2000, NULL, err, sizeof err), CM_OK);
    json_t *e = cm_session_store_get(&turn, key);
    EXPECT(!json_object_get(e, "authProfileOverrideSource")); /* what the turn still sees */
    json_t *done =
        json_pack("{s:i,s:s,s:s,s:i}", "totalTokens", 42, "authProfileOverride", "openai:a",
                  "authProfileOverrideSource", "auto", "authProfileOverrideCompactionCount", 0);
    EXPECT_INT(cm_session_note(&turn, key, done, 3000, NULL, err, sizeof err), CM_OK);
    if (!open_store(&look, state)) return;
    e = cm_session_store_get(&look, key);
    EXPECT_STR(json_string_value(json_object_get(e, "authProfileOverride")), "openai:work");
    EXPECT_STR(json_string_value(json_object_get(e, "authProfileOverrideSource")), "user");
    EXPECT(!json_object_get(e, "authProfileOverrideCompactionCount"));
    EXPECT_INT(json_integer_value(json_object_get(e, "totalTokens")), 42);
    cm_session_store_release(&look);
    /* unpinned by the user: the next auto pin is written */
    json_t *unpin = json_pack("{s:n,s:n}", "authProfileOverride", "authProfileOverrideSource");
    EXPECT_INT(cm_session_touch(&cmd, key, unpin, 4000, NULL, err, sizeof err), CM_OK);
    EXPECT_INT(cm_session_note(&turn, key, done, 5000, NULL, err, sizeof err), CM_OK);
    if (!open_store(&look, state)) return;
    e = cm_session_store_get(&look, key);
    EXPECT_STR(json_string_value(json_object_get(e, "authProfileOverride")), "openai:a");
    EXPECT_STR(json_string_value(json_object_get(e, "authProfileOverrideSource")), "auto");
    cm_session_store_release(&look);
    json_decref(user);
    json_decref(done);
    json_decref(unpin);
    cm_session_store_release(&turn);
    cm_session_store_release(&cmd);
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
