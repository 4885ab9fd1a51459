/*
 * test_gateway_in.c — the gateway's inbound rules (src/gateway/core/ dedupe.h,
 * debounce.h, commands.h): dedupe, control commands and debounce, each from
 * a table of events over a fake clock.
 */
#include "../src/gateway/core/commands.h"
#include "../src/gateway/core/debounce.h"
#include "../src/gateway/core/dedupe.h"
#include "gw_fixture.h"
#include "test.h"

/* ---- dedupe ------------------------------------------------------------- */

TEST(gw_in_dedupe_key)
{
    static const struct {
        gw_msg m;
        const char *want; /* NULL: no key */
    } cases[] = {
        {{.channel = " Telegram ", .account = "default", .peer = "42", .message_id = "7"},
         "8:telegram|7:default|0:|2:42|0:|1:7"},
        {{.channel = "telegram", .peer = "42", .thread = "3", .message_id = "7"},
         "8:telegram|0:|0:|2:42|1:3|1:7"},
        {{.channel = "http",
          .session = "agent:main:telegram:group:9",
          .peer = "9",
          .message_id = "m1"},
         "4:http|0:|10:agent:main|1:9|0:|2:m1"},
        {{.channel = "http", .session = "custom-key", .peer = "9", .message_id = "m1"},
         "4:http|0:|10:custom-key|1:9|0:|2:m1"},
        {{.channel = "telegram", .peer = "42"}, NULL},
        {{.peer = "42", .message_id = "7"}, NULL},
        {{.channel = "telegram", .message_id = "7", .peer = "  "}, NULL},
    };
    buf b;
    cm_buf_init(&b, 0);
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        bool ok = cm_gw_dedupe_key(&cases[i].m, &b);
        if (!cases[i].want) {
            if (ok) cm_buf_release(&b);
            EXPECT(!ok);
            continue;
        }
        if (!ok) cm_buf_release(&b);
        EXPECT(ok);
        if (strcmp(b.data, cases[i].want) != 0) cm_buf_release(&b);
        EXPECT_STR(b.data, cases[i].want);
    }
    cm_buf_release(&b);
}

/* Parts containing the old separator: two different messages once made one
 * key ("alice|7" as a peer, or peer "alice" in thread "7"). */
TEST(gw_in_dedupe_key_unambiguous)
{
    static const struct {
        gw_msg a, b;
    } pairs[] = {
        {{.channel = "telegram", .peer = "alice|7", .message_id = "42"},
         {.channel = "telegram", .peer = "alice", .thread = "7", .message_id = "42"}},
        {{.channel = "http", .account = "x|y", .peer = "p", .message_id = "1"},
         {.channel = "http", .account = "x", .session = "y", .peer = "p", .message_id = "1"}},
        {{.channel = "http", .peer = "p", .thread = "t|1", .message_id = "2"},
         {.channel = "http", .peer = "p", .thread = "t", .message_id = "1|2"}},
    };
    buf ka = BUF_INIT, kb = BUF_INIT, la = BUF_INIT, lb = BUF_INIT;
    bool distinct = true, legacy_same = true, cache_ok = true;
    for (size_t i = 0; i < ARRAY_LEN(pairs); i++) {
        distinct = distinct && cm_gw_dedupe_key(&pairs[i].a, &ka) &&
                   cm_gw_dedupe_key(&pairs[i].b, &kb) && strcmp(ka.data, kb.data) != 0;
        /* the old form made them one (what an older journal holds) */
        legacy_same = legacy_same && cm_gw_dedupe_key_legacy(&pairs[i].a, &la) &&
                      cm_gw_dedupe_key_legacy(&pairs[i].b, &lb) && !strcmp(la.data, lb.data);
        gw_dedupe *d = NULL;
        if (cm_gw_dedupe_open(GW_DEDUPE_TTL_MS, GW_DEDUPE_MAX, &d)) return;
        bool first = cm_gw_dedupe_check_msg(d, &pairs[i].a, 1000);
        bool second = cm_gw_dedupe_check_msg(d, &pairs[i].b, 1001);
        bool again = cm_gw_dedupe_check_msg(d, &pairs[i].b, 1002);
        cm_gw_dedupe_close(d);
        cache_ok = cache_ok && !first && !second && again;
    }
    cm_gw_dedupe_key_legacy(&pairs[0].a, &la);
    char legacy0[64];
    snprintf(legacy0, sizeof legacy0, "%s", la.data ? la.data : "");
    cm_buf_release(&ka);
    cm_buf_release(&kb);
    cm_buf_release(&la);
    cm_buf_release(&lb);
    EXPECT(distinct);
    EXPECT(legacy_same);
    EXPECT(cache_ok);
    EXPECT_STR(legacy0, GW_DEDUPE_LEGACY_PREFIX "telegram|alice|7|42");
}

TEST(gw_in_dedupe_ttl)
{
    gw_dedupe *d = NULL;
    EXPECT_INT(cm_gw_dedupe_open(GW_DEDUPE_TTL_MS, GW_DEDUPE_MAX, &d), CM_OK);
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
        bool dup = cm_gw_dedupe_check_msg(d, steps[i].use_other ? &other : &m, t);
        if (dup != steps[i].want_dup) {
            test_fail(__FILE__, __LINE__, "step %zu: dup %d, want %d", i, dup, steps[i].want_dup);
            ok = false;
        }
    }
    /* a message without an id is never a duplicate */
    gw_msg noid = {.channel = "telegram", .peer = "42"};
    EXPECT(ok);
    bool a = cm_gw_dedupe_check_msg(d, &noid, t), b = cm_gw_dedupe_check_msg(d, &noid, t);
    cm_gw_dedupe_close(d);
    EXPECT(!a && !b);
}

TEST(gw_in_dedupe_cap)
{
    gw_dedupe *d = NULL;
    EXPECT_INT(cm_gw_dedupe_open(0, 3, &d), CM_OK);
    bool r[8];
    r[0] = cm_gw_dedupe_check(d, "a", 1);
    r[1] = cm_gw_dedupe_check(d, "b", 2);
    r[2] = cm_gw_dedupe_check(d, "c", 3);
    r[3] = cm_gw_dedupe_check(d, "a", 4); /* dup; a becomes newest */
    r[4] = cm_gw_dedupe_check(d, "d", 5); /* evicts b, the oldest */
    size_t size = cm_gw_dedupe_size(d);
    r[5] = cm_gw_dedupe_check(d, "b", 6); /* b was evicted: new; evicts c */
    r[6] = cm_gw_dedupe_check(d, "a", 7);
    r[7] = cm_gw_dedupe_check(d, "c", 8);
    cm_gw_dedupe_close(d);
    EXPECT(!r[0] && !r[1] && !r[2] && r[3] && !r[4]);
    EXPECT_INT(size, 3);
    EXPECT(!r[5] && r[6] && !r[7]);
    EXPECT_INT(cm_gw_dedupe_open(1000, 0, &d), CM_EINVAL);
}

TEST(gw_in_dedupe_many)
{
    /* 5000 distinct keys, then a second pass: all duplicates, size capped */
    gw_dedupe *d = NULL;
    EXPECT_INT(cm_gw_dedupe_open(GW_DEDUPE_TTL_MS, GW_DEDUPE_MAX, &d), CM_OK);
    char key[32];
    size_t dups = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < GW_DEDUPE_MAX; i++) {
            snprintf(key, sizeof key, "k%d", i);
            dups += cm_gw_dedupe_check(d, key, 1000 + pass);
        }
    snprintf(key, sizeof key, "k%d", GW_DEDUPE_MAX);
    bool newest = cm_gw_dedupe_check(d, key, 2000);
    size_t size = cm_gw_dedupe_size(d);
    bool first = cm_gw_dedupe_check(d, "k0", 2001); /* evicted by the cap */
    cm_gw_dedupe_close(d);
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
        {"/new@otherbot", false}, /* another bot's; ours arrive bare */
        {"/think high", true},
        {"/t low", true},
        {"/bash ls", false}, /* gated: commands.bash is off */
        {"hello /new", false},
        {"hello", false},
        {"", false},
        {"/", false},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        bool got = cm_gw_is_control_command(cases[i].text, NULL);
        if (got != cases[i].want)
            test_fail(__FILE__, __LINE__, "\"%s\": got %d, want %d", cases[i].text, got,
                      cases[i].want);
    }
    json_t *root = json_pack("{s:{s:b}}", "commands", "bash", 1);
    EXPECT(root);
    /* "/plugin" is gated by commands.plugins, as "/plugins" is */
    json_t *pl = json_pack("{s:{s:b}}", "commands", "plugins", 1);
    EXPECT(cm_gw_is_control_command("/plugin list", pl));
    EXPECT(cm_gw_is_control_command("/plugins list", pl));
    EXPECT(!cm_gw_is_control_command("/plugin list", NULL));
    json_decref(pl);
    bool bash = cm_gw_is_control_command("/bash ls", root);
    json_decref(root);
    EXPECT(bash);
}

/* 2026.3.22's abort words act as /stop: alone, any case, blanks collapsed,
 * trailing punctuation dropped; inside a sentence they are text. */
TEST(gw_in_abort_words)
{
    static const struct {
        const char *text;
        bool want;
    } cases[] = {
        {"stop", true},
        {"  STOP!!  ", true},
        {"Wait...", true},
        {"please   stop", true},
        {"Stop don\u2019t do anything", true},
        {"ARR\u00CATE", true},
        {"\u0421\u0422\u041e\u041f", true}, /* СТОП */
        {"\u505c\u6b62\u3002", true},       /* 停止。 */
        {"/stop", true},
        {"stop quantumclaw", true},
        {"stop the car", false},
        {"can you wait for me", false},
        {"stopp it", false},
        {"", false},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        bool got = cm_gw_is_abort_request(cases[i].text);
        if (got != cases[i].want)
            test_fail(__FILE__, __LINE__, "\"%s\": got %d, want %d", cases[i].text, got,
                      cases[i].want);
    }
    EXPECT(!cm_gw_is_control_command("Stop.", NULL));     /* debounced like text, as 2026.3.22 */
    EXPECT(cm_gw_is_abort_request("STOP\u00a0please"));   /* JavaScript's blanks */
    EXPECT(cm_gw_is_abort_request("\u505c\u6b62\u3000")); /* 停止 and an ideographic space */
    EXPECT(!cm_gw_is_abort_request("stop ! ."));          /* one trailing run only */
    EXPECT(cm_gw_is_abort_request(
        "wait!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"));
    EXPECT(!cm_gw_is_abort_request(NULL));
}

/* A channel makes "/cmd@<its bot>" bare; another bot's command, a mention
 * later in the text and a longer name stay as they are. */
TEST(gw_in_command_unaddress)
{
    static const struct {
        const char *text, *want; /* want NULL: unchanged */
    } cases[] = {
        {"/new@clawbot", "/new"},
        {"  /Status@ClawBot", "  /Status"},
        {"/model@clawbot: gpt-5", "/model: gpt-5"},
        {"/queue@clawbot collect\nmore", "/queue collect\nmore"},
        {"/new@clawbotx", NULL},
        {"/new@otherbot", NULL},
        {"/@clawbot", NULL},
        {"hi @clawbot /new", NULL},
        {"/new", NULL},
        {"", NULL},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        char *got = NULL;
        EXPECT_INT(cm_gw_command_unaddress(cases[i].text, "clawbot", &got), CM_OK);
        bool same = cases[i].want ? got && !strcmp(got, cases[i].want) : !got;
        if (!same)
            test_fail(__FILE__, __LINE__, "\"%s\": got \"%s\", want \"%s\"", cases[i].text,
                      got ? got : "(unchanged)", cases[i].want ? cases[i].want : "(unchanged)");
        free(got);
    }
    char *got = NULL;
    EXPECT_INT(cm_gw_command_unaddress("/new@clawbot", NULL, &got), CM_OK);
    EXPECT(!got);
    EXPECT_INT(cm_gw_command_unaddress("/new@clawbot", "", &got), CM_OK);
    EXPECT(!got);
}

/* The gateway's own commands are a table (name, aliases, handler): a text
 * reaches the first entry whose name or alias is its command word (any
 * case, then the end, a blank or ':'), or whose also form it is; rest is
 * what follows. */
static bool S_is_stop_word(const char *text)
{
    return text && !strcmp(text, "halt");
}

static bool S_cmd_record(void *ctx, const char *rest)
{
    snprintf(ctx, 64, "%s", rest);
    return true;
}

TEST(gw_in_command_table)
{
    static const char *const new_aliases[] = {"/reset", NULL};
    const gw_command table[] = {
        {"/new", new_aliases, S_cmd_record, NULL},
        {"/stop", NULL, S_cmd_record, S_is_stop_word},
    };
    static const struct {
        const char *text;
        int want; /* index into table, -1: none */
        const char *rest;
    } cases[] = {
        {"/new", 0, ""},      {"  /NEW hello", 0, "hello"}, {"/reset: hi there", 0, "hi there"},
        {"/newer", -1, NULL}, {"/new@otherbot", -1, NULL},  {"/stop", 1, ""},
        {"halt", 1, ""},      {"halt now", -1, NULL},       {"please /new", -1, NULL},
        {"", -1, NULL},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        const char *rest = NULL;
        const gw_command *c = cm_gw_command_find(table, ARRAY_LEN(table), cases[i].text, &rest);
        int got = c ? (int)(c - table) : -1;
        if (got != cases[i].want || (c && strcmp(rest, cases[i].rest)))
            test_fail(__FILE__, __LINE__, "\"%s\": got entry %d rest \"%s\", want %d \"%s\"",
                      cases[i].text, got, c ? rest : "", cases[i].want,
                      cases[i].rest ? cases[i].rest : "");
        char seen[64] = "";
        if (c) EXPECT(c->handler(seen, rest) && !strcmp(seen, rest));
    }
    const char *rest = NULL;
    EXPECT(!cm_gw_command_find(table, ARRAY_LEN(table), NULL, &rest));
    /* 2026.3.22's registry: aliases count as their command */
    EXPECT(cm_gw_is_control_command("/tell main go on", NULL));
    EXPECT(cm_gw_is_control_command("/export", NULL));
    EXPECT(cm_gw_is_control_command("/ID", NULL));
    EXPECT(!cm_gw_is_control_command("/id me", NULL)); /* /whoami takes no arguments */
}

TEST(gw_in_debounce_window_config)
{
    json_error_t je;
    json_t *root = json_loads("{\"messages\":{\"inbound\":{\"debounceMs\":1200,"
                              "\"byChannel\":{\"slack\":1500,\"http\":0}}}}",
                              0, &je);
    EXPECT(root);
    cm_rtcfg *c = rtc(root);
    json_decref(root);
    EXPECT(c);
    int64_t tg = cm_gw_debounce_ms(c, "telegram"), sl = cm_gw_debounce_ms(c, "slack");
    int64_t ht = cm_gw_debounce_ms(c, "http");
    cm_rtcfg_unref(c);
    EXPECT_INT(cm_gw_debounce_ms(NULL, "telegram"), GW_DEBOUNCE_MS_DEFAULT);
    EXPECT_INT(tg, 1200);
    EXPECT_INT(sl, 1500);
    EXPECT_INT(ht, 0);
    /* what 2026.3.22's schema rejects (int, nonnegative) no longer reads as
     * a truncated or clamped window: the config fails to load */
    static const char *const bad[] = {
        "{\"messages\":{\"inbound\":{\"debounceMs\":1200.7}}}",
        "{\"messages\":{\"inbound\":{\"byChannel\":{\"bad\":\"x\"}}}}",
        "{\"messages\":{\"inbound\":{\"byChannel\":{\"neg\":-5}}}}"};
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        root = json_loads(bad[i], 0, &je);
        cm_rtcfg *b = rtc(root);
        json_decref(root);
        EXPECT(b == NULL);
    }
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
    cm_buf_init(&desc, 0);
    cm_rtcfg *c = root ? rtc(root) : NULL;
    bool ok = (!root || c) && cm_gw_debounce_open(c, &d) == CM_OK;
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
            rc = cm_gw_debounce_push(d, &m, s->at, &got);
        } else {
            rc = cm_gw_debounce_due(d, s->at, &got);
        }
        cm_buf_reset(&desc);
        for (size_t j = 0; rc == CM_OK && j < got.n; j++)
            rc = cm_buf_printf(&desc, "%s%s=%s", j ? " ; " : "", got.v[j].message_id,
                               got.v[j].text ? got.v[j].text : "");
        if (rc != CM_OK || strcmp(desc.len ? desc.data : "", s->want) != 0) {
            test_fail(__FILE__, __LINE__, "step %zu (t=%lld): got \"%s\", want \"%s\"", i,
                      (long long)s->at, desc.len ? desc.data : "", s->want);
            ok = false;
        }
        cm_gw_turns_release(&got);
    }
    cm_gw_debounce_close(d);
    cm_rtcfg_unref(c);
    cm_buf_release(&desc);
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
    EXPECT_INT(cm_gw_debounce_open(NULL, &d), CM_OK);
    int64_t none = cm_gw_debounce_next_deadline(d);
    gw_msg a = {.channel = "telegram", .peer = "p", .sender = "s1", .message_id = "1", .text = "x"};
    gw_msg b = a;
    b.sender = "s2";
    b.message_id = "2";
    cm_rc rc1 = cm_gw_debounce_push(d, &a, 1000, &t), rc2 = cm_gw_debounce_push(d, &b, 1500, &t);
    int64_t next = cm_gw_debounce_next_deadline(d);
    size_t pending = cm_gw_debounce_pending(d);
    cm_rc rc3 = cm_gw_debounce_flush_all(d, &t);
    size_t flushed = t.n, after = cm_gw_debounce_pending(d);
    cm_gw_turns_release(&t);
    cm_gw_debounce_close(d);
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
    EXPECT_INT(cm_gw_debounce_open(NULL, &d), CM_OK);
    gw_msg m = {.channel = "telegram", .peer = "p", .sender = "s", .message_id = "x", .text = "y"};
    cm_rc rc = CM_OK;
    for (int i = 0; i < GW_DEBOUNCE_MAX_PARTS * 2 + 1 && rc == CM_OK; i++)
        rc = cm_gw_debounce_push(d, &m, i, &t);
    size_t n = t.n, first = n ? t.v[0].count : 0;
    cm_gw_turns_release(&t);
    cm_gw_debounce_close(d);
    EXPECT_INT(rc, CM_OK);
    EXPECT_INT(n, 2);
    EXPECT_INT(first, GW_DEBOUNCE_MAX_PARTS);
}
