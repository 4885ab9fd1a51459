/*
 * test_tools.c — memory_search and memory_get payloads, citations, snippets,
 * and memory_get's path rules.
 */
#include <jansson.h>
#include <unistd.h>

#include "../src/tools/tools.h"
#include "test.h"

static search_hit mk(const char *path, int s, int e, double score, const char *text)
{
    search_hit h = {0};
    h.path = (char *)path;
    h.source = (char *)"memory";
    h.text = (char *)text;
    h.start_line = s;
    h.end_line = e;
    h.score = score;
    return h;
}

TEST(tools_search_payload_exact)
{
    search_hit v[2] = {mk("memory/2026-02-10.md", 12, 30, 0.734, "Router \"Omada\"\nVLAN 10"),
                       mk("MEMORY.md", 3, 3, 0.5, "one line")};
    v[0].has_text = true; /* found by the keyword side: textScore */
    v[0].text_score = 0.8;
    buf b = BUF_INIT;
    EXPECT_INT(
        cm_tools_search_payload(v, 2, &(tools_head){"none", "", NULL, CM_CITE_AUTO, NULL, NULL}, &b),
        CM_OK);
    /* ids: sha256 hex of "memory:<path>:<start>:<end>:<sha256 of text>:fts-only" */
    EXPECT_STR(b.data,
               "{\"results\":[{\"id\":"
               "\"132ea461c406f724a3d53c99965e65202913f29abf48d80aa3b082440cbf0de9\","
               "\"path\":\"memory/2026-02-10.md\",\"startLine\":12,\"endLine\":30,"
               "\"score\":0.734,\"textScore\":0.8,\"snippet\":\"Router \\\"Omada\\\"\\nVLAN "
               "10\\n\\nSource: "
               "memory/2026-02-10.md#L12-L30\",\"source\":\"memory\",\"citation\":"
               "\"memory/2026-02-10.md#L12-L30\"},{\"id\":"
               "\"617b4aaa772f8622b672488de1f6745e6ba0c9f166a745269766d07ddaa2bde3\","
               "\"path\":\"MEMORY.md\",\"startLine\":3,"
               "\"endLine\":3,\"score\":0.5,\"snippet\":\"one line\\n\\nSource: MEMORY.md#L3\","
               "\"source\":\"memory\",\"citation\":\"MEMORY.md#L3\"}],\"provider\":\"none\","
               "\"model\":\"\",\"citations\":\"auto\",\"mode\":\"fts-only\"}");
    cm_buf_reset(&b);
    EXPECT_INT(
        cm_tools_search_payload(v, 1, &(tools_head){"none", "", NULL, CM_CITE_OFF, NULL, NULL}, &b),
        CM_OK);
    EXPECT(strstr(b.data, "Source:") == NULL);
    EXPECT(strstr(b.data, "\"citation\"") == NULL);
    EXPECT_CONTAINS(b.data, "\"citations\":\"off\"");
    cm_buf_reset(&b);
    /* With a provider: mode hybrid, the model in the id. */
    EXPECT_INT(cm_tools_search_payload(v + 1, 1,
                                       &(tools_head){"openai", "m1", NULL, CM_CITE_OFF, NULL, NULL}, &b),
               CM_OK);
    EXPECT_CONTAINS(b.data, "\"mode\":\"hybrid\"");
    EXPECT(strstr(b.data, "617b4aaa772f") == NULL);
    EXPECT(strstr(b.data, "textScore") == NULL); /* a vector-only hit */
    cm_buf_reset(&b);
    EXPECT_INT(cm_tools_search_error("index is corrupt",
                                     &(tools_head){"none", "", NULL, CM_CITE_ON, NULL, NULL}, &b),
               CM_OK);
    EXPECT_STR(b.data, "{\"results\":[],\"disabled\":true,\"error\":\"index is corrupt\","
                       "\"provider\":\"none\",\"model\":\"\",\"citations\":\"on\","
                       "\"mode\":\"fts-only\"}");
    cm_buf_release(&b);
}

TEST(tools_chat_type_from_session_key)
{
    EXPECT_INT(cm_tools_chat_type(NULL), TOOLS_CHAT_DIRECT);
    EXPECT_INT(cm_tools_chat_type(""), TOOLS_CHAT_DIRECT);
    EXPECT_INT(cm_tools_chat_type("agent:main:main"), TOOLS_CHAT_DIRECT);
    EXPECT_INT(cm_tools_chat_type("agent:main:telegram:direct:42"), TOOLS_CHAT_DIRECT);
    EXPECT_INT(cm_tools_chat_type("agent:main:telegram:group:-100123"), TOOLS_CHAT_GROUP);
    EXPECT_INT(cm_tools_chat_type("agent:main:discord:channel:991"), TOOLS_CHAT_CHANNEL);
    EXPECT_INT(cm_tools_chat_type("  Agent:Ops:Slack:CHANNEL:c1:thread:9  "), TOOLS_CHAT_CHANNEL);
    /* channel wins over group, as in 2026.3.22 */
    EXPECT_INT(cm_tools_chat_type("agent:main:x:group:channel"), TOOLS_CHAT_CHANNEL);
    /* empty parts are dropped */
    EXPECT_INT(cm_tools_chat_type("agent::main::group:1"), TOOLS_CHAT_GROUP);
    /* the agent id is not the rest; not an agent key; too short; a token must be whole */
    EXPECT_INT(cm_tools_chat_type("agent:group:main"), TOOLS_CHAT_DIRECT);
    EXPECT_INT(cm_tools_chat_type("telegram:group:1"), TOOLS_CHAT_DIRECT);
    EXPECT_INT(cm_tools_chat_type("agent:main"), TOOLS_CHAT_DIRECT);
    EXPECT_INT(cm_tools_chat_type("agent:main:groups:1"), TOOLS_CHAT_DIRECT);
    EXPECT(cm_tools_cite(CM_CITE_ON, "agent:main:telegram:group:1"));
    EXPECT(!cm_tools_cite(CM_CITE_OFF, NULL));
    EXPECT(cm_tools_cite(CM_CITE_AUTO, NULL));
    EXPECT(!cm_tools_cite(CM_CITE_AUTO, "agent:main:telegram:group:1"));
}

typedef struct seen {
    json_t *arr; /* what each result was, as the payload would show it */
    int stop_after;
} seen;

static int collect(void *ctx, const cm_search_result *r)
{
    seen *s = ctx;
    json_t *o = json_pack("{s:s, s:i, s:i, s:f, s:s, s:s}", "path", r->path, "startLine",
                          r->start_line, "endLine", r->end_line, "score", r->score, "snippet",
                          r->snippet, "source", r->source);
    if (*r->citation) json_object_set_new(o, "citation", json_string(r->citation));
    json_array_append_new(s->arr, o);
    return s->stop_after && (int)json_array_size(s->arr) >= s->stop_after;
}

static int raw_path(void *ctx, const cm_search_result *r)
{
    /* the bytes as they are: jansson's json_stringn_nocheck keeps them */
    json_array_append_new(((seen *)ctx)->arr, json_stringn_nocheck(r->path, strlen(r->path)));
    return 0;
}

/* cm_tools_search_each hands out what the payload holds, field by field
 * (bar "id" and "textScore"), cited or not, for long CJK text too; a
 * nonzero return stops it. */
TEST(tools_search_each_matches_the_payload)
{
    buf t = BUF_INIT;
    for (int i = 0; i < 800; i++)
        cm_buf_adds(&t, "漢");
    search_hit v[3] = {mk("memory/2026-02-10.md", 12, 30, 0.734, "Router \"Omada\"\nVLAN 10"),
                       mk("MEMORY.md", 3, 3, 0.5, "one line"),
                       mk("memory/long.md", 1, 9, 0.123456789, t.data)};
    v[0].has_text = true;
    v[0].text_score = 0.8;
    for (int cite = 0; cite < 2; cite++) {
        buf b = BUF_INIT;
        tools_head head = {"none", "", NULL, cite ? CM_CITE_ON : CM_CITE_OFF, NULL, NULL};
        EXPECT_INT(cm_tools_search_payload(v, 3, &head, &b), CM_OK);
        json_t *root = json_loads(b.data, 0, NULL), *want = json_object_get(root, "results");
        seen s = {json_array(), 0};
        EXPECT_INT(cm_tools_search_each(v, 3, cite, collect, &s), CM_OK);
        EXPECT_INT(json_array_size(s.arr), 3);
        for (size_t i = 0; i < 3; i++) {
            json_t *w = json_array_get(want, i), *g = json_array_get(s.arr, i);
            json_object_del(w, "id");
            json_object_del(w, "textScore");
            EXPECT_NEAR(json_real_value(json_object_get(g, "score")),
                        json_number_value(json_object_get(w, "score")), 1e-6);
            json_object_del(w, "score");
            json_object_del(g, "score");
            char *ws = json_dumps(w, JSON_SORT_KEYS), *gs = json_dumps(g, JSON_SORT_KEYS);
            EXPECT_STR(gs, ws);
            free(ws);
            free(gs);
        }
        json_decref(s.arr);
        s = (seen){json_array(), 1};
        EXPECT_INT(cm_tools_search_each(v, 3, cite, collect, &s), CM_ECANCELED);
        EXPECT_INT(json_array_size(s.arr), 1);
        json_decref(s.arr);
        json_decref(root);
        cm_buf_release(&b);
    }
    cm_buf_release(&t);
    /* a name that is not UTF-8 comes as its bytes (the payload's is U+FFFD) */
    search_hit bad = mk("memory/bad\xff.md", 1, 1, 0.5, "t");
    seen s = {json_array(), 0};
    EXPECT_INT(cm_tools_search_each(&bad, 1, false, raw_path, &s), CM_OK);
    EXPECT_STR(json_string_value(json_array_get(s.arr, 0)), "memory/bad\xff.md");
    json_decref(s.arr);
}

TEST(tools_citations_auto_by_session)
{
    search_hit v = mk("memory/a.md", 1, 2, 0.9, "text");
    const char *keys[] = {"agent:main:telegram:group:7", "agent:main:discord:channel:8",
                          "agent:main:telegram:direct:9", NULL};
    const bool cited[] = {false, false, true, true};
    for (size_t i = 0; i < 4; i++) {
        buf b = BUF_INIT;
        EXPECT_INT(cm_tools_search_payload(
                       &v, 1, &(tools_head){"none", "", NULL, CM_CITE_AUTO, keys[i], NULL}, &b),
                   CM_OK);
        EXPECT_CONTAINS(b.data, "\"citations\":\"auto\"");
        EXPECT_INT(strstr(b.data, "\"citation\":\"memory/a.md#L1-L2\"") != NULL, cited[i]);
        EXPECT_INT(strstr(b.data, "Source: memory/a.md#L1-L2") != NULL, cited[i]);
        cm_buf_release(&b);
    }
}

/* Every byte of s is valid UTF-8 and none is a control character. */
static bool clean_bytes(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p < 0x20 || *p == 0x7f) return false;
        if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) return false; /* C1 */
    }
    json_error_t je;
    json_t *j = json_loads(s, 0, &je); /* jansson refuses invalid UTF-8 */
    json_decref(j);
    return j != NULL;
}

TEST(tools_payload_names_not_utf8_or_controls)
{
    search_hit v = mk("memory/bad\xff\n\x1b[31m\xc2\x9b.md", 1, 1, 0.9, "t\x7fx\xc2\x85y\xfe");
    v.has_text = true;
    buf b = BUF_INIT;
    EXPECT_INT(
        cm_tools_search_payload(&v, 1, &(tools_head){"none", "", NULL, CM_CITE_ON, NULL, NULL}, &b),
        CM_OK);
    EXPECT(clean_bytes(b.data));
    json_t *j = json_loads(b.data, 0, NULL);
    json_t *r = json_array_get(json_object_get(j, "results"), 0);
    EXPECT_STR(json_string_value(json_object_get(r, "path")),
               "memory/bad\xEF\xBF\xBD\n\x1b[31m\xc2\x9b.md"); /* U+FFFD, controls kept as \u */
    EXPECT_CONTAINS(b.data, "bad\xEF\xBF\xBD\\n\\u001b[31m\\u009b.md");
    EXPECT_CONTAINS(b.data, "t\\u007fx\\u0085y\xEF\xBF\xBD");
    json_decref(j);
    cm_buf_release(&b);
}

TEST(tools_snippet_is_700_characters)
{
    buf t = BUF_INIT, b = BUF_INIT;
    for (int i = 0; i < 800; i++)
        cm_buf_adds(&t, "漢");
    search_hit v = mk("memory/a.md", 1, 1, 1, t.data);
    EXPECT_INT(
        cm_tools_search_payload(&v, 1, &(tools_head){"none", "", NULL, CM_CITE_OFF, NULL, NULL}, &b),
        CM_OK);
    json_t *j = json_loads(b.data, 0, NULL);
    const char *snip = json_string_value(
        json_object_get(json_array_get(json_object_get(j, "results"), 0), "snippet"));
    EXPECT(snip != NULL);
    EXPECT_INT(strlen(snip), 700 * 3); /* 700 code points, none cut in half */
    json_decref(j);
    cm_buf_release(&t);
    cm_buf_release(&b);
}

static const char *get(const cm_config *c, const char *path, size_t len, long from, long lines,
                       cm_rc *rc)
{
    static buf b;
    static char err[512];
    cm_buf_reset(&b);
    *rc = cm_tools_get(c, path, len, from, 0, lines, &b, err, sizeof err);
    return *rc ? err : b.data;
}

TEST(tools_get_reads_lines_and_missing_files)
{
    char *d = tmp_dir();
    write_file(d, "ws/memory/2026-02-10.md", "l1\nl2\nl3\nl4\n");
    write_file(d, "team/plan.md", "plan\n");
    cm_config c = {0};
    c.workspace = (char *)path_in(d, "ws");
    char *extra[] = {(char *)"../team"};
    c.extra_paths.v = extra;
    c.extra_paths.n = 1;
    cm_rc rc;
    EXPECT_STR(get(&c, "memory/2026-02-10.md", 20, 0, 0, &rc),
               "{\"path\":\"memory/2026-02-10.md\",\"text\":\"l1\\nl2\\nl3\\nl4\\n\"}");
    EXPECT_STR(get(&c, "memory/2026-02-10.md", 20, 2, 2, &rc),
               "{\"path\":\"memory/2026-02-10.md\",\"text\":\"l2\\nl3\"}");
    EXPECT_STR(get(&c, "memory/2026-02-10.md", 20, 9, 2, &rc),
               "{\"path\":\"memory/2026-02-10.md\",\"text\":\"\"}");
    EXPECT_STR(get(&c, "memory/2026-02-11.md", 20, 0, 0, &rc),
               "{\"path\":\"memory/2026-02-11.md\",\"text\":\"\"}");
    EXPECT_STR(get(&c, "MEMORY.md", 9, 0, 0, &rc), "{\"path\":\"MEMORY.md\",\"text\":\"\"}");
    EXPECT_STR(get(&c, "../team/plan.md", 15, 0, 0, &rc),
               "{\"path\":\"../team/plan.md\",\"text\":\"plan\\n\"}");
}

TEST(tools_get_rejects_paths_outside_memory)
{
    char *d = tmp_dir();
    write_file(d, "ws/memory/a.md", "a\n");
    write_file(d, "ws/notes.md", "not memory\n");
    write_file(d, "secret.md", "secret\n");
    write_file(d, "ws/memory/data.txt", "text\n");
    EXPECT(symlink(path_in(d, "secret.md"), path_in(d, "ws/memory/link.md")) == 0);
    EXPECT(symlink(d, path_in(d, "ws/memory/up")) == 0);
    cm_config c = {0};
    c.workspace = (char *)path_in(d, "ws");
    cm_rc rc;
    struct {
        const char *path;
        size_t len;
        const char *msg;
    } bad[] = {
        {"../secret.md", 12, "'..' leaves the workspace"},
        {"memory/../../secret.md", 22, "'..' leaves the workspace"},
        {"/etc/passwd.md", 14, "absolute path outside the memory files"},
        {"~/x.md", 6, "not a memory file"},
        {"memory/a.md\0.txt", 16, "NUL byte"},
        {"memory/data.txt", 15, "only Markdown (.md)"},
        {"notes.md", 8, "not a memory file"},
        {"memory/link.md", 14, "symbolic links are not followed"},
        {"memory/up/secret.md", 19, "symbolic link"},
        {"", 0, "path is empty"},
    };
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        const char *msg = get(&c, bad[i].path, bad[i].len, 0, 0, &rc);
        EXPECT_INT(rc, CM_EPATH);
        EXPECT_CONTAINS(msg, bad[i].msg);
    }
    EXPECT_STR(get(&c, "memory/./a.md", 13, 0, 0, &rc),
               "{\"path\":\"memory/a.md\",\"text\":\"a\\n\"}");
}

TEST(tools_get_caps_huge_files)
{
    char *d = tmp_dir();
    buf t = BUF_INIT;
    for (int i = 0; i < 30000; i++)
        cm_buf_printf(&t, "line %05d %s\n", i, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
    write_file(d, "ws/MEMORY.md", t.data);
    cm_config c = {0};
    c.workspace = (char *)path_in(d, "ws");
    cm_rc rc;
    const char *out = get(&c, "MEMORY.md", 9, 0, 0, &rc);
    EXPECT_INT(rc, CM_OK);
    json_t *j = json_loads(out, 0, NULL);
    EXPECT(strlen(json_string_value(json_object_get(j, "text"))) <= TOOLS_GET_MAX_BYTES);
    EXPECT(json_is_true(json_object_get(j, "truncated")));
    long next = (long)json_integer_value(json_object_get(j, "nextFrom"));
    EXPECT(next > 1000 && next < 30000);
    json_decref(j);
    out = get(&c, "MEMORY.md", 9, next, 1, &rc);
    char want[64];
    snprintf(want, sizeof want, "line %05ld", next - 1);
    EXPECT_CONTAINS(out, want);
    cm_buf_release(&t);
}
