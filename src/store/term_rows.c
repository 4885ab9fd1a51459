/*
 * term_rows.c — each term's row count beside the keyword table (term_rows.h).
 */
#include <stdlib.h>
#include <string.h>

#include "fts_rank.h"
#include "files_stat.h"
#include "term_rows.h"

/* FTS5 cuts a token to this many bytes, in documents and in queries alike */
#define TOKEN_MAX 32768

enum { T_IDLE, T_KEEP, T_OFF }; /* a transaction's state: not armed, keeping, not keeping */

typedef struct delta {
    char *term; /* NULL: a free slot */
    int len;
    unsigned seen; /* the text that last counted it */
    long long n;
} delta;

struct term_rows {
    buf counts; /* cm_term_rows_lookup's answer */
    fts5_tokenizer t;
    Fts5Tokenizer *tok;
    bool tok_tried;
    int state;
    delta *d; /* open addressing, cap a power of two */
    size_t cap, used;
    unsigned text;       /* the note being tokenised: a term counts once a text */
    sqlite3_stmt *count; /* SELECT n FROM term_rows WHERE term = ?1 */
};

/* The files triggers replaced by ones that drop the mark too (an index's
 * older ones drop only the snapshot), in the transaction that marks it. */
static const char fill_sql[] =
    "CREATE TABLE IF NOT EXISTS term_rows(term TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;"
    "DELETE FROM term_rows;"
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.cm_vocab USING fts5vocab(main, 'chunks_fts', 'row');"
    "INSERT INTO term_rows(term, n) SELECT term, doc FROM temp.cm_vocab;"
    "INSERT INTO term_rows(term, n) VALUES('', 1);"
    "DROP TRIGGER IF EXISTS files_stat_ins; DROP TRIGGER IF EXISTS files_stat_upd;"
    "DROP TRIGGER IF EXISTS files_stat_del;" STORE_FILES_TRIGGERS_SQL;

static struct term_rows *get(store *s)
{
    if (!s->terms) s->terms = calloc(1, sizeof *s->terms);
    return s->terms;
}

/* Whether the table applies to this index at all. */
static bool applies(const store *s)
{
    return !s->pg && !s->trigram && s->tokenize && s->fts;
}

/* The keyword table's own tokenizer (its tokenize= words), made once. */
static Fts5Tokenizer *tokenizer(store *s, struct term_rows *t)
{
    if (t->tok_tried) return t->tok;
    t->tok_tried = true;
    char spec[128];
    const char *argv[8];
    int argc = 0;
    size_t n = strlen(s->tokenize);
    if (n >= sizeof spec) return NULL;
    memcpy(spec, s->tokenize, n + 1);
    for (char *p = spec; *p;) { /* words between single spaces (set_tokenize's) */
        if (*p == ' ') {
            *p++ = '\0';
            continue;
        }
        if (argc == (int)ARRAY_LEN(argv)) return NULL;
        argv[argc++] = p;
        p += strcspn(p, " ");
    }
    void *ud = NULL;
    if (!argc || s->fts->xFindTokenizer(s->fts, argv[0], &ud, &t->t) != SQLITE_OK) return NULL;
    if (t->t.xCreate(ud, argv + 1, argc - 1, &t->tok) != SQLITE_OK) t->tok = NULL;
    return t->tok;
}

static unsigned long hash(const char *p, int n)
{
    unsigned long h = 1469598103934665603ul;
    for (int i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 1099511628211ul;
    return h;
}

static bool grow(struct term_rows *t)
{
    size_t cap = t->cap ? t->cap * 2 : 1024;
    delta *d = calloc(cap, sizeof *d);
    if (!d) return false;
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->d[i].term) continue;
        size_t j = hash(t->d[i].term, t->d[i].len) & (cap - 1);
        while (d[j].term)
            j = (j + 1) & (cap - 1);
        d[j] = t->d[i];
    }
    free(t->d);
    t->d = d;
    t->cap = cap;
    return true;
}

typedef struct note_ctx {
    struct term_rows *t;
    int sign;
} note_ctx;

static int note_token(void *ctx, int flags, const char *tok, int n, int start, int end)
{
    (void)flags;
    (void)start;
    (void)end;
    note_ctx *c = ctx;
    struct term_rows *t = c->t;
    if (n <= 0) return SQLITE_OK;
    if (n > TOKEN_MAX) n = TOKEN_MAX;
    if ((t->used + 1) * 2 > t->cap && !grow(t)) return SQLITE_NOMEM;
    size_t j = hash(tok, n) & (t->cap - 1);
    while (t->d[j].term && (t->d[j].len != n || memcmp(t->d[j].term, tok, (size_t)n) != 0))
        j = (j + 1) & (t->cap - 1);
    delta *d = &t->d[j];
    if (!d->term) {
        if (!(d->term = malloc((size_t)n))) return SQLITE_NOMEM;
        memcpy(d->term, tok, (size_t)n);
        d->len = n;
        d->seen = t->text - 1;
        t->used++;
    }
    if (d->seen != t->text) { /* a row counts once whatever its term's occurrences */
        d->seen = t->text;
        d->n += c->sign;
    }
    return SQLITE_OK;
}

void cm_term_rows_end(store *s)
{
    struct term_rows *t = s->terms;
    if (!t) return;
    for (size_t i = 0; i < t->cap; i++)
        free(t->d[i].term);
    free(t->d);
    t->d = NULL;
    t->cap = t->used = 0;
    t->state = T_IDLE;
}

/* Whether the table is there and marked current (SQLITE_ROW), not
 * (SQLITE_DONE), or the error. Prepares the count statement. */
static int current(store *s, struct term_rows *t)
{
    if (!t->count && sqlite3_prepare_v3(s->db, "SELECT n FROM term_rows WHERE term = ?1", -1,
                                        SQLITE_PREPARE_PERSISTENT, &t->count, NULL) != SQLITE_OK)
        return SQLITE_DONE; /* no table: an index older than it */
    sqlite3_bind_text(t->count, 1, "", 0, SQLITE_STATIC);
    int r = sqlite3_step(t->count);
    sqlite3_reset(t->count);
    return r;
}

cm_rc cm_term_rows_arm(store *s, char *err, size_t errlen)
{
    if (!applies(s) || s->bulk) return CM_OK;
    struct term_rows *t = get(s);
    if (!t) return cm_store_fail(s, SQLITE_NOMEM, "count the terms", err, errlen);
    if (t->state != T_IDLE) return CM_OK;
    t->state = T_OFF; /* the files triggers drop the mark: it stays dropped */
    if (sqlite3_get_autocommit(s->db) || !tokenizer(s, t)) return CM_OK;
    int r = current(s, t);
    if (r == SQLITE_ROW)
        t->state = T_KEEP;
    else if (r != SQLITE_DONE)
        return cm_store_fail(s, r, "read the term counts", err, errlen);
    return CM_OK;
}

cm_rc cm_term_rows_note(store *s, const char *text, size_t len, int sign, char *err, size_t errlen)
{
    struct term_rows *t = s->terms;
    if (!t || t->state != T_KEEP) return CM_OK;
    note_ctx c = {t, sign};
    t->text++;
    int r = t->t.xTokenize(t->tok, &c, FTS5_TOKENIZE_DOCUMENT, text, (int)len, note_token);
    return r == SQLITE_OK ? CM_OK : cm_store_fail(s, r, "count the terms", err, errlen);
}

cm_rc cm_term_rows_flush(store *s, char *err, size_t errlen)
{
    struct term_rows *t = s->terms;
    if (!t || t->state != T_KEEP) return CM_OK;
    sqlite3_stmt *up = NULL, *gone = NULL;
    int r = sqlite3_prepare_v2(s->db,
                               "INSERT INTO term_rows(term, n) VALUES(?1, ?2) ON CONFLICT(term) "
                               "DO UPDATE SET n = n + excluded.n",
                               -1, &up, NULL);
    if (r == SQLITE_OK)
        r = sqlite3_prepare_v2(s->db, "DELETE FROM term_rows WHERE term = ?1 AND n <= 0", -1, &gone,
                               NULL);
    for (size_t i = 0; r == SQLITE_OK && i < t->cap; i++) {
        const delta *d = &t->d[i];
        if (!d->term || !d->n) continue;
        sqlite3_bind_text(up, 1, d->term, d->len, SQLITE_STATIC);
        sqlite3_bind_int64(up, 2, d->n);
        r = sqlite3_step(up);
        sqlite3_reset(up);
        if (r == SQLITE_DONE && d->n < 0) {
            sqlite3_bind_text(gone, 1, d->term, d->len, SQLITE_STATIC);
            r = sqlite3_step(gone);
            sqlite3_reset(gone);
        }
        if (r == SQLITE_DONE) r = SQLITE_OK;
    }
    sqlite3_finalize(up);
    sqlite3_finalize(gone);
    if (r == SQLITE_OK)
        r = sqlite3_exec(s->db, "INSERT OR REPLACE INTO term_rows(term, n) VALUES('', 1)", NULL,
                         NULL, NULL);
    return r == SQLITE_OK ? CM_OK : cm_store_fail(s, r, "write the term counts", err, errlen);
}

cm_rc cm_term_rows_fill(store *s, char *err, size_t errlen)
{
    if (!applies(s)) return CM_OK;
    int r = sqlite3_exec(s->db, fill_sql, NULL, NULL, NULL);
    return r == SQLITE_OK ? CM_OK : cm_store_fail(s, r, "count the terms", err, errlen);
}

cm_rc cm_term_rows_repair(store *s, bool *wrote, char *err, size_t errlen)
{
    *wrote = false;
    if (!applies(s) || s->readonly || s->bulk) return CM_OK;
    struct term_rows *t = get(s);
    if (!t) return cm_store_fail(s, SQLITE_NOMEM, "count the terms", err, errlen);
    int r = current(s, t);
    if (r == SQLITE_ROW) return CM_OK;
    if (r != SQLITE_DONE) return cm_store_fail(s, r, "read the term counts", err, errlen);
    cm_rc rc = cm_store_begin(s, err, errlen);
    if (!rc) rc = cm_term_rows_fill(s, err, errlen);
    if (!rc) rc = cm_store_commit(s, err, errlen);
    if (rc) cm_store_rollback(s);
    *wrote = !rc;
    return rc;
}

typedef struct phrase_ctx {
    int n;      /* tokens */
    bool plain; /* none colocated */
    int len;
    char first[256];
} phrase_ctx;

static int phrase_token(void *ctx, int flags, const char *tok, int n, int start, int end)
{
    (void)start;
    (void)end;
    phrase_ctx *c = ctx;
    if (flags & FTS5_TOKEN_COLOCATED) c->plain = false;
    if (c->n++ == 0 && n > 0 && (size_t)n <= sizeof c->first) {
        memcpy(c->first, tok, (size_t)n);
        c->len = n;
    }
    return SQLITE_OK;
}

cm_rc cm_term_rows_counts(store *s, const char *match, buf *out, char *err, size_t errlen)
{
    cm_buf_reset(out);
    if (!applies(s) || !match) return CM_OK;
    struct term_rows *t = get(s);
    if (!t) return cm_store_fail(s, SQLITE_NOMEM, "count the terms", err, errlen);
    if (!tokenizer(s, t) || current(s, t) != SQLITE_ROW) return CM_OK;
    cm_rc rc = CM_OK;
    for (const char *c = match; *c && !rc; c++) {
        if (*c != '"') continue;
        const char *p = ++c;
        while (*c && *c != '"')
            c++;
        if (!*c) break;
        phrase_ctx pc = {.plain = true};
        long long n = -1;
        if (c[1] != '*' &&
            t->t.xTokenize(t->tok, &pc, FTS5_TOKENIZE_QUERY, p, (int)(c - p), phrase_token) ==
                SQLITE_OK &&
            pc.n == 1 && pc.plain && pc.len > 0) {
            sqlite3_bind_text(t->count, 1, pc.first, pc.len, SQLITE_STATIC);
            int r = sqlite3_step(t->count);
            n = r == SQLITE_ROW ? sqlite3_column_int64(t->count, 0) : r == SQLITE_DONE ? 0 : -1;
            sqlite3_reset(t->count);
            if (r != SQLITE_ROW && r != SQLITE_DONE) {
                cm_buf_reset(out);
                return cm_store_fail(s, r, "read the term counts", err, errlen);
            }
        }
        if (out->len) rc = cm_buf_addc(out, ' ');
        if (!rc) rc = n >= 0 ? cm_buf_printf(out, "%lld", n) : cm_buf_addc(out, '-');
    }
    if (rc) cm_buf_reset(out);
    return rc;
}

const char *cm_term_rows_lookup(void *ctx, const char *match)
{
    store *s = ctx;
    char err[256];
    struct term_rows *t = get(s);
    if (!t || cm_term_rows_counts(s, match, &t->counts, err, sizeof err) != CM_OK || !t->counts.len)
        return NULL;
    return t->counts.data;
}

void cm_term_rows_free(store *s)
{
    struct term_rows *t = s->terms;
    if (!t) return;
    cm_term_rows_end(s);
    cm_buf_release(&t->counts);
    if (t->tok) t->t.xDelete(t->tok);
    sqlite3_finalize(t->count);
    free(t);
    s->terms = NULL;
}
