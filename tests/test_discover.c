/*
 * test_discover.c — which files are memory: roots, extraPaths, symlinks,
 * duplicates, oversized files, relative paths.
 */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../src/index/discover.h"
#include "test.h"

static cm_config cfg_for(const char *ws)
{
    cm_config c = {0};
    c.workspace = cm_strdup(ws);
    return c;
}

static void add_extra(cm_config *c, const char *p)
{
    c->extra_paths.v = realloc(c->extra_paths.v, (c->extra_paths.n + 1) * sizeof(char *));
    c->extra_paths.v[c->extra_paths.n++] = cm_strdup(p);
}

static void release(cm_config *c)
{
    for (size_t i = 0; i < c->extra_paths.n; i++)
        free(c->extra_paths.v[i]);
    free(c->extra_paths.v);
    free(c->workspace);
}

static const char *names(const file_list *l)
{
    static buf b;
    cm_buf_reset(&b);
    for (size_t i = 0; i < l->n; i++)
        cm_buf_printf(&b, "%s%s", i ? " " : "", l->v[i].rel);
    return b.data;
}

TEST(discover_roots_and_filters)
{
    char *d = tmp_dir();
    write_file(d, "ws/MEMORY.md", "# long-term\n");
    write_file(d, "ws/memory.md", "# lowercase, shadowed by MEMORY.md\n");
    write_file(d, "ws/memory/2026-02-10.md", "today\n");
    write_file(d, "ws/memory/deep/er/notes.md", "nested\n");
    write_file(d, "ws/memory/image.png", "not markdown");
    write_file(d, "ws/memory/notes.MD.txt", "not markdown");
    write_file(d, "ws/other/ignored.md", "not a memory root\n");
    cm_config c = cfg_for(path_in(d, "ws"));
    file_list l;
    problem_list p = {0};
    EXPECT_INT(cm_discover_files(&c, &l, &p), CM_OK);
    EXPECT_STR(names(&l), "MEMORY.md memory/2026-02-10.md memory/deep/er/notes.md");
    EXPECT_INT(l.v[0].size, 12);
    EXPECT(l.v[0].mtime_ns > 0);
    cm_index_file_list_release(&l);
    /* memory.md is the fallback when MEMORY.md is absent */
    unlink(path_in(d, "ws/MEMORY.md"));
    EXPECT_INT(cm_discover_files(&c, &l, &p), CM_OK);
    EXPECT_STR(names(&l), "memory.md memory/2026-02-10.md memory/deep/er/notes.md");
    cm_index_file_list_release(&l);
    cm_index_problem_list_release(&p);
    release(&c);
}

TEST(discover_ignores_symlinks_and_duplicates)
{
    char *d = tmp_dir();
    write_file(d, "ws/memory/a.md", "a\n");
    write_file(d, "outside/secret.md", "secret\n");
    write_file(d, "team/plan.md", "plan\n");
    EXPECT(symlink(path_in(d, "outside/secret.md"), path_in(d, "ws/memory/link.md")) == 0);
    EXPECT(symlink(path_in(d, "outside"), path_in(d, "ws/memory/linkdir")) == 0);
    cm_config c = cfg_for(path_in(d, "ws"));
    add_extra(&c, "../team");
    add_extra(&c, path_in(d, "team/plan.md")); /* the same file again, absolute */
    add_extra(&c, "memory");                   /* a root again */
    add_extra(&c, "../missing");               /* absent: no error */
    add_extra(&c, "memory/linkdir");           /* a symlinked directory: ignored */
    file_list l;
    problem_list p = {0};
    EXPECT_INT(cm_discover_files(&c, &l, &p), CM_OK);
    EXPECT_STR(names(&l), "../team/plan.md memory/a.md");
    /* the symlinked note and the symlinked extraPath are listed as problems */
    EXPECT_INT(p.n, 2);
    buf b = BUF_INIT;
    for (size_t i = 0; i < p.n; i++)
        cm_buf_printf(&b, "%s: %s\n", p.v[i].path, p.v[i].what);
    EXPECT_CONTAINS(b.data, "memory/link.md: symbolic link, not followed\n");
    EXPECT_CONTAINS(b.data, "memory/linkdir: symbolic link, not followed\n");
    cm_buf_release(&b);
    cm_index_file_list_release(&l);
    cm_index_problem_list_release(&p);
    release(&c);
}

/* A flat directory of many notes (past SPLIT_MIN) is statted in batches by
 * the pool's threads: every note once, sorted, sizes right; hard links and a
 * root reached twice keep one entry, the smallest path. */
TEST(discover_large_directory_in_batches)
{
    char *d = tmp_dir();
    enum { N = 4500 }; /* past 4,096: batches of 128 */
    char rel[64], text[32];
    for (int i = 0; i < N; i++) {
        snprintf(rel, sizeof rel, "ws/memory/n%04d.md", i);
        snprintf(text, sizeof text, "note %d\n", i);
        write_file(d, rel, text);
    }
    write_file(d, "ws/memory/sub/deep.md", "deep\n");
    write_file(d, "ws/memory/skip.txt", "not markdown");
    EXPECT(link(path_in(d, "ws/memory/n0005.md"), path_in(d, "ws/memory/a-link.md")) == 0);
    EXPECT(link(path_in(d, "ws/memory/n0006.md"), path_in(d, "ws/memory/z-link.md")) == 0);
    cm_config c = cfg_for(path_in(d, "ws"));
    add_extra(&c, "memory"); /* the same root again */
    file_list l;
    problem_list p = {0};
    EXPECT_INT(cm_discover_files(&c, &l, &p), CM_OK);
    EXPECT_INT(p.n, 0);
    EXPECT_INT(l.n, N + 1);
    /* n0005 and its link: "memory/a-link.md" is the smaller path */
    EXPECT_STR(l.v[0].rel, "memory/a-link.md");
    size_t got = 0;
    for (size_t i = 0; i < l.n; i++) {
        if (i) EXPECT(strcmp(l.v[i - 1].rel, l.v[i].rel) < 0);
        int k;
        if (sscanf(l.v[i].rel, "memory/n%d.md", &k) == 1) {
            got++;
            snprintf(text, sizeof text, "note %d\n", k);
            EXPECT_INT(l.v[i].size, (int64_t)strlen(text));
        }
    }
    EXPECT_INT(got, N - 1); /* all but n0005 */
    EXPECT_STR(l.v[l.n - 1].rel, "memory/sub/deep.md");
    uint64_t total = 0;
    for (size_t i = 0; i < l.n; i++)
        total += (uint64_t)l.v[i].size;
    EXPECT_INT(l.total_bytes, total);
    if (sysconf(_SC_NPROCESSORS_ONLN) > 1) EXPECT(l.helpers >= 1);
    cm_index_file_list_release(&l);
    cm_index_problem_list_release(&p);
    release(&c);
}

/* Helpers start only when work waits: one directory of 1,000 notes is
 * walked by the calling thread alone; many directories bring helpers in
 * (on more than one core), and both list every note. */
TEST(discover_starts_helpers_only_for_waiting_work)
{
    char *d = tmp_dir();
    char rel[64];
    for (int i = 0; i < 1000; i++) {
        snprintf(rel, sizeof rel, "flat/memory/n%04d.md", i);
        write_file(d, rel, "x\n");
    }
    for (int i = 0; i < 40; i++)
        for (int j = 0; j < 25; j++) {
            snprintf(rel, sizeof rel, "deep/memory/d%02d/n%02d.md", i, j);
            write_file(d, rel, "x\n");
        }
    const char *ws[] = {"flat", "deep"};
    for (int k = 0; k < 2; k++) {
        cm_config c = cfg_for(path_in(d, ws[k]));
        file_list l;
        problem_list p = {0};
        EXPECT_INT(cm_discover_files(&c, &l, &p), CM_OK);
        EXPECT_INT(l.n, 1000);
        if (k == 0) EXPECT_INT(l.helpers, 0);
        if (k == 1 && sysconf(_SC_NPROCESSORS_ONLN) > 1) EXPECT(l.helpers >= 1);
        cm_index_file_list_release(&l);
        cm_index_problem_list_release(&p);
        release(&c);
    }
}

TEST(discover_reports_oversized_and_unreadable)
{
    char *d = tmp_dir();
    write_file(d, "ws/memory/ok.md", "fine\n");
    int fd = open(path_in(d, "ws/memory/huge.md"), O_CREAT | O_WRONLY, 0600);
    EXPECT(fd >= 0 && ftruncate(fd, DISCOVER_MAX_FILE_BYTES + 1) == 0); /* sparse: costs no disk */
    close(fd);
    write_file(d, "ws/memory/locked/x.md", "x\n");
    chmod(path_in(d, "ws/memory/locked"), 0);
    cm_config c = cfg_for(path_in(d, "ws"));
    file_list l;
    problem_list p = {0};
    EXPECT_INT(cm_discover_files(&c, &l, &p), CM_OK);
    EXPECT_STR(names(&l), geteuid() == 0 ? "memory/locked/x.md memory/ok.md" : "memory/ok.md");
    EXPECT(p.n >= 1);
    EXPECT_STR(p.v[0].path, "memory/huge.md");
    EXPECT_CONTAINS(p.v[0].what, "over the");
    if (geteuid() != 0) EXPECT_CONTAINS(p.v[1].what, "cannot");
    chmod(path_in(d, "ws/memory/locked"), 0700);
    cm_index_file_list_release(&l);
    cm_index_problem_list_release(&p);
    release(&c);
}

TEST(discover_relpath_and_daily_dates)
{
    buf b = BUF_INIT;
    EXPECT_INT(cm_discover_relpath(&b, "/a/ws", "/a/ws/memory/x.md"), CM_OK);
    EXPECT_STR(b.data, "memory/x.md");
    cm_buf_reset(&b);
    cm_discover_relpath(&b, "/a/ws", "/a/team/p.md");
    EXPECT_STR(b.data, "../team/p.md");
    cm_buf_reset(&b);
    cm_discover_relpath(&b, "/a/ws", "/srv/notes/o.md");
    EXPECT_STR(b.data, "../../srv/notes/o.md");
    cm_buf_reset(&b);
    cm_discover_relpath(&b, "/a/ws", "/a/wsx/o.md");
    EXPECT_STR(b.data, "../wsx/o.md");
    cm_buf_release(&b);
    int y, m, d;
    EXPECT(cm_discover_daily_date("memory/2026-02-10.md", &y, &m, &d));
    EXPECT(y == 2026 && m == 2 && d == 10);
    EXPECT(cm_discover_daily_date("memory/archive/2025-12-31.md", &y, &m, &d));
    EXPECT(!cm_discover_daily_date("memory/2026-13-10.md", &y, &m, &d));
    EXPECT(!cm_discover_daily_date("memory/2026-02-10-notes.md", &y, &m, &d));
    EXPECT(!cm_discover_daily_date("notes/2026-02-10.md", &y, &m, &d));
}
