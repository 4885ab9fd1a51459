/*
 * test_cli.c — end to end through build/clawmem (or $CLAWMEM_BIN): the four
 * commands, text and JSON output, exit codes, and bad input (malformed config,
 * missing workspace, an index locked by another process, a corrupt index).
 */
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

typedef struct cli {
    char *dir;
    char ws[1024], state[1024], cfg[1024];
} cli;

static void cli_init(cli *c)
{
    c->dir = tmp_dir();
    snprintf(c->ws, sizeof c->ws, "%s/ws", c->dir);
    snprintf(c->state, sizeof c->state, "%s/state", c->dir);
    snprintf(c->cfg, sizeof c->cfg, "%s/qc.json", c->dir);
    write_file(c->ws, "MEMORY.md",
               "# Facts\n\n- The dog is called Biscuit.\n- Router: Omada ER605.\n");
    write_file(c->ws, "memory/2026-02-10.md",
               "# 2026-02-10\n\nConfigured VLAN 10 for IoT devices.\n");
    write_file(c->dir, "qc.json", "{ // defaults\n}\n");
}

/* Runs clawmem with the test's workspace/state/config, then args. */
static run_result cm(const cli *c, const char *const *env, const char *a1, const char *a2,
                     const char *a3, const char *a4)
{
    const char *args[16] = {"--workspace", c->ws, "--state-dir", c->state, "--config", c->cfg};
    size_t n = 6;
    const char *extra[] = {a1, a2, a3, a4};
    for (size_t i = 0; i < 4 && extra[i]; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    return run_clawmem(env, args);
}

TEST(cli_index_search_get_status)
{
    cli c;
    cli_init(&c);
    run_result r = cm(&c, NULL, "index", NULL, NULL, NULL);
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.out, "Indexed 2 of 2 files");
    run_result_release(&r);

    r = cm(&c, NULL, "search", "Biscuit", NULL, NULL);
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.out, " MEMORY.md:1-4\n# Facts");
    EXPECT_CONTAINS(r.out, "Source: MEMORY.md#L1-L4");
    EXPECT(r.out[0] == '0' || r.out[0] == '1');
    run_result_release(&r);

    r = cm(&c, NULL, "search", "VLAN IoT", "--json", NULL);
    EXPECT_INT(r.status, 0);
    json_t *p = json_loads(r.out, 0, NULL);
    EXPECT(p != NULL);
    json_t *hit = json_array_get(json_object_get(p, "results"), 0);
    EXPECT_STR(json_string_value(json_object_get(hit, "path")), "memory/2026-02-10.md");
    EXPECT_INT(json_integer_value(json_object_get(hit, "startLine")), 1);
    EXPECT_INT(json_integer_value(json_object_get(hit, "endLine")), 3);
    EXPECT_STR(json_string_value(json_object_get(hit, "citation")), "memory/2026-02-10.md#L1-L3");
    EXPECT_STR(json_string_value(json_object_get(p, "provider")), "none");
    json_decref(p);
    run_result_release(&r);

    r = cm(&c, NULL, "search", "zebra", NULL, NULL);
    EXPECT_INT(r.status, 0);
    EXPECT_STR(r.out, "No matches.\n");
    run_result_release(&r);

    r = cm(&c, NULL, "get", "MEMORY.md", "--from", "3");
    EXPECT_INT(r.status, 0);
    EXPECT_STR(r.out, "- The dog is called Biscuit.\n- Router: Omada ER605.\n");
    run_result_release(&r);

    r = cm(&c, NULL, "get", "memory/2099-01-01.md", "--json", NULL);
    EXPECT_INT(r.status, 0);
    EXPECT_STR(r.out, "{\"path\":\"memory/2099-01-01.md\",\"text\":\"\"}\n");
    run_result_release(&r);

    r = cm(&c, NULL, "get", "../etc/passwd.md", NULL, NULL);
    EXPECT_INT(r.status, 1);
    EXPECT_CONTAINS(r.err, "'..' leaves the workspace");
    run_result_release(&r);

    r = cm(&c, NULL, "status", "--json", "--deep", NULL);
    EXPECT_INT(r.status, 0);
    p = json_loads(r.out, 0, NULL);
    EXPECT_INT(json_integer_value(json_object_get(p, "files")), 2);
    EXPECT_STR(json_string_value(json_object_get(p, "integrity")), "ok");
    EXPECT_STR(json_string_value(json_object_get(p, "search")), "keyword");
    json_decref(p);
    run_result_release(&r);

    r = cm(&c, NULL, "status", NULL, NULL, NULL);
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.out, "Files: 2  Chunks: 2");
    run_result_release(&r);
}

TEST(cli_index_drop)
{
    cli c;
    cli_init(&c);
    run_result r = cm(&c, NULL, "index", "--drop", NULL, NULL);
    EXPECT_INT(r.status, 0);
    EXPECT_STR(r.out, "Nothing to drop: there is no index yet.\n");
    run_result_release(&r);
    r = cm(&c, NULL, "index", NULL, NULL, NULL);
    EXPECT_INT(r.status, 0);
    run_result_release(&r);
    r = cm(&c, NULL, "index", "--drop", "--json", NULL);
    EXPECT_INT(r.status, 0);
    EXPECT_STR(r.out, "{\"dropped\":true}\n");
    run_result_release(&r);
    EXPECT(access(path_in(c.state, "memory/main.clawmem.sqlite"), F_OK) != 0);
    EXPECT(access(path_in(c.ws, "MEMORY.md"), F_OK) == 0);
    r = cm(&c, NULL, "index", "--drop", "--force", NULL);
    EXPECT_INT(r.status, 1);
    EXPECT_CONTAINS(r.err, "--drop and --force");
    run_result_release(&r);
}

TEST(cli_search_syncs_changed_files_first)
{
    cli c;
    cli_init(&c);
    run_result r = cm(&c, NULL, "search", "Biscuit", NULL, NULL); /* no index yet */
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.out, "MEMORY.md");
    run_result_release(&r);
    write_file(c.ws, "memory/2026-02-11.md", "Biscuit went to the vet.\n");
    r = cm(&c, NULL, "search", "vet", NULL, NULL);
    EXPECT_CONTAINS(r.out, "memory/2026-02-11.md:1-1");
    run_result_release(&r);
}

TEST(cli_help_and_usage_errors)
{
    const char *cmds[] = {"status", "index", "search", "get"};
    for (size_t i = 0; i < 4; i++) {
        const char *a[] = {cmds[i], "--help", NULL};
        run_result r = run_clawmem(NULL, a);
        EXPECT_INT(r.status, 0);
        EXPECT_CONTAINS(r.out, "usage: clawmem ");
        run_result_release(&r);
    }
    const char *h[] = {"--help", NULL};
    run_result r = run_clawmem(NULL, h);
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.out, "commands:");
    run_result_release(&r);
    const char *bad[] = {"frobnicate", NULL};
    r = run_clawmem(NULL, bad);
    EXPECT_INT(r.status, 1);
    EXPECT_CONTAINS(r.err, "unknown command 'frobnicate'");
    run_result_release(&r);
    cli c;
    cli_init(&c);
    r = cm(&c, NULL, "search", NULL, NULL, NULL);
    EXPECT_INT(r.status, 1);
    EXPECT_CONTAINS(r.err, "missing QUERY");
    run_result_release(&r);
    r = cm(&c, NULL, "search", "x", "--max-results", "0");
    EXPECT_INT(r.status, 1);
    run_result_release(&r);
}

TEST(cli_malformed_config_is_one_clear_line)
{
    cli c;
    cli_init(&c);
    write_file(
        c.dir, "qc.json",
        "{\n  agents: {\n    defaults: { memorySearch: { query: { minScore: 2 } } }\n  }\n}\n");
    run_result r = cm(&c, NULL, "index", NULL, NULL, NULL);
    EXPECT_INT(r.status, 1);
    char want[2048];
    snprintf(want, sizeof want,
             "clawmem: error: %s:3:42: agents.defaults.memorySearch.query.minScore: expected a number "
             "between 0 and 1, got 2\n",
             c.cfg);
    EXPECT_STR(r.err, want);
    run_result_release(&r);
    write_file(c.dir, "qc.json", "{ agents: [ }");
    r = cm(&c, NULL, "search", "x", NULL, NULL);
    EXPECT_INT(r.status, 1);
    EXPECT_CONTAINS(r.err, "qc.json:1:13: ");
    run_result_release(&r);
    write_file(c.dir, "qc.json", "{agents: {defaults: {memorySearch: {chunkin: {}}}}}");
    r = cm(&c, NULL, "index", NULL, NULL, NULL);
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.err, "warning: ");
    EXPECT_CONTAINS(r.err, "unknown key agents.defaults.memorySearch.chunkin");
    run_result_release(&r);
}

TEST(cli_missing_workspace)
{
    cli c;
    cli_init(&c);
    snprintf(c.ws, sizeof c.ws, "%s/nowhere", c.dir);
    run_result r = cm(&c, NULL, "index", NULL, NULL, NULL);
    EXPECT_INT(r.status, 1);
    EXPECT_CONTAINS(r.err, "nowhere does not exist");
    run_result_release(&r);
}

TEST(cli_locked_index)
{
    cli c;
    cli_init(&c);
    run_result r = cm(&c, NULL, "index", NULL, NULL, NULL);
    EXPECT_INT(r.status, 0);
    run_result_release(&r);
    /* another process holds the writer lock */
    int pipefd[2];
    EXPECT(pipe(pipefd) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(path_in(c.state, "memory/main.clawmem.sqlite.lock"), O_RDWR | O_CREAT, 0600);
        flock(fd, LOCK_EX);
        if (write(pipefd[1], "x", 1) < 0) _exit(1);
        pause();
        _exit(0);
    }
    char ch;
    EXPECT(read(pipefd[0], &ch, 1) == 1);
    const char *env[] = {"CLAWMEM_BUSY_TIMEOUT_MS=300", NULL};
    r = cm(&c, env, "index", NULL, NULL, NULL);
    bool ok = r.status == 1 && strstr(r.err, "being updated by another process");
    run_result_release(&r);
    /* searching does not wait for the writer: it reads the last committed state */
    write_file(c.ws, "memory/2026-02-12.md", "unsynced words\n");
    r = cm(&c, env, "search", "Biscuit", NULL, NULL);
    bool search_ok = r.status == 0 && strstr(r.out, "MEMORY.md");
    run_result_release(&r);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(pipefd[0]);
    close(pipefd[1]);
    EXPECT(ok);
    EXPECT(search_ok);
}

TEST(cli_corrupt_index_then_force)
{
    cli c;
    cli_init(&c);
    run_result r = cm(&c, NULL, "index", NULL, NULL, NULL);
    run_result_release(&r);
    unlink(path_in(c.state, "memory/main.clawmem.sqlite-wal"));
    unlink(path_in(c.state, "memory/main.clawmem.sqlite-shm"));
    write_file(c.state, "memory/main.clawmem.sqlite",
               "this is not a database, just some text of enough length");
    r = cm(&c, NULL, "index", NULL, NULL, NULL);
    EXPECT_INT(r.status, 1);
    EXPECT_CONTAINS(r.err, "corrupt");
    EXPECT_CONTAINS(r.err, "clawmem index --force");
    run_result_release(&r);
    r = cm(&c, NULL, "search", "Biscuit", NULL, NULL);
    EXPECT_INT(r.status, 1);
    EXPECT_CONTAINS(r.err, "clawmem index --force");
    run_result_release(&r);
    r = cm(&c, NULL, "index", "--force", NULL, NULL);
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.out, "(full rebuild)");
    run_result_release(&r);
    r = cm(&c, NULL, "search", "Biscuit", NULL, NULL);
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.out, "MEMORY.md");
    run_result_release(&r);
}

TEST(cli_example_workspace)
{
    /* The bundled example: CJK notes are found by their own words. */
    char *d = tmp_dir();
    const char *base[] = {"--workspace", "examples/workspace", "--state-dir", d, NULL};
    const char *queries[][2] = {{"사용자 사전", "memory/2026-10-05.md"},
                                {"形態素解析", "memory/2026-11-05.md"},
                                {"五花肉", "memory/2026-08-11.md"},
                                {"sqlite3_sqlitevec_init", "memory/2026-09-03.md"}};
    for (size_t i = 0; i < ARRAY_LEN(queries); i++) {
        const char *a[] = {base[0],  base[1],       base[2],  base[3],
                           "search", queries[i][0], "--json", NULL};
        run_result r = run_clawmem(NULL, a);
        EXPECT_INT(r.status, 0);
        json_t *p = json_loads(r.out, 0, NULL);
        json_t *hit = json_array_get(json_object_get(p, "results"), 0);
        EXPECT_STR(json_string_value(json_object_get(hit, "path")), queries[i][1]);
        json_decref(p);
        run_result_release(&r);
    }
}

TEST(cli_workspace_through_a_symlink)
{
    /* a link in the workspace's own path is not "reading through a link" */
    cli c;
    cli_init(&c);
    char link[1100];
    snprintf(link, sizeof link, "%s/wslink", c.dir);
    EXPECT(symlink(c.ws, link) == 0);
    const char *a[] = {"--workspace", link,  "--state-dir", c.state, "--config",
                       c.cfg,         "get", "MEMORY.md",   NULL};
    run_result r = run_clawmem(NULL, a);
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.out, "Biscuit");
    run_result_release(&r);
}

/* Only '\n' of the control characters, and valid UTF-8 throughout. */
static bool text_is_clean(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p < 0x20 && *p != '\n') || *p == 0x7f) return false;
        if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) return false; /* C1 */
    }
    json_t *j = json_string(s); /* jansson refuses invalid UTF-8 */
    json_decref(j);
    return j != NULL;
}

/* Valid UTF-8 JSON with no raw control byte (the final newline aside). */
static bool json_is_clean(const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i + 1 < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] == 0x7f) return false;
    json_t *j = json_loads(s, 0, NULL);
    json_decref(j);
    return j != NULL && text_is_clean(s);
}

TEST(cli_hostile_file_names)
{
    cli c;
    cli_init(&c);
    write_file(c.ws, "memory/bad\xff.md", "zebrafish in a file whose name is not UTF-8\n");
    write_file(c.ws, "memory/evil\n0.999 MEMORY.md:1-1\x1b[31m.md", "zebrafish forged line\n");
    write_file(c.ws, "memory/c1\xc2\x9b\x07.md", "zebrafish bell\n");
    run_result r = cm(&c, NULL, "index", NULL, NULL, NULL);
    EXPECT_INT(r.status, 0);
    run_result_release(&r);

    r = cm(&c, NULL, "search", "zebrafish", "--json", NULL);
    EXPECT_INT(r.status, 0);
    EXPECT(json_is_clean(r.out));
    EXPECT_CONTAINS(r.out, "memory/bad\xEF\xBF\xBD.md"); /* U+FFFD */
    EXPECT_CONTAINS(r.out, "memory/evil\\n0.999 MEMORY.md:1-1\\u001b[31m.md");
    EXPECT_CONTAINS(r.out, "memory/c1\\u009b\\u0007.md");
    run_result_release(&r);

    r = cm(&c, NULL, "search", "zebrafish", NULL, NULL);
    EXPECT_INT(r.status, 0);
    EXPECT(text_is_clean(r.out));
    EXPECT(text_is_clean(r.err));
    EXPECT_CONTAINS(r.out, " memory/evil\\n0.999 MEMORY.md:1-1\\x1b[31m.md:1-1\n");
    EXPECT_CONTAINS(r.out, "Source: memory/evil\\n0.999 MEMORY.md:1-1\\x1b[31m.md#L1\n");
    EXPECT_CONTAINS(r.out, "memory/c1\\u009b\\x07.md");
    EXPECT(!strstr(r.out, "\n0.999 MEMORY.md")); /* no forged hit line */
    run_result_release(&r);

    r = cm(&c, NULL, "status", "--json", NULL, NULL);
    EXPECT_INT(r.status, 0);
    EXPECT(json_is_clean(r.out));
    run_result_release(&r);
    r = cm(&c, NULL, "status", NULL, NULL, NULL);
    EXPECT_INT(r.status, 0);
    EXPECT(text_is_clean(r.out));
    EXPECT(text_is_clean(r.err));
    run_result_release(&r);

    /* An error naming a hostile path stays on one line. */
    r = cm(&c, NULL, "get", "/etc/x\n\x1b[2J.md", NULL, NULL);
    EXPECT_INT(r.status, 1);
    EXPECT(text_is_clean(r.err));
    EXPECT_INT(strchr(r.err, '\n') - r.err, (long)strlen(r.err) - 1);
    run_result_release(&r);
}
/* Global options after the command, as before it. */
TEST(cli_global_options_after_the_command)
{
    cli c;
    cli_init(&c);
    const char *a[] = {"search", "Biscuit",  "--workspace", c.ws,     "--state-dir",
                       c.state,  "--config", c.cfg,         "--json", NULL};
    run_result r = run_clawmem(NULL, a);
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.out, "\"path\":\"MEMORY.md\"");
    run_result_release(&r);
    /* mixed: some before, some after; status shows they took effect */
    const char *b[] = {"--workspace", c.ws,  "status", "--state-dir", c.state,
                       "--config",    c.cfg, "--json", NULL};
    r = run_clawmem(NULL, b);
    EXPECT_INT(r.status, 0);
    json_t *p = json_loads(r.out, 0, NULL);
    EXPECT(p != NULL);
    EXPECT_STR(json_string_value(json_object_get(p, "stateDir")), c.state);
    EXPECT_STR(json_string_value(json_object_get(p, "configPath")), c.cfg);
    EXPECT_INT(json_integer_value(json_object_get(p, "files")), 2);
    json_decref(p);
    run_result_release(&r);
    const char *d[] = {"get",         "MEMORY.md", "--lines",  "1",   "--workspace", c.ws,
                       "--state-dir", c.state,     "--config", c.cfg, NULL};
    r = run_clawmem(NULL, d);
    EXPECT_INT(r.status, 0);
    EXPECT_STR(r.out, "# Facts\n");
    run_result_release(&r);
    const char *e[] = {"status", "--workspace", NULL};
    r = run_clawmem(NULL, e);
    EXPECT_INT(r.status, 1);
    EXPECT_STR(r.err, "clawmem: error: --workspace needs a value\n");
    run_result_release(&r);
}

/* `clawmem help [COMMAND]`, and a bare `clawmem`: one line on stderr. */
TEST(cli_help_command_and_bare_clawmem)
{
    const char *h[] = {"help", NULL};
    run_result r = run_clawmem(NULL, h);
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.out, "commands:");
    EXPECT_CONTAINS(r.out, "help [COMMAND]");
    run_result_release(&r);
    const char *cmds[] = {"status", "index", "search", "get", "watch", "mcp"};
    for (size_t i = 0; i < 6; i++) {
        const char *a[] = {"help", cmds[i], NULL};
        r = run_clawmem(NULL, a);
        EXPECT_INT(r.status, 0);
        char want[64];
        snprintf(want, sizeof want, "usage: clawmem %s", cmds[i]);
        EXPECT(strncmp(r.out, want, strlen(want)) == 0);
        EXPECT_STR(r.err, "");
        run_result_release(&r);
    }
    const char *self[][4] = {
        {"help", "--help", NULL}, {"help", "-h", NULL}, {"help", "get", "--help", NULL}};
    for (size_t i = 0; i < 3; i++) { /* help's own --help, as every command's */
        r = run_clawmem(NULL, self[i]);
        EXPECT_INT(r.status, 0);
        EXPECT_CONTAINS(r.out, "help [COMMAND]");
        EXPECT_STR(r.err, "");
        run_result_release(&r);
    }
    const char *bad[] = {"help", "frobnicate", NULL};
    r = run_clawmem(NULL, bad);
    EXPECT_INT(r.status, 1);
    EXPECT_STR(r.err, "clawmem: error: help: unknown command 'frobnicate' (see clawmem help)\n");
    run_result_release(&r);
    const char *none[] = {NULL};
    r = run_clawmem(NULL, none);
    EXPECT_INT(r.status, 1);
    EXPECT_STR(r.out, "");
    EXPECT_CONTAINS(r.err, "clawmem: error: missing COMMAND");
    EXPECT_CONTAINS(r.err, "clawmem help");
    EXPECT(strchr(r.err, '\n') == r.err + strlen(r.err) - 1); /* one line */
    run_result_release(&r);
}

/* `watch` prints one line per sync on stdout; --quiet none. */
TEST(cli_watch_prints_one_line_per_sync)
{
    cli c;
    cli_init(&c);
    const char *args[] = {"--workspace", c.ws,    "--state-dir", c.state, "--config",
                          c.cfg,         "watch", "--debounce",  "20",    NULL};
    proc p;
    proc_start(&p, NULL, args);
    char *l = proc_line(&p, 20000);
    EXPECT(l != NULL);
    EXPECT_CONTAINS(l, " synced 2 files: 2 indexed, 0 unchanged, 0 removed");
    EXPECT(l[2] == ':' && l[5] == ':'); /* HH:MM:SS first */
    free(l);
    write_file(c.ws, "memory/2026-02-11.md", "Biscuit went to the vet.\n");
    l = proc_line(&p, 20000);
    EXPECT(l != NULL);
    EXPECT_CONTAINS(l, " synced 3 files: 1 indexed, 2 unchanged, 0 removed");
    free(l);
    EXPECT_INT(proc_stop(&p, SIGTERM, 10000), 0);
    /* --quiet: nothing on stdout, the index still kept fresh */
    const char *qargs[] = {"--workspace", c.ws,      "--state-dir", c.state, "--config", c.cfg,
                           "watch",       "--quiet", "--debounce",  "20",    NULL};
    proc_start(&p, NULL, qargs);
    write_file(c.ws, "memory/2026-02-12.md", "The quokka smiled.\n");
    run_result r = {0};
    for (int i = 0; i < 200; i++) { /* bounded: up to ~20 s under load */
        r = cm(&c, NULL, "search", "quokka", "--no-sync", NULL);
        if (strstr(r.out, "2026-02-12.md")) break;
        run_result_release(&r);
        usleep(100000);
    }
    EXPECT_CONTAINS(r.out, "memory/2026-02-12.md");
    run_result_release(&r);
    l = proc_line(&p, 300);
    EXPECT(l == NULL);
    free(l);
    EXPECT_INT(proc_stop(&p, SIGTERM, 10000), 0);
}

/* The number of lines of s. */
static size_t lines_of(const char *s)
{
    size_t n = 0;
    for (; s && *s; s++)
        n += *s == '\n';
    return n;
}

/* A fatal error says "clawmem: error:", a warning "clawmem: warning:" (the
 * program carries on): `serve` refusing its tokens file exits 1 with an error,
 * an unknown config key is a warning and the command succeeds. */
TEST(cli_errors_and_warnings_are_labelled)
{
    cli c;
    cli_init(&c);
    write_file(c.dir, "tokens.json", "{ 'short': {agent: 'main'} }");
    run_result r = cm(&c, NULL, "serve", "--tokens", path_in(c.dir, "tokens.json"), NULL);
    EXPECT_INT(r.status, 1);
    EXPECT(strncmp(r.err, "clawmem: error: ", 16) == 0);
    EXPECT_CONTAINS(r.err, "a token must have at least 16 characters");
    EXPECT(strstr(r.err, "short") == NULL); /* a token is never shown */
    EXPECT_INT(lines_of(r.err), 1);
    run_result_release(&r);
    r = cm(&c, NULL, "status", "--bogus", NULL, NULL);
    EXPECT_INT(r.status, 1);
    EXPECT_STR(r.err, "clawmem: error: status: unknown option --bogus (see clawmem help status)\n");
    run_result_release(&r);
    write_file(c.dir, "qc.json", "{agents: {defaults: {memorySearch: {chunkin: {}}}}}");
    r = cm(&c, NULL, "index", NULL, NULL, NULL);
    EXPECT_INT(r.status, 0);
    EXPECT(strncmp(r.err, "clawmem: warning: ", 18) == 0);
    run_result_release(&r);
}

/* "did you mean": a mistyped command, option or config key names the one
 * meant (by edit distance); a word far from all of them gets no guess. */
TEST(cli_did_you_mean)
{
    cli c;
    cli_init(&c);
    run_result r = cm(&c, NULL, "serch", "dog", NULL, NULL);
    EXPECT_INT(r.status, 1);
    EXPECT_STR(r.err, "clawmem: error: unknown command 'serch' (did you mean search?)\n");
    run_result_release(&r);
    r = cm(&c, NULL, "stauts", NULL, NULL, NULL); /* two letters swapped */
    EXPECT_STR(r.err, "clawmem: error: unknown command 'stauts' (did you mean status?)\n");
    run_result_release(&r);
    r = cm(&c, NULL, "frobnicate", NULL, NULL, NULL);
    EXPECT_STR(r.err, "clawmem: error: unknown command 'frobnicate' (see clawmem help)\n");
    run_result_release(&r);
    r = cm(&c, NULL, "search", "dog", "--max-result", "3");
    EXPECT_INT(r.status, 1);
    EXPECT_STR(r.err,
               "clawmem: error: search: unknown option --max-result (did you mean --max-results?)\n");
    run_result_release(&r);
    r = cm(&c, NULL, "get", "MEMORY.md", "--workspac", "x"); /* a global option too */
    EXPECT_STR(r.err, "clawmem: error: get: unknown option --workspac (did you mean --workspace?)\n");
    run_result_release(&r);
    const char *pre[] = {"--stat-dir", "x", "status", NULL};
    r = run_clawmem(NULL, pre);
    EXPECT_STR(r.err, "clawmem: error: unknown option --stat-dir (did you mean --state-dir?)\n");
    run_result_release(&r);
    r = cm(&c, NULL, "serve", "--max-engine", "3", NULL);
    EXPECT_STR(r.err,
               "clawmem: error: serve: unknown option --max-engine (did you mean --max-engines?)\n");
    run_result_release(&r);
    r = cm(&c, NULL, "serve", "--listen", NULL, NULL);
    EXPECT_STR(r.err, "clawmem: error: serve: --listen needs a value\n");
    run_result_release(&r);
    write_file(c.dir, "qc.json",
               "{\n agents: {defaults: {memorySerch: {}, memorySearch: {qurey: {}}}},\n"
               " clawmem: {hybridMerj: 'rrf'}, zzzzzzzz: 1\n}\n");
    r = cm(&c, NULL, "status", NULL, NULL, NULL);
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.err, "unknown key agents.defaults.memorySerch (ignored): did you mean "
                           "memorySearch?\n");
    EXPECT_CONTAINS(r.err, "unknown key agents.defaults.memorySearch.qurey (ignored): did you "
                           "mean query?\n");
    EXPECT_CONTAINS(r.err, "unknown key clawmem.hybridMerj (ignored): did you mean hybridMerge?\n");
    EXPECT_CONTAINS(r.err, "unknown key zzzzzzzz (ignored)\n");
    run_result_release(&r);
}

/* The hint of a missing workspace follows where its path came from: one
 * given with --workspace is not answered with "give --workspace". */
TEST(cli_missing_workspace_hint)
{
    cli c;
    cli_init(&c);
    const char *a[] = {"--workspace", path_in(c.dir, "gone"), "--state-dir", c.state,
                       "--config",    c.cfg,                  "status",      NULL};
    run_result r = run_clawmem(NULL, a);
    EXPECT_INT(r.status, 1);
    EXPECT_CONTAINS(r.err, "gone does not exist (given with --workspace: create it or correct "
                           "the path)\n");
    EXPECT(strstr(r.err, "give --workspace") == NULL);
    run_result_release(&r);
    char cfg[1200];
    snprintf(cfg, sizeof cfg, "{agents: {list: [{id: 'main', workspace: '%s/gone2'}]}}", c.dir);
    write_file(c.dir, "qc.json", cfg);
    const char *b[] = {"--state-dir", c.state, "--config", c.cfg, "search", "dog", NULL};
    r = run_clawmem(NULL, b);
    EXPECT_INT(r.status, 1);
    EXPECT_CONTAINS(r.err, "gone2 does not exist (set by agents.list[0].workspace in the config: "
                           "create it, correct that path or give --workspace)\n");
    run_result_release(&r);
    write_file(c.dir, "qc.json", "{}");
    r = run_clawmem(NULL, b);
    EXPECT_INT(r.status, 1);
    EXPECT_CONTAINS(r.err, "state/workspace does not exist (the default: create it, set "
                           "agents.defaults.workspace or give --workspace)\n");
    run_result_release(&r);
}

/* One exit-code rule for search, text and --json alike: 0 when it answered
 * (no match included), 1 with one error line and nothing on stdout when it
 * could not search. */
TEST(cli_search_exit_codes)
{
    cli c;
    cli_init(&c);
    run_result ix = cm(&c, NULL, "index", NULL, NULL, NULL);
    EXPECT_INT(ix.status, 0);
    run_result_release(&ix);
    const char *modes[] = {NULL, "--json"};
    for (size_t m = 0; m < 2; m++) {
        run_result r = cm(&c, NULL, "search", "zebra", modes[m], NULL);
        EXPECT_INT(r.status, 0);
        EXPECT_STR(r.err, "");
        EXPECT_CONTAINS(r.out, m ? "\"results\":[]" : "No matches.");
        run_result_release(&r);
        const char *a[] = {"--workspace", path_in(c.dir, "gone"), "--state-dir", c.state,
                           "--config",    c.cfg,                  "search",      "dog",
                           modes[m],      NULL};
        r = run_clawmem(NULL, a);
        EXPECT_INT(r.status, 1);
        EXPECT_STR(r.out, "");
        EXPECT_INT(lines_of(r.err), 1);
        EXPECT(strncmp(r.err, "clawmem: error: search unavailable: workspace ", 46) == 0);
        EXPECT_CONTAINS(r.err, "gone does not exist");
        run_result_release(&r);
    }
}

/* An empty (or blank) query is a bad argument wherever it comes from: the
 * engine refuses it, and the CLI says so as MCP does (test_mcp.c). */
TEST(cli_empty_query_is_an_error)
{
    cli c;
    cli_init(&c);
    const char *queries[] = {"", " \t"};
    const char *shown[] = {"(got \"\")", "(got \" \\t\")"};
    for (size_t q = 0; q < 2; q++) {
        for (int json = 0; json < 2; json++) {
            run_result r = cm(&c, NULL, "search", queries[q], json ? "--json" : NULL, NULL);
            EXPECT_INT(r.status, 1);
            EXPECT_STR(r.out, "");
            char want[200];
            snprintf(want, sizeof want,
                     "clawmem: error: search: query is empty: give the words to look for %s\n",
                     shown[q]);
            EXPECT_STR(r.err, want);
            run_result_release(&r);
        }
    }
    /* the library itself */
    cm_options o = {0};
    o.workspace = c.ws;
    o.state_dir = c.state;
    o.config_path = c.cfg;
    cm_engine *e = NULL;
    char err[CM_ERR_SIZE], *js = NULL;
    EXPECT_INT(cm_engine_open(&o, &e, err, sizeof err), CM_OK);
    EXPECT_INT(cm_memory_search(e, "", NULL, &js, err, sizeof err), CM_EINVAL);
    EXPECT(js == NULL);
    EXPECT_STR(err, "query is empty: give the words to look for (got \"\")");
    EXPECT_INT(cm_memory_search(e, NULL, NULL, &js, err, sizeof err), CM_EINVAL);
    EXPECT_INT(cm_memory_search_each(e, "\n", NULL, NULL, NULL, NULL, err, sizeof err), CM_EINVAL);
    EXPECT_INT(cm_memory_search(e, "dog", NULL, &js, err, sizeof err), CM_OK);
    cm_free(js);
    cm_engine_close(e);
}
