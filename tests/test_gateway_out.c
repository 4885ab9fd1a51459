/*
 * test_gateway_out.c — the gateway's outbound text (src/gateway/shaping/blocks.c) and
 * prompt bodies (src/gateway/shaping/body.c): break preferences, fences closed and
 * reopened, UTF-16 counting at CJK and emoji boundaries, a property test over
 * random texts, coalescing over an injected clock, envelopes, history
 * wrappers and directive stripping from tables.
 */
#include "test.h"

#include "../src/base/utf8.h"
#include "../src/gateway/shaping/body.h"
#include "../src/gateway/shaping/blocks.h"

/* Joins pieces with "|" for compact expectations. */
static char *joined(const gw_pieces *p)
{
    buf b = BUF_INIT;
    cm_buf_adds(&b, "");
    for (size_t i = 0; i < p->n; i++) {
        if (i) cm_buf_addc(&b, '|');
        cm_buf_add(&b, p->v[i], p->len[i]);
    }
    return cm_buf_detach(&b);
}

static char *chunk(const char *text, int max, gw_break_pref pref)
{
    gw_pieces p;
    cm_gw_pieces_init(&p);
    if (cm_gw_chunk_text(text, strlen(text), max, pref, &p) != CM_OK) return NULL;
    char *s = joined(&p);
    cm_gw_pieces_release(&p);
    return s;
}

TEST(gateway_out_limits_and_units)
{
    EXPECT_INT(cm_gw_channel_text_limit("telegram"), 4000);
    EXPECT_INT(cm_gw_channel_text_limit("discord"), 2000);
    EXPECT_INT(cm_gw_channel_text_limit("line"), 5000);
    EXPECT_INT(cm_gw_channel_text_limit("http"), 4000);
    EXPECT_INT(cm_gw_channel_resolve_limit("telegram", 10000), 4096);
    EXPECT_INT(cm_gw_channel_resolve_limit("telegram", 0), 4000);
    EXPECT_INT(cm_gw_channel_resolve_limit("slack", 10000), 10000);
    EXPECT_INT(cm_gw_break_pref_parse("sentence"), GW_BREAK_SENTENCE);
    EXPECT_INT(cm_gw_break_pref_parse("bogus"), GW_BREAK_PARAGRAPH);
    EXPECT_INT(cm_gw_u16len("abc", 3), 3);
    EXPECT_INT(cm_gw_u16len("東京", strlen("東京")), 2);   /* 3 bytes each, 1 unit */
    EXPECT_INT(cm_gw_u16len("😀", strlen("😀")), 2);         /* 4 bytes, a surrogate pair */
    EXPECT_INT(cm_gw_u16len("é\xff", strlen("é\xff")), 2); /* invalid byte: one U+FFFD */
}

TEST(gateway_out_break_preferences)
{
    /* Each table row: text, max, preference, the pieces joined by "|". */
    static const struct {
        const char *text;
        int max;
        gw_break_pref pref;
        const char *want;
    } rows[] = {
        {"short", 10, GW_BREAK_PARAGRAPH, "short"},
        {"aaa bbb\n\nccc ddd\neee", 14, GW_BREAK_PARAGRAPH, "aaa bbb|ccc ddd\neee"},
        {"aaa\nbbb\nccc ddd eee", 12, GW_BREAK_PARAGRAPH, "aaa\nbbb|ccc ddd eee"},
        {"aaa\nbbb\nccc ddd eee", 12, GW_BREAK_NEWLINE, "aaa\nbbb|ccc ddd eee"},
        {"One two. Three four. Five", 16, GW_BREAK_SENTENCE, "One two.|Three four. Five"},
        {"One two. Three\nfour five", 16, GW_BREAK_SENTENCE, "One two.|Three\nfour five"},
        {"One two. Three\nfour five", 16, GW_BREAK_NEWLINE, "One two. Three|four five"},
        /* no preferred break: the last whitespace, then a hard break */
        {"aaaa bbbb cccc", 10, GW_BREAK_PARAGRAPH, "aaaa bbbb|cccc"},
        {"abcdefghijklmnop", 6, GW_BREAK_PARAGRAPH, "abcdef|ghijkl|mnop"},
        /* whitespace-only remainders are not sent */
        {"abc def\n\n\n\n", 8, GW_BREAK_PARAGRAPH, "abc def"},
        /* one whitespace character at a soft break is dropped, then newlines */
        {"abc def  \n\n\n\n  x", 8, GW_BREAK_PARAGRAPH, "abc def| \n\n\n\n  x"},
        {"abc def \n\n\n\n  x", 8, GW_BREAK_PARAGRAPH, "abc def|  x"},
    };
    for (size_t i = 0; i < ARRAY_LEN(rows); i++) {
        char *got = chunk(rows[i].text, rows[i].max, rows[i].pref);
        if (!got || strcmp(got, rows[i].want) != 0)
            test_fail(__FILE__, __LINE__, "row %zu: got \"%s\" want \"%s\"", i, got ? got : "",
                      rows[i].want);
        free(got);
    }
}

TEST(gateway_out_fence_closed_and_reopened)
{
    /* A fence longer than the limit: each piece closes it and the next
     * reopens it with the same opening line (info string included). */
    const char *text = "Intro.\n\n```python\nline1\nline2\nline3\nline4\n```\nAfter.";
    char *got = chunk(text, 24, GW_BREAK_PARAGRAPH);
    EXPECT(got != NULL);
    EXPECT_STR(got,
               "Intro.|```python\nline1\n```\n|```python\nline2\n```\n|```python\nline3\n```\n|"
               "```python\nline4\n```|After.");
    free(got);
    /* A fence that fits is never split, even when a newline inside it is
     * the only break in the window. */
    got = chunk("aaaa\n~~~\nb\nc\n~~~\nd", 16, GW_BREAK_NEWLINE);
    EXPECT_STR(got, "aaaa|~~~\nb\nc\n~~~\nd");
    free(got);
    /* Indented tilde fence with a longer marker: the closing line keeps the
     * indent and the marker; a shorter inner ``` line stays content. */
    got = chunk("  ~~~~ sh\nx1 ```\nx2\nx3\n  ~~~~\n", 20, GW_BREAK_PARAGRAPH);
    EXPECT(got != NULL);
    EXPECT_CONTAINS(got, "  ~~~~\n|  ~~~~ sh\n");
    const char *ind = "  ~~~~ sh\nx1 ```\nx2\nx3\n  ~~~~\n";
    gw_pieces p;
    cm_gw_pieces_init(&p);
    EXPECT_INT(cm_gw_chunk_text(ind, strlen(ind), 20, GW_BREAK_PARAGRAPH, &p), CM_OK);
    EXPECT(p.n >= 2);
    for (size_t i = 0; i < p.n; i++)
        EXPECT(cm_gw_u16len(p.v[i], p.len[i]) <= 20);
    cm_gw_pieces_release(&p);
    free(got);
    /* Nested: a ``` line inside a ```` fence does not close it. */
    got = chunk("````md\n```js\nx();\n```\n````\ntail", 40, GW_BREAK_PARAGRAPH);
    EXPECT_STR(got, "````md\n```js\nx();\n```\n````\ntail");
    free(got);
    got = chunk("````md\n```js\nx();\ny();\n```\n````", 20, GW_BREAK_PARAGRAPH);
    EXPECT(got != NULL);
    EXPECT(strncmp(got, "````md\n", 7) == 0);
    EXPECT_CONTAINS(got, "\n````\n|````md\n");
    free(got);
}

TEST(gateway_out_cjk_and_emoji_boundaries)
{
    /* 10 CJK characters (30 bytes, 10 units) at max 4: pieces of 4 units. */
    char *got = chunk("一二三四五六七八九十", 4, GW_BREAK_PARAGRAPH);
    EXPECT_STR(got, "一二三四|五六七八|九十");
    free(got);
    /* Emoji count 2 units: 3 of them at max 5 make 2 + 1 pieces, and no
     * piece ends between the halves of a pair or inside the UTF-8. */
    got = chunk("😀😀😀", 5, GW_BREAK_PARAGRAPH);
    EXPECT_STR(got, "😀😀|😀");
    free(got);
    got = chunk("a😀b😀c😀", 4, GW_BREAK_PARAGRAPH);
    EXPECT_STR(got, "a😀b|😀c|😀");
    free(got);
    /* Emoji counted as two units: 2000 of them (4000 units) fit a Discord
     * limit of 2000 only in two pieces. */
    buf b = BUF_INIT;
    for (int i = 0; i < 2000; i++)
        cm_buf_adds(&b, "😀");
    gw_pieces p;
    cm_gw_pieces_init(&p);
    EXPECT_INT(cm_gw_chunk_text(b.data, b.len, cm_gw_channel_text_limit("discord"),
                                GW_BREAK_PARAGRAPH, &p),
               CM_OK);
    EXPECT_INT(p.n, 2);
    EXPECT_INT(cm_gw_u16len(p.v[0], p.len[0]), 2000);
    EXPECT_INT(cm_utf8_valid_prefix(p.v[0], p.len[0]), p.len[0]);
    cm_gw_pieces_release(&p);
    cm_buf_release(&b);
}

static uint32_t rnd(uint32_t *st)
{
    uint32_t x = *st;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *st = x;
}

/* What chunking must preserve, in order: s without whitespace and fence
 * marker characters (added closing lines are only markers). */
static char *content_of(const char *s, size_t n)
{
    buf b = BUF_INIT;
    cm_buf_adds(&b, "");
    for (size_t k = 0; k < n; k++)
        if (!strchr(" \t\r\n\f\v`~", s[k])) cm_buf_addc(&b, s[k]);
    return cm_buf_detach(&b);
}

/* True when piece a ends with a closing fence line the chunker added and b
 * begins with the reopening line: *keep is a's length without the added
 * "\n" + closing line + "\n" (the "\n" only when a's text ends without
 * one... counted as added either way), *open_len the length of b's first
 * line and its newline. */
static bool added_fence(const char *a, size_t an, const char *b, size_t bn, size_t *keep,
                        size_t *open_len)
{
    if (an < 5 || a[an - 1] != '\n') return false;
    size_t e = an - 1, s = e;
    while (s > 0 && a[s - 1] != '\n')
        s--;
    if (s == 0) return false;
    size_t i = s;
    while (i < e && a[i] == ' ')
        i++;
    char mc = a[i];
    if (mc != '`' && mc != '~') return false;
    for (size_t k = i; k < e; k++)
        if (a[k] != mc) return false;
    if (e - i < 3 || bn < e - s || memcmp(a + s, b, e - s) != 0) return false;
    const char *nl = memchr(b, '\n', bn);
    if (!nl) return false;
    /* The reopening line is the fence's opening line, which a holds. */
    size_t ol = (size_t)(nl - b);
    bool found = false;
    for (size_t k = 0; !found && k + ol < s; k++)
        found = (k == 0 || a[k - 1] == '\n') && memcmp(a + k, b, ol) == 0 && a[k + ol] == '\n';
    if (!found) return false;
    *keep = s; /* a newline the chunker added before it is only whitespace */
    *open_len = (size_t)(nl - b) + 1;
    return true;
}

/* Random texts chunked at once (streaming false) or fed in deltas cut at
 * any byte, drained without force after each, then forced (streaming true,
 * with random min and chunkMode): no piece over max, valid UTF-8, and the
 * content preserved in order. */
static void property_random(bool streaming)
{
    static const char *atoms[] = {
        "word", " ", " ",         "\n",      "\n\n",          ". ",       "!",  "東京",
        "😀",    "é", "\n```js\n", "\n```\n", "\n~~~~ sh x\n", "\n~~~~\n", "\t", "longerword"};
    uint32_t st = 0x9e3779b9u;
    for (int iter = 0; iter < 400; iter++) {
        buf t = BUF_INIT;
        cm_buf_adds(&t, "");
        int atoms_n = (int)(rnd(&st) % 300);
        for (int k = 0; k < atoms_n; k++) {
            const char *a = atoms[rnd(&st) % ARRAY_LEN(atoms)];
            if (strstr(a, "js") || strstr(a, "sh")) /* opening lines are unique */
                cm_buf_printf(&t, "%.*s%d\n", (int)strlen(a) - 1, a, k);
            else
                cm_buf_adds(&t, a);
        }
        int max = 16 + (int)(rnd(&st) % 120);
        gw_break_pref pref = (gw_break_pref)(rnd(&st) % 3);
        gw_pieces p;
        cm_gw_pieces_init(&p);
        if (!streaming) {
            EXPECT_INT(cm_gw_chunk_text(t.data, t.len, max, pref, &p), CM_OK);
        } else {
            gw_chunker c;
            cm_gw_chunker_init(&c, 1 + (int)(rnd(&st) % (uint32_t)max), max, pref);
            c.flush_on_paragraph = rnd(&st) % 2;
            for (size_t off = 0; off < t.len;) {
                size_t want_len = 1 + rnd(&st) % 40, len = CM_MIN(t.len - off, want_len);
                EXPECT_INT(cm_gw_chunker_append(&c, t.data + off, len), CM_OK);
                EXPECT_INT(cm_gw_chunker_drain(&c, false, &p), CM_OK);
                off += len;
            }
            EXPECT_INT(cm_gw_chunker_drain(&c, true, &p), CM_OK);
            EXPECT(!cm_gw_chunker_has_buffered(&c));
            cm_gw_chunker_release(&c);
        }
        buf all = BUF_INIT;
        cm_buf_adds(&all, "");
        size_t skip = 0; /* bytes of an added reopening line at the start of piece i */
        for (size_t i = 0; i < p.n; i++) {
            if (cm_gw_u16len(p.v[i], p.len[i]) > (size_t)max)
                test_fail(__FILE__, __LINE__, "iter %d piece %zu: %zu units > %d", iter, i,
                          cm_gw_u16len(p.v[i], p.len[i]), max);
            EXPECT_INT(cm_utf8_valid_prefix(p.v[i], p.len[i]), p.len[i]);
            size_t keep = p.len[i], open_len = 0;
            if (i + 1 < p.n &&
                added_fence(p.v[i], p.len[i], p.v[i + 1], p.len[i + 1], &keep, &open_len)) {
                cm_buf_add(&all, p.v[i] + skip, keep - skip);
                skip = open_len;
                continue;
            }
            cm_buf_add(&all, p.v[i] + skip, p.len[i] - skip);
            cm_buf_addc(&all, '\n');
            skip = 0;
        }
        char *want = content_of(t.data, t.len), *got = content_of(all.data, all.len);
        if (strcmp(want, got) != 0)
            test_fail(__FILE__, __LINE__, "iter %d: content differs (max %d pref %d stream %d)",
                      iter, max, (int)pref, (int)streaming);
        free(want);
        free(got);
        cm_buf_release(&all);
        cm_gw_pieces_release(&p);
        cm_buf_release(&t);
        if (test_failed()) return;
    }
}

TEST(gateway_out_property_random_texts)
{
    property_random(false);
}

TEST(gateway_out_property_random_streams)
{
    property_random(true);
}

TEST(gateway_out_coalesce_idle_and_bounds)
{
    gw_coalescer q;
    gw_pieces out;
    cm_gw_pieces_init(&out);
    /* min 10, max 30, idle 1000 ms, paragraph joiner */
    cm_gw_coalescer_init(&q, 10, 30, 1000, GW_BREAK_PARAGRAPH);
    EXPECT_INT(cm_gw_coalescer_push(&q, "hello", 5, 0, &out), CM_OK);
    EXPECT_INT(cm_gw_coalescer_push(&q, "world", 5, 400, &out), CM_OK);
    EXPECT_INT(out.n, 0);
    EXPECT_INT(cm_gw_coalescer_due(&q, 1399, &out), CM_OK); /* idle counts from the last piece */
    EXPECT_INT(out.n, 0);
    EXPECT_INT(cm_gw_coalescer_due(&q, 1400, &out), CM_OK);
    EXPECT_INT(out.n, 1);
    EXPECT_STR(out.v[0], "hello\n\nworld");
    /* under min: the idle flush waits, the end sends it */
    EXPECT_INT(cm_gw_coalescer_push(&q, "tiny", 4, 2000, &out), CM_OK);
    EXPECT_INT(cm_gw_coalescer_due(&q, 5000, &out), CM_OK);
    EXPECT_INT(out.n, 1);
    EXPECT_INT(cm_gw_coalescer_end(&q, &out), CM_OK);
    EXPECT_INT(out.n, 2);
    EXPECT_STR(out.v[1], "tiny");
    /* a piece that would overflow max flushes the buffer first */
    EXPECT_INT(cm_gw_coalescer_push(&q, "0123456789abcdef", 16, 6000, &out), CM_OK);
    EXPECT_INT(cm_gw_coalescer_push(&q, "0123456789abcdef", 16, 6001, &out), CM_OK);
    EXPECT_INT(out.n, 3);
    EXPECT_STR(out.v[2], "0123456789abcdef");
    /* reaching max exactly sends at once */
    EXPECT_INT(cm_gw_coalescer_push(&q, "0123456789ab", 12, 6002, &out), CM_OK);
    EXPECT_INT(out.n, 4);
    EXPECT_INT(out.len[3], 30);
    /* a piece of max or more goes out alone, after what was buffered */
    EXPECT_INT(cm_gw_coalescer_push(&q, "abc", 3, 7000, &out), CM_OK);
    char big[40];
    memset(big, 'x', sizeof big);
    EXPECT_INT(cm_gw_coalescer_push(&q, big, sizeof big, 7001, &out), CM_OK);
    EXPECT_INT(out.n, 6);
    EXPECT_STR(out.v[4], "abc");
    EXPECT_INT(out.len[5], 40);
    cm_gw_coalescer_release(&q);
    /* joiners follow the break preference */
    cm_gw_coalescer_init(&q, 1, 100, 0, GW_BREAK_SENTENCE);
    cm_gw_coalescer_push(&q, "a.", 2, 0, &out);
    cm_gw_coalescer_push(&q, "b.", 2, 0, &out);
    EXPECT_INT(cm_gw_coalescer_due(&q, 1000000, &out), CM_OK); /* idle 0: no idle flush */
    EXPECT_INT(out.n, 6);
    cm_gw_coalescer_end(&q, &out);
    EXPECT_STR(out.v[6], "a. b.");
    cm_gw_coalescer_release(&q);
    cm_gw_pieces_release(&out);
}

TEST(gateway_out_stream_breaks)
{
    gw_pieces out;
    cm_gw_pieces_init(&out);
    /* text_end: pieces leave while the model is still writing */
    gw_stream st;
    cm_gw_stream_init(&st, GW_STREAM_TEXT_END, 10, 20, GW_BREAK_PARAGRAPH, 1, 100, 500);
    EXPECT_INT(cm_gw_stream_delta(&st, "First para.\n\nSecond ", 20, 0, &out), CM_OK);
    EXPECT_INT(out.n, 0); /* in the coalescer */
    EXPECT_INT(cm_gw_stream_due(&st, 500, &out), CM_OK);
    EXPECT_INT(out.n, 1);
    EXPECT_STR(out.v[0], "First para.");
    EXPECT_INT(cm_gw_stream_delta(&st, "one.", 4, 600, &out), CM_OK);
    EXPECT_INT(cm_gw_stream_text_end(&st, 700, &out), CM_OK);
    EXPECT_INT(cm_gw_stream_due(&st, 1200, &out), CM_OK);
    EXPECT_INT(out.n, 2);
    EXPECT_STR(out.v[1], "Second one.");
    EXPECT_INT(cm_gw_stream_message_end(&st, 1300, &out), CM_OK);
    EXPECT_INT(out.n, 2);
    cm_gw_stream_release(&st);
    /* message_end: nothing before the end, then every piece */
    cm_gw_pieces_release(&out);
    cm_gw_pieces_init(&out);
    cm_gw_stream_init(&st, GW_STREAM_MESSAGE_END, 10, 20, GW_BREAK_PARAGRAPH, 1, 20, 500);
    EXPECT_INT(cm_gw_stream_delta(&st, "First para.\n\nSecond one is longer.", 34, 0, &out), CM_OK);
    EXPECT_INT(cm_gw_stream_text_end(&st, 10, &out), CM_OK);
    EXPECT_INT(cm_gw_stream_due(&st, 100000, &out), CM_OK);
    EXPECT_INT(out.n, 0);
    EXPECT_INT(cm_gw_stream_message_end(&st, 100001, &out), CM_OK);
    EXPECT(out.n >= 2);
    for (size_t i = 0; i < out.n; i++)
        EXPECT(cm_gw_u16len(out.v[i], out.len[i]) <= 20);
    EXPECT_STR(out.v[0], "First para.");
    cm_gw_stream_release(&st);
    cm_gw_pieces_release(&out);
}

TEST(gateway_out_sender_and_from_labels)
{
    static const struct {
        gw_sender s;
        const char *want;
    } rows[] = {
        {{"Alice", "alice", NULL, "+15550001", "42"}, "Alice (+15550001)"},
        {{NULL, "alice", NULL, NULL, "42"}, "alice (42)"},
        {{"  ", NULL, "Al#1", NULL, NULL}, "Al#1"},
        {{NULL, NULL, NULL, NULL, " 42 "}, "42"},
        {{"42", NULL, NULL, NULL, "42"}, "42"},
        {{NULL, NULL, NULL, NULL, NULL}, ""},
    };
    for (size_t i = 0; i < ARRAY_LEN(rows); i++) {
        buf b = BUF_INIT;
        cm_buf_adds(&b, "");
        EXPECT_INT(cm_gw_sender_label(&b, &rows[i].s), CM_OK);
        if (strcmp(b.data, rows[i].want) != 0)
            test_fail(__FILE__, __LINE__, "row %zu: got \"%s\"", i, b.data);
        cm_buf_release(&b);
    }
    buf b = BUF_INIT;
    cm_gw_from_label(&b, true, NULL, "-100");
    EXPECT_STR(b.data, "Group id:-100");
    cm_buf_reset(&b);
    cm_gw_from_label(&b, true, "Dev chat", NULL);
    EXPECT_STR(b.data, "Dev chat");
    cm_buf_reset(&b);
    cm_gw_from_label(&b, false, "Alice", "Alice");
    EXPECT_STR(b.data, "Alice");
    cm_buf_reset(&b);
    cm_gw_from_label(&b, false, "Alice", "42");
    EXPECT_STR(b.data, "Alice id:42");
    cm_buf_release(&b);
}

TEST(gateway_out_envelope_format)
{
    const int64_t t0 = 1767623400000; /* Mon 2026-01-05 14:30 UTC */
    gw_envelope_opts utc = {GW_TZ_UTC, false, false};
    static const struct {
        gw_envelope e;
        bool no_ts;
        const char *want;
    } rows[] = {
        {{"Telegram", "Alice id:42", NULL, true, false, t0, 0, "hi"},
         false,
         "[Telegram Alice id:42 Mon 2026-01-05T14:30Z] hi"},
        /* groups: the sender label prefixes the body */
        {{"Telegram", "Dev id:-100", "Bob (7)", false, false, t0, t0 - 300000, "yo"},
         false,
         "[Telegram Dev id:-100 +5m Mon 2026-01-05T14:30Z] Bob (7): yo"},
        /* direct chats take no label; own messages are "(self)" */
        {{"Telegram", "Alice", "Alice", true, true, 0, 0, "note"},
         false,
         "[Telegram Alice] (self): note"},
        /* header parts: brackets and newlines neutralised */
        {{NULL, "Eve [admin]\nx", NULL, true, false, 0, 0, "b"},
         false,
         "[Channel Eve (admin) x] b"},
        {{"HTTP", NULL, NULL, true, false, t0, t0 - 25000, "b"}, true, "[HTTP +25s] b"},
        {{"HTTP", NULL, NULL, true, false, t0, t0 - 45000, "b"}, true, "[HTTP +1m] b"},
        {{"HTTP", "u", NULL, true, false, t0, t0 - 3 * 3600000, "b"}, true, "[HTTP u +3h] b"},
        {{"HTTP", "u", NULL, true, false, t0, t0 - 50 * 3600000LL, "b"}, true, "[HTTP u +2d] b"},
        {{"HTTP", "u", NULL, true, false, t0, t0 + 1000, "b"}, true, "[HTTP u] b"},
    };
    for (size_t i = 0; i < ARRAY_LEN(rows); i++) {
        buf b = BUF_INIT;
        gw_envelope_opts o = utc;
        o.no_timestamp = rows[i].no_ts;
        EXPECT_INT(cm_gw_envelope_format(&b, &rows[i].e, &o), CM_OK);
        if (strcmp(b.data, rows[i].want) != 0)
            test_fail(__FILE__, __LINE__, "row %zu: got \"%s\" want \"%s\"", i, b.data,
                      rows[i].want);
        cm_buf_release(&b);
    }
    /* local time: "Mon 2026-01-05 HH:MM ZONE" */
    buf b = BUF_INIT;
    gw_envelope e = {"Telegram", NULL, NULL, true, false, t0, 0, "x"};
    EXPECT_INT(cm_gw_envelope_format(&b, &e, NULL), CM_OK);
    EXPECT(strncmp(b.data, "[Telegram Mon 2026-01-05 ", 25) == 0 ||
           strncmp(b.data, "[Telegram Tue 2026-01-06 ", 25) == 0 ||
           strncmp(b.data, "[Telegram Sun 2026-01-04 ", 25) == 0);
    cm_buf_release(&b);
}

TEST(gateway_out_history_pending_only)
{
    const int64_t t0 = 1767623400000;
    gw_history h;
    cm_gw_history_init(&h, 2);
    gw_history_fmt fmt = {"Telegram", "Dev id:-100", {GW_TZ_UTC, true, false}};
    buf b = BUF_INIT;
    /* nothing pending: the current message alone */
    EXPECT_INT(cm_gw_history_build(&b, &h, "g1", &fmt, "[Telegram] Carol: now"), CM_OK);
    EXPECT_STR(b.data, "[Telegram] Carol: now");
    /* three mention-gated messages, limit 2: the oldest is dropped */
    EXPECT_INT(cm_gw_history_record(&h, "g1", "Alice", "one", "11", t0), CM_OK);
    EXPECT_INT(cm_gw_history_record(&h, "g1", "Bob", "two", NULL, t0), CM_OK);
    EXPECT_INT(cm_gw_history_record(&h, "g1", "Alice", "three", "13", t0), CM_OK);
    EXPECT_INT(cm_gw_history_record(&h, "g2", "Zed", "other chat", NULL, t0), CM_OK);
    EXPECT_INT(cm_gw_history_count(&h, "g1"), 2);
    cm_buf_reset(&b);
    EXPECT_INT(cm_gw_history_build(&b, &h, "g1", &fmt, "[Telegram] Carol: now"), CM_OK);
    EXPECT_STR(b.data, "[Chat messages since your last reply - for context]\n"
                       "[Telegram Dev id:-100] Bob: two\n"
                       "[Telegram Dev id:-100] Alice: three [id:13]\n"
                       "\n"
                       "[Current message - respond to this]\n"
                       "[Telegram] Carol: now");
    /* the run took them: they are never sent twice */
    cm_gw_history_clear(&h, "g1");
    cm_buf_reset(&b);
    EXPECT_INT(cm_gw_history_build(&b, &h, "g1", &fmt, "next"), CM_OK);
    EXPECT_STR(b.data, "next");
    EXPECT_INT(cm_gw_history_count(&h, "g2"), 1);
    cm_gw_history_release(&h);
    /* limit 0 disables history */
    cm_gw_history_init(&h, 0);
    EXPECT_INT(cm_gw_history_record(&h, "g1", "Alice", "one", NULL, t0), CM_OK);
    EXPECT_INT(cm_gw_history_count(&h, "g1"), 0);
    cm_buf_reset(&b);
    EXPECT_INT(cm_gw_history_build(&b, &h, "g1", &fmt, "cur"), CM_OK);
    EXPECT_STR(b.data, "cur");
    cm_gw_history_release(&h);
    /* default limit, and the least recently used conversation goes first */
    cm_gw_history_init(&h, -1);
    EXPECT_INT(h.limit, 50);
    char key[32];
    for (int i = 0; i <= GW_HISTORY_MAX_KEYS; i++) {
        snprintf(key, sizeof key, "k%d", i);
        EXPECT_INT(cm_gw_history_record(&h, key, "s", "m", NULL, t0), CM_OK);
        if (i == 0) EXPECT_INT(cm_gw_history_record(&h, "k0", "s", "m2", NULL, t0), CM_OK);
        if (i == 10) EXPECT_INT(cm_gw_history_record(&h, "k0", "s", "m3", NULL, t0), CM_OK);
    }
    EXPECT_INT(h.n, GW_HISTORY_MAX_KEYS);
    EXPECT_INT(cm_gw_history_count(&h, "k0"), 3);
    EXPECT_INT(cm_gw_history_count(&h, "k1"), 0); /* evicted */
    cm_gw_history_release(&h);
    cm_buf_release(&b);
}

TEST(gateway_out_directive_stripping)
{
    static const struct {
        const char *in, *want;
    } rows[] = {
        {"  plain text\n  stays  ", "plain text\n  stays"},
        {"/think high explain this", "explain this"},
        {"explain /think: low this", "explain this"},
        {"/t medium go", "go"},
        {"/THINKING: high go", "go"},
        /* the word after a level directive is its level, whatever it is */
        {"/think go", ""},
        {"a/think not a directive", "a/think not a directive"},
        {"/thinker stays", "/thinker stays"},
        {"/verbose on\nline two", "line two"},
        {"/v off x", "x"},
        {"/reasoning stream why?", "why?"},
        {"/reason on why", "why"},
        {"/fast on quick", "quick"},
        {"/elevated full run it", "run it"},
        {"/status", ""},
        {"/status: what now", "what now"},
        {"use /model openai/gpt-5.2 please", "use please"},
        {"/model: anthropic/claude-opus-4@work hi", "hi"},
        {"/think high /verbose on /model x/y hello\n\nworld", "hello world"},
        /* only the first of each kind goes */
        {"/think a /think b c", "/think b c"},
        /* /queue and /exec are commands of their own: left in the text */
        {"/queue collect hi", "/queue collect hi"},
    };
    for (size_t i = 0; i < ARRAY_LEN(rows); i++) {
        buf b = BUF_INIT;
        cm_buf_adds(&b, "");
        EXPECT_INT(cm_gw_directives_strip(&b, rows[i].in, NULL), CM_OK);
        if (strcmp(b.data, rows[i].want) != 0)
            test_fail(__FILE__, __LINE__, "row %zu: got \"%s\" want \"%s\"", i, b.data,
                      rows[i].want);
        cm_buf_release(&b);
    }
    gw_directives d;
    buf b = BUF_INIT;
    EXPECT_INT(cm_gw_directives_strip(&b, "/think: high /model openai/gpt-5.2 /status go", &d),
               CM_OK);
    EXPECT(d.think && d.model && d.status && !d.verbose);
    EXPECT_STR(d.level_think, "high");
    EXPECT_STR(d.model_ref, "openai/gpt-5.2");
    EXPECT_STR(b.data, "go");
    cm_buf_release(&b);
}

TEST(gateway_out_strip_current_message_only)
{
    const char *body = "[Chat messages since your last reply - for context]\n"
                       "[Telegram G] Bob: /think high keep this\n"
                       "\n"
                       "[Current message - respond to this]\n"
                       "[Telegram G] Alice: /verbose on do it";
    buf b = BUF_INIT;
    gw_directives d;
    EXPECT_INT(cm_gw_body_strip_current(&b, body, &d), CM_OK);
    EXPECT_STR(b.data, "[Chat messages since your last reply - for context]\n"
                       "[Telegram G] Bob: /think high keep this\n"
                       "\n"
                       "[Current message - respond to this]\n"
                       "[Telegram G] Alice: do it");
    EXPECT(d.verbose && !d.think);
    cm_buf_reset(&b);
    EXPECT_INT(cm_gw_body_strip_current(&b, "/think low hi", &d), CM_OK);
    EXPECT_STR(b.data, "hi");
    EXPECT(d.think);
    cm_buf_release(&b);
}

TEST(gateway_out_pathological_inputs)
{
    /* An 8 MB single line and 20k small fences chunked at the Telegram
     * limit: linear time (a fixed budget), every piece within the limit. */
    buf b = BUF_INIT;
    for (int i = 0; i < (8 << 20) / 8; i++)
        cm_buf_adds(&b, "abcdefg ");
    for (int i = 0; i < 20000; i++)
        cm_buf_adds(&b, "\n```\nx\n```\n");
    int64_t t0 = cm_now_ms();
    gw_pieces p;
    cm_gw_pieces_init(&p);
    EXPECT_INT(cm_gw_chunk_text(b.data, b.len, 4000, GW_BREAK_PARAGRAPH, &p), CM_OK);
    int64_t ms = cm_now_ms() - t0;
    EXPECT(p.n > b.len / 4000);
    size_t total = 0;
    for (size_t i = 0; i < p.n; i++) {
        EXPECT(cm_gw_u16len(p.v[i], p.len[i]) <= 4000);
        total += p.len[i];
    }
    EXPECT(total + p.n >= b.len - 20000 * 2);
    if (ms > 5000) test_fail(__FILE__, __LINE__, "took %lld ms", (long long)ms);
    cm_gw_pieces_release(&p);
    cm_buf_release(&b);
}

TEST(gateway_out_stream_config_and_human_delay)
{
    static const struct {
        const char *channel;
        int limit;
        gw_stream_cfg req, want;
    } rows[] = {
        /* defaults: 800/1200, coalesce min = chunk min, max = chunk max, 1000 ms */
        {"telegram", 0, {0, 0, GW_BREAK_PARAGRAPH, 0, 0, -1}, {800, 1200, 0, 800, 1200, 1000}},
        /* Discord's coalesce default 1500 is capped at the chunk max */
        {"discord", 0, {0, 0, GW_BREAK_PARAGRAPH, 0, 0, -1}, {800, 1200, 0, 1200, 1200, 1000}},
        {"discord", 0, {0, 1800, GW_BREAK_NEWLINE, 0, 0, -1}, {800, 1800, 1, 1500, 1800, 1000}},
        /* a channel limit below the chunk bounds caps both */
        {"http", 500, {0, 0, GW_BREAK_SENTENCE, 0, 0, 9000}, {500, 500, 2, 500, 500, 5000}},
        {"slack", 0, {100, 300, 0, 50, 200, 0}, {100, 300, 0, 50, 200, 0}},
        {"telegram", 10000, {0, 9000, 0, 0, 0, -1}, {800, 9000, 0, 800, 9000, 1000}},
    };
    for (size_t i = 0; i < ARRAY_LEN(rows); i++) {
        gw_stream_cfg got;
        cm_gw_stream_cfg_resolve(&got, rows[i].channel, rows[i].limit, &rows[i].req);
        const gw_stream_cfg *w = &rows[i].want;
        if (got.chunk_min != w->chunk_min || got.chunk_max != w->chunk_max || got.pref != w->pref ||
            got.co_min != w->co_min || got.co_max != w->co_max || got.idle_ms != w->idle_ms)
            test_fail(__FILE__, __LINE__, "row %zu: got %d/%d pref %d co %d/%d idle %d", i,
                      got.chunk_min, got.chunk_max, (int)got.pref, got.co_min, got.co_max,
                      got.idle_ms);
    }
    EXPECT_INT(cm_gw_human_delay_ms(GW_DELAY_OFF, 0, 0, 12345), 0);
    EXPECT_INT(cm_gw_human_delay_ms(GW_DELAY_NATURAL, 0, 0, 0), 800);
    EXPECT_INT(cm_gw_human_delay_ms(GW_DELAY_NATURAL, 0, 0, UINT32_MAX), 2500);
    EXPECT_INT(cm_gw_human_delay_ms(GW_DELAY_CUSTOM, 100, 200, 1u << 31), 150);
    EXPECT_INT(cm_gw_human_delay_ms(GW_DELAY_CUSTOM, 300, 200, 999), 300);
    uint32_t st = 7;
    for (int i = 0; i < 1000; i++) {
        int d = cm_gw_human_delay_ms(GW_DELAY_NATURAL, 0, 0, rnd(&st));
        EXPECT(d >= 800 && d <= 2500);
    }
}

TEST(gateway_out_flush_on_paragraph)
{
    const char *text = "para one\n\npara two\n \n\npar";
    gw_pieces out;
    cm_gw_pieces_init(&out);
    /* chunkMode length: one piece up to the last paragraph break */
    gw_chunker c;
    cm_gw_chunker_init(&c, 5, 100, GW_BREAK_PARAGRAPH);
    cm_gw_chunker_append(&c, text, strlen(text));
    EXPECT_INT(cm_gw_chunker_drain(&c, false, &out), CM_OK);
    char *got = joined(&out);
    EXPECT_STR(got, "para one\n\npara two\n ");
    free(got);
    cm_gw_chunker_release(&c);
    cm_gw_pieces_release(&out);
    /* chunkMode newline: every paragraph once min is reached */
    cm_gw_pieces_init(&out);
    cm_gw_chunker_init(&c, 5, 100, GW_BREAK_PARAGRAPH);
    c.flush_on_paragraph = true;
    cm_gw_chunker_append(&c, text, strlen(text));
    EXPECT_INT(cm_gw_chunker_drain(&c, false, &out), CM_OK);
    got = joined(&out);
    EXPECT_STR(got, "para one|para two");
    free(got);
    EXPECT_STR(c.text.data, "par");
    /* a blank line inside a fence is no paragraph break */
    cm_gw_chunker_append(&c, "\n```\na\n\nb\n```\n\nz", 16);
    EXPECT_INT(cm_gw_chunker_drain(&c, false, &out), CM_OK);
    EXPECT_INT(out.n, 3);
    EXPECT_STR(out.v[2], "par\n```\na\n\nb\n```");
    EXPECT_STR(c.text.data, "z");
    cm_gw_chunker_release(&c);
    cm_gw_pieces_release(&out);
}
