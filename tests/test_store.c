/*
 * test_store.c — the store directly: cm_bm25 scores, contentless FTS deletes,
 * leftovers of dead rebuilds, bulk builds, process-wide SQLite options.
 */
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../src/store/fts_rank.h"
#include "../src/store/store.h"
#include "test.h"

static chunk_list one_chunk(const char *text)
{
    chunk_list l = {0};
    cm_chunk_text(text, strlen(text), 400, 80, &l);
    return l;
}

TEST(store_cm_bm25_uses_rsj_idf_with_a_prior)
{
    char *d = tmp_dir();
    store s;
    char err[256];
    EXPECT_INT(
        cm_store_open(&s, path_in(d, "i.sqlite"), "unicode61", STORE_CREATE, 1000, err, sizeof err),
        CM_OK);
    chunk_list a = one_chunk("the dog biscuit"), b = one_chunk("the router omada er605 box");
    EXPECT_INT(cm_store_begin(&s, err, sizeof err), CM_OK);
    EXPECT_INT(cm_store_file_replace(&s, "a.md", "memory", "h1", 1, 1, NULL, &a, err, sizeof err),
               CM_OK);
    EXPECT_INT(cm_store_file_replace(&s, "b.md", "memory", "h2", 1, 1, NULL, &b, err, sizeof err),
               CM_OK);
    EXPECT_INT(cm_store_commit(&s, err, sizeof err), CM_OK);
    fts_hits h = {0};
    EXPECT_INT(cm_store_fts_search(&s, "\"biscuit\"", NULL, 10, &h, err, sizeof err), CM_OK);
    EXPECT_INT(h.n, 1);
    /* 2 rows count as FTS_RANK_MIN_ROWS (100), n=1: idf = ln(99.5/1.5);
     * tf=1, dl=3, avgdl=4 */
    double norm = 1.2 * (1 - 0.75 + 0.75 * 3.0 / 4.0);
    EXPECT_NEAR(h.v[0].rank, -log(99.5 / 1.5) * 2.2 / (1 + norm), 1e-9);
    cm_fts_hits_release(&h);
    /* a term in every row still scores above zero */
    EXPECT_INT(cm_store_fts_search(&s, "\"the\"", NULL, 10, &h, err, sizeof err), CM_OK);
    EXPECT_INT(h.n, 2);
    EXPECT(h.v[0].rank < 0);
    cm_fts_hits_release(&h);
    /* deleting a file removes its keyword entries (contentless 'delete') */
    EXPECT_INT(cm_store_begin(&s, err, sizeof err), CM_OK);
    EXPECT_INT(cm_store_file_delete(&s, "a.md", err, sizeof err), CM_OK);
    EXPECT_INT(cm_store_commit(&s, err, sizeof err), CM_OK);
    EXPECT_INT(cm_store_fts_search(&s, "\"biscuit\"", NULL, 10, &h, err, sizeof err), CM_OK);
    EXPECT_INT(h.n, 0);
    bool ok = false;
    EXPECT_INT(cm_store_check(&s, &ok, err, sizeof err), CM_OK);
    EXPECT(ok);
    EXPECT_INT(cm_store_fts_search(&s, "\"unbalanced", NULL, 10, &h, err, sizeof err), CM_EINVAL);
    cm_store_close(&s);
    cm_chunk_list_release(&a);
    cm_chunk_list_release(&b);
}

/* A row shorter than FTS_RANK_LENGTH_FLOOR of the average is normalised at
 * that floor: "biscuit" (dl 1) beside a 9-word row (avgdl 5) scores as if
 * it had 2.5 words, not 1, so a note's short last chunk is no better for
 * its shortness alone. */
TEST(store_cm_bm25_length_floor)
{
    char *d = tmp_dir();
    store s;
    char err[256];
    EXPECT_INT(
        cm_store_open(&s, path_in(d, "i.sqlite"), "unicode61", STORE_CREATE, 1000, err, sizeof err),
        CM_OK);
    chunk_list a = one_chunk("biscuit"),
               b = one_chunk("the router omada er605 box sits on the shelf");
    EXPECT_INT(cm_store_begin(&s, err, sizeof err), CM_OK);
    EXPECT_INT(cm_store_file_replace(&s, "a.md", "memory", "h1", 1, 1, NULL, &a, err, sizeof err),
               CM_OK);
    EXPECT_INT(cm_store_file_replace(&s, "b.md", "memory", "h2", 1, 1, NULL, &b, err, sizeof err),
               CM_OK);
    EXPECT_INT(cm_store_commit(&s, err, sizeof err), CM_OK);
    fts_hits h = {0};
    EXPECT_INT(cm_store_fts_search(&s, "\"biscuit\"", NULL, 10, &h, err, sizeof err), CM_OK);
    EXPECT_INT(h.n, 1);
    double norm = 1.2 * (1 - 0.75 + 0.75 * FTS_RANK_LENGTH_FLOOR);
    EXPECT_NEAR(h.v[0].rank, -log(99.5 / 1.5) * 2.2 / (1 + norm), 1e-9);
    cm_fts_hits_release(&h);
    cm_store_close(&s);
    cm_chunk_list_release(&a);
    cm_chunk_list_release(&b);
}

/* A variant's "w/a" weight (fts_rank.h): a when no row holds its group's
 * keyword, else w. "decide" OR "decision" under "1 0.1/0.9": over notes
 * that never say "decide", the note saying "decision" scores 0.9 of the
 * keyword's own score; once a note says "decide", 0.1. */
TEST(store_cm_bm25_absent_keyword_weight)
{
    char *d = tmp_dir();
    store s;
    char err[256];
    EXPECT_INT(
        cm_store_open(&s, path_in(d, "i.sqlite"), "unicode61", STORE_CREATE, 1000, err, sizeof err),
        CM_OK);
    chunk_list a = one_chunk("the decision was hard"), b = one_chunk("they decide it today");
    EXPECT_INT(cm_store_begin(&s, err, sizeof err), CM_OK);
    EXPECT_INT(cm_store_file_replace(&s, "a.md", "memory", "h1", 1, 1, NULL, &a, err, sizeof err),
               CM_OK);
    EXPECT_INT(cm_store_commit(&s, err, sizeof err), CM_OK);
    fts_hits h = {0}, plain = {0};
    const char *m = "\"decide\" OR \"decision\"";
    EXPECT_INT(cm_store_fts_search(&s, m, "1 0.1/0.9", 10, &h, err, sizeof err), CM_OK);
    EXPECT_INT(cm_store_fts_search(&s, "\"decision\"", NULL, 10, &plain, err, sizeof err), CM_OK);
    EXPECT(h.n == 1 && plain.n == 1);
    if (h.n == 1 && plain.n == 1) EXPECT_NEAR(h.v[0].rank, 0.9 * plain.v[0].rank, 1e-9);
    cm_fts_hits_release(&h);
    cm_fts_hits_release(&plain);
    EXPECT_INT(cm_store_begin(&s, err, sizeof err), CM_OK);
    EXPECT_INT(cm_store_file_replace(&s, "b.md", "memory", "h2", 1, 1, NULL, &b, err, sizeof err),
               CM_OK);
    EXPECT_INT(cm_store_commit(&s, err, sizeof err), CM_OK);
    EXPECT_INT(cm_store_fts_search(&s, m, "1 0.1/0.9", 10, &h, err, sizeof err), CM_OK);
    EXPECT_INT(cm_store_fts_search(&s, "\"decision\"", NULL, 10, &plain, err, sizeof err), CM_OK);
    EXPECT(h.n == 2 && plain.n == 1);
    for (size_t i = 0; i < h.n && plain.n == 1; i++)
        if (!strcmp(h.v[i].path, "a.md")) EXPECT_NEAR(h.v[i].rank, 0.1 * plain.v[0].rank, 1e-9);
    cm_fts_hits_release(&h);
    cm_fts_hits_release(&plain);
    cm_store_close(&s);
    cm_chunk_list_release(&a);
    cm_chunk_list_release(&b);
}

TEST(store_removes_leftovers_of_dead_rebuilds)
{
    char *d = tmp_dir();
    write_file(d, "i.sqlite", "");
    write_file(d, "i.sqlite.rebuild-999999999", "dead");
    write_file(d, "i.sqlite.rebuild-999999999-journal", "dead");
    char mine[64];
    snprintf(mine, sizeof mine, "i.sqlite.rebuild-%d", (int)getppid()); /* alive */
    write_file(d, mine, "alive");
    char own[64]; /* this process's: another engine of it may be rebuilding */
    snprintf(own, sizeof own, "i.sqlite.rebuild-%d", (int)getpid());
    write_file(d, own, "ours");
    cm_store_remove_leftovers(path_in(d, "i.sqlite"), false);
    EXPECT(access(path_in(d, own), F_OK) == 0);
    cm_store_remove_leftovers(path_in(d, "i.sqlite"), true); /* under the writer lock */
    EXPECT(access(path_in(d, own), F_OK) != 0);
    EXPECT(access(path_in(d, "i.sqlite.rebuild-999999999"), F_OK) != 0);
    EXPECT(access(path_in(d, "i.sqlite.rebuild-999999999-journal"), F_OK) != 0);
    EXPECT(access(path_in(d, mine), F_OK) == 0);
    EXPECT(access(path_in(d, "i.sqlite"), F_OK) == 0);
}

/* A term in nearly every row keeps the IDF floor: 150 rows of the same
 * length (dl = avgdl, so norm = k1) with "common" once score 0.5 × 2.2/2.2. */
TEST(store_cm_bm25_idf_floor)
{
    char *d = tmp_dir();
    store s;
    char err[256];
    EXPECT_INT(
        cm_store_open(&s, path_in(d, "i.sqlite"), "unicode61", STORE_CREATE, 1000, err, sizeof err),
        CM_OK);
    chunk_list c = one_chunk("common filler");
    EXPECT_INT(cm_store_begin(&s, err, sizeof err), CM_OK);
    for (int i = 0; i < 150; i++) {
        char path[32];
        snprintf(path, sizeof path, "n%03d.md", i);
        EXPECT_INT(cm_store_file_replace(&s, path, "memory", "h", 1, 1, NULL, &c, err, sizeof err),
                   CM_OK);
    }
    EXPECT_INT(cm_store_commit(&s, err, sizeof err), CM_OK);
    fts_hits h = {0};
    EXPECT_INT(cm_store_fts_search(&s, "\"common\"", NULL, 5, &h, err, sizeof err), CM_OK);
    EXPECT_INT(h.n, 5);
    EXPECT_NEAR(h.v[0].rank, -FTS_RANK_IDF_FLOOR, 1e-9);
    cm_fts_hits_release(&h);
    cm_store_close(&s);
    cm_chunk_list_release(&c);
}

/* cm_store_files_load reads the table in row order and sorts it itself: rows
 * written out of path order (byte order, as SQLite's BINARY) come back
 * sorted, with their fields. */
TEST(store_files_load_sorts_rows_written_out_of_order)
{
    char *d = tmp_dir();
    store s;
    char err[256];
    EXPECT_INT(
        cm_store_open(&s, path_in(d, "i.sqlite"), "unicode61", STORE_CREATE, 1000, err, sizeof err),
        CM_OK);
    const char *paths[] = {"memory/b.md", "MEMORY.md", "memory/a.md", "memory/B.md",
                           "memory/\xc3\xa9.md"};
    chunk_list c = one_chunk("text");
    EXPECT_INT(cm_store_begin(&s, err, sizeof err), CM_OK);
    for (int i = 0; i < 5; i++)
        EXPECT_INT(cm_store_file_replace(&s, paths[i], "memory", "h", 100 + i, 10 + i, NULL, &c,
                                         err, sizeof err),
                   CM_OK);
    EXPECT_INT(cm_store_commit(&s, err, sizeof err), CM_OK);
    stored_files f = {0};
    EXPECT_INT(cm_store_files_load(&s, &f, err, sizeof err), CM_OK);
    EXPECT_INT(f.n, 5);
    const char *want[] = {"MEMORY.md", "memory/B.md", "memory/a.md", "memory/b.md",
                          "memory/\xc3\xa9.md"};
    for (size_t i = 0; i < f.n && i < 5; i++)
        EXPECT_STR(f.v[i].path, want[i]);
    EXPECT_INT(f.v[0].mtime_ns, 101); /* MEMORY.md was written second */
    EXPECT_INT(f.v[0].size, 11);
    cm_store_stored_files_release(&f);
    cm_store_close(&s);
    cm_chunk_list_release(&c);
}

/* cm_bm25(k) skips the length lookup of rows that cannot reach the k best:
 * its first k rows and their scores are those of the unbounded ranking, for
 * AND and OR queries over common and rare words; rows past k get their
 * bound instead (shown by a query without LIMIT), so skipping happened. */
TEST(store_cm_bm25_top_k_is_exact)
{
    char *d = tmp_dir();
    store s;
    char err[256];
    EXPECT_INT(
        cm_store_open(&s, path_in(d, "i.sqlite"), "unicode61", STORE_CREATE, 1000, err, sizeof err),
        CM_OK);
    static const char *words[] = {"alpha", "beta",  "gamma",   "delta", "eps",    "zeta",
                                  "eta",   "theta", "iota",    "kappa", "lambda", "mu",
                                  "nu",    "xi",    "omicron", "pi"};
    uint64_t r = 99;
    EXPECT_INT(cm_store_begin(&s, err, sizeof err), CM_OK);
    for (int f = 0; f < 400; f++) {
        char text[512] = "", path[32];
        size_t len = 0;
        int nw = 3 + f % 23;
        for (int i = 0; i < nw; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            unsigned z = (unsigned)(r >> 33) % 1000, w = 0;
            while (w < 15 && z < 1000u >> (w + 1)) /* rarer words further on */
                w++;
            len += (size_t)snprintf(text + len, sizeof text - len, "%s ", words[15 - w]);
        }
        chunk_list c = one_chunk(text);
        snprintf(path, sizeof path, "n%03d.md", f);
        EXPECT_INT(cm_store_file_replace(&s, path, "memory", "h", 1, 1, NULL, &c, err, sizeof err),
                   CM_OK);
        cm_chunk_list_release(&c);
    }
    EXPECT_INT(cm_store_commit(&s, err, sizeof err), CM_OK);
    static const char *queries[] = {"\"pi\" OR \"alpha\"", "\"pi\" OR \"omicron\" OR \"xi\"",
                                    "\"pi\" AND \"omicron\"", "\"pi\"", "\"alpha\" OR \"beta\""};
    int skipped = 0;
    for (size_t qi = 0; qi < sizeof queries / sizeof *queries; qi++) {
        fts_hits h = {0};
        EXPECT_INT(cm_store_fts_search(&s, queries[qi], NULL, 10, &h, err, sizeof err), CM_OK);
        sqlite3_stmt *ref = NULL, *all = NULL;
        EXPECT(sqlite3_prepare_v2(s.db,
                                  "SELECT rowid, rank FROM chunks_fts WHERE chunks_fts MATCH ?1 "
                                  "AND rank MATCH 'cm_bm25()' ORDER BY rank, rowid",
                                  -1, &ref, NULL) == SQLITE_OK);
        EXPECT(sqlite3_prepare_v2(s.db,
                                  "SELECT rowid, rank FROM chunks_fts WHERE chunks_fts MATCH ?1 "
                                  "AND rank MATCH 'cm_bm25(10)' ORDER BY rank, rowid",
                                  -1, &all, NULL) == SQLITE_OK);
        sqlite3_bind_text(ref, 1, queries[qi], -1, SQLITE_STATIC);
        sqlite3_bind_text(all, 1, queries[qi], -1, SQLITE_STATIC);
        size_t i = 0;
        while (sqlite3_step(ref) == SQLITE_ROW) {
            EXPECT(sqlite3_step(all) == SQLITE_ROW);
            double want = sqlite3_column_double(ref, 1);
            if (i < 10) {
                EXPECT(i < h.n);
                if (i < h.n) EXPECT_NEAR(h.v[i].rank, want, 1e-12);
                EXPECT_INT(sqlite3_column_int64(all, 0), sqlite3_column_int64(ref, 0));
            } else {
                skipped += sqlite3_column_double(all, 1) != want;
            }
            i++;
        }
        EXPECT_INT(h.n, i < 10 ? i : 10);
        sqlite3_finalize(ref);
        sqlite3_finalize(all);
        cm_fts_hits_release(&h);
    }
    EXPECT(skipped > 0);
    cm_store_close(&s);
}

/* SQLITE_TRACE_STMT: counts the statements run on the connection whose SQL
 * calls the rank function. */
static int count_rank_stmts(unsigned type, void *ctx, void *p, void *x)
{
    (void)type;
    (void)x;
    const char *sql = sqlite3_sql(p);
    if (sql && strstr(sql, "cm_bm25(")) (*(int *)ctx)++;
    return 0;
}

/* A search ranks its rows in one statement: FTS5's ORDER BY rank would sort
 * in a statement of its own and then call cm_bm25 again, on another cursor,
 * for every row read, counting each phrase's rows a second time (issue 30,
 * tenth round). Its hits are still those of that ranking, scores and ties
 * (the lower rowid first, here across the limit) alike. */
TEST(store_search_ranks_in_one_statement)
{
    char *d = tmp_dir();
    store s;
    char err[256];
    EXPECT_INT(
        cm_store_open(&s, path_in(d, "i.sqlite"), "porter", STORE_CREATE, 1000, err, sizeof err),
        CM_OK);
    static const char *texts[] = {"harbor crane at dawn", "the crane lifts crates",
                                  "harbor crane at dawn", "cranes and herons",
                                  "harbor crane at dawn", "a quiet harbor"};
    EXPECT_INT(cm_store_begin(&s, err, sizeof err), CM_OK);
    for (int f = 0; f < 30; f++) {
        char path[32];
        chunk_list c = one_chunk(texts[f % 6]);
        snprintf(path, sizeof path, "n%02d.md", f);
        EXPECT_INT(cm_store_file_replace(&s, path, "memory", "h", 1, 1, NULL, &c, err, sizeof err),
                   CM_OK);
        cm_chunk_list_release(&c);
    }
    EXPECT_INT(cm_store_commit(&s, err, sizeof err), CM_OK);
    static const char *queries[] = {"\"crane\"", "\"harbor\" OR \"crane\"",
                                    "\"harbor\" AND (\"crane\" OR \"heron\")"};
    static const char *weights[] = {NULL, "c0 1 1", "1 1 0.5"};
    for (size_t qi = 0; qi < sizeof queries / sizeof *queries; qi++) {
        int nrank = 0;
        fts_hits h = {0};
        sqlite3_trace_v2(s.db, SQLITE_TRACE_STMT, count_rank_stmts, &nrank);
        EXPECT_INT(cm_store_fts_search(&s, queries[qi], weights[qi], 7, &h, err, sizeof err),
                   CM_OK);
        sqlite3_trace_v2(s.db, 0, NULL, NULL);
        EXPECT_INT(nrank, 1);
        sqlite3_stmt *ref = NULL;
        char sql[256];
        snprintf(sql, sizeof sql,
                 "SELECT rowid, rank FROM chunks_fts WHERE chunks_fts MATCH ?1 AND rank MATCH "
                 "'cm_bm25(7, ''%s'')' ORDER BY rank LIMIT 7",
                 weights[qi] ? weights[qi] : "");
        EXPECT(sqlite3_prepare_v2(s.db, sql, -1, &ref, NULL) == SQLITE_OK);
        sqlite3_bind_text(ref, 1, queries[qi], -1, SQLITE_STATIC);
        size_t i = 0;
        for (; sqlite3_step(ref) == SQLITE_ROW; i++) {
            EXPECT(i < h.n);
            if (i >= h.n) break;
            EXPECT_INT(h.v[i].id, sqlite3_column_int64(ref, 0));
            EXPECT(h.v[i].rank == sqlite3_column_double(ref, 1));
        }
        EXPECT_INT(h.n, i);
        EXPECT_INT(i, 7);
        sqlite3_finalize(ref);
        cm_fts_hits_release(&h);
    }
    cm_store_close(&s);
}

/* One value of a single-row query on s (the test's own SQL). */
static int64_t store_int(store *s, const char *sql)
{
    sqlite3_stmt *q = NULL;
    int64_t v = -1;
    if (sqlite3_prepare_v2(s->db, sql, -1, &q, NULL) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW)
        v = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    return v;
}

/* A bulk build (a rebuild's private file) writes the keyword entries after
 * every chunk, in one pass: before cm_store_bulk_keywords nothing is found,
 * after it every query ranks the same rows with the same scores as a store
 * written file by file, the keyword tables' pages all lie past the chunks'
 * (file by file they are spread among them), FTS5's integrity check passes
 * and its pending-data bound is back to its default. */
TEST(store_bulk_build_writes_keywords_after_the_chunks)
{
    char *d = tmp_dir();
    const char *words[] = {"harbor", "lantern", "quartz", "meadow", "cobalt", "ember", "falcon",
                           "glacier", "hollow", "indigo", "juniper", "kestrel", "lagoon", "marble",
                           "nectar", "orchid", "pepper", "quiver", "raven", "saffron"};
    store one, bulk;
    char err[256];
    EXPECT_INT(cm_store_open(&one, path_in(d, "one.sqlite"), "porter", STORE_CREATE, 1000, err,
                             sizeof err),
               CM_OK);
    EXPECT_INT(cm_store_open(&bulk, path_in(d, "bulk.sqlite"), "porter",
                             STORE_CREATE | STORE_BULK, 1000, err, sizeof err),
               CM_OK);
    EXPECT_INT(cm_store_begin(&one, err, sizeof err), CM_OK);
    EXPECT_INT(cm_store_begin(&bulk, err, sizeof err), CM_OK);
    buf text = BUF_INIT;
    uint32_t x = 12345;
    for (int f = 0; f < 2000; f++) {
        cm_buf_reset(&text);
        for (int w = 0; w < 30; w++) {
            x = x * 1103515245u + 12345u;
            EXPECT_INT(cm_buf_printf(&text, "%s%s", w ? " " : "", words[(x >> 16) % 20]), CM_OK);
        }
        chunk_list c = one_chunk(text.data);
        char path[32];
        snprintf(path, sizeof path, "memory/%04d.md", f);
        EXPECT_INT(cm_store_file_replace(&one, path, "memory", "h", 1, 1, NULL, &c, err, sizeof err),
                   CM_OK);
        EXPECT_INT(
            cm_store_file_replace(&bulk, path, "memory", "h", 1, 1, NULL, &c, err, sizeof err),
            CM_OK);
        cm_chunk_list_release(&c);
    }
    cm_buf_release(&text);
    fts_hits h = {0}, w = {0};
    EXPECT_INT(cm_store_fts_search(&bulk, "\"harbor\"", NULL, 10, &h, err, sizeof err), CM_OK);
    EXPECT_INT(h.n, 0); /* no keyword entries yet */
    cm_fts_hits_release(&h);
    EXPECT_INT(cm_store_bulk_keywords(&bulk, err, sizeof err), CM_OK);
    EXPECT_INT(cm_store_bulk_keywords(&one, err, sizeof err), CM_OK); /* not bulk: nothing */
    EXPECT_INT(cm_store_commit(&one, err, sizeof err), CM_OK);
    EXPECT_INT(cm_store_commit(&bulk, err, sizeof err), CM_OK);
    const char *queries[] = {"\"harbor\"", "\"lantern\" AND \"quartz\"", "\"meadow\" OR \"ember\"",
                             "\"falcon\" \"glacier\" \"hollow\""};
    for (size_t qi = 0; qi < sizeof queries / sizeof *queries; qi++) {
        EXPECT_INT(cm_store_fts_search(&one, queries[qi], NULL, 50, &w, err, sizeof err), CM_OK);
        EXPECT_INT(cm_store_fts_search(&bulk, queries[qi], NULL, 50, &h, err, sizeof err), CM_OK);
        EXPECT(w.n > 10);
        EXPECT_INT(h.n, w.n);
        for (size_t i = 0; i < h.n && i < w.n; i++) {
            EXPECT_INT(h.v[i].id, w.v[i].id);
            EXPECT_NEAR(h.v[i].rank, w.v[i].rank, 1e-12);
            EXPECT_STR(h.v[i].path, w.v[i].path);
        }
        cm_fts_hits_release(&h);
        cm_fts_hits_release(&w);
    }
    /* the pages of the length table (~6 bytes a row) among the chunks': its
     * root only (made with the schema), or more of them */
    const char *among = "SELECT count(*) FROM dbstat WHERE name = 'chunks_fts_docsize' AND pageno < "
                        "(SELECT max(pageno) FROM dbstat WHERE name = 'chunks')";
    EXPECT(store_int(&bulk, "SELECT count(*) FROM dbstat WHERE name = 'chunks_fts_docsize'") > 3);
    EXPECT(store_int(&bulk, "SELECT count(*) FROM dbstat WHERE name = 'chunks'") > 50);
    EXPECT_INT(store_int(&bulk, among), 1);
    EXPECT(store_int(&one, among) > 3);
    /* the files rows likewise: the same rows, in path order, their pages
     * past the chunks' (but for the root, made with the schema) */
    const char *files_among = "SELECT count(*) FROM dbstat WHERE name = 'files' AND pageno < "
                              "(SELECT max(pageno) FROM dbstat WHERE name = 'chunks')";
    const char *rows = "SELECT sum(CAST(substr(path, 8, 4) AS INTEGER)) * 10000 + sum(hash = 'h' "
                       "AND source = 'memory' AND problem IS NULL AND size = 1 AND mtime = 1) "
                       "FROM files";
    EXPECT(store_int(&bulk, "SELECT count(*) FROM dbstat WHERE name = 'files'") > 3);
    EXPECT_INT(store_int(&bulk, files_among), 1);
    EXPECT(store_int(&one, files_among) > 3);
    EXPECT_INT(store_int(&bulk, "SELECT count(*) FROM files"), 2000);
    EXPECT_INT(store_int(&bulk, rows), 1999000LL * 10000 + 2000);
    EXPECT_INT(store_int(&one, rows), 1999000LL * 10000 + 2000);
    EXPECT_INT(store_int(&bulk, "SELECT count(*) FROM files a JOIN files b ON b.rowid = a.rowid + "
                                "1 WHERE b.path < a.path"),
               0);
    EXPECT_INT(store_int(&bulk, "SELECT v FROM chunks_fts_config WHERE k = 'hashsize'"), 1048576);
    bool ok = false;
    EXPECT_INT(cm_store_check(&bulk, &ok, err, sizeof err), CM_OK);
    EXPECT(ok);
    cm_store_close(&one);
    cm_store_close(&bulk);
}

/* cm_process_init, called first in a fresh process (the runner run again
 * for this test alone), sets SQLite's process-wide options: no memory
 * statistics, so a store's allocations leave sqlite3_memory_used at 0.
 * Called once SQLite has started (this process), it changes nothing and the
 * store still works. */
TEST(store_process_init_sets_sqlite_options_only_first)
{
    char *d = tmp_dir();
    store s;
    char err[256];
    chunk_list c = one_chunk("a process of its own");
    bool fresh = getenv("CLAWMEM_TEST_FRESH_PROCESS") != NULL;
    if (fresh) cm_process_init();
    EXPECT_INT(cm_store_open(&s, path_in(d, "i.sqlite"), "porter", STORE_CREATE, 1000, err,
                             sizeof err),
               CM_OK);
    if (!fresh) cm_process_init();
    EXPECT_INT(cm_store_begin(&s, err, sizeof err), CM_OK);
    EXPECT_INT(cm_store_file_replace(&s, "a.md", "memory", "h", 1, 1, NULL, &c, err, sizeof err),
               CM_OK);
    EXPECT_INT(cm_store_commit(&s, err, sizeof err), CM_OK);
    fts_hits h = {0};
    EXPECT_INT(cm_store_fts_search(&s, "\"process\"", NULL, 10, &h, err, sizeof err), CM_OK);
    EXPECT_INT(h.n, 1);
    cm_fts_hits_release(&h);
    if (fresh) {
        EXPECT_INT(sqlite3_memory_used(), 0);
    } else {
        EXPECT(sqlite3_memory_used() > 0);
        pid_t pid = fork();
        EXPECT(pid >= 0);
        if (pid == 0) {
            setenv("CLAWMEM_TEST_FRESH_PROCESS", "1", 1);
            int null = open("/dev/null", O_WRONLY);
            if (null >= 0) dup2(null, 1);
            execl("/proc/self/exe", "test_runner", "store_process_init_sets_sqlite_options_only_first",
                  (char *)NULL);
            _exit(127);
        }
        int st = 0;
        EXPECT(waitpid(pid, &st, 0) == pid);
        EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    cm_store_close(&s);
    cm_chunk_list_release(&c);
}
