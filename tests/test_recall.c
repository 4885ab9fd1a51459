/*
 * test_recall.c — issue 30's recall work: the query's variants grouped under
 * their keyword (query.h) and scored as groups by cm_bm25, the static
 * model's word families and nearest words, dates in a question (when.h)
 * against an injected clock, "when" questions, and the weak-result fallback.
 * The engine tests use a small model written here, so they do not depend on
 * the installed one (test_quality.c's everyday check does).
 */
#include <jansson.h>
#include <stdlib.h>

#include "../src/embed/static_model.h"
#include "../src/search/query.h"
#include "../src/search/when.h"
#include "test.h"

/* ---- the query's groups ------------------------------------------------ */

static size_t fake_variants(void *ctx, const char *kw, size_t len, query_variant *out, size_t cap)
{
    (void)ctx;
    (void)cap;
    if (len == 9 && !memcmp(kw, "allergies", 9)) {
        snprintf(out[0].text, sizeof out[0].text, "allergic");
        out[0].weight = 0.5;
        snprintf(out[1].text, sizeof out[1].text, "allergen");
        out[1].weight = 0.25;
        return 2;
    }
    if (len == 5 && !memcmp(kw, "wi fi", 5)) {
        snprintf(out[0].text, sizeof out[0].text, "wifi");
        out[0].weight = 0.5;
        return 1;
    }
    if (len == 4 && !memcmp(kw, "maya", 4)) { /* refused: a quote, weight 1 */
        snprintf(out[0].text, sizeof out[0].text, "a\"b");
        out[0].weight = 0.5;
        snprintf(out[1].text, sizeof out[1].text, "may");
        out[1].weight = 1;
        return 2;
    }
    return 0;
}

static void build(const char *q, query_join j, bool join_hyphens, buf *m, buf *w)
{
    cm_buf_reset(m);
    cm_buf_reset(w);
    query_opts o = {false, j, NULL, NULL, fake_variants, NULL, w, join_hyphens, false};
    size_t nt = 0;
    EXPECT_INT(cm_query_build_opts(q, strlen(q), &o, m, &nt), CM_OK);
}

/* The expression and weights of q with definitions on and no model. */
static void build_defs(const char *q, buf *m, buf *w)
{
    cm_buf_reset(m);
    cm_buf_reset(w);
    query_opts o = {false, QUERY_AND, NULL, NULL, NULL, NULL, w, false, true};
    EXPECT_INT(cm_query_build_opts(q, strlen(q), &o, m, NULL), CM_OK);
}

TEST(recall_query_joins_a_definition_and_its_acronym)
{
    buf m = BUF_INIT, w = BUF_INIT;
    build_defs("CRP after coronary artery bypass graft (CABG) surgery", &m, &w);
    EXPECT_STR(m.data, "\"CRP\" AND (\"coronary\" OR \"cabg\") AND (\"artery\" OR \"cabg\") AND "
                       "(\"bypass\" OR \"cabg\") AND (\"graft\" OR \"cabg\") AND "
                       "(\"CABG\" OR \"coronary artery bypass graft\") AND \"surgery\"");
    EXPECT_STR(w.data, "1 1 0.2 1 0.2 1 0.2 1 0.2 1 0.5 1");
    /* letters found inside words, stop words inside the long form */
    build_defs("AMP-activated protein kinase (AMPK) activation", &m, &w);
    EXPECT_STR(m.data, "(\"AMP\" OR \"ampk\") AND (\"activated\" OR \"ampk\") AND "
                       "(\"protein\" OR \"ampk\") AND (\"kinase\" OR \"ampk\") AND "
                       "(\"AMPK\" OR \"amp activated protein kinase\") AND \"activation\"");
    /* no definition: parentheses around a word its neighbours do not spell,
     * a lower-case word, or nothing before it: plain keywords, no weights */
    build_defs("blood pressure (CRP) levels", &m, &w);
    EXPECT_STR(m.data, "\"blood\" AND \"pressure\" AND \"CRP\" AND \"levels\"");
    EXPECT_STR(w.data ? w.data : "", "");
    build_defs("reactive oxygen species (ros)", &m, &w);
    EXPECT_STR(w.data ? w.data : "", "");
    build_defs("(ROS) species", &m, &w);
    EXPECT_STR(w.data ? w.data : "", "");
    cm_buf_release(&m);
    cm_buf_release(&w);
}

TEST(recall_query_groups_variants_under_their_keyword)
{
    buf m = BUF_INIT, w = BUF_INIT;
    build("does Maya have any allergies?", QUERY_AND, true, &m, &w);
    EXPECT_STR(m.data, "\"Maya\" AND (\"allergies\" OR \"allergic\" OR \"allergen\")");
    EXPECT_STR(w.data, "1 1 0.5 0.25");
    build("does Maya have any allergies?", QUERY_OR, true, &m, &w);
    EXPECT_STR(m.data, "\"Maya\" OR \"allergies\" OR \"allergic\" OR \"allergen\"");
    EXPECT_STR(w.data, "1 1 0.5 0.25");
    /* a hyphenated word is one keyword, the phrase of its parts */
    build("Wi-Fi password", QUERY_AND, true, &m, &w);
    EXPECT_STR(m.data, "(\"Wi Fi\" OR \"wifi\") AND \"password\"");
    EXPECT_STR(w.data, "1 0.5 1");
    build("Wi-Fi password", QUERY_AND, false, &m, &w); /* not joined: as before */
    EXPECT_STR(m.data, "\"Wi\" AND \"Fi\" AND \"password\"");
    EXPECT_STR(w.data ? w.data : "", "");
    /* no variant anywhere: the plain expression and no weights */
    build("router password", QUERY_AND, true, &m, &w);
    EXPECT_STR(m.data, "\"router\" AND \"password\"");
    EXPECT(!w.len);
    cm_buf_release(&m);
    cm_buf_release(&w);
}

/* ---- dates ------------------------------------------------------------ */

static void when_is(const char *q, int64_t today, const char *first, const char *last,
                    const char *rest)
{
    char r[256];
    when_range wr;
    bool found = cm_when_find(q, strlen(q), today, r, &wr);
    if (!first) {
        EXPECT(!found);
        return;
    }
    EXPECT(found);
    if (!found) return;
    char a[16], b[16];
    int y, m, d;
    cm_when_civil(wr.first, &y, &m, &d);
    snprintf(a, sizeof a, "%04d-%02d-%02d", y, m, d);
    cm_when_civil(wr.last, &y, &m, &d);
    snprintf(b, sizeof b, "%04d-%02d-%02d", y, m, d);
    EXPECT_STR(a, first);
    EXPECT_STR(b, last);
    if (rest) EXPECT_STR(r, rest);
}

TEST(recall_when_finds_dates_relative_to_today)
{
    int64_t t = cm_when_day(2026, 12, 1); /* a Tuesday */
    int y, m, d;
    cm_when_civil(t, &y, &m, &d);
    EXPECT(y == 2026 && m == 12 && d == 1);
    EXPECT_INT((int)cm_when_day(1970, 1, 1), 0);
    when_is("what did I decide last Tuesday", t, "2026-11-24", "2026-11-24",
            "what did I decide             ");
    when_is("what did I decide on Tuesday?", t, "2026-11-24", "2026-11-24", NULL);
    when_is("what did we agree on Friday", t, "2026-11-27", "2026-11-27", NULL);
    when_is("what happened yesterday", t, "2026-11-30", "2026-11-30", "what happened          ");
    when_is("the day before yesterday", t, "2026-11-29", "2026-11-29", NULL);
    when_is("notes from today", t, "2026-12-01", "2026-12-01", NULL);
    when_is("what did I buy last week", t, "2026-11-23", "2026-11-29", NULL);
    when_is("plans this week", t, "2026-11-30", "2026-12-01", NULL);
    when_is("3 days ago", t, "2026-11-28", "2026-11-28", NULL);
    when_is("what was decided in March", t, "2026-03-01", "2026-03-31", NULL);
    when_is("budget in December", t, "2026-12-01", "2026-12-01", NULL); /* no later than today */
    when_is("budget in January", t, "2026-01-01", "2026-01-31", NULL);
    when_is("in November 2024", t, "2024-11-01", "2024-11-30", NULL);
    when_is("what did Maya say on May 4", t, "2026-05-04", "2026-05-04", NULL);
    when_is("the 4th of May", t, "2026-05-04", "2026-05-04", NULL);
    when_is("last month", t, "2026-11-01", "2026-11-30", NULL);
    when_is("the notes of 2026-11-20 please", t, "2026-11-20", "2026-11-20",
            "the notes of            please");
    when_is("¿qué pasó ayer?", t, "2026-11-30", "2026-11-30", NULL);
    when_is("o que decidimos na segunda-feira", t, "2026-11-30", "2026-11-30", NULL);
    when_is("la semana pasada", t, "2026-11-23", "2026-11-29", NULL);
    when_is("en marzo", t, "2026-03-01", "2026-03-31", NULL);
    /* not dates: "may" the verb, a short month alone, a day in the future */
    when_is("it may rain", t, NULL, NULL, NULL);
    when_is("mar a lago", t, NULL, NULL, NULL);
    when_is("what is on next Friday", t, NULL, NULL, NULL);
    when_is("the notes of 2027-01-02", t, NULL, NULL, NULL);
    when_is("router password", t, NULL, NULL, NULL);
}

TEST(recall_when_questions_and_time_mentions)
{
    EXPECT(cm_when_asks("When is Maya coming?", 20));
    EXPECT(cm_when_asks("¿Cuándo llega Maya?", strlen("¿Cuándo llega Maya?")));
    EXPECT(!cm_when_asks("Is Maya coming when it rains?", 29));
    static const char *const yes[] = {"Maya arrives on Friday.", "Call at 6pm.",
                                      "meet at 18:30 sharp", "back next week",
                                      "Born in 1984.", "since March"};
    static const char *const no[] = {"# 2026-11-20\nMaya loves chess.", "It may rain.",
                                     "She has 3 cats.", "Week of rest? no."};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
        EXPECT(cm_when_mentions(yes[i], strlen(yes[i])));
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        EXPECT(!cm_when_mentions(no[i], strlen(no[i])));
}

/* ---- the static model's variants ---------------------------------------- */

/* Words in 4 dimensions: one cluster per concept, "the" off on its own. */
static const char *words[] = {"the",     "maya",     "allergies", "allergic", "allergy",
                              "peanuts", "wifi",     "wi-fi",     "password", "car",
                              "vehicle", "arrives",  "friday",    "decided",  "logo",
                              "launch",  "caring",   "care"};
static const float vecs[] = {
    0.1f, 0.1f, 0.1f, 0.1f, /* the */
    0,    0,    0,    1,    /* maya */
    1,    0.1f, 0,    0,    /* allergies */
    0.9f, 0.2f, 0,    0,    /* allergic */
    1,    0.15f, 0,   0,    /* allergy */
    0.3f, 0,    0,    0.5f, /* peanuts */
    0,    1,    0,    0,    /* wifi */
    0,    0.95f, 0.1f, 0,   /* wi-fi */
    0,    0.4f, 0.3f, 0.2f, /* password */
    0,    0,    1,    0.1f, /* car */
    0,    0.05f, 0.95f, 0.1f, /* vehicle */
    0.2f, 0.2f, 0.2f, 0.5f, /* arrives */
    0.1f, 0.3f, 0.1f, 0.3f, /* friday */
    0.3f, 0.3f, 0.3f, 0.1f, /* decided */
    0.5f, 0.5f, 0,    0,    /* logo */
    0,    0.5f, 0.5f, 0,    /* launch */
    0.7f, 0,    0,    0.7f, /* caring: not of car's family (cosine) */
    0.6f, 0,    0,    0.8f, /* care */
};
#define NWORDS (sizeof words / sizeof *words)

static char *small_model(char *d)
{
    static char path[1024];
    char err[256];
    snprintf(path, sizeof path, "%s/m.bin", d);
    if (cm_static_model_write(path, words, vecs, NWORDS, 4, err, sizeof err)) return NULL;
    return path;
}

static bool has(const static_variant *v, size_t n, const char *text)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v[i].text, text)) return true;
    return false;
}

TEST(recall_static_model_families_and_neighbours)
{
    char *d = tmp_dir();
    const char *path = small_model(d);
    EXPECT(path != NULL);
    static_model m;
    char err[256];
    EXPECT_INT(cm_static_model_map(&m, path, err, sizeof err), CM_OK);
    static_variant v[8];
    static_variant_opts o = {0.5f, 0, 0.7f, 0};
    size_t n = cm_static_model_variants(&m, "allergies", 9, &o, v, 8);
    EXPECT(has(v, n, "allergic") && has(v, n, "allergy"));
    EXPECT(n == 2 && v[0].morph && v[0].cos >= v[1].cos);
    n = cm_static_model_variants(&m, "wifi", 4, &o, v, 8);
    EXPECT(n == 1 && has(v, n, "wi fi"));
    n = cm_static_model_variants(&m, "wi fi", 5, &o, v, 8);
    EXPECT(n == 1 && has(v, n, "wifi"));
    n = cm_static_model_variants(&m, "car", 3, &o, v, 8); /* too short for a family */
    EXPECT_INT((int)n, 0);
    n = cm_static_model_variants(&m, "vehicle", 7, &o, v, 8);
    EXPECT_INT((int)n, 0);
    o.neighbours = 1;
    n = cm_static_model_variants(&m, "vehicle", 7, &o, v, 8);
    EXPECT(n == 1 && has(v, n, "car") && !v[0].morph);
    EXPECT_INT((int)cm_static_model_variants(&m, "zebra", 5, &o, v, 8), 0);
    EXPECT_INT((int)cm_static_model_variants(&m, "Maya", 4, &o, v, 8), 0); /* not lower-case */
    EXPECT(cm_static_model_lookup(&m, "peanuts", 7) == 5);
    EXPECT_STR(cm_static_model_word(&m, 5), "peanuts");
    EXPECT_STR(cm_static_model_word(&m, 99), "");
    cm_static_model_close(&m);
}

/* ---- the engine ------------------------------------------------------- */

typedef struct ws {
    char *d;
    cm_engine *e;
} ws;

static void ws_open(ws *w, bool with_model)
{
    char cfg[1400];
    w->d = tmp_dir();
    const char *path = small_model(w->d);
    snprintf(cfg, sizeof cfg, "{clawmem:{staticModel:'%s%s'}}", path, with_model ? "" : ".none");
    write_file(w->d, "qc.json", cfg);
    write_file(w->d, "ws/MEMORY.md", "# Memory\n");
}

/* The payload of query q against w's workspace (opened and synced on first
 * use), searched at clock now; NULL when the engine fails (the caller's
 * expectations then fail). */
static json_t *ask(ws *w, const char *q, int64_t now)
{
    char err[512], *js = NULL;
    if (!w->e) {
        cm_options o = {NULL, path_in(w->d, "ws"), path_in(w->d, "qc.json"),
                        path_in(w->d, "state"), NULL, NULL, 0};
        if (cm_engine_open(&o, &w->e, err, sizeof err) != CM_OK) return NULL;
        if (cm_engine_sync(w->e, 0, NULL, NULL, NULL, err, sizeof err) != CM_OK) return NULL;
    }
    cm_search_opts so = {5, -1, now};
    if (cm_memory_search(w->e, q, &so, &js, err, sizeof err) != CM_OK) return NULL;
    json_t *p = json_loads(js ? js : "{}", 0, NULL);
    cm_free(js);
    return p;
}

static const char *first_path(json_t *p)
{
    const char *s =
        json_string_value(json_object_get(json_array_get(json_object_get(p, "results"), 0), "path"));
    return s ? s : "(none)";
}

static void ws_close(ws *w)
{
    cm_engine_close(w->e);
    w->e = NULL;
}

TEST(recall_variants_put_the_paraphrased_note_first)
{
    ws w = {0};
    ws_open(&w, true);
    /* the shorter notes win on BM25 alone: only the variants turn it round */
    write_file(w.d, "ws/memory/arrival.md", "Maya arrives Friday.\n");
    write_file(w.d, "ws/memory/allergy.md", "Maya is allergic to peanuts, so no satay at dinner.\n");
    write_file(w.d, "ws/memory/bank.md", "Bank password rotates.\n");
    write_file(w.d, "ws/memory/cabin.md", "The Wi-Fi password at the cabin is bluefern42.\n");
    json_t *p = ask(&w, "does maya have any allergies", 0);
    EXPECT_STR(first_path(p), "memory/allergy.md");
    json_decref(p);
    p = ask(&w, "wifi password", 0);
    EXPECT_STR(first_path(p), "memory/cabin.md");
    EXPECT_STR(json_string_value(json_object_get(p, "mode")), "fts-only");
    json_decref(p);
    ws_close(&w);
    /* without the model (nor WordNet's derivations, which join allergies
     * and allergic too: an empty table in the state dir turns them off):
     * keywords as before (the shorter note first) */
    ws_open(&w, false);
    write_file(w.d, "state/models/wordnet-derivations.txt", "");
    write_file(w.d, "ws/memory/arrival.md", "Maya arrives Friday.\n");
    write_file(w.d, "ws/memory/allergy.md", "Maya is allergic to peanuts, so no satay at dinner.\n");
    p = ask(&w, "does maya have any allergies", 0);
    EXPECT_STR(first_path(p), "memory/arrival.md");
    json_decref(p);
    ws_close(&w);
}

TEST(recall_weak_results_fall_back_to_the_static_model)
{
    ws w = {0};
    ws_open(&w, true);
    write_file(w.d, "ws/memory/parking.md", "Parked the car on level 3, row F.\n");
    write_file(w.d, "ws/memory/logo.md", "Decided to keep the old logo.\n");
    json_t *p = ask(&w, "where is my vehicle", 0);
    EXPECT_STR(first_path(p), "memory/parking.md");
    EXPECT_STR(json_string_value(json_object_get(p, "mode")), "static-fallback");
    json_decref(p);
    p = ask(&w, "the old logo", 0); /* found by its keywords: no fallback */
    EXPECT_STR(first_path(p), "memory/logo.md");
    EXPECT_STR(json_string_value(json_object_get(p, "mode")), "fts-only");
    json_decref(p);
    p = ask(&w, "zebra crossing", 0); /* nothing near either */
    EXPECT_INT((int)json_array_size(json_object_get(p, "results")), 0);
    EXPECT_STR(json_string_value(json_object_get(p, "mode")), "fts-only");
    json_decref(p);
    ws_close(&w);
}

TEST(recall_dates_in_the_question_pick_the_day)
{
    setenv("TZ", "UTC", 1);
    tzset();
    ws w = {0};
    ws_open(&w, false);
    write_file(w.d, "ws/memory/2026-11-24.md", "# Tuesday\nDecided to move the launch to January after the long review.\n");
    write_file(w.d, "ws/memory/2026-11-17.md", "# Tuesday\nDecided to keep the logo.\n");
    write_file(w.d, "ws/memory/2026-11-30.md", "Dentist at 3pm, then groceries.\n");
    write_file(w.d, "ws/memory/notes.md", "Decided: tea over coffee.\n");
    int64_t now = cm_when_day(2026, 12, 1) * 86400 + 12 * 3600; /* Tuesday noon */
    json_t *p = ask(&w, "what did I decide last Tuesday", now);
    EXPECT_STR(first_path(p), "memory/2026-11-24.md");
    json_decref(p);
    p = ask(&w, "what happened yesterday", now); /* no keyword: the day's note */
    EXPECT_STR(first_path(p), "memory/2026-11-30.md");
    json_decref(p);
    /* a week later the same words name another Tuesday */
    p = ask(&w, "what did I decide last Tuesday", now - 7 * 86400);
    EXPECT_STR(first_path(p), "memory/2026-11-17.md");
    json_decref(p);
    /* a date that names no note: the words stay keywords */
    p = ask(&w, "what did I decide in March", now);
    EXPECT(json_array_size(json_object_get(p, "results")) > 0);
    json_decref(p);
    ws_close(&w);
}

TEST(recall_when_questions_prefer_a_time)
{
    ws w = {0};
    ws_open(&w, false);
    write_file(w.d, "ws/memory/arrival.md", "Maya arrives on Friday at 6pm; pick her up at the station.\n");
    write_file(w.d, "ws/memory/chess.md", "Maya loves chess and long walks by the river with her dog.\n");
    json_t *p = ask(&w, "when is maya coming", 0);
    EXPECT_STR(first_path(p), "memory/arrival.md");
    json_decref(p);
    ws_close(&w);
}

TEST(recall_when_asks_a_year_or_a_count_of_years)
{
    static const char *const yes[] = {"Which year did Evan start yoga?",
                                      "what month was the launch",
                                      "How many years passed between the two moves?",
                                      "¿Qué año empezó Maya?", "Quantos anos tem a casa?"};
    static const char *const no[] = {"How many cats does Maya have?", "What did Maya say?",
                                     "Which yearbook is hers?", "the year Maya moved"};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
        EXPECT(cm_when_asks(yes[i], strlen(yes[i])));
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        EXPECT(!cm_when_asks(no[i], strlen(no[i])));
}

TEST(recall_which_year_questions_prefer_a_time)
{
    ws w = {0};
    ws_open(&w, false);
    write_file(w.d, "ws/memory/piano.md",
               "Maya started the piano in 2019, after a summer of lessons with her aunt.\n");
    write_file(w.d, "ws/memory/recital.md",
               "Maya's piano recital went well; she started strong and loved it.\n");
    json_t *p = ask(&w, "Which year did Maya start piano?", 0);
    EXPECT_STR(first_path(p), "memory/piano.md");
    json_decref(p);
    ws_close(&w);
}
