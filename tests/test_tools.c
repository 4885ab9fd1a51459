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
    buf b = BUF_INIT;
    EXPECT_INT(tools_search_payload(v, 2, &(tools_head){"none", "", NULL, CM_CITE_AUTO}, &b), CM_OK);
    EXPECT_STR(b.data,
               "{\"results\":[{\"path\":\"memory/2026-02-10.md\",\"startLine\":12,\"endLine\":30,"
               "\"score\":0.734,\"snippet\":\"Router \\\"Omada\\\"\\nVLAN 10\\n\\nSource: "
               "memory/2026-02-10.md#L12-L30\",\"source\":\"memory\",\"citation\":"
               "\"memory/2026-02-10.md#L12-L30\"},{\"path\":\"MEMORY.md\",\"startLine\":3,"
               "\"endLine\":3,\"score\":0.5,\"snippet\":\"one line\\n\\nSource: MEMORY.md#L3\","
               "\"source\":\"memory\",\"citation\":\"MEMORY.md#L3\"}],\"provider\":\"none\","
               "\"model\":\"\",\"citations\":\"auto\"}");
    buf_reset(&b);
    EXPECT_INT(tools_search_payload(v, 1, &(tools_head){"none", "", NULL, CM_CITE_OFF}, &b), CM_OK);
    EXPECT(strstr(b.data, "Source:") == NULL);
    EXPECT(strstr(b.data, "\"citation\"") == NULL);
    EXPECT_CONTAINS(b.data, "\"citations\":\"off\"");
    buf_reset(&b);
    EXPECT_INT(tools_search_error("index is corrupt", &(tools_head){"none", "", NULL, CM_CITE_ON}, &b), CM_OK);
    EXPECT_STR(b.data, "{\"results\":[],\"disabled\":true,\"error\":\"index is corrupt\","
                       "\"provider\":\"none\",\"model\":\"\",\"citations\":\"on\"}");
    buf_release(&b);
}

TEST(tools_snippet_is_700_characters)
{
    buf t = BUF_INIT, b = BUF_INIT;
    for (int i = 0; i < 800; i++)
        buf_adds(&t, "漢");
    search_hit v = mk("memory/a.md", 1, 1, 1, t.data);
    EXPECT_INT(tools_search_payload(&v, 1, &(tools_head){"none", "", NULL, CM_CITE_OFF}, &b), CM_OK);
    json_t *j = json_loads(b.data, 0, NULL);
    const char *snip = json_string_value(
        json_object_get(json_array_get(json_object_get(j, "results"), 0), "snippet"));
    EXPECT(snip != NULL);
    EXPECT_INT(strlen(snip), 700 * 3); /* 700 code points, none cut in half */
    json_decref(j);
    buf_release(&t);
    buf_release(&b);
}

static const char *get(const cm_config *c, const char *path, size_t len, long from, long lines,
                       cm_rc *rc)
{
    static buf b;
    static char err[512];
    buf_reset(&b);
    *rc = tools_get(c, path, len, from, 0, lines, &b, err, sizeof err);
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
        buf_printf(&t, "line %05d %s\n", i, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
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
    buf_release(&t);
}
