/*
 * test_session_context.c — a session's context at scale: transcripts read
 * from the last compaction on, and the context cache of transcripts (only
 * new lines parsed, outside writes seen, a gateway's conversations in
 * rotation). The store and session.maintenance: test_session_scale.c.
 */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../src/agent/session_turn.h"
#include "../src/base/fs.h"
#include "../src/session/ctx_cache.h"
#include "../src/session/transcript.h"
#include "test.h"

#define T0 1800000000000LL

/* ---- transcripts ---------------------------------------------------------- */

static void append(const char *path, const char *type, json_t *fields, char id[40])
{
    char err[256];
    if (cm_transcript_append(path, "sid", "/", type, fields, T0, id, err, sizeof err))
        test_fail(__FILE__, __LINE__, "append: %s", err);
    json_decref(fields);
}

static void say(const char *path, const char *role, const char *text, char id[40])
{
    json_t *m = !strcmp(role, "user")
                    ? cm_transcript_user_message(text, T0)
                    : cm_transcript_assistant_message(text, "openai-completions", "openai", "m",
                                                      "stop", T0);
    append(path, "message", json_pack("{s:o}", "message", m), id);
}

/* The texts of a history, joined by "|" (the summary as "S:<summary>"). */
static void texts(const json_t *hist, char *out, size_t n)
{
    out[0] = 0;
    size_t i;
    json_t *m;
    json_array_foreach((json_t *)hist, i, m)
    {
        const char *t = json_string_value(
            json_object_get(json_array_get(json_object_get(m, "content"), 0), "text"));
        const char *sum = t ? strstr(t, "<summary>\n") : NULL;
        size_t l = strlen(out);
        if (sum)
            snprintf(out + l, n - l, "%sS:%.*s", i ? "|" : "", (int)strcspn(sum + 10, "\n"),
                     sum + 10);
        else
            snprintf(out + l, n - l, "%s%s", i ? "|" : "", t ? t : "?");
    }
}

/* A transcript: m1..m4, a compaction keeping from m3, a decoy record with a
 * nested {"type":"compaction"}, m5, m6. */
static void build(const char *path, bool kept_known)
{
    char id[40], kept[40];
    say(path, "user", "m1", id);
    say(path, "assistant", "m2", id);
    say(path, "user", "m3", kept);
    say(path, "assistant", "m4", id);
    append(path, "compaction",
           json_pack("{s:s,s:s,s:i}", "summary", "the gist", "firstKeptEntryId",
                     kept_known ? kept : "ffffffff", "tokensBefore", 10),
           id);
    say(path, "user", "m5 says \"type\":\"compaction\"", id);
    append(path, "custom",
           json_pack("{s:s,s:{s:s,s:s}}", "customType", "x", "data", "type", "compaction", "id",
                     kept),
           id);
    say(path, "assistant", "m6", id);
}

TEST(session_transcript_context_from_the_last_compaction)
{
    char *d = tmp_dir(), err[256], got[512];
    const char *f = path_in(d, "t.jsonl");
    char *p = cm_strdup(f);
    build(p, true);
    json_t *hist = NULL;
    EXPECT_INT(cm_agent_session_history(p, &hist, err, sizeof err), CM_OK);
    texts(hist, got, sizeof got);
    EXPECT_STR(got, "S:the gist|m3|m4|m5 says \"type\":\"compaction\"|m6");
    json_decref(hist);
    int64_t off = -1;
    EXPECT_INT(cm_transcript_context_offset(p, &off, err, sizeof err), CM_OK);
    EXPECT(off > 0);
    free(p);

    /* an unknown kept id: the messages after the compaction */
    p = cm_strdup(path_in(d, "u.jsonl"));
    build(p, false);
    EXPECT_INT(cm_agent_session_history(p, &hist, err, sizeof err), CM_OK);
    texts(hist, got, sizeof got);
    EXPECT_STR(got, "S:the gist|m5 says \"type\":\"compaction\"|m6");
    json_decref(hist);
    free(p);

    /* no compaction: everything, from offset 0 */
    p = cm_strdup(path_in(d, "v.jsonl"));
    char id[40];
    say(p, "user", "a", id);
    say(p, "assistant", "b", id);
    EXPECT_INT(cm_transcript_context_offset(p, &off, err, sizeof err), CM_OK);
    EXPECT_INT(off, 0);
    EXPECT_INT(cm_agent_session_history(p, &hist, err, sizeof err), CM_OK);
    texts(hist, got, sizeof got);
    EXPECT_STR(got, "a|b");
    json_decref(hist);
    free(p);
}

/* Appends text to path as another process would (no lock, no newline
 * added). */
static void raw_append(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_APPEND);
    EXPECT(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    if (fd >= 0) close(fd);
}

/* A user message record's line (no newline). */
static char *user_line(const char *text, const char *id)
{
    json_t *r = json_pack("{s:s,s:s,s:n,s:s,s:o}", "type", "message", "id", id, "parentId",
                          "timestamp", "2027-01-15T08:00:00.000Z", "message",
                          cm_transcript_user_message(text, T0));
    char *l = json_dumps(r, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(r);
    return l;
}

static void history_texts(const char *p, char *got, size_t n)
{
    char err[256];
    json_t *hist = NULL;
    EXPECT_INT(cm_agent_session_history(p, &hist, err, sizeof err), CM_OK);
    texts(hist, got, n);
    json_decref(hist);
}

/* A session's context is parsed once and kept (ctx_cache.h): the next turn
 * parses only the lines appended since. Whatever another process does to
 * the file is seen at the next read: lines it appends, a torn line and its
 * completion, a compaction (the context's start moves), the file rewritten
 * in place or replaced. (The old code parsed every record each time.) */
TEST(session_context_cache_parses_only_new_lines_and_sees_outside_writes)
{
    char *d = tmp_dir(), got[512], id[40], kept[40];
    char *p = cm_strdup(path_in(d, "c.jsonl"));
    say(p, "user", "a", id);
    say(p, "assistant", "b", id);
    ctx_cache_stats s0, s1;
    history_texts(p, got, sizeof got);
    EXPECT_STR(got, "a|b");
    cm_ctx_cache_stats_get(&s0);
    say(p, "user", "c", kept);
    history_texts(p, got, sizeof got);
    EXPECT_STR(got, "a|b|c");
    cm_ctx_cache_stats_get(&s1);
    EXPECT_INT(s1.hits - s0.hits, 1);
    EXPECT_INT(s1.parsed - s0.parsed, 1); /* the new line only */
    /* another writer's torn line, then its end */
    char *l = user_line("d", "0000000d");
    size_t half = strlen(l) / 2;
    char first[512];
    snprintf(first, sizeof first, "%.*s", (int)half, l);
    raw_append(p, first);
    history_texts(p, got, sizeof got);
    EXPECT_STR(got, "a|b|c");
    raw_append(p, l + half);
    raw_append(p, "\n");
    history_texts(p, got, sizeof got);
    EXPECT_STR(got, "a|b|c|d");
    free(l);
    /* a compaction: the context starts at the kept record */
    append(p, "compaction",
           json_pack("{s:s,s:s,s:i}", "summary", "gist", "firstKeptEntryId", kept,
                     "tokensBefore", 10),
           id);
    say(p, "assistant", "e", id);
    history_texts(p, got, sizeof got);
    EXPECT_STR(got, "S:gist|c|d|e");
    say(p, "user", "f", id);
    history_texts(p, got, sizeof got);
    EXPECT_STR(got, "S:gist|c|d|e|f");
    /* rewritten in place (same inode), longer */
    char *q = cm_strdup(path_in(d, "other.jsonl"));
    for (int i = 0; i < 12; i++) {
        char t[16];
        snprintf(t, sizeof t, "x%d", i);
        say(q, i % 2 ? "assistant" : "user", t, id);
    }
    buf b = BUF_INIT;
    char err[256];
    EXPECT_INT(cm_fs_read_file(q, 1 << 20, &b, err, sizeof err), CM_OK);
    int fd = open(p, O_WRONLY | O_TRUNC);
    EXPECT(fd >= 0 && write(fd, b.data, b.len) == (ssize_t)b.len);
    if (fd >= 0) close(fd);
    history_texts(p, got, sizeof got);
    EXPECT_STR(got, "x0|x1|x2|x3|x4|x5|x6|x7|x8|x9|x10|x11");
    /* replaced (another inode), shorter */
    unlink(q);
    say(q, "user", "y", id);
    EXPECT(rename(q, p) == 0);
    history_texts(p, got, sizeof got);
    EXPECT_STR(got, "y");
    /* removed */
    unlink(p);
    history_texts(p, got, sizeof got);
    EXPECT_STR(got, "");
    cm_buf_release(&b);
    free(q);
    free(p);
}

/* Over the old whole-file cap (512 MiB) before the compaction: the context
 * is still read (a sparse file: no disk used). */
TEST(session_transcript_huge_prefix_is_not_read)
{
    char *d = tmp_dir(), err[256], got[512];
    char *p = cm_strdup(path_in(d, "big.jsonl"));
    char id[40];
    say(p, "user", "first", id);
    int fd = open(p, O_WRONLY);
    EXPECT(fd >= 0 && lseek(fd, 600LL << 20, SEEK_END) > 0 && write(fd, "\n", 1) == 1);
    close(fd);
    build(p, true);
    json_t *hist = NULL;
    EXPECT_INT(cm_agent_session_history(p, &hist, err, sizeof err), CM_OK);
    texts(hist, got, sizeof got);
    EXPECT_STR(got, "S:the gist|m3|m4|m5 says \"type\":\"compaction\"|m6");
    json_decref(hist);
    unlink(p);
    free(p);
}

/* A transcript of one user message, written directly (no lock, no fsync). */
static void one_line_file(const char *path, const char *text)
{
    char *l = user_line(text, "0000000a");
    FILE *f = fopen(path, "w");
    EXPECT(f && fprintf(f, "%s\n", l) > 0);
    if (f) fclose(f);
    free(l);
}

/* A gateway's conversations taking turns in rotation stay parsed: 1,000
 * transcripts read in turn, twice, are each a hit the second and third
 * time (the old cache kept 256 and dropped the least recently used, so
 * every read of 1,000 in rotation parsed the whole transcript again).
 * Past CTX_CACHE_MAX the least recently used goes, and a removed
 * transcript's place is used again. */
TEST(session_context_cache_keeps_a_gateways_conversations_in_rotation)
{
    char *d = tmp_dir(), got[256], name[32];
    enum { N = 1000, ALL = CTX_CACHE_MAX + 1 > N ? CTX_CACHE_MAX + 1 : N };
    char **p = calloc(ALL, sizeof *p);
    for (int i = 0; i < ALL; i++) {
        snprintf(name, sizeof name, "r%d.jsonl", i);
        p[i] = cm_strdup(path_in(d, name));
        snprintf(name, sizeof name, "t%d", i);
        one_line_file(p[i], name);
    }
    for (int i = 0; i < N; i++)
        history_texts(p[i], got, sizeof got);
    ctx_cache_stats s0, s1;
    cm_ctx_cache_stats_get(&s0);
    int wrong = 0;
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < N; i++) {
            history_texts(p[i], got, sizeof got);
            snprintf(name, sizeof name, "t%d", i);
            wrong += strcmp(got, name) != 0;
        }
    cm_ctx_cache_stats_get(&s1);
    EXPECT_INT(wrong, 0);
    EXPECT_INT(s1.hits - s0.hits, 2 * N); /* old: 0 */
    EXPECT_INT(s1.reads - s0.reads, 0);   /* old: 2,000 */
    /* a removed transcript: forgotten; its place taken by the next */
    unlink(p[0]);
    history_texts(p[0], got, sizeof got);
    EXPECT_STR(got, "");
    /* every one of ALL read in order: the first (least recently used) goes */
    for (int i = 1; i < ALL; i++)
        history_texts(p[i], got, sizeof got);
    one_line_file(p[0], "back");
    cm_ctx_cache_stats_get(&s0);
    history_texts(p[ALL - 1], got, sizeof got); /* the most recent: kept */
    history_texts(p[0], got, sizeof got);       /* read again, from the file */
    EXPECT_STR(got, "back");
    cm_ctx_cache_stats_get(&s1);
    EXPECT_INT(s1.hits - s0.hits, 1);
    EXPECT_INT(s1.reads - s0.reads, 1);
    cm_ctx_cache_stats_get(&s0);
    history_texts(p[1], got, sizeof got); /* the least recently used now: gone */
    EXPECT_STR(got, "t1");
    history_texts(p[2], got, sizeof got); /* p[1] took p[2]'s place when read */
    cm_ctx_cache_stats_get(&s1);
    EXPECT_INT(s1.reads - s0.reads, 2);
    for (int i = 0; i < ALL; i++) {
        unlink(p[i]);
        free(p[i]);
    }
    free(p);
}

/* More conversations in rotation than the cache's CTX_CACHE_TOTAL of text
 * holds: 64 transcripts of 600 KB (38 MiB) read in turn, three times. The
 * old cache let every one in, dropping the least recently used: the one
 * whose turn came next, so no read was ever a hit. Now, once full, one new
 * transcript in eight is let in and most of those kept are found again. */
TEST(session_context_cache_full_keeps_most_of_a_rotation)
{
    char *d = tmp_dir(), got[32], name[32];
    enum { N = 64, BIG = 600 * 1024 };
    char *text = malloc(BIG + 1), *p[N];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "big%d.jsonl", i);
        p[i] = cm_strdup(path_in(d, name));
        memset(text, 'a' + i % 26, BIG);
        snprintf(text, 16, "n%02d", i); /* its own first letters */
        text[3] = 'x';
        text[BIG] = 0;
        one_line_file(p[i], text);
    }
    for (int i = 0; i < N; i++)
        history_texts(p[i], got, sizeof got);
    ctx_cache_stats s0, s1;
    cm_ctx_cache_stats_get(&s0);
    int wrong = 0;
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < N; i++) {
            history_texts(p[i], got, sizeof got);
            snprintf(name, sizeof name, "n%02dx", i);
            wrong += strncmp(got, name, 4) != 0;
        }
    cm_ctx_cache_stats_get(&s1);
    EXPECT_INT(wrong, 0);
    EXPECT(s1.hits - s0.hits >= N); /* old: 0; about 52 of 64 a round now */
    for (int i = 0; i < N; i++) {
        unlink(p[i]);
        free(p[i]);
    }
    free(text);
}
