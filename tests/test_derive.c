/*
 * test_derive.c — WordNet's derivations on the query side of keyword search
 * (src/search/derive.h): the table's lookups and base forms, its conversion
 * from WordNet's data files (derive_build.h), and a question that finds its
 * note through them (docs/QUALITY.md, issue 30, round 7).
 */
#include <jansson.h>
#include <unistd.h>

#include "../src/base/fs.h"

#include "../src/search/derive.h"
#include "../src/search/derive_build.h"
#include "test.h"

/* The fixture table: sorted, one word a line, a lemma with no derivations
 * listed alone. */
static const char table[] = "adopt\tadoption adoptive\n"
                            "adoption\tadopt\n"
                            "decide\tdecision decisive\n"
                            "decision\tdecide\n"
                            "new\tnewness\n"
                            "news\t\n"
                            "paint\tpainter\n"
                            "painter\tpaint\n";

TEST(derive_forms_of_a_word_and_its_base_form)
{
    char *d = tmp_dir();
    write_file(d, "t.txt", table);
    derive_table t;
    char err[256], out[64];
    EXPECT_INT(cm_derive_open(&t, path_in(d, "t.txt"), err, sizeof err), CM_OK);
    EXPECT_INT((int)cm_derive_forms(&t, "adopt", 5, out, sizeof out), 2);
    EXPECT_STR(out, "adoption adoptive");
    EXPECT_INT((int)cm_derive_forms(&t, "painter", 7, out, sizeof out), 1); /* the last line */
    EXPECT_STR(out, "paint");
    EXPECT_INT((int)cm_derive_forms(&t, "decisions", 9, out, sizeof out), 1); /* -s */
    EXPECT_STR(out, "decide");
    EXPECT_INT((int)cm_derive_forms(&t, "painters", 8, out, sizeof out), 1);
    EXPECT_STR(out, "paint");
    EXPECT_INT((int)cm_derive_forms(&t, "adopted", 7, out, sizeof out), 2);  /* -ed */
    EXPECT_INT((int)cm_derive_forms(&t, "deciding", 8, out, sizeof out), 2); /* -ing, +e */
    EXPECT_STR(out, "decision decisive");
    /* a lemma is its own base: "news" stops there, not at "new" */
    EXPECT_INT((int)cm_derive_forms(&t, "news", 4, out, sizeof out), 0);
    EXPECT_INT((int)cm_derive_forms(&t, "new", 3, out, sizeof out), 1);
    EXPECT_INT((int)cm_derive_forms(&t, "adop", 4, out, sizeof out), 0); /* whole words */
    EXPECT_INT((int)cm_derive_forms(&t, "zebra", 5, out, sizeof out), 0);
    EXPECT_INT((int)cm_derive_forms(&t, "a", 1, out, sizeof out), 0); /* before the first */
    EXPECT_INT((int)cm_derive_forms(&t, "adopt", 5, out, 12), 1);     /* what fits in cap */
    EXPECT_STR(out, "adoption");
    cm_derive_close(&t);
    /* no table, an empty or a truncated one */
    EXPECT_INT(cm_derive_open(&t, path_in(d, "none.txt"), err, sizeof err), CM_ENOTFOUND);
    write_file(d, "e.txt", "");
    EXPECT(cm_derive_open(&t, path_in(d, "e.txt"), err, sizeof err) != CM_OK);
    write_file(d, "h.txt", "adopt\tadoption");
    EXPECT(cm_derive_open(&t, path_in(d, "h.txt"), err, sizeof err) != CM_OK);
    EXPECT_INT((int)cm_derive_forms(&t, "adopt", 5, out, sizeof out), 0);
}

/* WordNet's data files in miniature: a licence line, then synsets whose
 * pointers name the other file's synset by byte offset. "marriage" (noun)
 * and "marry" (verb) are derivations of each other ("+", word 1 to word 1,
 * written in both files); "wedlock", word 2 of the noun's synset, points to
 * "marry" too, but is not listed for "marriage" (synonyms are not); the
 * hypernym pointer ("@", a whole synset: 0000) is ignored; "Hot_dog" is no
 * one-word lemma, so its pointer is dropped. */
TEST(derive_convert_reads_wordnet_data)
{
    char *d = tmp_dir();
    const char *lic = "  1 This software and database is being provided\n"; /* 50 bytes */
    char noun[512], verb[512];
    size_t off = strlen(lic);
    snprintf(noun, sizeof noun,
             "%s%08zu 14 n 02 marriage 0 wedlock 0 003 + %08zu v 0101 @ %08zu n 0000 "
             "+ %08zu v 0201 | the state of being married\n",
             lic, off, off, off, off);
    snprintf(verb, sizeof verb,
             "%s%08zu 41 v 02 marry 0 Hot_dog 0 002 + %08zu n 0101 + %08zu n 0202 | take in "
             "marriage\n",
             lic, off, off, off);
    write_file(d, "wn/data.noun", noun);
    write_file(d, "wn/data.verb", verb);
    write_file(d, "wn/data.adj", lic);
    write_file(d, "wn/data.adv", lic);
    char err[256];
    EXPECT_INT(cm_derive_convert(path_in(d, "wn"), path_in(d, "t.txt"), err, sizeof err), CM_OK);
    buf b = BUF_INIT;
    EXPECT_INT(cm_fs_read_file(path_in(d, "t.txt"), 1 << 20, &b, err, sizeof err), CM_OK);
    EXPECT_STR(b.data ? b.data : "", "marriage\tmarry\nmarry\tmarriage wedlock\nwedlock\tmarry\n");
    cm_buf_release(&b);
    /* a missing data file: nothing written */
    EXPECT_INT(cm_derive_convert(path_in(d, "none"), path_in(d, "u.txt"), err, sizeof err),
               CM_ENOTFOUND);
    EXPECT(access(path_in(d, "u.txt"), F_OK) != 0);
}

/* "What was Ana's decision?" finds the note that says she decided, above a
 * note that only names Ana more often: Porter keeps "decision" and
 * "decided" apart, and so do the static model's suffix families; the
 * table in the state dir's models/ joins them. A table that cannot be read
 * leaves the search as it was (no derivations, no error). */
TEST(quality_derivation_finds_the_verb)
{
    char *d = tmp_dir();
    write_file(d, "qc.json", "{}\n");
    write_file(d, "ws/MEMORY.md", "# Memory\n");
    write_file(d, "ws/memory/berlin.md", "Ana decided to move to Berlin in the spring.\n");
    write_file(d, "ws/memory/ana.md", "Ana and Ana's sister cooked dinner; Ana baked bread.\n");
    write_file(d, "ws/memory/misc.md", "Coffee beans, bread and milk for the weekend.\n");
    for (int pass = 0; pass < 2; pass++) {
        /* pass 0: the table; pass 1: a truncated one */
        write_file(d, "state/models/" DERIVE_TABLE_NAME,
                   pass ? "decide\tdecision" : "decide\tdecision\ndecision\tdecide\n");
        cm_options o = {
            NULL, path_in(d, "ws"), path_in(d, "qc.json"), path_in(d, "state"), NULL, NULL, 0};
        cm_engine *e = NULL;
        char err[512], *js = NULL;
        EXPECT_INT(cm_engine_open(&o, &e, err, sizeof err), CM_OK);
        EXPECT_INT(cm_engine_sync(e, 0, NULL, NULL, NULL, err, sizeof err), CM_OK);
        cm_search_opts so = {6, 0, 0};
        EXPECT_INT(cm_memory_search(e, "what was Ana's decision?", &so, &js, err, sizeof err),
                   CM_OK);
        json_t *p = json_loads(js ? js : "{}", 0, NULL);
        const char *first = json_string_value(
            json_object_get(json_array_get(json_object_get(p, "results"), 0), "path"));
        if (pass == 0) EXPECT_STR(first ? first : "(none)", "memory/berlin.md");
        if (pass == 1) EXPECT(!first || strcmp(first, "memory/berlin.md") != 0);
        json_decref(p);
        cm_free(js);
        cm_engine_close(e);
    }
}
