/*
 * test_term_rows.c — each term's row count beside the keyword table
 * (src/store/term_rows.h): equal to FTS5's own count of the term's rows
 * through rebuilds, edits, deletions, renames and memory_write; another
 * writer's change (chunks with their file's row) drops its mark and the
 * next sync fills it again, with the files triggers an older index lacks; a search reads it (a
 * doctored count moves the scores), and scores the same without it (an older index) or with a mark
 * dropped.
 */
#include <sqlite3.h>
#include <unistd.h>

#include "../src/engine/engine_int.h"
#include "test.h"

typedef struct tr_ws {
    char *dir;
    char ws[1024], state[1024], cfg[1024], db[1100];
} tr_ws;

static void ws_init(tr_ws *f)
{
    f->dir = tmp_dir();
    snprintf(f->ws, sizeof f->ws, "%s/ws", f->dir);
    snprintf(f->state, sizeof f->state, "%s/state", f->dir);
    snprintf(f->cfg, sizeof f->cfg, "%s/qc.json", f->dir);
    snprintf(f->db, sizeof f->db, "%s/memory/main.clawmem.sqlite", f->state);
    write_file(f->dir, "qc.json", "{clawmem: {memoryWrite: true}}");
    static const char *const words[] = {"otters", "beavers", "rivers", "dams", "fishing", "swim"};
    for (int i = 0; i < 12; i++) {
        char rel[64], text[256];
        snprintf(rel, sizeof rel, "memory/n%02d.md", i);
        /* a word twice in a note still counts that row once */
        snprintf(text, sizeof text, "# Note %02d\n\n%s and %s near %s; %s again.\n", i,
                 words[i % 6], words[(i + 1) % 6], words[(i * 5) % 6], words[i % 6]);
        write_file(f->ws, rel, text);
    }
}

static cm_engine *ws_open(const tr_ws *f)
{
    cm_options o = {NULL, f->ws, f->cfg, f->state, NULL, NULL, 0};
    cm_engine *e = NULL;
    char err[512];
    if (cm_engine_open(&o, &e, err, sizeof err)) fprintf(stderr, "  open: %s\n", err);
    return e;
}

static cm_rc ws_sync(cm_engine *e, unsigned flags)
{
    char err[512];
    cm_sync_stats st;
    cm_rc rc = cm_engine_sync(e, flags, NULL, NULL, &st, err, sizeof err);
    if (rc) fprintf(stderr, "  sync: %s\n", err);
    return rc;
}

static void exec_sql(const tr_ws *f, const char *sql)
{
    sqlite3 *db = NULL;
    EXPECT_INT(sqlite3_open(f->db, &db), SQLITE_OK);
    int r = sqlite3_exec(db, sql, NULL, NULL, NULL);
    if (r != SQLITE_OK) fprintf(stderr, "  sql: %s\n", sqlite3_errmsg(db));
    EXPECT_INT(r, SQLITE_OK);
    sqlite3_close(db);
}

static int64_t one_int(const tr_ws *f, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    int64_t v = -1;
    if (sqlite3_open(f->db, &db) == SQLITE_OK &&
        sqlite3_prepare_v2(db, sql, -1, &q, NULL) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW)
        v = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    sqlite3_close(db);
    return v;
}

/* Makes the index one an older clawmem left: no term counts, the files
 * triggers dropping the snapshot only. */
static void make_older(const tr_ws *f)
{
    static const char *const ev[] = {"ins", "INSERT", "upd", "UPDATE", "del", "DELETE"};
    char sql[1024];
    exec_sql(f, "DROP TRIGGER files_stat_ins; DROP TRIGGER files_stat_upd; "
                "DROP TRIGGER files_stat_del; DROP TABLE term_rows");
    for (int i = 0; i < 6; i += 2) {
        snprintf(sql, sizeof sql,
                 "CREATE TRIGGER files_stat_%s AFTER %s ON files BEGIN DELETE FROM meta WHERE "
                 "key = 'clawmem_files_stat_v1'; END",
                 ev[i], ev[i + 1]);
        exec_sql(f, sql);
    }
}

/* Whether the table is marked current and equals FTS5's count of each
 * term's rows (fts5vocab), term by term. */
static bool rows_exact(const tr_ws *f)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    int64_t diff = -1, mark = 0, terms = 0;
    if (sqlite3_open(f->db, &db) == SQLITE_OK &&
        sqlite3_exec(db, "CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, 'chunks_fts', 'row')",
                     NULL, NULL, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db,
                           "SELECT (SELECT count(*) FROM (SELECT term, n FROM term_rows WHERE "
                           "term <> '' EXCEPT SELECT term, doc FROM temp.v)) + (SELECT count(*) "
                           "FROM (SELECT term, doc FROM temp.v EXCEPT SELECT term, n FROM "
                           "term_rows)), (SELECT count(*) FROM term_rows WHERE term = ''), "
                           "(SELECT count(*) FROM temp.v)",
                           -1, &q, NULL) == SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW) {
        diff = sqlite3_column_int64(q, 0);
        mark = sqlite3_column_int64(q, 1);
        terms = sqlite3_column_int64(q, 2);
    }
    sqlite3_finalize(q);
    sqlite3_close(db);
    return diff == 0 && mark == 1 && terms >= 8;
}

/* The scores of a keyword search straight on the index file, as text. */
static void scores(const tr_ws *f, const char *match, char *out, size_t cap)
{
    store s;
    fts_hits h = {0};
    char err[512];
    out[0] = '\0';
    cm_rc rc = cm_store_open(&s, f->db, NULL, 0, 1000, err, sizeof err);
    if (!rc) rc = cm_store_fts_search(&s, match, "", 10, &h, err, sizeof err);
    if (rc) fprintf(stderr, "  search: %s\n", err);
    EXPECT_INT(rc, CM_OK);
    size_t at = 0;
    for (size_t i = 0; i < h.n && at + 64 < cap; i++)
        at +=
            (size_t)snprintf(out + at, cap - at, "%lld:%.17g ", (long long)h.v[i].id, h.v[i].rank);
    cm_fts_hits_release(&h);
    if (!rc) cm_store_close(&s);
}

TEST(store_term_rows_stay_exact_through_edits_deletes_renames_and_a_rebuild)
{
    tr_ws f;
    ws_init(&f);
    cm_engine *e = ws_open(&f);
    EXPECT_INT(ws_sync(e, 0), CM_OK); /* a new index: a rebuild */
    EXPECT(rows_exact(&f));
    /* edited: a word gone, a new one, the count of another up */
    write_file(f.ws, "memory/n02.md", "# Note 02\n\nlodges of otters, otters and kits\n");
    EXPECT_INT(ws_sync(e, 0), CM_OK);
    EXPECT(rows_exact(&f));
    EXPECT_INT(one_int(&f, "SELECT n FROM term_rows WHERE term = 'lodg'"), 1);
    /* deleted: its terms' counts down, a term only it held gone */
    EXPECT_INT(unlink(path_in(f.ws, "memory/n02.md")), 0);
    EXPECT_INT(ws_sync(e, 0), CM_OK);
    EXPECT(rows_exact(&f));
    EXPECT_INT(one_int(&f, "SELECT count(*) FROM term_rows WHERE term = 'lodg'"), 0);
    /* renamed, and added */
    char from[1200];
    snprintf(from, sizeof from, "%s", path_in(f.ws, "memory/n05.md"));
    EXPECT_INT(rename(from, path_in(f.ws, "memory/n05-renamed.md")), 0);
    write_file(f.ws, "memory/new.md", "# New\n\nfishing otters, kayaks\n");
    EXPECT_INT(ws_sync(e, 0), CM_OK);
    EXPECT(rows_exact(&f));
    /* memory_write's one note */
    char err[512], *out = NULL;
    cm_rc wrc = cm_memory_write(e, "memory/n09.md", "appended kayaks\n", 0, &out, err, sizeof err);
    if (wrc) fprintf(stderr, "  write: %s\n", err);
    EXPECT_INT(wrc, CM_OK);
    cm_free(out);
    EXPECT(rows_exact(&f));
    EXPECT_INT(one_int(&f, "SELECT n FROM term_rows WHERE term = 'kayak'"), 2);
    /* a forced rebuild */
    EXPECT_INT(ws_sync(e, CM_SYNC_FORCE), CM_OK);
    EXPECT(rows_exact(&f));
    cm_engine_close(e);
}

TEST(store_term_rows_another_writer_drops_the_mark_and_a_sync_fills_them_again)
{
    tr_ws f;
    ws_init(&f);
    cm_engine *e = ws_open(&f);
    EXPECT_INT(ws_sync(e, 0), CM_OK);
    EXPECT(rows_exact(&f));
    char before[4096], after[4096], counted[4096];
    scores(&f, "\"otter\" AND \"beaver\"", before, sizeof before);
    /* an older clawmem's write: a chunk, its keyword entry and its file's
     * row, no count */
    exec_sql(&f, "INSERT INTO chunks(path, source, start_line, end_line, hash, text, updated_at) "
                 "VALUES('memory/n03.md', 'memory', 9, 9, 'h', 'otters otters', 0);"
                 "INSERT INTO chunks_fts(rowid, text) VALUES(last_insert_rowid(), "
                 "'otters otters');"
                 "UPDATE files SET hash = 'x' WHERE path = 'memory/n03.md';");
    EXPECT_INT(one_int(&f, "SELECT count(*) FROM term_rows WHERE term = ''"), 0);
    EXPECT(!rows_exact(&f));
    /* the search counts the rows itself: the same scores as with no table */
    scores(&f, "\"otter\" AND \"beaver\"", after, sizeof after);
    EXPECT(strcmp(before, after) != 0); /* the new row is counted */
    make_older(&f);
    scores(&f, "\"otter\" AND \"beaver\"", counted, sizeof counted);
    EXPECT_STR(after, counted);
    /* a sync under the writer lock fills the table again (an index older
     * than it gets it so too, with the files triggers that drop its mark) */
    EXPECT_INT(ws_sync(e, 0), CM_OK);
    EXPECT(rows_exact(&f));
    scores(&f, "\"otter\" AND \"beaver\"", after, sizeof after);
    EXPECT_STR(after, counted);
    exec_sql(&f, "UPDATE files SET hash = 'y' WHERE path = 'memory/n04.md'");
    EXPECT_INT(one_int(&f, "SELECT count(*) FROM term_rows WHERE term = ''"), 0);
    cm_engine_close(e);
}

TEST(store_term_rows_are_what_the_search_reads_and_score_as_counting_the_rows)
{
    tr_ws f;
    ws_init(&f);
    cm_engine *e = ws_open(&f);
    EXPECT_INT(ws_sync(e, 0), CM_OK);
    cm_engine_close(e);
    static const char *const matches[] = {
        "\"otter\" AND \"beaver\"",
        "(\"otter\" OR \"beaver\") AND \"swim\"",
        "\"otters and beavers\" OR \"swim\"", /* a phrase of several tokens */
        "\"ott\"* AND \"swim\"",              /* a prefix */
        "\"fishing\" OR \"zzzabsent\"",       /* a term in no row */
    };
    char with[5][4096], without[4096], doctored[4096];
    for (int i = 0; i < 5; i++) {
        scores(&f, matches[i], with[i], sizeof with[i]);
        EXPECT(with[i][0] != '\0' || i == 4);
    }
    /* a count is read, not recomputed: a doctored one moves the scores */
    exec_sql(&f, "UPDATE term_rows SET n = n + 5 WHERE term = 'beaver'");
    scores(&f, matches[0], doctored, sizeof doctored);
    EXPECT(strcmp(doctored, with[0]) != 0);
    /* an index without the table (an older clawmem's) scores the same */
    make_older(&f);
    for (int i = 0; i < 5; i++) {
        scores(&f, matches[i], without, sizeof without);
        EXPECT_STR(without, with[i]);
    }
}
