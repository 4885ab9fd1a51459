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
/* and a lexeme's positions (MAXNUMPOS) */
#define LEX_MAX_NPOS 256

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

/* A token of the chunk being lexed: its bytes at off in lexbytes. */
struct pg_lex_tok {
    size_t off;
    int len;
    int pos;
};

typedef struct doc_out {
    struct store_pg *p;
    int64_t n; /* tokens so far: the next one's position */
} doc_out;

static int doc_token(void *ctx, int flags, const char *tok, int n, int start, int end)
{
    (void)start;
    (void)end;
    doc_out *o = ctx;
    struct store_pg *p = o->p;
    if (!(flags & FTS5_TOKEN_COLOCATED)) o->n++;
    if (n <= 0 || n > LEX_MAX_BYTES) return SQLITE_OK; /* PostgreSQL has no room for it */
    if (p->nlextok == p->caplextok) {
        size_t cap = p->caplextok ? p->caplextok * 2 : 256;
        struct pg_lex_tok *nv = realloc(p->lextok, cap * sizeof *nv);
        if (!nv) return SQLITE_NOMEM;
        p->lextok = nv;
        p->caplextok = cap;
    }
    struct pg_lex_tok *t = &p->lextok[p->nlextok++];
    t->off = p->lexbytes.len;
    t->len = n;
    t->pos = (int)CM_MIN(o->n, LEX_MAX_POS);
    return cm_buf_add(&p->lexbytes, tok, (size_t)n) ? SQLITE_NOMEM : SQLITE_OK;
}

/* The order of PostgreSQL's lexemes (tsCompareString: bytes, then the
 * shorter first), then position; ctx: the tokens' bytes. */
static int tok_cmp(const void *a, const void *b, void *ctx)
{
    const struct pg_lex_tok *x = a, *y = b;
    const char *bytes = ctx;
    int c = memcmp(bytes + x->off, bytes + y->off, (size_t)CM_MIN(x->len, y->len));
    if (!c) c = (x->len > y->len) - (x->len < y->len);
    if (!c) c = (x->pos > y->pos) - (x->pos < y->pos);
    return c;
}

/* Appends v as n big-endian bytes (PostgreSQL's binary forms). */
static cm_rc put_be(buf *b, uint64_t v, int n)
{
    unsigned char o[8];
    for (int i = 0; i < n; i++)
        o[i] = (unsigned char)(v >> (8 * (n - 1 - i)));
    return cm_buf_add(b, o, (size_t)n);
}

/* Writes v big-endian into n bytes at b->data + at (a count known later). */
static void patch_be(buf *b, size_t at, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        b->data[at + (size_t)i] = (char)(unsigned char)(v >> (8 * (n - 1 - i)));
}

/* The tokens as a tsvector: each lexeme once, in PostgreSQL's order, with
 * its distinct positions ascending, at most 256 of them (the first: what
 * tsvector_in keeps of a longer list), so the server finds it sorted. bin:
 * tsvector's binary form (tsvectorrecv: the lexeme count as int32, then
 * each lexeme NUL-terminated, its position count as int16 and each
 * position as int16, weight D), else its text literal. */
static cm_rc doc_literal(struct store_pg *p, buf *out, bool bin)
{
    cm_rc rc = CM_OK;
    uint32_t nlex = 0;
    size_t base = out->len;
    if (p->nlextok > 1) qsort_r(p->lextok, p->nlextok, sizeof *p->lextok, tok_cmp, p->lexbytes.data);
    if (bin) rc = put_be(out, 0, 4);
    for (size_t i = 0; i < p->nlextok && !rc;) {
        const struct pg_lex_tok *t = &p->lextok[i];
        const char *lex = p->lexbytes.data + t->off;
        size_t npos_at = 0;
        if (bin) {
            rc = cm_buf_add(out, lex, (size_t)t->len);
            if (!rc) rc = cm_buf_addc(out, '\0');
            npos_at = out->len;
            if (!rc) rc = put_be(out, 0, 2);
        } else {
            if (out->len) rc = cm_buf_addc(out, ' ');
            if (!rc) rc = put_lexeme(out, lex, t->len) ? CM_ENOMEM : CM_OK;
        }
        int last = -1, kept = 0;
        size_t j = i;
        for (; !rc && j < p->nlextok; j++) {
            const struct pg_lex_tok *u = &p->lextok[j];
            if (u->len != t->len || memcmp(p->lexbytes.data + u->off, lex, (size_t)t->len)) break;
            if (u->pos == last || kept == LEX_MAX_NPOS) continue;
            rc = bin ? put_be(out, (uint64_t)u->pos, 2)
                     : cm_buf_printf(out, "%c%d", kept ? ',' : ':', u->pos);
            last = u->pos;
            kept++;
        }
        if (!rc && bin) patch_be(out, npos_at, (uint64_t)kept, 2);
        nlex++;
        i = j;
    }
    if (!rc && bin) patch_be(out, base, nlex, 4);
    return rc;
}

/* The chunk's tokens into lextok and lexbytes; *ntok their count. */
static cm_rc doc_tokens(store *s, const char *text, size_t len, int64_t *ntok)
{
    struct store_pg *p = s->pg;
    doc_out o = {p, 0};
    cm_buf_reset(&p->lexbytes);
    p->nlextok = 0;
    *ntok = 0;
    if (len > INT32_MAX) return CM_EINVAL;
    int r = p->lex_fn.xTokenize(p->lex_tok, &o, FTS5_TOKENIZE_DOCUMENT, text, (int)len, doc_token);
    *ntok = o.n;
    if (r != SQLITE_OK) return r == SQLITE_NOMEM ? CM_ENOMEM : CM_EIO;
    return CM_OK;
}

cm_rc cm_store_pg_lex_doc(store *s, const char *text, size_t len, buf *out, int64_t *ntok)
{
    cm_buf_reset(out);
    cm_rc rc = doc_tokens(s, text, len, ntok);
    return rc ? rc : doc_literal(s->pg, out, false);
}

cm_rc cm_store_pg_lex_doc_bin(store *s, const char *text, size_t len, buf *out, int64_t *ntok)
{
    cm_rc rc = doc_tokens(s, text, len, ntok);
    return rc ? rc : doc_literal(s->pg, out, true);
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
