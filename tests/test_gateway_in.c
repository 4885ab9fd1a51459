/*
 * test_gateway_in.c — the gateway's inbound rules (src/gateway/inbound.h):
 * dedupe, debounce and access, each from a table of events over a fake clock.
 */
#include "test.h"

#include "../src/gateway/inbound.h"

/* ---- dedupe ------------------------------------------------------------- */

TEST(gw_in_dedupe_key)
{
    static const struct {
        gw_msg m;
        const char *want; /* NULL: no key */
    } cases[] = {
        {{.channel = " Telegram ", .account = "default", .peer = "42", .message_id = "7"},
         "telegram|default|42|7"},
        {{.channel = "telegram", .peer = "42", .thread = "3", .message_id = "7"},
         "telegram|42|3|7"},
        {{.channel = "http",
          .session = "agent:main:telegram:group:9",
          .peer = "9",
          .message_id = "m1"},
         "http|agent:main|9|m1"},
        {{.channel = "http", .session = "custom-key", .peer = "9", .message_id = "m1"},
         "http|custom-key|9|m1"},
        {{.channel = "telegram", .peer = "42"}, NULL},
        {{.peer = "42", .message_id = "7"}, NULL},
        {{.channel = "telegram", .message_id = "7", .peer = "  "}, NULL},
    };
    buf b;
    buf_init(&b, 0);
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        bool ok = gw_dedupe_key(&cases[i].m, &b);
        if (!cases[i].want) {
            if (ok) buf_release(&b);
            EXPECT(!ok);
            continue;
        }
        if (!ok) buf_release(&b);
        EXPECT(ok);
        if (strcmp(b.data, cases[i].want) != 0) buf_release(&b);
        EXPECT_STR(b.data, cases[i].want);
    }
    buf_release(&b);
}

TEST(gw_in_dedupe_ttl)
{
    gw_dedupe *d = NULL;
    EXPECT_INT(gw_dedupe_new(GW_DEDUPE_TTL_MS, GW_DEDUPE_MAX, &d), CM_OK);
    gw_msg m = {.channel = "telegram", .account = "default", .peer = "42", .message_id = "100"};
    gw_msg other = m;
    other.message_id = "101";
    int64_t t = 1000000;
    static const struct {
        int64_t dt; /* since the previous step */
        bool use_other;
        bool want_dup;
    } steps[] = {
        {0, false, false},                   /* first delivery */
        {1000, false, true},                 /* redelivered a second later */
        {0, true, false},                    /* another message id is new */
        {GW_DEDUPE_TTL_MS - 1, false, true}, /* still within the TTL (refreshed) */
        {GW_DEDUPE_TTL_MS, false, false},    /* expired: new again */
        {1, false, true},
    };
    bool ok = true;
    for (size_t i = 0; i < ARRAY_LEN(steps) && ok; i++) {
        t += steps[i].dt;
        bool dup = gw_dedupe_check_msg(d, steps[i].use_other ? &other : &m, t);
        if (dup != steps[i].want_dup) {
            test_fail(__FILE__, __LINE__, "step %zu: dup %d, want %d", i, dup, steps[i].want_dup);
            ok = false;
        }
    }
    /* a message without an id is never a duplicate */
    gw_msg noid = {.channel = "telegram", .peer = "42"};
    EXPECT(ok);
    bool a = gw_dedupe_check_msg(d, &noid, t), b = gw_dedupe_check_msg(d, &noid, t);
    gw_dedupe_free(d);
    EXPECT(!a && !b);
}

TEST(gw_in_dedupe_cap)
{
    gw_dedupe *d = NULL;
    EXPECT_INT(gw_dedupe_new(0, 3, &d), CM_OK);
    bool r[8];
    r[0] = gw_dedupe_check(d, "a", 1);
    r[1] = gw_dedupe_check(d, "b", 2);
    r[2] = gw_dedupe_check(d, "c", 3);
    r[3] = gw_dedupe_check(d, "a", 4); /* dup; a becomes newest */
    r[4] = gw_dedupe_check(d, "d", 5); /* evicts b, the oldest */
    size_t size = gw_dedupe_size(d);
    r[5] = gw_dedupe_check(d, "b", 6); /* b was evicted: new; evicts c */
    r[6] = gw_dedupe_check(d, "a", 7);
    r[7] = gw_dedupe_check(d, "c", 8);
    gw_dedupe_free(d);
    EXPECT(!r[0] && !r[1] && !r[2] && r[3] && !r[4]);
    EXPECT_INT(size, 3);
    EXPECT(!r[5] && r[6] && !r[7]);
    EXPECT_INT(gw_dedupe_new(1000, 0, &d), CM_EINVAL);
}

TEST(gw_in_dedupe_many)
{
    /* 5000 distinct keys, then a second pass: all duplicates, size capped */
    gw_dedupe *d = NULL;
    EXPECT_INT(gw_dedupe_new(GW_DEDUPE_TTL_MS, GW_DEDUPE_MAX, &d), CM_OK);
    char key[32];
    size_t dups = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < GW_DEDUPE_MAX; i++) {
            snprintf(key, sizeof key, "k%d", i);
            dups += gw_dedupe_check(d, key, 1000 + pass);
        }
    snprintf(key, sizeof key, "k%d", GW_DEDUPE_MAX);
    bool newest = gw_dedupe_check(d, key, 2000);
    size_t size = gw_dedupe_size(d);
    bool first = gw_dedupe_check(d, "k0", 2001); /* evicted by the cap */
    gw_dedupe_free(d);
    EXPECT_INT(dups, GW_DEDUPE_MAX);
    EXPECT(!newest);
    EXPECT_INT(size, GW_DEDUPE_MAX);
    EXPECT(!first);
}

/* ---- debounce ----------------------------------------------------------- */

TEST(gw_in_control_commands)
{
    static const struct {
        const char *text;
        bool want;
    } cases[] = {
        {"/new", true},
        {"  /RESET  ", true},
        {"/new let's start over", true},
        {"/model: gpt-5", true},
        {"/queue collect", true},
        {"/reasoning on", true},
        {"/stop", true},
        {"/stop now", false}, /* /stop takes no arguments */
        {"/status\nand more", true},
        {"/newish", false},
        {"/new@clawbot", true},
        {"/new@otherbot", false},
        {"/think high", true},
        {"/t low", true},
        {"/bash ls", false}, /* gated: commands.bash is off */
        {"hello /new", false},
        {"hello", false},
        {"", false},
        {"/", false},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        bool got = gw_is_control_command(cases[i].text, "clawbot", NULL);
        if (got != cases[i].want)
            test_fail(__FILE__, __LINE__, "\"%s\": got %d, want %d", cases[i].text, got,
                      cases[i].want);
    }
    json_t *root = json_pack("{s:{s:b}}", "commands", "bash", 1);
    EXPECT(root);
    bool bash = gw_is_control_command("/bash ls", NULL, root);
    json_decref(root);
    EXPECT(bash);
}

TEST(gw_in_debounce_window_config)
{
    json_error_t je;
    json_t *root = json_loads("{\"messages\":{\"inbound\":{\"debounceMs\":1200.7,"
                              "\"byChannel\":{\"slack\":1500,\"http\":0,\"bad\":\"x\","
                              "\"neg\":-5}}}}",
                              0, &je);
    EXPECT(root);
    int64_t tg = gw_debounce_ms(root, "telegram"), sl = gw_debounce_ms(root, "slack");
    int64_t ht = gw_debounce_ms(root, "http"), bad = gw_debounce_ms(root, "bad");
    int64_t neg = gw_debounce_ms(root, "neg");
    json_decref(root);
    EXPECT_INT(gw_debounce_ms(NULL, "telegram"), GW_DEBOUNCE_MS_DEFAULT);
    EXPECT_INT(tg, 1200);
    EXPECT_INT(sl, 1500);
    EXPECT_INT(ht, 0);
    EXPECT_INT(bad, 1200);
    EXPECT_INT(neg, 0);
}

/* One step of a debounce table: a message (text NULL: just advance the
 * clock and collect due turns) and the turns expected as "id=text" joined
 * by " ; ", or "" for none. */
typedef struct db_step {
    int64_t at;
    const char *sender, *peer, *id, *text;
    bool media;
    const char *want;
} db_step;

static bool S_run_table(const db_step *steps, size_t n, const json_t *root)
{
    gw_debounce *d = NULL;
    gw_turns got = {0};
    buf desc;
    buf_init(&desc, 0);
    bool ok = gw_debounce_new(root, "clawbot", &d) == CM_OK;
    for (size_t i = 0; ok && i < n; i++) {
        const db_step *s = &steps[i];
        cm_rc rc;
        if (s->id) {
            gw_msg m = {.channel = "telegram",
                        .peer = s->peer ? s->peer : "chat1",
                        .sender = s->sender ? s->sender : "alice",
                        .message_id = s->id,
                        .text = s->text,
                        .has_media = s->media};
            rc = gw_debounce_push(d, &m, s->at, &got);
        } else {
            rc = gw_debounce_due(d, s->at, &got);
        }
        buf_reset(&desc);
        for (size_t j = 0; rc == CM_OK && j < got.n; j++)
            rc = buf_printf(&desc, "%s%s=%s", j ? " ; " : "", got.v[j].message_id,
                            got.v[j].text ? got.v[j].text : "");
        if (rc != CM_OK || strcmp(desc.len ? desc.data : "", s->want) != 0) {
            test_fail(__FILE__, __LINE__, "step %zu (t=%lld): got \"%s\", want \"%s\"", i,
                      (long long)s->at, desc.len ? desc.data : "", s->want);
            ok = false;
        }
        gw_turns_release(&got);
    }
    gw_debounce_free(d);
    buf_release(&desc);
    return ok;
}

TEST(gw_in_debounce_burst)
{
    /* window 2000 (default): a burst of three texts is one turn with the
     * newest id; each message moves the deadline */
    static const db_step steps[] = {
        {0, NULL, NULL, "1", "hi", false, ""},
        {500, NULL, NULL, "2", "are you there", false, ""},
        {2400, NULL, NULL, NULL, NULL, false, ""}, /* 2000 after "2" is 2500 */
        {2450, NULL, NULL, "3", "?", false, ""},
        {4449, NULL, NULL, NULL, NULL, false, ""},
        {4450, NULL, NULL, NULL, NULL, false, "3=hi\nare you there\n?"},
        {4451, NULL, NULL, NULL, NULL, false, ""},
        {9000, NULL, NULL, "4", "later", false, ""},
        {11000, NULL, NULL, NULL, NULL, false, "4=later"},
    };
    EXPECT(S_run_table(steps, ARRAY_LEN(steps), NULL));
}

TEST(gw_in_debounce_media_and_commands)
{
    static const db_step steps[] = {
        /* media flushes the pending batch at once, then goes alone */
        {0, NULL, NULL, "1", "look", false, ""},
        {100, NULL, NULL, "2", "at this", false, ""},
        {200, NULL, NULL, "3", "<photo>", true, "2=look\nat this ; 3=<photo>"},
        /* a control command: batch first, then the command standalone */
        {300, NULL, NULL, "4", "oops", false, ""},
        {400, NULL, NULL, "5", "/new", false, "4=oops ; 5=/new"},
        /* a command with nothing pending is a turn of its own at once */
        {500, NULL, NULL, "6", "/queue collect", false, "6=/queue collect"},
        /* other senders and other conversations have their own batches */
        {600, "alice", "chat1", "7", "a1", false, ""},
        {700, "bob", "chat1", "8", "b1", false, ""},
        {800, "alice", "chat2", "9", "a2", false, ""},
        {900, "alice", "chat1", "10", "a3", false, ""},
        {2700, NULL, NULL, NULL, NULL, false, "8=b1"},
        {2900, NULL, NULL, NULL, NULL, false, "9=a2 ; 10=a1\na3"},
        /* an empty text is not debounced (and joins nothing) */
        {3000, NULL, NULL, "11", "", false, "11="},
    };
    EXPECT(S_run_table(steps, ARRAY_LEN(steps), NULL));
}

TEST(gw_in_debounce_off_and_deadline)
{
    json_t *root = json_pack("{s:{s:{s:i}}}", "messages", "inbound", "debounceMs", 0);
    EXPECT(root);
    static const db_step off[] = {
        {0, NULL, NULL, "1", "a", false, "1=a"},
        {1, NULL, NULL, "2", "b", false, "2=b"},
    };
    bool ok = S_run_table(off, ARRAY_LEN(off), root);
    json_decref(root);
    EXPECT(ok);

    gw_debounce *d = NULL;
    gw_turns t = {0};
    EXPECT_INT(gw_debounce_new(NULL, NULL, &d), CM_OK);
    int64_t none = gw_debounce_next_deadline(d);
    gw_msg a = {.channel = "telegram", .peer = "p", .sender = "s1", .message_id = "1", .text = "x"};
    gw_msg b = a;
    b.sender = "s2";
    b.message_id = "2";
    cm_rc rc1 = gw_debounce_push(d, &a, 1000, &t), rc2 = gw_debounce_push(d, &b, 1500, &t);
    int64_t next = gw_debounce_next_deadline(d);
    size_t pending = gw_debounce_pending(d);
    cm_rc rc3 = gw_debounce_flush_all(d, &t);
    size_t flushed = t.n, after = gw_debounce_pending(d);
    gw_turns_release(&t);
    gw_debounce_free(d);
    EXPECT_INT(none, INT64_MAX);
    EXPECT(rc1 == CM_OK && rc2 == CM_OK && rc3 == CM_OK);
    EXPECT_INT(next, 3000);
    EXPECT_INT(pending, 2);
    EXPECT_INT(flushed, 2);
    EXPECT_INT(after, 0);
}

TEST(gw_in_debounce_runaway_burst)
{
    /* a sender who never pauses is cut every GW_DEBOUNCE_MAX_PARTS messages */
    gw_debounce *d = NULL;
    gw_turns t = {0};
    EXPECT_INT(gw_debounce_new(NULL, NULL, &d), CM_OK);
    gw_msg m = {.channel = "telegram", .peer = "p", .sender = "s", .message_id = "x", .text = "y"};
    cm_rc rc = CM_OK;
    for (int i = 0; i < GW_DEBOUNCE_MAX_PARTS * 2 + 1 && rc == CM_OK; i++)
        rc = gw_debounce_push(d, &m, i, &t);
    size_t n = t.n, first = n ? t.v[0].count : 0;
    gw_turns_release(&t);
    gw_debounce_free(d);
    EXPECT_INT(rc, CM_OK);
    EXPECT_INT(n, 2);
    EXPECT_INT(first, GW_DEBOUNCE_MAX_PARTS);
}
