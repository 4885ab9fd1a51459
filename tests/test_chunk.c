/*
 * test_chunk.c — the chunker against golden files (tests/data/chunk/NAME.md →
 * NAME.golden; CLAWMEM_UPDATE_GOLDEN=1 rewrites them), and its invariants on
 * pathological input: a 10 MB single line, random documents with over-long
 * lines (the budget), CJK weighting, CRLF, blank files, a byte-order mark.
 */
#include "../src/base/fs.h"
#include "../src/base/utf8.h"
#include "../src/index/chunk.h"
#include "test.h"

static void render(const chunk_list *l, buf *out)
{
    for (size_t i = 0; i < l->n; i++)
        cm_buf_printf(out, "== chunk %zu: lines %d-%d, %zu bytes, weight %zu\n%s\n", i + 1,
                      l->v[i].start_line, l->v[i].end_line, l->v[i].len,
                      cm_chunk_weight(l->v[i].text, l->v[i].len), l->v[i].text);
}

/* Chunks tests/data/chunk/<name>.md with (tokens, overlap) and compares. */
static bool golden(const char *name, int tokens, int overlap)
{
    char in[256], gold[256], err[256];
    snprintf(in, sizeof in, "tests/data/chunk/%s.md", name);
    snprintf(gold, sizeof gold, "tests/data/chunk/%s.golden", name);
    buf text = BUF_INIT, want = BUF_INIT, got = BUF_INIT;
    chunk_list l = {0};
    bool ok = false;
    if (cm_fs_read_file(in, 1 << 24, &text, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "%s", err);
        goto out;
    }
    if (cm_chunk_text(text.data, text.len, tokens, overlap, &l)) goto out;
    render(&l, &got);
    if (getenv("CLAWMEM_UPDATE_GOLDEN")) {
        FILE *f = fopen(gold, "wb");
        if (f) {
            fwrite(got.data, 1, got.len, f);
            fclose(f);
        }
    }
    if (cm_fs_read_file(gold, 1 << 24, &want, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "%s (run with CLAWMEM_UPDATE_GOLDEN=1 to create)", err);
        goto out;
    }
    ok = got.len == want.len && (got.len == 0 || memcmp(got.data, want.data, got.len) == 0);
    if (!ok) test_fail(__FILE__, __LINE__, "%s differs from %s:\n%s", name, gold, got.data);
out:
    cm_chunk_list_release(&l);
    cm_buf_release(&text);
    cm_buf_release(&want);
    cm_buf_release(&got);
    return ok;
}

TEST(chunk_golden_english)
{
    EXPECT(golden("english", 60, 12));
}

TEST(chunk_golden_cjk)
{
    EXPECT(golden("cjk", 40, 8));
}

TEST(chunk_golden_crlf)
{
    EXPECT(golden("crlf", 40, 8));
}

TEST(chunk_golden_blank_lines_only)
{
    EXPECT(golden("blank", 400, 80));
}

TEST(chunk_golden_long_line)
{
    EXPECT(golden("longline", 20, 4));
}

TEST(chunk_budget_and_overlap_rules)
{
    /* 10 lines of 99 chars: 100 weighted each with the newline; budget 400,
     * overlap 120 → each next chunk repeats the last 2 lines. */
    buf t = BUF_INIT;
    for (int i = 0; i < 10; i++) {
        for (int k = 0; k < 99; k++)
            cm_buf_addc(&t, (char)('a' + i));
        cm_buf_addc(&t, '\n');
    }
    chunk_list l = {0};
    EXPECT_INT(cm_chunk_text(t.data, t.len, 100, 30, &l), CM_OK);
    EXPECT_INT(l.n, 4);
    EXPECT_INT(l.v[0].start_line, 1);
    EXPECT_INT(l.v[0].end_line, 4);
    EXPECT_INT(l.v[1].start_line, 3);
    EXPECT_INT(l.v[1].end_line, 6);
    EXPECT_INT(l.v[3].end_line, 10); /* the final newline opens no line 11 */
    char hex[65];
    cm_sha256_hex(l.v[0].text, l.v[0].len, hex);
    EXPECT_STR(l.v[0].hash, hex);
    cm_chunk_list_release(&l);
    cm_buf_release(&t);
}

TEST(chunk_ten_megabyte_single_line)
{
    /* 10 MB of a 3-byte character mixed with ASCII: windows must never split a
     * UTF-8 sequence and never pass the weighted budget; each repeats the
     * previous window's last 320 characters, so they advance by 1,280. */
    size_t n = 10u << 20;
    char *s = malloc(n);
    size_t i = 0;
    while (i + 4 <= n) {
        memcpy(s + i, "\xE2\x82\xAC", 3); /* € (not CJK: weight 1) */
        s[i + 3] = 'x';
        i += 4;
    }
    n = i;
    chunk_list l = {0};
    EXPECT_INT(cm_chunk_text(s, n, 400, 80, &l), CM_OK);
    EXPECT_INT(l.n, (n / 4 * 2 - 320 + 1279) / 1280);
    for (size_t k = 0; k < l.n; k++) {
        EXPECT(cm_utf8_valid_prefix(l.v[k].text, l.v[k].len) == l.v[k].len);
        EXPECT_INT(l.v[k].start_line, 1);
        EXPECT_INT(l.v[k].end_line, 1);
        EXPECT(cm_chunk_weight(l.v[k].text, l.v[k].len) <= 1600);
        if (k + 1 < l.n) EXPECT_INT(cm_chunk_weight(l.v[k].text, l.v[k].len), 1600);
    }
    free(s);
    cm_chunk_list_release(&l);
}

/* xorshift, for reproducible "random" documents */
static uint32_t rnd(uint32_t *st)
{
    uint32_t x = *st;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *st = x;
}

/* Appends a line of about `chars` random characters: words of ASCII letters,
 * CJK (weight 4), two-byte Latin letters, spaces. */
static void random_line(buf *b, uint32_t *st, size_t chars)
{
    static const char *const alpha[] = {"a", "b",  "c",  "d",  "e",  "k",  "m",  "q", "z", "é",
                                        "ß", "漢", "字", "検", "索", "서", "울", " ", " "};
    for (size_t i = 0; i < chars; i++)
        cm_buf_adds(b, alpha[rnd(st) % (sizeof alpha / sizeof *alpha)]);
}

/* Splits a chunk's text into its lines (in place); returns how many. */
static size_t split_lines(char *t, char **lines, size_t max)
{
    size_t n = 0;
    lines[n++] = t;
    for (char *p = t; *p && n < max; p++)
        if (*p == '\n') {
            *p = 0;
            lines[n++] = p + 1;
        }
    return n;
}

TEST(chunk_budget_invariants_on_random_documents)
{
    /* Documents of short, long and over-long lines (ASCII, CJK, Latin-1),
     * chunked with assorted budgets: no chunk passes tokens×4; a chunk's lines
     * are the document's lines, whole except a window of an over-long line at
     * its start or end; the windows of one line follow each other without a
     * gap, each sharing at most overlap×4 characters with the one before. */
    uint32_t st = 2463534242u;
    for (int doc = 0; doc < 60; doc++) {
        buf t = BUF_INIT;
        int nlines = 1 + (int)(rnd(&st) % 40);
        char **lines = calloc((size_t)nlines + 1, sizeof *lines);
        for (int i = 0; i < nlines; i++) {
            size_t start = t.len;
            uint32_t r = rnd(&st) % 10;
            random_line(&t, &st, r < 6 ? rnd(&st) % 120 : r < 9 ? rnd(&st) % 900 : rnd(&st) % 6000);
            lines[i] = cm_strndup(t.data + start, t.len - start);
            cm_buf_addc(&t, '\n');
        }
        int tokens = 8 + (int)(rnd(&st) % 400), overlap = (int)(rnd(&st) % (unsigned)tokens);
        size_t budget = (size_t)CM_MAX(32, tokens * 4), ov = (size_t)overlap * 4;
        chunk_list l = {0};
        EXPECT_INT(cm_chunk_text(t.data, t.len, tokens, overlap, &l), CM_OK);
        EXPECT(l.n > 0);
        int window_line = 0;
        const char *prev_window = NULL;
        size_t prev_off = 0, prev_len = 0;
        for (size_t k = 0; k < l.n; k++) {
            chunk *c = &l.v[k];
            EXPECT(cm_chunk_weight(c->text, c->len) <= budget);
            EXPECT(cm_utf8_valid_prefix(c->text, c->len) == c->len);
            char *copy = cm_strndup(c->text, c->len);
            char *parts[512];
            size_t np = split_lines(copy, parts, 512);
            EXPECT_INT(np, c->end_line - c->start_line + 1);
            for (size_t j = 0; j < np; j++) {
                const char *line = lines[c->start_line - 1 + (int)j];
                if (strcmp(parts[j], line) == 0) continue;
                /* a window: the first part (continuing the line) or the last */
                EXPECT(j == 0 || j == np - 1);
                const char *at = strstr(line, parts[j]);
                EXPECT(at != NULL);
                size_t off = (size_t)(at - line), len = strlen(parts[j]);
                if (window_line == c->start_line + (int)j && prev_window == line) {
                    EXPECT(off > prev_off);             /* progress */
                    EXPECT(off <= prev_off + prev_len); /* no gap */
                    EXPECT(cm_chunk_weight(line + off, prev_off + prev_len - off) <= ov);
                } else {
                    EXPECT_INT(off, 0); /* the first window starts the line */
                }
                window_line = c->start_line + (int)j;
                prev_window = line;
                prev_off = off;
                prev_len = len;
            }
            free(copy);
        }
        cm_chunk_list_release(&l);
        for (int i = 0; i < nlines; i++)
            free(lines[i]);
        free(lines);
        cm_buf_release(&t);
    }
}

TEST(chunk_byte_order_mark_is_not_text)
{
    const char *t = "\xEF\xBB\xBF# Notes\nthe schema freeze\n";
    chunk_list l = {0};
    EXPECT_INT(cm_chunk_text(t, strlen(t), 400, 80, &l), CM_OK);
    EXPECT_INT(l.n, 1);
    EXPECT_INT(l.v[0].start_line, 1);
    EXPECT_INT(l.v[0].end_line, 2);
    EXPECT_STR(l.v[0].text, "# Notes\nthe schema freeze");
    cm_chunk_list_release(&l);
    /* only at the start: U+FEFF inside the text is a character like others */
    t = "a\n\xEF\xBB\xBF"
        "b";
    EXPECT_INT(cm_chunk_text(t, strlen(t), 400, 80, &l), CM_OK);
    EXPECT_STR(l.v[0].text, "a\n\xEF\xBB\xBF"
                            "b");
    cm_chunk_list_release(&l);
}

TEST(chunk_cjk_counts_as_tokens)
{
    /* 1000 CJK characters on one line weigh 4000: with a 400-token budget they
     * are cut into segments of 400 characters (1600 weighted). */
    buf t = BUF_INIT;
    for (int i = 0; i < 1000; i++)
        cm_buf_adds(&t, "漢");
    chunk_list l = {0};
    EXPECT_INT(cm_chunk_text(t.data, t.len, 400, 0, &l), CM_OK);
    EXPECT_INT(l.n, 3);
    EXPECT_INT(cm_chunk_weight(l.v[0].text, l.v[0].len), 1600);
    EXPECT_INT(cm_chunk_weight(l.v[2].text, l.v[2].len), 800);
    cm_chunk_list_release(&l);
    cm_buf_release(&t);
}

TEST(chunk_empty_and_whitespace_inputs)
{
    chunk_list l = {0};
    EXPECT_INT(cm_chunk_text("", 0, 400, 80, &l), CM_OK);
    EXPECT_INT(l.n, 0);
    EXPECT_INT(cm_chunk_text("\n\n  \n\t\n", 6, 400, 80, &l), CM_OK);
    EXPECT_INT(l.n, 0);
    EXPECT_INT(cm_chunk_text("\n\nlast", 6, 400, 80, &l), CM_OK);
    EXPECT_INT(l.n, 1);
    EXPECT_INT(l.v[0].start_line, 1);
    EXPECT_INT(l.v[0].end_line, 3);
    cm_chunk_list_release(&l);
}
