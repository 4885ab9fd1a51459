/*
 * test_search.c — the FTS query builder and the ranking pipeline, with the
 * seeds' worked examples (MMR "home network setup", decay "Rod's work
 * schedule") as tests.
 */
#include <jansson.h>
#include <math.h>

#include "../include/clawmem.h"
#include "../src/search/query.h"
#include "../src/search/rank.h"
#include "test.h"

static const char *q(const char *s, bool trigram, query_join j)
{
    static buf b;
    cm_buf_reset(&b);
    cm_query_build(s, strlen(s), trigram, j, &b, NULL);
    return b.data;
}

TEST(query_tokens_are_quoted_and_joined)
{
    EXPECT_STR(q("what's Rod's work schedule?", false, QUERY_AND),
               "\"Rod\" AND \"work\" AND \"schedule\"");
    EXPECT_STR(q("memorySearch.query.hybrid", false, QUERY_OR),
               "\"memorySearch\" OR \"query\" OR \"hybrid\"");
    EXPECT_STR(q("\"); DROP TABLE chunks; --", false, QUERY_AND),
               "\"DROP\" AND \"TABLE\" AND \"chunks\"");
    EXPECT_STR(q("NEAR(x z) OR c*", false, QUERY_AND), /* "OR" is a stop word too */
               "\"NEAR\" AND \"x\" AND \"z\" AND \"c\"");
    EXPECT_STR(q("  ?!  ", false, QUERY_AND), "");
    EXPECT_STR(q("café naïve", false, QUERY_AND), "\"café\" AND \"naïve\"");
}

TEST(query_cjk_runs_become_bigram_phrases)
{
    EXPECT_STR(q("서울 회의", false, QUERY_AND), "\"서울\" AND \"회의\"");
    EXPECT_STR(q("向量数据库", false, QUERY_AND), "\"向量 量数 数据 据库\"");
    /* Japanese runs are cut where the script changes */
    EXPECT_STR(q("検索インデックス sqlite", false, QUERY_AND),
               "\"検索\" AND \"イン ンデ デッ ック クス\" AND \"sqlite\"");
    EXPECT_STR(q("书", false, QUERY_AND), "\"书\"*");
}

TEST(query_stop_words_never_make_a_hit)
{
    /* the question: only its keywords are searched */
    EXPECT_STR(q("what did we decide about the schema freeze?", false, QUERY_AND),
               "\"decide\" AND \"schema\" AND \"freeze\"");
    EXPECT_STR(q("What did we decide about the schema freeze?", false, QUERY_OR),
               "\"decide\" OR \"schema\" OR \"freeze\"");
    /* the other languages of QuantumClaw's lists */
    EXPECT_STR(q("¿Qué decidimos sobre el esquema?", false, QUERY_AND),
               "\"decidimos\" AND \"esquema\"");
    EXPECT_STR(q("o que você disse sobre o servidor", false, QUERY_AND),
               "\"disse\" AND \"servidor\"");
    /* duplicates differing in case count once */
    EXPECT_STR(q("Schema schema SCHEMA", false, QUERY_AND), "\"Schema\"");
}

/* In a question, the verbs that frame what was said are no keywords: "What
 * did Maya share with Tom?" asks for what she said, which the note tells
 * without the verb; elsewhere ("samba share", "how do I share a folder")
 * the verb is the subject. */
TEST(query_question_drops_speech_verbs)
{
    EXPECT_STR(q("What did Maya share with Tom?", false, QUERY_AND), "\"Maya\" AND \"Tom\"");
    EXPECT_STR(q("what does Gina say about the dancers", false, QUERY_OR),
               "\"Gina\" OR \"dancers\"");
    EXPECT_STR(q("Who did Evan describe the trip to, and what did he mention?", false, QUERY_AND),
               "\"Evan\" AND \"trip\"");
    /* "how" asks how to do the thing: the verb is the subject */
    EXPECT_STR(q("how do I share a folder", false, QUERY_AND), "\"share\" AND \"folder\"");
    EXPECT_STR(q("samba share config", false, QUERY_AND), "\"samba\" AND \"share\" AND \"config\"");
    EXPECT_STR(q("Maya told Tom about the trip", false, QUERY_AND),
               "\"Maya\" AND \"told\" AND \"Tom\" AND \"trip\"");
    EXPECT_STR(q("what did she say", false, QUERY_AND), /* stop words only: all of them */
               "\"what\" AND \"did\" AND \"she\" AND \"say\"");
}

TEST(query_of_stop_words_uses_them_all)
{
    size_t nt = 0;
    buf b = BUF_INIT;
    EXPECT_INT(cm_query_build("what is the", 11, false, QUERY_AND, &b, &nt), CM_OK);
    EXPECT_INT(nt, 3);
    EXPECT_STR(b.data, "\"what\" AND \"is\" AND \"the\"");
    cm_buf_release(&b);
    EXPECT_STR(q("The the THE", false, QUERY_OR), "\"The\"");
}

TEST(query_cjk_stop_words_and_particles)
{
    /* Chinese: cut around stop words and particles (QuantumClaw's example) */
    EXPECT_STR(q("之前讨论的那个方案", false, QUERY_AND), "\"讨论\" AND \"方案\"");
    /* Korean: a trailing particle is dropped, stop words are not keywords */
    EXPECT_STR(q("서울에서 회의를 오늘", false, QUERY_AND), "\"서울\" AND \"회의\"");
    /* Japanese: one-character hiragana is grammar */
    EXPECT_STR(q("東京の検索", false, QUERY_AND), "\"東京\" AND \"検索\"");
    /* a query of CJK stop words still answers */
    EXPECT_STR(q("什么", false, QUERY_AND), "\"什么\"");
}

TEST(query_trigram_drops_short_tokens)
{
    EXPECT_STR(q("a VLAN 10 router", true, QUERY_AND), "\"VLAN\" AND \"router\"");
    EXPECT_STR(q("東京都", true, QUERY_AND), "\"東京都\"");
}

/* A stand-in for the store's trigram vocabulary: "ai" → two trigrams. */
static cm_rc fake_expand(void *ctx, const char *term, size_t len, buf *out)
{
    (*(int *)ctx)++;
    if (len == 2 && memcmp(term, "ai", 2) == 0) return cm_buf_adds(out, "(\"ai \" OR \"air\")");
    return CM_OK;
}

TEST(query_trigram_short_terms_are_expanded)
{
    buf b = BUF_INIT;
    int calls = 0;
    size_t nt = 0;
    /* short terms go to the expander lower-cased; long ones are used as written */
    EXPECT_INT(cm_query_build_ex("AI router", 9, true, QUERY_AND, fake_expand, &calls, &b, &nt),
               CM_OK);
    EXPECT_STR(b.data, "(\"ai \" OR \"air\") AND \"router\"");
    EXPECT_INT(calls, 1);
    EXPECT_INT(nt, 2);
    /* no trigram starts with it: the term as written, which matches nothing */
    cm_buf_reset(&b);
    EXPECT_INT(cm_query_build_ex("서울 회의실", strlen("서울 회의실"), true, QUERY_OR, fake_expand,
                                 &calls, &b, &nt),
               CM_OK);
    EXPECT_STR(b.data, "\"서울\" OR \"회의실\"");
    EXPECT_INT(calls, 2);
    cm_buf_release(&b);
}

TEST(query_long_input_is_bounded)
{
    buf b = BUF_INIT, big = BUF_INIT;
    for (int i = 0; i < 5000; i++)
        cm_buf_printf(&big, "w%d ", i);
    size_t nt = 0;
    EXPECT_INT(cm_query_build(big.data, big.len, false, QUERY_AND, &b, &nt), CM_OK);
    EXPECT_INT(nt, QUERY_MAX_TOKENS);
    cm_buf_release(&b);
    cm_buf_release(&big);
}

TEST(rank_bm25_to_score)
{
    EXPECT_NEAR(cm_rank_bm25_score(0), 1.0, 1e-12);
    EXPECT_NEAR(cm_rank_bm25_score(1), 0.5, 1e-12);
    EXPECT_NEAR(cm_rank_bm25_score(-1), 0.5, 1e-12);
    EXPECT_NEAR(cm_rank_bm25_score(-3), 0.75, 1e-12);
    EXPECT(cm_rank_bm25_score(-10) > cm_rank_bm25_score(-2)); /* more relevant, higher */
    EXPECT_NEAR(cm_rank_bm25_score(NAN), 0, 1e-12);
}

static search_hit hit(int64_t id, const char *path, const char *text, double score)
{
    search_hit h = {0};
    h.id = id;
    h.path = cm_strdup(path);
    h.source = cm_strdup("memory");
    h.text = cm_strdup(text);
    h.start_line = 1;
    h.end_line = 1;
    h.score = score;
    h.has_text = true;
    return h;
}

/* 2026-02-10 00:00 UTC */
#define FEB10 1770681600

TEST(rank_decay_matches_the_seed_example)
{
    /* "what's Rod's work schedule?" with halfLife 30, today Feb 10. */
    search_hit v[3] = {
        hit(1, "memory/2025-09-15.md", "Rod works Mon-Fri, standup at 10am, pairing at 2pm", 0.91),
        hit(2, "memory/2026-02-10.md", "Rod has standup at 14:15, 1:1 with Zeb at 14:45", 0.82),
        hit(3, "memory/2026-02-03.md", "Rod started new team, standup moved to 14:15", 0.80),
    };
    rank_opts o = {0.3, 0, 10, true, 30, FEB10, false, 0.7};
    size_t n = cm_rank_finish(v, 3, &o);
    EXPECT_INT(n, 3);
    EXPECT_STR(v[0].path, "memory/2026-02-10.md");
    EXPECT_NEAR(v[0].score, 0.82, 1e-9);
    EXPECT_STR(v[1].path, "memory/2026-02-03.md");
    EXPECT_NEAR(v[1].score, 0.80 * pow(0.5, 7.0 / 30), 1e-9); /* 0.68 */
    EXPECT_NEAR(v[1].score, 0.68, 0.005);
    EXPECT_STR(v[2].path, "memory/2025-09-15.md");
    EXPECT_NEAR(v[2].score, 0.91 * pow(0.5, 148.0 / 30), 1e-9); /* 0.03 */
    EXPECT_NEAR(v[2].score, 0.03, 0.005);
    for (size_t i = 0; i < n; i++)
        cm_search_hit_release(&v[i]);
}

TEST(rank_decay_multipliers)
{
    EXPECT_NEAR(cm_rank_decay_multiplier("memory/2026-01-11.md", 0, FEB10, 30), 0.5, 1e-9);
    EXPECT_NEAR(cm_rank_decay_multiplier("memory/2025-11-12.md", 0, FEB10, 30), 0.125, 1e-9);
    EXPECT_NEAR(cm_rank_decay_multiplier("MEMORY.md", 0, FEB10, 30), 1.0, 1e-12);
    EXPECT_NEAR(cm_rank_decay_multiplier("memory/network.md", 0, FEB10, 30), 1.0, 1e-12);
    EXPECT_NEAR(cm_rank_decay_multiplier("memory/projects/2025-01-01-notes.md", 0, FEB10, 30), 1.0,
                1e-12);
    /* outside memory/: from mtime, 30 days old */
    EXPECT_NEAR(cm_rank_decay_multiplier("../team/plan.md",
                                         (int64_t)(FEB10 - 30 * 86400) * 1000000000, FEB10, 30),
                0.5, 1e-9);
}

TEST(rank_mmr_matches_the_seed_example)
{
    /* "home network setup": the Feb 8 near-duplicate drops out of the top 3. */
    search_hit v[4] = {
        hit(1, "memory/2026-02-10.md", "Configured Omada router, set VLAN 10 for IoT devices",
            0.92),
        hit(2, "memory/2026-02-08.md", "Configured Omada router, moved IoT to VLAN 10", 0.89),
        hit(3, "memory/network.md", "Router: Omada ER605, AdGuard: 192.168.10.2, VLAN 10: IoT",
            0.85),
        hit(4, "memory/2026-02-05.md", "Set up AdGuard DNS on 192.168.10.2", 0.78),
    };
    rank_opts plain = {0.3, 0, 3, false, 30, FEB10, false, 0.7};
    search_hit w[4];
    for (int i = 0; i < 4; i++)
        w[i] = hit(v[i].id, v[i].path, v[i].text, v[i].score);
    size_t n = cm_rank_finish(w, 4, &plain);
    EXPECT_INT(n, 3);
    EXPECT_STR(w[1].path, "memory/2026-02-08.md"); /* without MMR the duplicate is 2nd */
    for (size_t i = 0; i < n; i++)
        cm_search_hit_release(&w[i]);

    rank_opts o = {0.3, 0, 3, false, 30, FEB10, true, 0.7};
    n = cm_rank_finish(v, 4, &o);
    EXPECT_INT(n, 3);
    /* The seed's top 3: Feb 10, network.md and the AdGuard note (MMR picks the
     * AdGuard note second: it shares least with Feb 10); the duplicate is gone. */
    EXPECT_STR(v[0].path, "memory/2026-02-10.md");
    EXPECT_STR(v[1].path, "memory/2026-02-05.md");
    EXPECT_STR(v[2].path, "memory/network.md");
    EXPECT_NEAR(v[1].score, 0.78, 1e-12); /* MMR reorders, it does not rescore */
    EXPECT_NEAR(v[2].score, 0.85, 1e-12);
    for (size_t i = 0; i < n; i++)
        cm_search_hit_release(&v[i]);
}

TEST(rank_mmr_lambda_one_is_pure_relevance)
{
    search_hit v[3] = {hit(1, "a.md", "same words here", 0.9),
                       hit(2, "b.md", "same words here", 0.8), hit(3, "c.md", "different", 0.1)};
    EXPECT_INT(cm_rank_mmr(v, 3, 1.0), CM_OK);
    EXPECT_INT(v[0].id, 1);
    EXPECT_INT(v[1].id, 2);
    EXPECT_INT(cm_rank_mmr(v, 3, 0.0), CM_OK);
    EXPECT_INT(v[0].id, 1);
    EXPECT_INT(v[1].id, 3); /* pure diversity: the duplicate goes last */
    for (int i = 0; i < 3; i++)
        cm_search_hit_release(&v[i]);
}

TEST(rank_jaccard_tokens)
{
    EXPECT_NEAR(cm_rank_jaccard("The Router", "router the"), 1.0, 1e-12);
    EXPECT_NEAR(cm_rank_jaccard("a b", "b c"), 1.0 / 3, 1e-12);
    EXPECT_NEAR(cm_rank_jaccard("東京", "京都"), 1.0 / 5, 1e-12); /* {東,京,東京} vs {京,都,京都} */
    EXPECT_NEAR(cm_rank_jaccard("", "x"), 0.0, 1e-12);
    EXPECT_NEAR(cm_rank_jaccard("dns on 192.168.10.2", "192.168.10.3 dns"), 1.0 / 4, 1e-12);
}

TEST(rank_min_score_and_second_chance)
{
    search_hit v[3] = {hit(1, "a.md", "a", 0.5), hit(2, "b.md", "b", 0.34),
                       hit(3, "c.md", "c", 0.2)};
    rank_opts o = {0.3, 0.35, 6, false, 30, FEB10, false, 0.7};
    size_t n = cm_rank_finish(v, 3, &o);
    EXPECT_INT(n, 1);
    EXPECT_INT(v[0].id, 1);
    cm_search_hit_release(&v[0]);
    /* nothing reaches 0.35: keyword hits get a second chance at min(0.35, 0.3) */
    search_hit w[3] = {hit(1, "a.md", "a", 0.32), hit(2, "b.md", "b", 0.31),
                       hit(3, "c.md", "c", 0.2)};
    w[1].has_text = false;
    n = cm_rank_finish(w, 3, &o);
    EXPECT_INT(n, 1);
    EXPECT_INT(w[0].id, 1);
    cm_search_hit_release(&w[0]);
    /* maxResults cuts */
    search_hit x[3] = {hit(1, "a.md", "a", 0.9), hit(2, "b.md", "b", 0.8),
                       hit(3, "c.md", "c", 0.7)};
    o.max_results = 2;
    n = cm_rank_finish(x, 3, &o);
    EXPECT_INT(n, 2);
    for (size_t i = 0; i < n; i++)
        cm_search_hit_release(&x[i]);
}

TEST(rank_spreads_hits_over_files)
{
    /* A file's second hit ranks as if 0.9 × its score: another file's best
     * hit close below it goes first; scores stay as they were. */
    search_hit v[4] = {hit(1, "memory/a.md", "one", 0.80), hit(2, "memory/a.md", "two", 0.76),
                       hit(3, "memory/b.md", "three", 0.74), hit(4, "memory/a.md", "four", 0.30)};
    rank_opts o = {0.3, 0.35, 6, false, 30, FEB10, false, 0.7};
    size_t n = cm_rank_finish(v, 4, &o);
    EXPECT_INT(n, 3); /* minScore applies to the scores themselves */
    EXPECT_INT(v[0].id, 1);
    EXPECT_INT(v[1].id, 3);
    EXPECT_INT(v[2].id, 2);
    EXPECT_NEAR(v[2].score, 0.76, 1e-12);
    for (size_t i = 0; i < n; i++)
        cm_search_hit_release(&v[i]);
    /* far enough ahead, the second hit keeps its place */
    search_hit w[3] = {hit(1, "memory/a.md", "one", 0.80), hit(2, "memory/a.md", "two", 0.79),
                       hit(3, "memory/b.md", "three", 0.60)};
    n = cm_rank_finish(w, 3, &o);
    EXPECT_INT(n, 3);
    EXPECT_INT(w[1].id, 2);
    for (size_t i = 0; i < n; i++)
        cm_search_hit_release(&w[i]);
    /* with MMR, MMR alone decides the order */
    search_hit x[3] = {hit(1, "memory/a.md", "alpha beta", 0.80),
                       hit(2, "memory/a.md", "gamma delta", 0.76),
                       hit(3, "memory/b.md", "epsilon zeta", 0.74)};
    o.mmr = true;
    o.mmr_lambda = 1.0;
    n = cm_rank_finish(x, 3, &o);
    EXPECT_INT(x[1].id, 2);
    for (size_t i = 0; i < n; i++)
        cm_search_hit_release(&x[i]);
}

/* ---- the query model through the engine ---------------------------------- */

typedef struct qenv {
    char *dir;
    char ws[1024], state[1024], cfg[1024];
} qenv;

static void qenv_init(qenv *e, const char *config)
{
    e->dir = tmp_dir();
    snprintf(e->ws, sizeof e->ws, "%s/ws", e->dir);
    snprintf(e->state, sizeof e->state, "%s/state", e->dir);
    snprintf(e->cfg, sizeof e->cfg, "%s/config.json", e->dir);
    write_file(e->dir, "config.json", config);
}

/* Syncs, then searches (minScore 0, 10 results); the payload or NULL. */
static json_t *qsearch(const qenv *e, const char *query)
{
    return sync_search(e->ws, e->state, e->cfg, query);
}

static const char *qpath(json_t *p, size_t i)
{
    json_t *r = json_array_get(json_object_get(p, "results"), i);
    return r ? json_string_value(json_object_get(r, "path")) : NULL;
}

static size_t qcount(json_t *p)
{
    return json_array_size(json_object_get(p, "results"));
}

TEST(search_stop_word_hits_never_come_first)
{
    /* The question: a note of stop words ("what", "the") used to rank
     * first, above the notes about the schema freeze. */
    const char *tok[] = {"porter", "unicode61", "trigram"};
    for (int t = 0; t < 3; t++) {
        char cfg[256];
        snprintf(cfg, sizeof cfg,
                 "{agents:{defaults:{memorySearch:{store:{fts:{tokenizer:'%s'}}}}}}", tok[t]);
        qenv e;
        qenv_init(&e, cfg);
        write_file(e.ws, "memory/2026-01-02.md",
                   "What the team said: the what and the why of it all, and what the plan is.\n");
        write_file(e.ws, "memory/2026-01-03.md",
                   "Decided: schema freeze starts Monday, no migrations.\n");
        write_file(e.ws, "memory/2026-01-04.md", "The schema has three tables.\n");
        json_t *p = qsearch(&e, "what did we decide about the schema freeze?");
        EXPECT(p != NULL);
        EXPECT(qcount(p) >= 1);
        if (t < 2)
            EXPECT_STR(qpath(p, 0), "memory/2026-01-03.md"); /* "decide" stems to "Decided" */
        else
            EXPECT(qpath(p, 0) && strcmp(qpath(p, 0), "memory/2026-01-02.md") != 0);
        /* the stop-word note is not a hit at all */
        for (size_t i = 0; i < qcount(p); i++)
            EXPECT(strcmp(qpath(p, i), "memory/2026-01-02.md") != 0);
        /* more keywords first: the freeze note above the note with "schema" only */
        json_decref(p);
        p = qsearch(&e, "schema freeze");
        EXPECT_INT(qcount(p), 2);
        EXPECT_STR(qpath(p, 0), "memory/2026-01-03.md");
        EXPECT_STR(qpath(p, 1), "memory/2026-01-04.md");
        json_decref(p);
        /* a query made only of stop words still answers */
        p = qsearch(&e, "what the");
        EXPECT(qcount(p) >= 1);
        EXPECT_STR(qpath(p, 0), "memory/2026-01-02.md");
        json_decref(p);
    }
}

TEST(search_trigram_short_terms_and_cjk)
{
    /* trigram drops nothing: AI, 서울, 検索 (under three characters) match as
     * substrings; CJK works the same with the default tokenizer */
    const char *tok[] = {"trigram", "porter"};
    for (int t = 0; t < 2; t++) {
        char cfg[256];
        snprintf(cfg, sizeof cfg,
                 "{agents:{defaults:{memorySearch:{store:{fts:{tokenizer:'%s'}}}}}}", tok[t]);
        qenv e;
        qenv_init(&e, cfg);
        write_file(e.ws, "memory/ai.md", "We use AI to rank notes.\n");
        write_file(e.ws, "memory/ko.md", "서울에서 회의를 했다.\n");
        write_file(e.ws, "memory/ja.md", "東京のチームと検索インデックスを設計した。\n");
        write_file(e.ws, "memory/zh.md", "我们讨论了向量数据库的方案。\n");
        write_file(e.ws, "memory/other.md", "Nothing to see here, only oranges.\n");
        static const char *const cases[][2] = {
            {"AI", "memory/ai.md"},
            {"서울", "memory/ko.md"},
            {"서울에서 회의", "memory/ko.md"},
            {"検索", "memory/ja.md"},
            {"東京の検索", "memory/ja.md"},
            {"之前讨论的那个方案", "memory/zh.md"},
        };
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
            json_t *p = qsearch(&e, cases[i][0]);
            EXPECT(p != NULL);
            if (qcount(p) < 1 || strcmp(qpath(p, 0), cases[i][1]) != 0) {
                test_fail(__FILE__, __LINE__, "%s, %s: first hit %s, want %s", tok[t], cases[i][0],
                          qpath(p, 0) ? qpath(p, 0) : "(none)", cases[i][1]);
                json_decref(p);
                return;
            }
            json_decref(p);
        }
    }
}

TEST(search_snippet_has_no_byte_order_mark)
{
    qenv e;
    qenv_init(&e, "{}");
    write_file(e.ws, "memory/bom.md", "\xEF\xBB\xBF# Freeze\nThe schema freeze starts Monday.\n");
    json_t *p = qsearch(&e, "freeze");
    EXPECT_INT(qcount(p), 1);
    json_t *r = json_array_get(json_object_get(p, "results"), 0);
    const char *snip = json_string_value(json_object_get(r, "snippet"));
    EXPECT(snip != NULL);
    EXPECT(strncmp(snip, "# Freeze", 8) == 0);
    EXPECT(strstr(snip, "\xEF\xBB\xBF") == NULL);
    EXPECT_INT(json_integer_value(json_object_get(r, "startLine")), 1);
    json_decref(p);
}
