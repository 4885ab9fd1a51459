/*
 * store_pg_search.c — keyword search over PostgreSQL: the FTS5 expression of
 * query.c translated to tsquery, and cm_bm25 computed in SQL (store_pg.c's
 * head says how the tables hold the keyword text).
 */
#include "fts_rank.h"
#include "store_pg_int.h"

/* ---- keyword search ---------------------------------------------------------- */

/* Translates the FTS5 expression of query.c ("a" AND ("b c" OR "d"*)) into
 * to_tsquery text ('a' & ('b c' | 'd':*)), the array of its phrases as
 * to_tsquery text, and their OR ('a' | 'b c' | 'd':*). */
static cm_rc translate(store *s, const char *m, buf *tsq, buf *aq, buf *tor, int *nphrase)
{
    cm_rc rc = CM_OK;
    bool operand = false; /* the last item was a phrase or ')' */
    buf ph = BUF_INIT, q1 = BUF_INIT;
    *nphrase = 0;
    for (const char *c = m; *c && !rc;) {
        if (*c == ' ') {
            c++;
        } else if (*c == '(' || *c == ')') {
            if (*c == '(' && operand) rc = cm_buf_adds(tsq, " & ");
            if (!rc) rc = cm_buf_addc(tsq, *c);
            operand = *c == ')';
            c++;
        } else if (strncmp(c, "AND ", 4) == 0 || strncmp(c, "OR ", 3) == 0 ||
                   strncmp(c, "NOT ", 4) == 0) {
            rc = cm_buf_adds(tsq, *c == 'A' ? " & " : *c == 'O' ? " | " : " & !");
            c += *c == 'O' ? 3 : 4;
            operand = false;
        } else if (*c == '"') {
            cm_buf_reset(&ph);
            for (c++; *c && !rc; c++) {
                if (*c == '"' && c[1] == '"') {
                    rc = cm_buf_addc(&ph, '"');
                    c++;
                } else if (*c == '"') {
                    c++;
                    break;
                } else {
                    rc = cm_buf_addc(&ph, *c);
                }
            }
            bool prefix = *c == '*';
            if (prefix) c++;
            cm_buf_reset(&q1);
            if (s->pg->lexer) { /* lexed here: a tsquery literal */
                if (!rc) rc = cm_store_pg_lex_query(s, ph.data, ph.len, prefix, &q1);
            } else {
                if (!rc) rc = cm_buf_addc(&q1, '\'');
                for (size_t i = 0; !rc && i < ph.len; i++) {
                    char ch = ph.data[i];
                    if (ch == '\'' || ch == '\\') rc = cm_buf_addc(&q1, ch);
                    if (!rc) rc = cm_buf_addc(&q1, ch);
                }
                if (!rc) rc = cm_buf_adds(&q1, prefix ? "':*" : "'");
            }
            if (!rc && operand) rc = cm_buf_adds(tsq, " & ");
            if (!rc) rc = cm_buf_add(tsq, q1.data, q1.len);
            if (!rc) rc = cm_store_pg_array_elem(aq, q1.data, q1.len);
            if (!rc && tor->len) rc = cm_buf_adds(tor, " | ");
            if (!rc) rc = cm_buf_add(tor, q1.data, q1.len);
            operand = true;
            (*nphrase)++;
        } else {
            c++; /* nothing else is written by query.c */
        }
    }
    if (!rc && *nphrase) rc = cm_buf_addc(aq, '}');
    cm_buf_release(&ph);
    cm_buf_release(&q1);
    return rc;
}

#define STR_(x) #x
#define STR(x)  STR_(x)

/* cm_bm25 in SQL, one prepared statement (a generic plan: nothing planned
 * per search). The query's tsqueries are made once (qq, php). One scan of
 * the keyword index (its condition an expression of the parameters, not a
 * column of qq: the planner uses an index only for the former) fetches the
 * agent's chunks that hold any phrase of the query (u; hit: those that
 * match the AND query, hito: the OR query $7, tested only when it is not
 * the OR of the phrases $3, which every chunk of u matches; without $7 the
 * OR hits are never the answer). Every chunk with a phrase is among them,
 * so each phrase's document frequency (its IDF: Robertson–Spärck Jones', at least
 * FTS_RANK_IDF_FLOOR, N at least FTS_RANK_MIN_ROWS) is counted there (a
 * match test per chunk and phrase) rather than by an index scan of its own.
 * A chunk's score does not depend on which query found it, so the AND hits
 * are ranked among the OR hits exactly as alone: the AND hits are the
 * answer when there are at least $5 of them (o), else the OR hits (the
 * store's second pass, in the same statement), and only the answer's chunks
 * get each phrase's frequency (tf): ts_rank_cd with every weight 1 and no
 * normalisation, where each cover of the phrase (an occurrence; for a
 * prefix, of any lexeme it starts) adds exactly 1, so it counts FTS5's
 * phrase instances, in C (0: the chunk lacks the phrase), and costs more
 * than the match test (docs/BENCHMARKS.md). A phrase of one lexeme without
 * a prefix (php.one: most phrases) takes ts_rank instead, several times
 * cheaper: with every weight 1 it is H(n) / (pi^2 / 6) for the lexeme's n
 * positions, H(n) = 1 + 1/4 + ... + 1/n^2; as pi^2 / 6 - H(n) = 1/n -
 * 1/(2n^2) + ..., n = round(1 / (pi^2 / 6 * (1 - rank)) - 1/2), the same
 * count (a tsvector keeps at most 256 positions of a lexeme: up to there
 * the float's error moves the value by less than 0.06; 0 when absent).
 * Then BM25 with k1 1.2, b 0.75
 * over the chunk's token count (at least FTS_RANK_LENGTH_FLOOR of the
 * average), and the coverage penalty of 6. Each row
 * also carries whether the OR hits answered and the agent's data version. */
#define SEARCH_SQL(TQ, QT)                                                                         \
    "WITH php AS MATERIALIZED (SELECT t.i, q, numnode(q) = 1 AND right(q::text, 1) = '''' AS one " \
    "FROM unnest($2::text[]) WITH ORDINALITY AS t(s, i) "                                          \
    "CROSS JOIN LATERAL (SELECT " TQ "t.s" QT " AS q) x WHERE numnode(q) > 0), "                   \
    "qq AS MATERIALIZED (SELECT " TQ "$4::text" QT " AS qand, " TQ                                 \
    "coalesce($7::text, $4::text)" QT " AS qorx), "                                                \
    "st AS MATERIALIZED (SELECT greatest(nchunks, " STR(FTS_RANK_MIN_ROWS) ")::float8 AS n, "      \
    "CASE WHEN nchunks > 0 AND ntok > 0 THEN ntok::float8 / nchunks ELSE 1 END AS avgdl, "         \
    "version FROM clawmem_agents WHERE agent_id = $1::text), "                                     \
    "u AS MATERIALIZED (SELECT c.id, c.ntok, c.tsv, c.tsv @@ qq.qand AS hit, $7::text IS NULL "   \
    "OR $7::text = $3::text OR c.tsv @@ qq.qorx AS hito FROM clawmem_chunks c, qq WHERE "          \
    "c.agent_id = $1::text AND c.tsv @@ " TQ "$3::text" QT "), "                                   \
    "o AS MATERIALIZED (SELECT $7::text IS NOT NULL AND count(*) FILTER (WHERE hit) < $5::int "   \
    "AS orp FROM u), "                                                                             \
    "idf AS MATERIALIZED (SELECT php.i, greatest(" STR(FTS_RANK_IDF_FLOOR) ", ln((st.n - x.n + "   \
    "0.5) / (x.n + 0.5))) AS idf FROM php CROSS JOIN st CROSS JOIN LATERAL (SELECT "               \
    "count(*)::float8 AS n FROM u WHERE u.tsv @@ php.q) x), "                                      \
    "tf AS MATERIALIZED (SELECT u.id, u.ntok, php.i, CASE WHEN php.one THEN round(1 / ("           \
    "1.64493406685 * (1 - ts_rank('{1,1,1,1}', u.tsv, php.q, 0)::float8)) - 0.5) ELSE "            \
    "ts_rank_cd('{1,1,1,1}', u.tsv, php.q, 0)::float8 END AS tf FROM u CROSS JOIN o CROSS JOIN "   \
    "php WHERE u.hit OR (o.orp AND u.hito)), "                                                     \
    "sc AS MATERIALIZED (SELECT tf.id, sum(CASE WHEN tf.tf > 0 THEN idf.idf * tf.tf * 2.2 / "      \
    "(tf.tf + 1.2 * (0.25 + 0.75 * greatest(tf.ntok / st.avgdl, "                                  \
    STR(FTS_RANK_LENGTH_FLOOR) "))) ELSE 0 END) AS s, sum(CASE WHEN tf.tf > "                      \
    "0 THEN idf.idf ELSE 0 END) AS have, sum(idf.idf) AS alli FROM tf JOIN idf ON idf.i = tf.i "   \
    "CROSS JOIN st GROUP BY tf.id), "                                                              \
    "r AS (SELECT id, CASE WHEN alli > 0 AND have < alli THEN greatest(s - 6 * (1 - have / "       \
    "alli), s * 0.001) ELSE s END AS score FROM sc ORDER BY 2 DESC, id LIMIT $5::int) "            \
    "SELECT c.id, c.path, c.source, c.start_line, c.end_line, c.text, -r.score, CASE WHEN "        \
    "c.source = 'sessions' THEN c.updated_at * 1000000000 ELSE (SELECT f.mtime FROM "              \
    "clawmem_files f WHERE f.agent_id = $1::text AND f.path = c.path) END, o.orp, (SELECT "        \
    "version FROM st) FROM r JOIN clawmem_chunks c ON c.agent_id = $1::text AND c.id = r.id "      \
    "CROSS JOIN o ORDER BY r.score DESC, c.id"
/* The server's lexer: the query's text through to_tsquery with the agent's
 * configuration ($6); clawmem's (store_pg_lex.c): tsquery literals, $6 ''. */
static const char search_sql[] = SEARCH_SQL("to_tsquery($6::regconfig, ", ")");
static const char search_lex_sql[] = SEARCH_SQL("(", " || $6::text)::tsquery");

/* The same search for a query of exactly k phrases (most queries), with
 * each phrase's tsquery, IDF and frequency a column rather than a row: one
 * row per chunk from the scan to the ranking, no rows per (chunk, phrase)
 * to join, sort and group, and no tsvector carried past the scan (both cost
 * more than the ranking functions, docs/BENCHMARKS.md). qq holds the
 * phrases' tsqueries (e: non-empty; an empty phrase has no IDF and no
 * frequency, as one dropped from php above; o: one lexeme without a
 * prefix). The scan (u) computes each matching chunk's frequency of each
 * phrase at once, the same values as tf above: ts_rank's count, which is 0
 * exactly when the chunk lacks the lexeme, so it is also the match test the
 * document frequency needs; ts_rank_cd, dearer, only for a chunk that
 * matches its phrase. a counts the AND hits and each phrase's document
 * frequency over u (its IDF), and the answer's scores are summed in the
 * phrases' order, as cm_bm25 does (the statement above sums in whatever
 * order its grouping meets the rows). The length normalisation is taken in
 * float8 (0.75 times an integer is exact in either type; in numeric it was
 * numeric arithmetic and a conversion through text per chunk). Written
 * into b (replaced); lex: the phrases are tsquery literals (search_lex_sql's
 * form). The OFFSET 0s keep a subquery whole (pulled up, its expressions
 * would be copied into each use and computed again). */
static cm_rc flat_sql(buf *b, int k, bool lex)
{
    const char *tq = lex ? "(" : "to_tsquery($6::regconfig, ";
    const char *qt = lex ? " || $6::text)::tsquery" : ")";
    cm_buf_reset(b);
    cm_rc rc = cm_buf_adds(b, "WITH qq AS MATERIALIZED (SELECT x.*");
    for (int i = 1; !rc && i <= k; i++)
        rc = cm_buf_printf(b,
                           ", numnode(x.q%d) > 0 AS e%d, numnode(x.q%d) = 1 AND right(x.q%d::text, "
                           "1) = '''' AS o%d",
                           i, i, i, i, i);
    if (!rc) rc = cm_buf_adds(b, " FROM (SELECT ");
    for (int i = 1; !rc && i <= k; i++)
        rc = cm_buf_printf(b, "%s($2::text[])[%d]%s AS q%d, ", tq, i, qt, i);
    if (!rc)
        rc = cm_buf_printf(b,
                           "%s$4::text%s AS qand, %scoalesce($7::text, $4::text)%s AS qorx OFFSET "
                           "0) x), ",
                           tq, qt, tq, qt);
    if (!rc)
        rc = cm_buf_adds(b, "st AS MATERIALIZED (SELECT greatest(nchunks, " STR(
                                FTS_RANK_MIN_ROWS) ")::float8 AS n, CASE WHEN nchunks > 0 AND "
                                                   "ntok > 0 THEN ntok::float8 / nchunks ELSE 1 "
                                                   "END AS avgdl, version FROM clawmem_agents "
                                                   "WHERE agent_id = $1::text), ");
    if (!rc)
        rc = cm_buf_adds(b, "u AS MATERIALIZED (SELECT c.id, c.ntok, c.tsv @@ qq.qand AS hit, "
                            "$7::text IS NULL OR $7::text = $3::text OR c.tsv @@ qq.qorx AS hito");
    for (int i = 1; !rc && i <= k; i++)
        rc =
            cm_buf_printf(b,
                          ", CASE WHEN NOT qq.e%d THEN 0 WHEN qq.o%d THEN round(1 / (1.64493406685 "
                          "* (1 - ts_rank('{1,1,1,1}', c.tsv, qq.q%d, 0)::float8)) - 0.5) WHEN "
                          "c.tsv @@ qq.q%d THEN ts_rank_cd('{1,1,1,1}', c.tsv, qq.q%d, 0)::float8 "
                          "ELSE 0 END AS f%d",
                          i, i, i, i, i, i);
    if (!rc)
        rc = cm_buf_printf(b,
                           " FROM clawmem_chunks c, qq WHERE c.agent_id = $1::text AND c.tsv @@ "
                           "%s$3::text%s), "
                           "a AS MATERIALIZED (SELECT $7::text IS NOT NULL AND x.nh < $5::int AS "
                           "orp",
                           tq, qt);
    for (int i = 1; !rc && i <= k; i++)
        rc = cm_buf_printf(
            b,
            ", CASE WHEN qq.e%d THEN greatest(" STR(
                FTS_RANK_IDF_FLOOR) ", ln((st.n "
                                    "- x.n%d + 0.5) / (x.n%d + 0.5))) ELSE 0 END AS i%d",
            i, i, i, i);
    if (!rc) rc = cm_buf_adds(b, " FROM (SELECT count(*) FILTER (WHERE u.hit) AS nh");
    for (int i = 1; !rc && i <= k; i++)
        rc = cm_buf_printf(b, ", (count(*) FILTER (WHERE u.f%d > 0))::float8 AS n%d", i, i);
    if (!rc)
        rc = cm_buf_adds(b, " FROM u) x CROSS JOIN qq CROSS JOIN st), "
                            "r AS (SELECT y.id, CASE WHEN y.alli > 0 AND y.have < y.alli THEN "
                            "greatest(y.s - 6 * (1 - y.have / y.alli), y.s * 0.001) ELSE y.s END "
                            "AS score FROM (SELECT t.id, ");
    for (int i = 1; !rc && i <= k; i++)
        rc = cm_buf_printf(b,
                           "%s(CASE WHEN t.f%d > 0 THEN a.i%d * t.f%d * 2.2 / (t.f%d + t.nm) ELSE "
                           "0 END)",
                           i > 1 ? " + " : "", i, i, i, i);
    if (!rc) rc = cm_buf_adds(b, " AS s, ");
    for (int i = 1; !rc && i <= k; i++)
        rc = cm_buf_printf(b, "%s(CASE WHEN t.f%d > 0 THEN a.i%d ELSE 0 END)", i > 1 ? " + " : "",
                           i, i);
    if (!rc) rc = cm_buf_adds(b, " AS have, ");
    for (int i = 1; !rc && i <= k; i++)
        rc = cm_buf_printf(b, "%sa.i%d", i > 1 ? " + " : "", i);
    if (!rc)
        rc = cm_buf_adds(
            b,
            " AS alli FROM (SELECT u.*, 1.2 * (0.25 + 0.75 * greatest(u.ntok::float8 / st.avgdl, "
            STR(FTS_RANK_LENGTH_FLOOR) ")) AS nm "
            "FROM u CROSS JOIN a CROSS JOIN st WHERE u.hit OR (a.orp AND u.hito) OFFSET 0) t "
            "CROSS JOIN a OFFSET 0) y ORDER BY 2 DESC, 1 LIMIT $5::int) "
            "SELECT c.id, c.path, c.source, c.start_line, c.end_line, c.text, -r.score, CASE WHEN "
            "c.source = 'sessions' THEN c.updated_at * 1000000000 ELSE (SELECT f.mtime FROM "
            "clawmem_files f WHERE f.agent_id = $1::text AND f.path = c.path) END, a.orp, (SELECT "
            "version FROM st) FROM r JOIN clawmem_chunks c ON c.agent_id = $1::text AND c.id = "
            "r.id CROSS JOIN a ORDER BY r.score DESC, c.id");
    return rc;
}

static const char hit_sql[] =
    "SELECT c.id, c.path, c.source, c.start_line, c.end_line, c.text, 0, CASE WHEN c.source = "
    "'sessions' THEN c.updated_at * 1000000000 ELSE (SELECT f.mtime FROM clawmem_files f WHERE "
    "f.agent_id = $1 AND f.path = c.path) END FROM clawmem_chunks c WHERE c.agent_id = $1 AND "
    "c.id = $2";

/* Reads row i of r (the columns of search_sql) into h. */
static cm_rc hit_row(store *s, PGresult *r, int i, fts_hit *h, char *err, size_t errlen)
{
    memset(h, 0, sizeof *h);
    for (int k = 0; k < 8; k++)
        if (cm_store_pg_lib.getisnull(r, i, k))
            return cm_store_corrupt(s, "the chunks table", err, errlen);
    h->id = strtoll(cm_store_pg_lib.getvalue(r, i, 0), NULL, 10);
    h->start_line = (int)strtol(cm_store_pg_lib.getvalue(r, i, 3), NULL, 10);
    h->end_line = (int)strtol(cm_store_pg_lib.getvalue(r, i, 4), NULL, 10);
    h->rank = strtod(cm_store_pg_lib.getvalue(r, i, 6), NULL);
    h->mtime_ns = strtoll(cm_store_pg_lib.getvalue(r, i, 7), NULL, 10);
    return cm_store_hit_strings(h, cm_store_pg_lib.getvalue(r, i, 1),
                                cm_store_pg_lib.getvalue(r, i, 2),
                                cm_store_pg_lib.getvalue(r, i, 5), err, errlen);
}

cm_rc cm_store_pg_fts_search(store *s, const char *match, const char *or_match, int limit,
                             fts_hits *out, bool *used_or, char *err, size_t errlen)
{
    buf tsq = BUF_INIT, aq = BUF_INIT, tor = BUF_INIT;
    buf otsq = BUF_INIT, oaq = BUF_INIT, otor = BUF_INIT, flat = BUF_INIT;
    PGresult *r = NULL;
    int nphrase = 0, onphrase = 0;
    if (used_or) *used_or = false;
    cm_rc rc = translate(s, match, &tsq, &aq, &tor, &nphrase);
    /* the OR query's phrases are the AND query's: only its expression counts */
    if (!rc && or_match) rc = translate(s, or_match, &otsq, &oaq, &otor, &onphrase);
    if (rc || !nphrase) goto out;
    char lim[16];
    snprintf(lim, sizeof lim, "%d", limit);
    bool lex = s->pg->lexer;
    const char *pa[] = {s->pg->agent, aq.data, tor.data, tsq.data, lim, lex ? "" : s->pg->tsconfig,
                        or_match && onphrase ? otsq.data : NULL};
    int id = lex ? PG_STMT_SEARCH_LEX : PG_STMT_SEARCH;
    const char *sql = lex ? search_lex_sql : search_sql;
    if (nphrase <= PG_FLAT_MAX) { /* most queries: the statement of their phrase count */
        CHECK(flat_sql(&flat, nphrase, lex));
        id = PG_STMT_FLAT + (lex ? PG_FLAT_MAX : 0) + nphrase - 1;
        sql = flat.data;
    }
    rc = cm_store_pg_run_prepared(s, id, sql, 7, pa, "keyword search", &r, err, errlen);
    if (rc == CM_EDB) rc = CM_EINVAL; /* the query itself: a syntax error */
    if (rc) goto out;
    int n = cm_store_pg_lib.ntuples(r);
    if (n && used_or) *used_or = cm_store_pg_lib.getvalue(r, 0, 8)[0] == 't';
    if (n) cm_store_pg_saw_version(s, strtoll(cm_store_pg_lib.getvalue(r, 0, 9), NULL, 10));
    for (int i = 0; i < n; i++) {
        if (out->n == out->cap) {
            size_t cap = out->cap ? out->cap * 2 : 32;
            fts_hit *nv = realloc(out->v, cap * sizeof *nv);
            if (!nv) FAIL(CM_ENOMEM, "out of memory");
            out->v = nv;
            out->cap = cap;
        }
        CHECK(hit_row(s, r, i, out->v + out->n, err, errlen));
        out->n++;
    }
out:
    if (r) cm_store_pg_lib.clear(r);
    cm_buf_release(&tsq);
    cm_buf_release(&aq);
    cm_buf_release(&tor);
    cm_buf_release(&otsq);
    cm_buf_release(&oaq);
    cm_buf_release(&otor);
    cm_buf_release(&flat);
    return rc;
}

cm_rc cm_store_pg_chunk_get(store *s, int64_t id, fts_hit *out, char *err, size_t errlen)
{
    PGresult *r = NULL;
    char ids[32];
    snprintf(ids, sizeof ids, "%lld", (long long)id);
    const char *pa[] = {s->pg->agent, ids};
    memset(out, 0, sizeof *out);
    cm_rc rc = cm_store_pg_run(s, hit_sql, 2, pa, "read a chunk", &r, err, errlen);
    if (rc) return rc;
    if (!cm_store_pg_lib.ntuples(r))
        rc = cm_seterr(err, errlen, CM_ENOTFOUND, "chunk %lld is gone", (long long)id);
    else
        rc = hit_row(s, r, 0, out, err, errlen);
    cm_store_pg_lib.clear(r);
    return rc;
}
