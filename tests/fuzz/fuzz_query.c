/*
 * fuzz_query.c — the FTS query builder on arbitrary bytes, checked against a
 * real FTS5 table: every expression it emits must parse (no syntax error can
 * come from user input). The best-passage scan (passage.h) reads the same
 * bytes as a chunk's text against the expression's terms. With variants
 * (each keyword echoed back as its own variant, joined hyphens) the groups
 * must parse too, and the date reader (when.h) must stay in bounds.
 */
#include <sqlite3.h>

#include "../../src/search/passage.h"
#include "../../src/search/query.h"
#include "../../src/search/when.h"
#include "fuzz.h"

static size_t echo(void *ctx, const char *kw, size_t len, query_variant *out, size_t cap)
{
    (void)ctx;
    if (!cap || len >= sizeof out[0].text) return 0;
    memcpy(out[0].text, kw, len);
    out[0].text[len] = '\0';
    out[0].weight = 0.5;
    return 1;
}

int fuzz_query(const uint8_t *data, size_t size)
{
    static sqlite3 *db;
    static sqlite3_stmt *q;
    if (!db) {
        sqlite3_open(":memory:", &db);
        sqlite3_exec(db,
                     "CREATE VIRTUAL TABLE t USING fts5(x);"
                     "INSERT INTO t VALUES('hello world 東京 서울 데이터');",
                     NULL, NULL, NULL);
        sqlite3_prepare_v2(db, "SELECT count(*) FROM t WHERE t MATCH ?1", -1, &q, NULL);
    }
    for (int mode = 0; mode < 4; mode++) {
        buf b = BUF_INIT;
        if (cm_query_build((const char *)data, size, mode & 1, (mode & 2) ? QUERY_OR : QUERY_AND,
                           &b, NULL) == CM_OK &&
            b.len) {
            sqlite3_bind_text(q, 1, b.data, (int)b.len, SQLITE_STATIC);
            int rc = sqlite3_step(q);
            sqlite3_reset(q);
            if (rc != SQLITE_ROW) __builtin_trap();
            passage_terms t;
            char *text = malloc(size + 1);
            if (text && cm_rank_passage_terms(b.data, &t)) {
                memcpy(text, data, size);
                text[size] = '\0';
                double x = cm_rank_passage_best(text, &t, (size_t)mode * 8);
                if (!(x >= 0 && x <= 1)) __builtin_trap();
            }
            free(text);
        }
        cm_buf_release(&b);
        buf w = BUF_INIT;
        query_opts o = {false, (mode & 2) ? QUERY_OR : QUERY_AND, NULL, NULL, echo, NULL, &w,
                        mode & 1, (mode & 4) != 0};
        if (cm_query_build_opts((const char *)data, size, &o, &b, NULL) == CM_OK && b.len) {
            sqlite3_bind_text(q, 1, b.data, (int)b.len, SQLITE_STATIC);
            int rc = sqlite3_step(q);
            sqlite3_reset(q);
            if (rc != SQLITE_ROW) __builtin_trap();
            passage_terms t;
            cm_rank_passage_groups(b.data, w.data, &t);
        }
        cm_buf_release(&b);
        cm_buf_release(&w);
    }
    char *rest = malloc(size + 1);
    when_range r;
    if (rest && cm_when_find((const char *)data, size, 20000, rest, &r) &&
        (r.first > r.last || r.last > 20000))
        __builtin_trap();
    (void)cm_when_mentions((const char *)data, size);
    (void)cm_when_asks((const char *)data, size);
    free(rest);
    return 0;
}

FUZZ_ENTRY(fuzz_query)
