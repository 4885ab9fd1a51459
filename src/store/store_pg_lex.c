/*
 * store_pg_lex.c — the PostgreSQL store's keyword text lexed in this
 * process by SQLite's own FTS5 tokenizer (the one the SQLite store indexes
 * with: porter over unicode61, or unicode61 alone), written as tsvector and
 * tsquery literals: the server then only stores and indexes lexemes, where
 * to_tsvector spent most of a rebuild's server time (docs/BENCHMARKS.md),
 * and the two stores split and stem words alike. An agent indexed before
 * (clawmem_agents.lexer 0) keeps the server's to_tsvector until it is
 * rebuilt (store_pg.c).
 */
#include <pthread.h>
#include <sqlite3.h>

#include "fts_rank.h"
#include "store_pg_int.h"

/* PostgreSQL's limits: a lexeme's bytes (MAXSTRLEN), a position
 * (MAXENTRYPOS - 1). */
#define LEX_MAX_BYTES 2046
#define LEX_MAX_POS   16383

/* One in-memory SQLite database for the process: its FTS5 API hands out
 * the tokenizers (never closed: the API lives as long as it). */
static pthread_once_t api_once = PTHREAD_ONCE_INIT;
static fts5_api *lex_api;

static void api_load(void)
{
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_MEMORY, NULL) !=
        SQLITE_OK) {
        sqlite3_close(db);
        return;
    }
    lex_api = cm_fts_api(db);
    if (!lex_api) sqlite3_close(db);
}

cm_rc cm_store_pg_lex_open(store *s, const char *tokenizer, char *err, size_t errlen)
{
    struct store_pg *p = s->pg;
    if (p->lex_tok) return CM_OK;
    pthread_once(&api_once, api_load);
    if (!lex_api)
        return cm_seterr(err, errlen, CM_EIO, "postgres index of agent %s: no FTS5 tokenizer",
                         p->agent);
    bool porter = tokenizer && strcmp(tokenizer, "porter") == 0;
    const char *pargs[] = {"unicode61", "remove_diacritics", "2"};
    const char *uargs[] = {"remove_diacritics", "2"};
    void *ud = NULL;
    int r = lex_api->xFindTokenizer(lex_api, porter ? "porter" : "unicode61", &ud, &p->lex_fn);
    if (r == SQLITE_OK)
        r = p->lex_fn.xCreate(ud, porter ? pargs : uargs, porter ? 3 : 2, &p->lex_tok);
    if (r != SQLITE_OK) {
        p->lex_tok = NULL;
        return cm_seterr(err, errlen, CM_EIO, "postgres index of agent %s: no FTS5 tokenizer",
                         p->agent);
    }
    return CM_OK;
}

void cm_store_pg_lex_close(store *s)
{
    if (s->pg && s->pg->lex_tok) s->pg->lex_fn.xDelete(s->pg->lex_tok);
    if (s->pg) s->pg->lex_tok = NULL;
}

/* Appends tok as a quoted lexeme ('' for a quote, \\ for a backslash). */
static int put_lexeme(buf *b, const char *tok, int n)
{
    if (cm_buf_addc(b, '\'')) return SQLITE_NOMEM;
    for (int i = 0; i < n; i++) {
        if ((tok[i] == '\'' || tok[i] == '\\') && cm_buf_addc(b, tok[i])) return SQLITE_NOMEM;
        if (cm_buf_addc(b, tok[i])) return SQLITE_NOMEM;
    }
    return cm_buf_addc(b, '\'') ? SQLITE_NOMEM : SQLITE_OK;
}

typedef struct doc_out {
    buf *b;
    int64_t n; /* tokens so far: the next one's position */
} doc_out;

static int doc_token(void *ctx, int flags, const char *tok, int n, int start, int end)
{
    (void)start;
    (void)end;
    doc_out *o = ctx;
    if (!(flags & FTS5_TOKEN_COLOCATED)) o->n++;
    if (n <= 0 || n > LEX_MAX_BYTES) return SQLITE_OK; /* PostgreSQL has no room for it */
    if (o->b->len && cm_buf_addc(o->b, ' ')) return SQLITE_NOMEM;
    int r = put_lexeme(o->b, tok, n);
    if (r == SQLITE_OK && cm_buf_printf(o->b, ":%lld", (long long)CM_MIN(o->n, LEX_MAX_POS)))
        r = SQLITE_NOMEM;
    return r;
}

cm_rc cm_store_pg_lex_doc(store *s, const char *text, size_t len, buf *out, int64_t *ntok)
{
    struct store_pg *p = s->pg;
    doc_out o = {out, 0};
    cm_buf_reset(out);
    *ntok = 0;
    if (len > INT32_MAX) return CM_EINVAL;
    int r = p->lex_fn.xTokenize(p->lex_tok, &o, FTS5_TOKENIZE_DOCUMENT, text, (int)len, doc_token);
    *ntok = o.n;
    return r == SQLITE_OK ? CM_OK : r == SQLITE_NOMEM ? CM_ENOMEM : CM_EIO;
}

typedef struct query_out {
    buf *b;
    size_t n;
} query_out;

static int query_token(void *ctx, int flags, const char *tok, int n, int start, int end)
{
    (void)start;
    (void)end;
    query_out *o = ctx;
    if ((flags & FTS5_TOKEN_COLOCATED) || n <= 0 || n > LEX_MAX_BYTES) return SQLITE_OK;
    if (o->n++ && cm_buf_adds(o->b, " <-> ")) return SQLITE_NOMEM;
    return put_lexeme(o->b, tok, n);
}

cm_rc cm_store_pg_lex_query(store *s, const char *phrase, size_t len, bool prefix, buf *out)
{
    struct store_pg *p = s->pg;
    query_out o = {out, 0};
    if (len > INT32_MAX) return CM_EINVAL;
    /* in parentheses: a phrase binds tighter than any operator around it */
    if (cm_buf_addc(out, '(')) return CM_ENOMEM;
    int r = p->lex_fn.xTokenize(p->lex_tok, &o,
                                FTS5_TOKENIZE_QUERY | (prefix ? FTS5_TOKENIZE_PREFIX : 0), phrase,
                                (int)len, query_token);
    if (r != SQLITE_OK) return r == SQLITE_NOMEM ? CM_ENOMEM : CM_EIO;
    /* no token (nothing a word): a lexeme no chunk holds */
    if (!o.n && cm_buf_adds(out, "' '")) return CM_ENOMEM;
    if (prefix && o.n && cm_buf_adds(out, ":*")) return CM_ENOMEM;
    return cm_buf_addc(out, ')');
}
