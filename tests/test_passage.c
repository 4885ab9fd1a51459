/*
 * test_passage.c — the best passage inside a keyword hit (src/search/passage.h):
 * the query's terms from its FTS5 expression, the best line's share of them,
 * sentences in long lines, and through the engine, a chunk whose single line
 * holds every keyword above one where they are scattered.
 */
#include <jansson.h>

#include "../include/clawmem.h"
#include "../src/search/passage.h"
#include "../src/search/query.h"
#include "test.h"

/* The passage terms of a user's query, through query.c as the engine does. */
static size_t terms_of(const char *query, query_join j, passage_terms *t)
{
    buf m = BUF_INIT;
    size_t n = 0;
    if (cm_query_build(query, strlen(query), false, j, &m, NULL) == CM_OK)
        n = cm_rank_passage_terms(m.data ? m.data : "", t);
    cm_buf_release(&m);
    return n;
}

TEST(passage_terms_from_the_query)
{
    passage_terms t;
    /* stop words never reach the expression; the rest are stemmed */
    EXPECT_INT(terms_of("When did Melanie sign up for pottery classes?", QUERY_AND, &t), 4);
    EXPECT_STR(t.term[0], "melani");
    EXPECT_STR(t.term[1], "sign");
    EXPECT_STR(t.term[3], "class");
    EXPECT_INT(terms_of("Melanie OR pottery", QUERY_OR, &t), 2);
    /* a CJK run (a phrase of bigrams) and a prefix phrase are left out */
    EXPECT_INT(cm_rank_passage_terms("\"東京 京都\" AND \"x\"* AND \"schema\"", &t), 1);
    EXPECT_STR(t.term[0], "schema");
    EXPECT_INT(cm_rank_passage_terms("", &t), 0);
    EXPECT_INT(cm_rank_passage_terms("\"unterminated", &t), 0);
}

TEST(passage_best_line_holds_the_keywords)
{
    passage_terms t;
    EXPECT_INT(terms_of("pottery class signed", QUERY_AND, &t), 3);
    const char *together = "**Caroline** (D1:1): hi there\n"
                           "**Melanie** (D1:2): I signed up for a pottery class!\n"
                           "**Caroline** (D1:3): nice\n";
    const char *scattered = "**Caroline** (D1:1): pottery is fun\n"
                            "**Melanie** (D1:2): which class?\n"
                            "**Caroline** (D1:3): I signed the form\n";
    EXPECT_NEAR(cm_rank_passage_best(together, &t, 0), 1.0, 1e-12);
    EXPECT_NEAR(cm_rank_passage_best(scattered, &t, 0), 1.0 / 3, 1e-12);
    /* stems meet: plural, -ing, -ed */
    EXPECT_NEAR(cm_rank_passage_best("Potteries and classes; signing.", &t, 0), 1.0, 1e-12);
    EXPECT_NEAR(cm_rank_passage_best("nothing here", &t, 0), 0.0, 1e-12);
    EXPECT_NEAR(cm_rank_passage_best("", &t, 0), 0.0, 1e-12);
    EXPECT_NEAR(cm_rank_passage_best(NULL, &t, 0), 0.0, 1e-12);
}

TEST(passage_sentences_split_long_lines_only)
{
    passage_terms t;
    EXPECT_INT(terms_of("vitamin deficiency fractures", QUERY_AND, &t), 3);
    /* one line (an abstract): whole, all three; split, at most two */
    const char *abstract = "Vitamin D was measured. Deficiency was common. Fractures were rare, "
                           "and vitamin levels did not predict them.";
    EXPECT_NEAR(cm_rank_passage_best(abstract, &t, 0), 1.0, 1e-12);
    EXPECT_NEAR(cm_rank_passage_best(abstract, &t, 40), 2.0 / 3, 1e-12);
    /* a line under the bound stays whole */
    EXPECT_NEAR(cm_rank_passage_best(abstract, &t, 400), 1.0, 1e-12);
    /* "3.5" and "e.g." do not end a sentence (no space after the dot) */
    EXPECT_NEAR(cm_rank_passage_best("vitamin 3.5 units, deficiency e.g.fractures", &t, 10), 1.0,
                1e-12);
}

/* ---- through the engine ---------------------------------------------------- */

static json_t *result(json_t *p, size_t i)
{
    return json_array_get(json_object_get(p, "results"), i);
}

TEST(search_keywords_on_one_line_beat_scattered)
{
    /* Two notes with the same words, so the same BM25: in one, a single line
     * holds every keyword; in the other (indexed first, the lower id, which
     * wins a tie) they are scattered over three lines. */
    const char *tok[] = {"porter", "unicode61"};
    for (int k = 0; k < 2; k++) {
        char *dir = tmp_dir(), ws[1024], state[1024], cfg[1024], js[256];
        snprintf(ws, sizeof ws, "%s/ws", dir);
        snprintf(state, sizeof state, "%s/state", dir);
        snprintf(cfg, sizeof cfg, "%s/config.json", dir);
        snprintf(js, sizeof js, "{agents:{defaults:{memorySearch:{store:{fts:{tokenizer:'%s'}}}}}}",
                 tok[k]);
        write_file(dir, "config.json", js);
        write_file(ws, "memory/2026-01-01.md",
                   "We talked about pottery today.\nThe class was full.\nMelanie "
                   "signed a form.\n");
        write_file(ws, "memory/2026-01-02.md",
                   "We talked about today.\nThe was full.\nMelanie signed a pottery class "
                   "form.\n");
        json_t *p = sync_search(ws, state, cfg, "When did Melanie sign up for the pottery class?");
        EXPECT(p != NULL);
        EXPECT_INT(json_array_size(json_object_get(p, "results")), 2);
        EXPECT_STR(json_string_value(json_object_get(result(p, 0), "path")),
                   "memory/2026-01-02.md");
        double s0 = json_number_value(json_object_get(result(p, 0), "score"));
        double s1 = json_number_value(json_object_get(result(p, 1), "score"));
        EXPECT(s0 > s1);
        json_decref(p);
        /* one keyword: every hit holds it on a line, nothing changes */
        p = sync_search(ws, state, cfg, "pottery");
        EXPECT(p != NULL);
        EXPECT_INT(json_array_size(json_object_get(p, "results")), 2);
        s0 = json_number_value(json_object_get(result(p, 0), "score"));
        s1 = json_number_value(json_object_get(result(p, 1), "score"));
        EXPECT_NEAR(s0, s1, 1e-12);
        json_decref(p);
    }
}
