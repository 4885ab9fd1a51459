/*
 * test_quality.c — the alternative hybrid merges of clawmem.hybridMerge
 * (docs/QUALITY.md): min-max normalised weighting and reciprocal-rank fusion,
 * the config key that picks them, the static provider's default merge, the
 * everyday-notes check of issue 30 and its irregular verbs.
 */
#include <jansson.h>

#include <unistd.h>
#include "../src/config/config.h"
#include "../src/embed/embed.h"
#include "../src/search/irregular.h"
#include "../src/search/rank.h"
#include "../src/search/typo.h"
#include "test.h"

static search_hit side(int64_t id, bool text, double score)
{
    search_hit h = {0};
    h.id = id;
    h.path = cm_strdup("memory/a.md");
    h.source = cm_strdup("memory");
    h.text = cm_strdup("x");
    h.has_text = text;
    h.has_vector = !text;
    if (text)
        h.text_score = score;
    else
        h.vector_score = score;
    return h;
}

static double score_of(const search_hit *v, size_t n, int64_t id)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].id == id) return v[i].score;
    return -1;
}

TEST(merge_minmax_normalises_each_side)
{
    /* keyword side 1, 2, 3; vector side 3, 4 (chunk 3 on both) */
    search_hit v[5] = {side(1, true, 0.95), side(2, true, 0.93), side(3, true, 0.90),
                       side(3, false, 0.8), side(4, false, 0.4)};
    size_t n = cm_rank_merge_minmax(v, 5, 0.2, 0.8);
    EXPECT_INT(n, 4);
    EXPECT_NEAR(score_of(v, n, 1), 0.8, 1e-9);       /* best keyword: 0.8 × 1 */
    EXPECT_NEAR(score_of(v, n, 2), 0.8 * 0.6, 1e-9); /* (0.93 − 0.90) / 0.05 */
    EXPECT_NEAR(score_of(v, n, 3), 0.2, 1e-9);       /* worst keyword, best vector */
    EXPECT_NEAR(score_of(v, n, 4), 0.0, 1e-9);
    for (size_t i = 0; i < n; i++) {
        if (v[i].id == 3) EXPECT_NEAR(v[i].text_score, 0.90, 1e-9); /* raw scores kept */
        cm_search_hit_release(&v[i]);
    }
    /* one hit on a side: it counts as that side's best */
    search_hit w[1] = {side(7, false, 0.3)};
    n = cm_rank_merge_minmax(w, 1, 0.5, 0.5);
    EXPECT_NEAR(w[0].score, 0.5, 1e-9);
    cm_search_hit_release(&w[0]);
}

TEST(merge_rrf_uses_ranks_only)
{
    /* keyword side 1, 2; vector side 2, 3: the scores themselves do not matter */
    search_hit v[4] = {side(1, true, 0.1), side(2, true, 0.05), side(2, false, 0.99),
                       side(3, false, 0.98)};
    size_t n = cm_rank_merge_rrf(v, 4, RANK_RRF_K, 0.5, 0.5);
    EXPECT_INT(n, 3);
    EXPECT_NEAR(score_of(v, n, 2), 0.5 * 61 / 62.0 + 0.5, 1e-9); /* 2nd keyword, 1st vector */
    EXPECT_NEAR(score_of(v, n, 1), 0.5, 1e-9);
    EXPECT_NEAR(score_of(v, n, 3), 0.5 * 61 / 62.0, 1e-9);
    for (size_t i = 0; i < n; i++)
        cm_search_hit_release(&v[i]);
}

TEST(config_hybrid_merge_key)
{
    cm_config c;
    char err[512];
    cm_config_args a = {NULL, NULL, NULL, "/tmp/qc-state"};
    EXPECT_INT(cm_config_parse(NULL, 0, "qc.json", &a, NULL, &c, err, sizeof err), CM_OK);
    EXPECT_INT(c.hybrid_merge, CM_MERGE_WEIGHTED); /* QuantumClaw's merge by default */
    cm_config_release(&c);
    const char *ok[] = {"{clawmem:{hybridMerge:'minmax'}}", "{clawmem:{hybridMerge:'rrf'}}",
                        "{clawmem:{hybridMerge:'weighted'}}"};
    const cm_merge want[] = {CM_MERGE_MINMAX, CM_MERGE_RRF, CM_MERGE_WEIGHTED};
    for (int i = 0; i < 3; i++) {
        EXPECT_INT(cm_config_parse(ok[i], strlen(ok[i]), "qc.json", &a, NULL, &c, err, sizeof err),
                   CM_OK);
        EXPECT_INT(c.hybrid_merge, want[i]);
        cm_config_release(&c);
    }
    const char *bad = "{clawmem:{hybridMerge:'max'}}";
    EXPECT(cm_config_parse(bad, strlen(bad), "qc.json", &a, NULL, &c, err, sizeof err) != CM_OK);
    EXPECT_CONTAINS(err, "clawmem.hybridMerge");
}

TEST(config_static_provider_defaults_to_minmax)
{
    /* provider "static" alone: minmax at the weight make eval found best */
    cm_config c;
    char err[512];
    cm_config_args a = {NULL, NULL, NULL, "/tmp/qc-state"};
    const char *st = "{agents:{defaults:{memorySearch:{provider:'static'}}}}";
    EXPECT_INT(cm_config_parse(st, strlen(st), "qc.json", &a, NULL, &c, err, sizeof err), CM_OK);
    EXPECT_INT(c.hybrid_merge, CM_MERGE_MINMAX);
    EXPECT_NEAR(c.vector_weight, CM_STATIC_VECTOR_WEIGHT, 1e-12);
    EXPECT_NEAR(c.text_weight, 1 - CM_STATIC_VECTOR_WEIGHT, 1e-12);
    cm_config_release(&c);
    /* the user's merge wins, with QuantumClaw's weights */
    st = "{agents:{defaults:{memorySearch:{provider:'static'}}},clawmem:{hybridMerge:'weighted'}}";
    EXPECT_INT(cm_config_parse(st, strlen(st), "qc.json", &a, NULL, &c, err, sizeof err), CM_OK);
    EXPECT_INT(c.hybrid_merge, CM_MERGE_WEIGHTED);
    EXPECT_NEAR(c.vector_weight, 0.7, 1e-12);
    cm_config_release(&c);
    /* so do the user's weights, even QuantumClaw's own: QuantumClaw's merge */
    st = "{agents:{defaults:{memorySearch:{provider:'static',query:{hybrid:{vectorWeight:0.7}}}}}}";
    EXPECT_INT(cm_config_parse(st, strlen(st), "qc.json", &a, NULL, &c, err, sizeof err), CM_OK);
    EXPECT_INT(c.hybrid_merge, CM_MERGE_WEIGHTED);
    EXPECT_NEAR(c.vector_weight, 0.7, 1e-12);
    EXPECT_NEAR(c.text_weight, 0.3, 1e-12);
    cm_config_release(&c);
    st = "{agents:{defaults:{memorySearch:{provider:'static',query:{hybrid:{textWeight:0.5}}}}}}";
    EXPECT_INT(cm_config_parse(st, strlen(st), "qc.json", &a, NULL, &c, err, sizeof err), CM_OK);
    EXPECT_INT(c.hybrid_merge, CM_MERGE_WEIGHTED);
    EXPECT_NEAR(c.vector_weight, 0.7 / 1.2, 1e-12); /* the unset weight keeps its default */
    cm_config_release(&c);
    /* other providers keep QuantumClaw's merge and weights */
    st = "{agents:{defaults:{memorySearch:{provider:'openai'}}}}";
    EXPECT_INT(cm_config_parse(st, strlen(st), "qc.json", &a, NULL, &c, err, sizeof err), CM_OK);
    EXPECT_INT(c.hybrid_merge, CM_MERGE_WEIGHTED);
    EXPECT_NEAR(c.vector_weight, 0.7, 1e-12);
    cm_config_release(&c);
}

/* Issue 30's user-level check: a small workspace of everyday notes and
 * questions worded differently from them (allergies / allergic, wifi /
 * Wi-Fi, vehicle / car, "when is Maya coming" / arrives); with the default
 * configuration and the static model `make` installs, the note that answers
 * must come first. */
TEST(quality_everyday_notes_answer_paraphrased_questions)
{
    char *d = tmp_dir();
    write_file(d, "qc.json", "{}\n");
    write_file(d, "ws/MEMORY.md", "# Memory\n");
    write_file(d, "ws/memory/2026-11-20.md", "Maya arrives on Friday at 6pm; pick her up at the station.\n");
    write_file(d, "ws/memory/2026-11-21.md", "Maya is allergic to peanuts, so no satay at the dinner party.\n");
    write_file(d, "ws/memory/cabin.md", "The Wi-Fi password at the cabin is bluefern42.\n");
    write_file(d, "ws/memory/parking.md", "Parked the car on level 3 of the airport garage, row F.\n");
    write_file(d, "ws/memory/maya.md", "Maya loves chess and long walks by the river with her dog.\n");
    write_file(d, "ws/memory/bank.md", "Online banking password changes every ninety days.\n");
    write_file(d, "ws/memory/shopping.md", "Buy peanut butter, bread and coffee.\n");
    static const char *const qa[][2] = {
        {"does maya have any allergies", "memory/2026-11-21.md"},
        {"peanut allergies", "memory/2026-11-21.md"},
        {"wifi password", "memory/cabin.md"},
        {"what is the wi-fi password", "memory/cabin.md"},
        {"where did I leave the vehicle", "memory/parking.md"},
        {"when is Maya coming", "memory/2026-11-20.md"},
    };
    cm_options o = {NULL, path_in(d, "ws"), path_in(d, "qc.json"), path_in(d, "state"), NULL, NULL, 0};
    cm_engine *e = NULL;
    char err[512];
    EXPECT_INT(cm_engine_open(&o, &e, err, sizeof err), CM_OK);
    {
        cm_config c = {0}; /* only the model's lookup: the state dir, then beside the program */
        c.state_dir = (char *)path_in(d, "state");
        char *model = cm_embed_static_path(&c);
        int have = model && access(model, F_OK) == 0;
        cm_free(model);
        if (!have) {
            cm_engine_close(e);
            SKIP("static", "the static model is not installed (make static-model)");
        }
    }
    EXPECT_INT(cm_engine_sync(e, 0, NULL, NULL, NULL, err, sizeof err), CM_OK);
    for (size_t i = 0; i < sizeof qa / sizeof *qa; i++) {
        char *js = NULL;
        cm_search_opts so = {6, -1, 0}; /* the default minScore */
        EXPECT_INT(cm_memory_search(e, qa[i][0], &so, &js, err, sizeof err), CM_OK);
        json_t *p = json_loads(js ? js : "{}", 0, NULL);
        const char *first = json_string_value(
            json_object_get(json_array_get(json_object_get(p, "results"), 0), "path"));
        if (!first || strcmp(first, qa[i][1]) != 0)
            fprintf(stderr, "  %s: first %s, want %s\n", qa[i][0], first ? first : "(none)",
                    qa[i][1]);
        EXPECT(first && strcmp(first, qa[i][1]) == 0);
        json_decref(p);
        cm_free(js);
    }
    cm_engine_close(e);
}

TEST(quality_irregular_forms_table)
{
    const char *f[3];
    EXPECT_INT((int)cm_irregular_forms("win", 3, f, 3), 1);
    EXPECT_STR(f[0], "won");
    EXPECT_INT((int)cm_irregular_forms("bought", 6, f, 3), 1);
    EXPECT_STR(f[0], "buy");
    EXPECT_INT((int)cm_irregular_forms("went", 4, f, 3), 2);
    EXPECT_STR(f[0], "go");
    EXPECT_STR(f[1], "gone");
    EXPECT_INT((int)cm_irregular_forms("wen", 3, f, 3), 0); /* whole words only */
    EXPECT_INT((int)cm_irregular_forms("table", 5, f, 3), 0);
    EXPECT_INT((int)cm_irregular_forms("taken", 5, f, 1), 1); /* at most cap */
    EXPECT_STR(f[0], "take");
}

/* A question in the base form ("what did Dave buy") finds the note that
 * tells it in the past ("bought") above a note that only names Dave more
 * often: the verb's other forms join its keyword (docs/QUALITY.md, issue 30,
 * round 5). With the default configuration, with or without the static
 * model. */
TEST(quality_irregular_verb_finds_the_past_tense)
{
    char *d = tmp_dir();
    write_file(d, "qc.json", "{}\n");
    write_file(d, "ws/MEMORY.md", "# Memory\n");
    write_file(d, "ws/memory/camera.md", "Dave bought a vintage camera at the flea market.\n");
    write_file(d, "ws/memory/garage.md", "Dave fixed the van at Dave's garage with Dave's brother.\n");
    write_file(d, "ws/memory/chess.md", "Nate won the regional chess tournament on Friday.\n");
    write_file(d, "ws/memory/plans.md", "Nate and Nate's team travel to the tournament in May; Nate drives.\n");
    write_file(d, "ws/memory/misc.md", "Coffee beans, bread and milk for the weekend.\n");
    static const char *const qa[][2] = {
        {"what did Dave buy?", "memory/camera.md"},
        {"did Nate win the tournament", "memory/chess.md"},
    };
    cm_options o = {NULL, path_in(d, "ws"), path_in(d, "qc.json"), path_in(d, "state"), NULL, NULL, 0};
    cm_engine *e = NULL;
    char err[512];
    EXPECT_INT(cm_engine_open(&o, &e, err, sizeof err), CM_OK);
    EXPECT_INT(cm_engine_sync(e, 0, NULL, NULL, NULL, err, sizeof err), CM_OK);
    for (size_t i = 0; i < sizeof qa / sizeof *qa; i++) {
        char *js = NULL;
        cm_search_opts so = {6, 0, 0};
        EXPECT_INT(cm_memory_search(e, qa[i][0], &so, &js, err, sizeof err), CM_OK);
        json_t *p = json_loads(js ? js : "{}", 0, NULL);
        const char *first = json_string_value(
            json_object_get(json_array_get(json_object_get(p, "results"), 0), "path"));
        if (!first || strcmp(first, qa[i][1]) != 0)
            fprintf(stderr, "  %s: first %s, want %s\n", qa[i][0], first ? first : "(none)",
                    qa[i][1]);
        EXPECT(first && strcmp(first, qa[i][1]) == 0);
        json_decref(p);
        cm_free(js);
    }
    cm_engine_close(e);
}

/* Whether the space-terminated list l holds the word w. */
static bool has_word(const char *l, const char *w)
{
    size_t n = strlen(w);
    for (const char *p = l; p && *p; p = strchr(p, ' '), p = p ? p + 1 : p)
        if (!strncmp(p, w, n) && p[n] == ' ') return true;
    return false;
}

TEST(quality_typo_edits)
{
    buf b = BUF_INIT;
    size_t n = 0;
    EXPECT_INT(cm_typo_edits("abcde", 5, &b, &n), CM_OK);
    /* 5 deletions, 4 swaps, 5 × 25 replacements, 6 × 26 insertions, less repeats */
    EXPECT(n > 250 && n <= 5 + 4 + 125 + 156);
    EXPECT(has_word(b.data, "bacde"));  /* a swap */
    EXPECT(has_word(b.data, "abde"));   /* a deletion */
    EXPECT(has_word(b.data, "abxcde")); /* an insertion */
    EXPECT(has_word(b.data, "abcdz"));  /* a replacement */
    EXPECT(!has_word(b.data, "abcde")); /* not the word itself */
    cm_buf_release(&b);
    b = (buf)BUF_INIT;
    EXPECT_INT(cm_typo_edits("abcd", 4, &b, &n), CM_OK); /* too short */
    EXPECT_INT((int)n, 0);
    EXPECT_INT(cm_typo_edits("ab-cde", 6, &b, &n), CM_OK); /* not letters */
    EXPECT_INT((int)n, 0);
    cm_buf_release(&b);
}

/* A misspelled question ("educaton", "funraiser") finds the note that spells
 * the word right above notes that only name the person more often: a keyword
 * that neither the index nor the language knows gains the index's word one
 * edit away (docs/QUALITY.md, issue 30, round 6). */
TEST(quality_typo_finds_the_right_spelling)
{
    char *d = tmp_dir();
    write_file(d, "qc.json", "{}\n");
    write_file(d, "ws/MEMORY.md", "# Memory\n");
    write_file(d, "ws/memory/school.md", "Maria went back to night school to finish her education.\n");
    write_file(d, "ws/memory/trip.md", "Maria and Maria's sister drove to the coast; Maria loved it.\n");
    write_file(d, "ws/memory/charity.md", "Jon organised a fundraiser for the animal shelter.\n");
    write_file(d, "ws/memory/gym.md", "Jon and Jon's friend lift weights; Jon trains on Mondays.\n");
    write_file(d, "ws/memory/misc.md", "Coffee beans, bread and milk for the weekend.\n");
    static const char *const qa[][2] = {
        {"what did Maria say about her educaton?", "memory/school.md"},
        {"what was Jon's funraiser for", "memory/charity.md"},
    };
    cm_options o = {NULL, path_in(d, "ws"), path_in(d, "qc.json"), path_in(d, "state"), NULL, NULL, 0};
    cm_engine *e = NULL;
    char err[512];
    EXPECT_INT(cm_engine_open(&o, &e, err, sizeof err), CM_OK);
    EXPECT_INT(cm_engine_sync(e, 0, NULL, NULL, NULL, err, sizeof err), CM_OK);
    for (size_t i = 0; i < sizeof qa / sizeof *qa; i++) {
        char *js = NULL;
        cm_search_opts so = {6, 0, 0};
        EXPECT_INT(cm_memory_search(e, qa[i][0], &so, &js, err, sizeof err), CM_OK);
        json_t *p = json_loads(js ? js : "{}", 0, NULL);
        const char *first = json_string_value(
            json_object_get(json_array_get(json_object_get(p, "results"), 0), "path"));
        if (!first || strcmp(first, qa[i][1]) != 0)
            fprintf(stderr, "  %s: first %s, want %s\n", qa[i][0], first ? first : "(none)",
                    qa[i][1]);
        EXPECT(first && strcmp(first, qa[i][1]) == 0);
        json_decref(p);
        cm_free(js);
    }
    cm_engine_close(e);
}
