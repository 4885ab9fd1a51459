/*
 * test_fs_tools.c — the agent's file tools (src/tools/fs_tools.c) and the
 * tool policy (src/tools/policy.c): read's limits and continuation notes as
 * the reference writes them, write and edit (atomic, CRLF and BOM kept, the
 * reference's fuzzy match and its errors), hostile paths (escapes, symbolic
 * links, a directory swapped for a link), and tools.profile/allow/deny.
 */
#include <fcntl.h>
#include <jansson.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../src/agent/turn.h"
#include "../src/base/fs.h"
#include "../src/base/path.h"
#include "../src/tools/fs_tools.h"
#include "../src/tools/policy.h"
#include "test.h"

/* Runs a tool on args (JSON text); the result text or "ERR: <message>". */
static char *run(cm_rc (*fn)(const char *, const json_t *, buf *, char *, size_t), const char *ws,
                 const char *args)
{
    json_t *a = json_loads(args, 0, NULL);
    buf out = BUF_INIT;
    char err[1024] = "";
    cm_rc rc = fn(ws, a, &out, err, sizeof err);
    json_decref(a);
    if (rc) {
        cm_buf_reset(&out);
        cm_buf_printf(&out, "ERR: %s", err);
    }
    return cm_buf_detach(&out);
}

static char *slurp(const char *path)
{
    buf b = BUF_INIT;
    char err[256];
    if (cm_fs_read_file(path, 1 << 26, &b, err, sizeof err)) return NULL;
    return cm_buf_detach(&b);
}

#define EXPECT_RUN(fn, ws, args, want)                                                             \
    do {                                                                                           \
        char *got_ = run(fn, ws, args);                                                            \
        EXPECT_STR(got_, want);                                                                    \
        free(got_);                                                                                \
    } while (0)

#define EXPECT_RUN_HAS(fn, ws, args, want)                                                         \
    do {                                                                                           \
        char *got_ = run(fn, ws, args);                                                            \
        EXPECT_CONTAINS(got_, want);                                                               \
        free(got_);                                                                                \
    } while (0)

TEST(fs_tools_read_offset_limit_and_notes)
{
    char *d = tmp_dir();
    char *ws = cm_strdup(path_in(d, "ws"));
    write_file(d, "ws/a.txt", "one\ntwo\nthree\n");
    EXPECT_RUN(cm_tool_read, ws, "{\"path\":\"a.txt\"}", "one\ntwo\nthree\n");
    EXPECT_RUN(cm_tool_read, ws, "{\"path\":\"a.txt\",\"offset\":2}", "two\nthree\n");
    /* 4 lines (the empty one after the final newline counts) */
    EXPECT_RUN(cm_tool_read, ws, "{\"path\":\"a.txt\",\"limit\":1}",
               "one\n\n[3 more lines in file. Use offset=2 to continue.]");
    EXPECT_RUN(cm_tool_read, ws, "{\"path\":\"a.txt\",\"offset\":2,\"limit\":1}",
               "two\n\n[2 more lines in file. Use offset=3 to continue.]");
    EXPECT_RUN(cm_tool_read, ws, "{\"path\":\"a.txt\",\"offset\":9}",
               "ERR: Offset 9 is beyond end of file (4 lines total)");
    EXPECT_RUN(cm_tool_read, ws, "{\"path\":\"@a.txt\",\"offset\":3,\"limit\":5}", "three\n");
    EXPECT_RUN(cm_tool_read, ws, "{\"path\":\"nope.txt\"}", "ERR: File not found: nope.txt");
    EXPECT_RUN_HAS(cm_tool_read, ws, "{\"path\":\"a.txt\",\"offset\":-1}", "ERR: offset");
    /* absolute inside the workspace is fine */
    char args[2048];
    snprintf(args, sizeof args, "{\"path\":\"%s/a.txt\",\"limit\":1}", ws);
    EXPECT_RUN_HAS(cm_tool_read, ws, args, "one\n\n[3 more");
    free(ws);
}

TEST(fs_tools_read_limits_as_the_reference)
{
    char *d = tmp_dir();
    char *ws = cm_strdup(path_in(d, "ws"));
    buf b = BUF_INIT;
    for (int i = 1; i <= 2500; i++)
        cm_buf_printf(&b, "line %d\n", i);
    write_file(d, "ws/long.txt", b.data);
    char *got = run(cm_tool_read, ws, "{\"path\":\"long.txt\"}");
    EXPECT_CONTAINS(got, "line 2000\n\n[Showing lines 1-2000 of 2501. Use offset=2001 to continue.]");
    EXPECT(!strstr(got, "line 2001"));
    free(got);
    got = run(cm_tool_read, ws, "{\"path\":\"long.txt\",\"offset\":2001}");
    EXPECT(!strncmp(got, "line 2001\n", 10));
    EXPECT(!strstr(got, "Showing"));
    free(got);
    /* the byte limit: 100 lines of 1,000 bytes */
    cm_buf_reset(&b);
    for (int i = 0; i < 100; i++) {
        for (int k = 0; k < 999; k++)
            cm_buf_addc(&b, (char)('a' + i % 26));
        cm_buf_addc(&b, '\n');
    }
    write_file(d, "ws/wide.txt", b.data);
    got = run(cm_tool_read, ws, "{\"path\":\"wide.txt\"}");
    /* 51 lines of 999 bytes and 50 separators = 50,999 <= 51,200; 52 do not fit */
    EXPECT_CONTAINS(got, "\n\n[Showing lines 1-51 of 101 (50.0KB limit). Use offset=52 to continue.]");
    EXPECT_INT((long)(strstr(got, "\n\n[Showing") - got), 51 * 999 + 50);
    free(got);
    /* a first line over the limit */
    cm_buf_reset(&b);
    for (int k = 0; k < 60000; k++)
        cm_buf_addc(&b, 'x');
    cm_buf_adds(&b, "\nshort\n");
    write_file(d, "ws/huge.txt", b.data);
    EXPECT_RUN(cm_tool_read, ws, "{\"path\":\"huge.txt\"}",
               "[Line 1 is 58.6KB, exceeds 50.0KB limit. Use bash: sed -n '1p' huge.txt | head -c "
               "51200]");
    EXPECT_RUN(cm_tool_read, ws, "{\"path\":\"huge.txt\",\"offset\":2}", "short\n");
    /* invalid UTF-8 is shown as U+FFFD, as the reference decodes it */
    write_bytes(d, "ws/bin.txt", "a\xff" "b", 3);
    EXPECT_RUN(cm_tool_read, ws, "{\"path\":\"bin.txt\"}", "a\xef\xbf\xbd" "b");
    cm_buf_release(&b);
    free(ws);
}

TEST(fs_tools_paths_stay_in_the_workspace)
{
    char *d = tmp_dir();
    char *ws = cm_strdup(path_in(d, "ws"));
    write_file(d, "secret.txt", "TOPSECRET\n");
    write_file(d, "ws/ok.md", "fine\n");
    EXPECT(symlink(path_in(d, "secret.txt"), path_in(d, "ws/link.txt")) == 0);
    EXPECT(symlink(d, path_in(d, "ws/up")) == 0);
    const char *bad[] = {
        "{\"path\":\"../secret.txt\"}",   "{\"path\":\"/etc/passwd\"}",
        "{\"path\":\"link.txt\"}",        "{\"path\":\"up/secret.txt\"}",
        "{\"path\":\"ok.md/../../secret.txt\"}", "{\"path\":\"\"}",
        "{\"path\":42}",                  "{}",
        "{\"path\":\"~/../../etc/passwd\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *got = run(cm_tool_read, ws, bad[i]);
        EXPECT(!strncmp(got, "ERR: ", 5));
        EXPECT(!strstr(got, "TOPSECRET"));
        free(got);
    }
    /* writes through the same paths create nothing outside */
    EXPECT_RUN_HAS(cm_tool_write, ws, "{\"path\":\"../out.txt\",\"content\":\"x\"}", "ERR: ");
    EXPECT_RUN_HAS(cm_tool_write, ws, "{\"path\":\"up/out.txt\",\"content\":\"x\"}", "ERR: ");
    EXPECT_RUN_HAS(cm_tool_write, ws, "{\"path\":\"link.txt\",\"content\":\"x\"}", "ERR: ");
    EXPECT_RUN_HAS(cm_tool_edit, ws,
                   "{\"path\":\"link.txt\",\"oldText\":\"TOPSECRET\",\"newText\":\"x\"}", "ERR: ");
    EXPECT(access(path_in(d, "out.txt"), F_OK) != 0);
    char *s = slurp(path_in(d, "secret.txt"));
    EXPECT_STR(s, "TOPSECRET\n");
    free(s);
    /* the same with the per-component walk (kernels without openat2) */
    cm_path_force_fallback(1);
    EXPECT_RUN_HAS(cm_tool_read, ws, "{\"path\":\"up/secret.txt\"}", "ERR: ");
    EXPECT_RUN_HAS(cm_tool_write, ws, "{\"path\":\"up/out2.txt\",\"content\":\"x\"}", "ERR: ");
    cm_path_force_fallback(0);
    EXPECT(access(path_in(d, "out2.txt"), F_OK) != 0);
    /* a FIFO is refused without blocking */
    EXPECT(mkfifo(path_in(d, "ws/fifo"), 0600) == 0);
    EXPECT_RUN_HAS(cm_tool_read, ws, "{\"path\":\"fifo\"}", "ERR: ");
    free(ws);
}

TEST(fs_tools_write_creates_and_replaces)
{
    char *d = tmp_dir();
    char *ws = cm_strdup(path_in(d, "ws"));
    EXPECT_RUN(cm_tool_write, ws, "{\"path\":\"notes/deep/x.md\",\"content\":\"héllo\\n\"}",
               "Successfully wrote 7 bytes to notes/deep/x.md");
    char *s = slurp(path_in(d, "ws/notes/deep/x.md"));
    EXPECT_STR(s, "héllo\n");
    free(s);
    chmod(path_in(d, "ws/notes/deep/x.md"), 0600);
    EXPECT_RUN_HAS(cm_tool_write, ws, "{\"path\":\"notes/deep/x.md\",\"content\":\"\"}",
                   "Successfully wrote 0 bytes");
    struct stat st;
    EXPECT(stat(path_in(d, "ws/notes/deep/x.md"), &st) == 0);
    EXPECT_INT(st.st_size, 0);
    EXPECT_INT(st.st_mode & 0777, 0600); /* permissions kept */
    /* no temporary file left behind */
    EXPECT(access(path_in(d, "ws/notes/deep"), F_OK) == 0);
    run_result r = run_cmd(NULL, (const char *const[]){"sh", "-c",
                                                        "ls -A \"$0\" | wc -l",
                                                        path_in(d, "ws/notes/deep"), NULL});
    EXPECT_STR(r.out, "1\n");
    run_result_release(&r);
    free(ws);
}

TEST(fs_tools_edit_as_the_reference)
{
    char *d = tmp_dir();
    char *ws = cm_strdup(path_in(d, "ws"));
    write_file(d, "ws/a.md", "alpha\nbeta\ngamma\n");
    EXPECT_RUN(cm_tool_edit, ws, "{\"path\":\"a.md\",\"oldText\":\"beta\",\"newText\":\"BETA\"}",
               "Successfully replaced text in a.md.");
    char *s = slurp(path_in(d, "ws/a.md"));
    EXPECT_STR(s, "alpha\nBETA\ngamma\n");
    free(s);
    EXPECT_RUN(cm_tool_edit, ws, "{\"path\":\"a.md\",\"oldText\":\"delta\",\"newText\":\"x\"}",
               "ERR: Could not find the exact text in a.md. The old text must match exactly "
               "including all whitespace and newlines.");
    write_file(d, "ws/b.md", "x = 1\nx = 1\n");
    EXPECT_RUN(cm_tool_edit, ws, "{\"path\":\"b.md\",\"oldText\":\"x = 1\",\"newText\":\"y\"}",
               "ERR: Found 2 occurrences of the text in b.md. The text must be unique. Please "
               "provide more context to make it unique.");
    EXPECT_RUN_HAS(cm_tool_edit, ws, "{\"path\":\"a.md\",\"oldText\":\"BETA\",\"newText\":\"BETA\"}",
                   "ERR: No changes made to a.md.");
    EXPECT_RUN(cm_tool_edit, ws, "{\"path\":\"missing.md\",\"oldText\":\"a\",\"newText\":\"b\"}",
               "ERR: File not found: missing.md");
    /* CRLF endings and a BOM are kept; the model's LF text matches them */
    write_bytes(d, "ws/w.txt", "\xEF\xBB\xBFone\r\ntwo\r\n", 13);
    EXPECT_RUN(cm_tool_edit, ws, "{\"path\":\"w.txt\",\"oldText\":\"one\\ntwo\",\"newText\":\"1\\n2\"}",
               "Successfully replaced text in w.txt.");
    s = slurp(path_in(d, "ws/w.txt"));
    EXPECT_STR(s, "\xEF\xBB\xBF" "1\r\n2\r\n");
    free(s);
    /* the fuzzy match: typographic quotes and trailing spaces */
    write_file(d, "ws/q.md", "He said \xE2\x80\x9Chi\xE2\x80\x9D   \nend\n");
    EXPECT_RUN(cm_tool_edit, ws,
               "{\"path\":\"q.md\",\"oldText\":\"He said \\\"hi\\\"\",\"newText\":\"He said bye\"}",
               "Successfully replaced text in q.md.");
    s = slurp(path_in(d, "ws/q.md"));
    EXPECT_STR(s, "He said bye\nend\n");
    free(s);
    free(ws);
}

static bool offers(const char *cfg, const char *agent, const char *tool)
{
    json_t *root = json_loads(cfg, 0, NULL);
    tool_policy p;
    bool r = false;
    if (cm_tool_policy_init(&p, root, agent) == CM_OK) {
        r = cm_tool_policy_allows(&p, tool);
        cm_tool_policy_release(&p);
    }
    json_decref(root);
    return r;
}

TEST(fs_tools_policy_profiles_groups_and_globs)
{
    EXPECT(offers("{}", "main", "read"));
    EXPECT(offers("{\"tools\":{\"profile\":\"full\"}}", "main", "agents_list"));
    EXPECT(!offers("{\"tools\":{\"profile\":\"minimal\"}}", "main", "read"));
    EXPECT(offers("{\"tools\":{\"profile\":\"minimal\"}}", "main", "session_status"));
    EXPECT(offers("{\"tools\":{\"profile\":\"coding\"}}", "main", "edit"));
    EXPECT(offers("{\"tools\":{\"profile\":\"coding\"}}", "main", "memory_write"));
    EXPECT(!offers("{\"tools\":{\"profile\":\"messaging\"}}", "main", "write"));
    EXPECT(offers("{\"tools\":{\"profile\":\"messaging\"}}", "main", "message"));
    EXPECT(!offers("{\"tools\":{\"deny\":[\"group:fs\"]}}", "main", "edit"));
    EXPECT(offers("{\"tools\":{\"deny\":[\"group:fs\"]}}", "main", "memory_get"));
    EXPECT(!offers("{\"tools\":{\"allow\":[\"memory_*\"]}}", "main", "read"));
    EXPECT(offers("{\"tools\":{\"allow\":[\"memory_*\"]}}", "main", "memory_search"));
    EXPECT(offers("{\"tools\":{\"allow\":[\" Memory_Get \"]}}", "main", "memory_get"));
    EXPECT(!offers("{\"tools\":{\"deny\":[\"bash\"]}}", "main", "exec"));
    EXPECT(offers("{\"tools\":{\"allow\":[\"exec\"]}}", "main", "apply_patch"));
    EXPECT(!offers("{\"tools\":{\"allow\":[\"*\"],\"deny\":[\"*\"]}}", "main", "read"));
    EXPECT(!offers("{\"tools\":{\"allow\":[\"group:openclaw\"]}}", "main", "read"));
    EXPECT(offers("{\"tools\":{\"allow\":[\"group:openclaw\"]}}", "main", "web_fetch"));
    /* alsoAllow adds to a profile's list */
    EXPECT(offers("{\"tools\":{\"profile\":\"minimal\",\"alsoAllow\":[\"read\"]}}", "main",
                  "read"));
    /* the agent's profile replaces the global one; its deny applies to it alone */
    const char *multi = "{\"tools\":{\"profile\":\"minimal\"},\"agents\":{\"list\":["
                        "{\"id\":\"coder\",\"tools\":{\"profile\":\"coding\",\"deny\":[\"write\"]}},"
                        "{\"id\":\"main\"}]}}";
    EXPECT(offers(multi, "coder", "read"));
    EXPECT(!offers(multi, "coder", "write"));
    EXPECT(!offers(multi, "main", "read"));
    EXPECT(cm_tool_glob_match("a*b*c", "axxbyyc"));
    EXPECT(!cm_tool_glob_match("a*b*c", "axxbyy"));
}

TEST(fs_tools_offered_by_the_agent_turn)
{
    char *d = tmp_dir();
    char *ws = cm_strdup(path_in(d, "ws"));
    agent_tools t = {.workspace = ws, .fs_write = true};
    llm_tool_def defs[AGENT_TOOLS_MAX];
    size_t n = cm_agent_tools_offered(&t, defs, AGENT_TOOLS_MAX);
    EXPECT_INT(n, 3);
    EXPECT_STR(defs[0].name, "read");
    EXPECT_STR(defs[1].name, "edit");
    EXPECT_STR(defs[2].name, "write");
    t.fs_write = false; /* a read-only workspace: read alone */
    EXPECT_INT(cm_agent_tools_offered(&t, defs, AGENT_TOOLS_MAX), 1);
    json_t *root = json_loads("{\"tools\":{\"deny\":[\"read\"]}}", 0, NULL);
    tool_policy p;
    EXPECT_INT(cm_tool_policy_init(&p, root, "main"), CM_OK);
    t.fs_write = true;
    t.policy = &p;
    n = cm_agent_tools_offered(&t, defs, AGENT_TOOLS_MAX);
    EXPECT_INT(n, 2);
    EXPECT_STR(defs[0].name, "edit");
    cm_tool_policy_release(&p);
    json_decref(root);
    free(ws);
}
