/*
 * test_gateway_in.c — the gateway's inbound rules (src/gateway/core/ dedupe.h,
 * debounce.h, access.h, pairing.h, queue.h): dedupe, debounce and access,
 * each from a table of events over a fake clock.
 */
#include "test.h"

#include "../src/base/fs.h"
#include "../src/gateway/core/access.h"
#include "../src/gateway/core/commands.h"
#include "../src/gateway/core/debounce.h"
#include "../src/gateway/core/dedupe.h"
#include "../src/gateway/core/pairing.h"
#include "../src/gateway/core/queue.h"

#include <ctype.h>

/* The typed snapshot of root (NULL when root is rejected). */
static cm_rtcfg *rtc(const json_t *root)
{
    cm_rtcfg *c = NULL;
    char err[256];
    return cm_rtcfg_from_json(root, &c, err, sizeof err) ? NULL : c;
}

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

/* ---- access ------------------------------------------------------------- */

static json_t *S_json(const char *text)
{
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    if (!j) test_fail(__FILE__, __LINE__, "bad test JSON: %s", je.text);
    return j;
}

TEST(gw_in_access_config_errors)
{
    static const struct {
        const char *cfg;
        cm_rc want;
    } cases[] = {
        {"{}", CM_OK},
        {"{\"channels\":{\"telegram\":{\"dmPolicy\":\"pairing\"}}}", CM_OK},
        {"{\"channels\":{\"telegram\":{\"dmPolicy\":\"allowlist\"}}}", CM_ECONFIG},
        {"{\"channels\":{\"telegram\":{\"dmPolicy\":\"allowlist\",\"allowFrom\":[]}}}", CM_ECONFIG},
        {"{\"channels\":{\"telegram\":{\"dmPolicy\":\"allowlist\",\"allowFrom\":[\" \"]}}}",
         CM_ECONFIG},
        {"{\"channels\":{\"telegram\":{\"dmPolicy\":\"allowlist\",\"allowFrom\":[123]}}}", CM_OK},
        {"{\"channels\":{\"telegram\":{\"dmPolicy\":\"open\"}}}", CM_ECONFIG},
        {"{\"channels\":{\"telegram\":{\"dmPolicy\":\"open\",\"allowFrom\":[\"42\"]}}}",
         CM_ECONFIG},
        {"{\"channels\":{\"telegram\":{\"dmPolicy\":\"open\",\"allowFrom\":[\"*\"]}}}", CM_OK},
        {"{\"channels\":{\"telegram\":{\"dmPolicy\":\"disabled\"}}}", CM_OK},
        {"{\"channels\":{\"telegram\":{\"dmPolicy\":\"everyone\"}}}", CM_ECONFIG},
        {"{\"channels\":{\"telegram\":{\"groupPolicy\":\"some\"}}}", CM_ECONFIG},
        {"{\"channels\":{\"telegram\":{\"allowFrom\":\"42\"}}}", CM_ECONFIG},
        /* an account's keys override the channel's */
        {"{\"channels\":{\"telegram\":{\"dmPolicy\":\"allowlist\",\"allowFrom\":[\"42\"],"
         "\"accounts\":{\"default\":{\"allowFrom\":[]}}}}}",
         CM_ECONFIG},
    };
    char *state = tmp_dir();
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        json_t *root = S_json(cases[i].cfg);
        if (!root) return;
        char err[256] = "";
        gw_access_result res;
        gw_msg m = {
            .channel = "telegram", .peer = "42", .sender = "42", .message_id = "1", .text = "hi"};
        /* a wrong kind or choice fails the load now (runtime_config.c); the
         * rules across keys are the check's own */
        cm_rtcfg *c = NULL;
        cm_rc rc = cm_rtcfg_from_json(root, &c, err, sizeof err);
        res.verdict = GW_ACCESS_DENY;
        if (!rc) rc = cm_gw_access_check(c, state, &m, 1000, &res, err, sizeof err);
        cm_rtcfg_unref(c);
        json_decref(root);
        if (rc != cases[i].want)
            test_fail(__FILE__, __LINE__, "case %zu: rc %d (%s), want %d", i, rc, err,
                      cases[i].want);
        if (rc && res.verdict != GW_ACCESS_DENY)
            test_fail(__FILE__, __LINE__, "case %zu: an error is not a deny", i);
        if (rc == CM_ECONFIG && !strstr(err, "channels.telegram."))
            test_fail(__FILE__, __LINE__, "case %zu: message does not name the key: %s", i, err);
    }
}

/* A table of messages against one config; want is the verdict. */
typedef struct ac_case {
    const char *cfg;
    bool group;
    const char *peer, *sender;
    bool mentioned;
    gw_access_verdict want;
} ac_case;

static void S_access_table(const ac_case *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char *state = tmp_dir();
        json_t *root = S_json(cases[i].cfg);
        if (!root) return;
        char err[256] = "";
        gw_access_result res;
        gw_msg m = {.channel = "telegram",
                    .peer = cases[i].peer,
                    .sender = cases[i].sender,
                    .message_id = "1",
                    .text = "hi",
                    .is_group = cases[i].group,
                    .mentioned = cases[i].mentioned};
        cm_rtcfg *c = rtc(root);
        json_decref(root);
        cm_rc rc = c ? cm_gw_access_check(c, state, &m, 1000, &res, err, sizeof err) : CM_ECONFIG;
        cm_rtcfg_unref(c);
        if (rc != CM_OK || res.verdict != cases[i].want)
            test_fail(__FILE__, __LINE__, "case %zu: rc %d (%s), verdict %d (%s), want %d", i, rc,
                      err, res.verdict, res.reason, cases[i].want);
    }
}

TEST(gw_in_access_dm_policies)
{
    static const ac_case cases[] = {
        {"{}", false, "42", "42", false, GW_ACCESS_PAIRING_ISSUED},
        {"{\"channels\":{\"telegram\":{\"allowFrom\":[\"42\"]}}}", false, "42", "42", false,
         GW_ACCESS_ALLOW},
        {"{\"channels\":{\"telegram\":{\"allowFrom\":[\"telegram:42\"]}}}", false, "42", "42",
         false, GW_ACCESS_ALLOW},
        {"{\"channels\":{\"telegram\":{\"allowFrom\":[42]}}}", false, "42", "42", false,
         GW_ACCESS_ALLOW},
        {"{\"channels\":{\"telegram\":{\"allowFrom\":[\"42\"]}}}", false, "7", "7", false,
         GW_ACCESS_PAIRING_ISSUED},
        {"{\"channels\":{\"telegram\":{\"dmPolicy\":\"allowlist\",\"allowFrom\":[\"42\"]}}}", false,
         "42", "42", false, GW_ACCESS_ALLOW},
        {"{\"channels\":{\"telegram\":{\"dmPolicy\":\"allowlist\",\"allowFrom\":[\"42\"]}}}", false,
         "7", "7", false, GW_ACCESS_DENY},
        {"{\"channels\":{\"telegram\":{\"dmPolicy\":\"open\",\"allowFrom\":[\"*\"]}}}", false, "7",
         "7", false, GW_ACCESS_ALLOW},
        {"{\"channels\":{\"telegram\":{\"dmPolicy\":\"disabled\",\"allowFrom\":[\"42\"]}}}", false,
         "42", "42", false, GW_ACCESS_DENY},
        {"{\"channels\":{\"telegram\":{\"allowFrom\":[\"42\"],\"accounts\":{\"default\":"
         "{\"dmPolicy\":\"disabled\"}}}}}",
         false, "42", "42", false, GW_ACCESS_DENY},
    };
    S_access_table(cases, ARRAY_LEN(cases));
}

TEST(gw_in_access_groups)
{
    static const ac_case cases[] = {
        /* default groupPolicy allowlist with no groups entries: blocked */
        {"{\"channels\":{\"telegram\":{\"allowFrom\":[\"42\"]}}}", true, "-100", "42", true,
         GW_ACCESS_DENY},
        /* the group listed, the sender in allowFrom (fallback), mentioned */
        {"{\"channels\":{\"telegram\":{\"allowFrom\":[\"42\"],\"groups\":{\"-100\":{}}}}}", true,
         "-100", "42", true, GW_ACCESS_ALLOW},
        /* … not mentioned: history only */
        {"{\"channels\":{\"telegram\":{\"allowFrom\":[\"42\"],\"groups\":{\"-100\":{}}}}}", true,
         "-100", "42", false, GW_ACCESS_NO_MENTION},
        /* requireMention false for the group */
        {"{\"channels\":{\"telegram\":{\"allowFrom\":[\"42\"],\"groups\":{\"-100\":"
         "{\"requireMention\":false}}}}}",
         true, "-100", "42", false, GW_ACCESS_ALLOW},
        /* "*" defaults */
        {"{\"channels\":{\"telegram\":{\"groupAllowFrom\":[\"42\"],\"groups\":{\"*\":"
         "{\"requireMention\":false}}}}}",
         true, "-555", "42", false, GW_ACCESS_ALLOW},
        /* another group when only -100 is listed */
        {"{\"channels\":{\"telegram\":{\"allowFrom\":[\"42\"],\"groups\":{\"-100\":{}}}}}", true,
         "-200", "42", true, GW_ACCESS_DENY},
        /* groupAllowFrom wins over allowFrom */
        {"{\"channels\":{\"telegram\":{\"allowFrom\":[\"42\"],\"groupAllowFrom\":[\"7\"],"
         "\"groups\":{\"-100\":{}}}}}",
         true, "-100", "42", true, GW_ACCESS_DENY},
        /* no sender allowlist at all: blocked */
        {"{\"channels\":{\"telegram\":{\"groups\":{\"-100\":{}}}}}", true, "-100", "42", true,
         GW_ACCESS_DENY},
        /* open policy: any group, any sender */
        {"{\"channels\":{\"telegram\":{\"groupPolicy\":\"open\"}}}", true, "-100", "9", true,
         GW_ACCESS_ALLOW},
        /* per-group open policy */
        {"{\"channels\":{\"telegram\":{\"groups\":{\"-100\":{\"groupPolicy\":\"open\"}}}}}", true,
         "-100", "9", true, GW_ACCESS_ALLOW},
        /* disabled, and a disabled group entry */
        {"{\"channels\":{\"telegram\":{\"groupPolicy\":\"disabled\",\"groupAllowFrom\":[\"*\"],"
         "\"groups\":{\"*\":{}}}}}",
         true, "-100", "9", true, GW_ACCESS_DENY},
        {"{\"channels\":{\"telegram\":{\"groupPolicy\":\"open\",\"groups\":{\"-100\":"
         "{\"enabled\":false}}}}}",
         true, "-100", "9", true, GW_ACCESS_DENY},
        /* groups never ask for pairing */
        {"{}", true, "-100", "9", true, GW_ACCESS_DENY},
    };
    S_access_table(cases, ARRAY_LEN(cases));
}

static bool S_code_ok(const char *code)
{
    if (strlen(code) != GW_PAIRING_CODE_LEN) return false;
    for (const char *p = code; *p; p++)
        if (!strchr(GW_PAIRING_ALPHABET, *p) || strchr("0O1I", *p)) return false;
    return true;
}

static gw_access_verdict S_dm(const json_t *root, const char *state, const char *sender,
                              int64_t now, char code[16])
{
    gw_access_result res;
    char err[256];
    gw_msg m = {.channel = "telegram",
                .peer = sender,
                .sender = sender,
                .message_id = "1",
                .text = "hello"};
    cm_rtcfg *c = rtc(root);
    cm_rc rc = c ? cm_gw_access_check(c, state, &m, now, &res, err, sizeof err) : CM_ECONFIG;
    cm_rtcfg_unref(c);
    if (rc) test_fail(__FILE__, __LINE__, "access check: %s", err);
    if (code) snprintf(code, 16, "%s", res.code);
    return rc ? GW_ACCESS_DENY : res.verdict;
}

TEST(gw_in_access_pairing_flow)
{
    char *state = tmp_dir();
    json_t *root = json_object();     /* dmPolicy pairing by default */
    const int64_t t0 = 1796040000000; /* 2026-11-30T12:00:00Z */
    char code[16], code2[16], err[256], id[64];
    buf b;
    cm_buf_init(&b, 0);

    /* an unknown sender gets a code once; its next messages get nothing */
    gw_access_verdict v1 = S_dm(root, state, "111", t0, code);
    gw_access_verdict v2 = S_dm(root, state, "111", t0 + 1000, code2);
    cm_rc rr = cm_fs_read_file(path_in(state, "credentials/telegram-pairing.json"), 1 << 20, &b,
                               err, sizeof err);
    EXPECT_INT(v1, GW_ACCESS_PAIRING_ISSUED);
    EXPECT(S_code_ok(code));
    EXPECT_INT(v2, GW_ACCESS_PAIRING_PENDING);
    EXPECT_STR(code2, "");
    EXPECT_INT(rr, CM_OK);
    EXPECT_CONTAINS(b.data, "\"version\": 1");
    EXPECT_CONTAINS(b.data, "\"id\": \"111\"");
    EXPECT_CONTAINS(b.data, code);
    EXPECT_CONTAINS(b.data, "\"createdAt\": \"2026-11-30T12:00:00.000Z\"");
    EXPECT_CONTAINS(b.data, "\"lastSeenAt\": \"2026-11-30T12:00:01.000Z\"");
    EXPECT_CONTAINS(b.data, "\"accountId\": \"default\"");
    cm_buf_release(&b);

    /* at most 3 pending: a fourth sender gets no code */
    EXPECT_INT(S_dm(root, state, "222", t0 + 2000, NULL), GW_ACCESS_PAIRING_ISSUED);
    EXPECT_INT(S_dm(root, state, "333", t0 + 3000, NULL), GW_ACCESS_PAIRING_ISSUED);
    EXPECT_INT(S_dm(root, state, "444", t0 + 4000, code2), GW_ACCESS_PAIRING_PENDING);
    EXPECT_STR(code2, "");

    /* an unapproved sender is never allowed, however often it writes */
    for (int i = 0; i < 50; i++) {
        gw_access_verdict v = S_dm(root, state, "111", t0 + 5000 + i, NULL);
        EXPECT(v != GW_ACCESS_ALLOW);
    }

    /* a wrong code approves nobody; the right one (any case) approves 111 */
    EXPECT_INT(cm_gw_pairing_approve(state, "telegram", NULL, "ZZZZZZZZ", t0 + 6000, id, sizeof id,
                                     err, sizeof err),
               CM_ENOTFOUND);
    char lower[16];
    for (int i = 0; i < 16; i++)
        lower[i] = (char)tolower((unsigned char)code[i]);
    EXPECT_INT(cm_gw_pairing_approve(state, "telegram", NULL, lower, t0 + 6000, id, sizeof id, err,
                                     sizeof err),
               CM_OK);
    EXPECT_STR(id, "111");
    cm_buf_init(&b, 0);
    rr = cm_fs_read_file(path_in(state, "credentials/telegram-default-allowFrom.json"), 1 << 20, &b,
                         err, sizeof err);
    EXPECT_INT(rr, CM_OK);
    EXPECT_CONTAINS(b.data, "\"allowFrom\": [\n    \"111\"\n  ]");
    cm_buf_release(&b);
    EXPECT_INT(S_dm(root, state, "111", t0 + 7000, NULL), GW_ACCESS_ALLOW);
    /* the code is used up */
    EXPECT_INT(cm_gw_pairing_approve(state, "telegram", NULL, code, t0 + 8000, id, sizeof id, err,
                                     sizeof err),
               CM_ENOTFOUND);

    /* with a slot free again, 444 gets a code; after an hour it expires and
     * the sender is issued a new one */
    EXPECT_INT(S_dm(root, state, "444", t0 + 9000, code), GW_ACCESS_PAIRING_ISSUED);
    EXPECT_INT(S_dm(root, state, "444", t0 + 9000 + GW_PAIRING_TTL_MS, NULL),
               GW_ACCESS_PAIRING_PENDING);
    EXPECT_INT(S_dm(root, state, "444", t0 + 9001 + GW_PAIRING_TTL_MS, code2),
               GW_ACCESS_PAIRING_ISSUED);
    EXPECT(S_code_ok(code2));
    EXPECT_INT(cm_gw_pairing_approve(state, "telegram", NULL, code, t0 + 9002 + GW_PAIRING_TTL_MS,
                                     id, sizeof id, err, sizeof err),
               CM_ENOTFOUND);

    /* the allowlist policy never reads the pairing store */
    json_t *strict = S_json("{\"channels\":{\"telegram\":{\"dmPolicy\":\"allowlist\","
                            "\"allowFrom\":[\"999\"]}}}");
    EXPECT(strict);
    gw_access_verdict vs = S_dm(strict, state, "111", t0 + 10000, NULL);
    json_decref(strict);
    json_decref(root);
    EXPECT_INT(vs, GW_ACCESS_DENY);
}

TEST(gw_in_access_store_written_by_quantumclaw)
{
    /* QuantumClaw's legacy unscoped file counts for the default account,
     * a named account reads only its own file */
    char *state = tmp_dir();
    write_file(state, "credentials/telegram-allowFrom.json",
               "{\n  \"version\": 1,\n  \"allowFrom\": [\n    \"555\", 777\n  ]\n}\n");
    write_file(state, "credentials/telegram-work-allowFrom.json",
               "{\"version\":1,\"allowFrom\":[\"888\"]}");
    write_file(state, "credentials/discord-pairing.json", "not json");
    json_t *root = json_object();
    gw_access_result res;
    char err[256];
    static const struct {
        const char *channel, *account, *sender;
        gw_access_verdict want;
    } cases[] = {
        {"telegram", NULL, "555", GW_ACCESS_ALLOW},
        {"telegram", "default", "777", GW_ACCESS_ALLOW},
        {"telegram", "work", "888", GW_ACCESS_ALLOW},
        {"telegram", "work", "555", GW_ACCESS_PAIRING_ISSUED},
        {"telegram", NULL, "888", GW_ACCESS_PAIRING_ISSUED},
        {"discord", NULL, "555", GW_ACCESS_PAIRING_ISSUED}, /* a corrupt store is empty */
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        gw_msg m = {.channel = cases[i].channel,
                    .account = cases[i].account,
                    .peer = cases[i].sender,
                    .sender = cases[i].sender,
                    .message_id = "1"};
        cm_rc rc = cm_gw_access_check(NULL, state, &m, 1796040000000, &res, err, sizeof err);
        if (rc || res.verdict != cases[i].want)
            test_fail(__FILE__, __LINE__, "case %zu: rc %d, verdict %d, want %d", i, rc,
                      res.verdict, cases[i].want);
    }
    json_decref(root);
    EXPECT(!test_failed());
}

/* ---- queue modes -------------------------------------------------------- */

TEST(gw_in_queue_settings)
{
    static const struct {
        const char *s;
        int want; /* -1: not a mode */
    } modes[] = {
        {"collect", GW_QMODE_COLLECT},
        {" Coalesce ", GW_QMODE_COLLECT},
        {"followup", GW_QMODE_FOLLOWUP},
        {"follow-ups", GW_QMODE_FOLLOWUP},
        {"steer", GW_QMODE_STEER},
        {"queue", GW_QMODE_STEER},
        {"queued", GW_QMODE_STEER},
        {"steer+backlog", GW_QMODE_STEER_BACKLOG},
        {"steer_backlog", GW_QMODE_STEER_BACKLOG},
        {"interrupt", GW_QMODE_INTERRUPT},
        {"abort", GW_QMODE_INTERRUPT},
        {"later", -1},
        {"", -1},
    };
    for (size_t i = 0; i < ARRAY_LEN(modes); i++) {
        gw_queue_mode m = GW_QMODE_COLLECT;
        bool ok = cm_gw_queue_mode_parse(modes[i].s, &m);
        if (ok != (modes[i].want >= 0) || (ok && (int)m != modes[i].want))
            test_fail(__FILE__, __LINE__, "mode \"%s\": ok %d mode %d", modes[i].s, ok, m);
    }
    gw_queue_drop d;
    EXPECT(cm_gw_queue_drop_parse("oldest", &d) && d == GW_QDROP_OLD);
    EXPECT(cm_gw_queue_drop_parse("NEW", &d) && d == GW_QDROP_NEW);
    EXPECT(cm_gw_queue_drop_parse("summary", &d) && d == GW_QDROP_SUMMARIZE);
    EXPECT(!cm_gw_queue_drop_parse("all", &d));

    gw_queue_settings s;
    cm_gw_queue_settings_resolve(NULL, "telegram", NULL, &s);
    EXPECT_INT(s.mode, GW_QMODE_COLLECT);
    EXPECT_INT(s.debounce_ms, 1000);
    EXPECT_INT(s.cap, 20);
    EXPECT_INT(s.drop, GW_QDROP_SUMMARIZE);
    json_t *root = S_json("{\"messages\":{\"queue\":{\"mode\":\"followup\",\"debounceMs\":500,"
                          "\"cap\":5,\"drop\":\"old\",\"byChannel\":{\"discord\":\"steer\"},"
                          "\"debounceMsByChannel\":{\"discord\":50}}}}");
    EXPECT(root);
    cm_rtcfg *c = rtc(root);
    json_decref(root);
    EXPECT(c);
    gw_queue_settings tg, dc, ov;
    cm_gw_queue_settings_resolve(c, "telegram", NULL, &tg);
    cm_gw_queue_settings_resolve(c, "Discord", NULL, &dc);
    gw_queue_override o = {.mode = "interrupt", .drop = "new", .debounce_ms = 0, .cap = 2};
    cm_gw_queue_settings_resolve(c, "discord", &o, &ov);
    cm_rtcfg_unref(c);
    EXPECT(tg.mode == GW_QMODE_FOLLOWUP && tg.debounce_ms == 500 && tg.cap == 5 &&
           tg.drop == GW_QDROP_OLD);
    EXPECT(dc.mode == GW_QMODE_STEER && dc.debounce_ms == 50);
    EXPECT(ov.mode == GW_QMODE_INTERRUPT && ov.debounce_ms == 0 && ov.cap == 2 &&
           ov.drop == GW_QDROP_NEW);
}

TEST(gw_in_queue_actions)
{
    static const struct {
        gw_queue_mode mode;
        bool active, streaming, heartbeat;
        gw_queue_action want;
        size_t depth; /* queued afterwards */
    } cases[] = {
        {GW_QMODE_COLLECT, false, false, false, GW_QACT_RUN_NOW, 0},
        {GW_QMODE_INTERRUPT, false, false, false, GW_QACT_RUN_NOW, 0},
        {GW_QMODE_COLLECT, true, false, true, GW_QACT_DROP, 0},
        {GW_QMODE_COLLECT, true, true, false, GW_QACT_ENQUEUE, 1},
        {GW_QMODE_FOLLOWUP, true, false, false, GW_QACT_ENQUEUE, 1},
        {GW_QMODE_STEER, true, true, false, GW_QACT_STEER, 0},
        {GW_QMODE_STEER, true, false, false, GW_QACT_ENQUEUE, 1},
        {GW_QMODE_STEER_BACKLOG, true, true, false, GW_QACT_STEER_AND_ENQUEUE, 1},
        {GW_QMODE_STEER_BACKLOG, true, false, false, GW_QACT_ENQUEUE, 1},
        {GW_QMODE_INTERRUPT, true, true, false, GW_QACT_INTERRUPT, 0},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        gw_queue *q = NULL;
        EXPECT_INT(cm_gw_queue_open("agent:main:main", NULL, &q), CM_OK);
        gw_queue_settings s;
        cm_gw_queue_settings_resolve(NULL, "telegram", NULL, &s);
        s.mode = cases[i].mode;
        gw_queue_item m = {.prompt = "hi", .message_id = "1", .channel = "telegram", .peer = "42"};
        gw_queue_action a = cm_gw_queue_on_inbound(q, &s, cases[i].active, cases[i].streaming,
                                                   cases[i].heartbeat, &m, 1000);
        size_t depth = cm_gw_queue_depth(q);
        cm_gw_queue_close(q);
        if (a != cases[i].want || depth != cases[i].depth)
            test_fail(__FILE__, __LINE__, "case %zu: action %d depth %zu, want %d %zu", i, a, depth,
                      cases[i].want, cases[i].depth);
    }
    /* an interrupt drops what was queued */
    gw_queue *q = NULL;
    gw_queue_settings s;
    cm_gw_queue_settings_resolve(NULL, NULL, NULL, &s);
    EXPECT_INT(cm_gw_queue_open("k", NULL, &q), CM_OK);
    gw_queue_item m = {.prompt = "a", .message_id = "1", .channel = "telegram", .peer = "42"};
    cm_gw_queue_on_inbound(q, &s, true, false, false, &m, 0);
    s.mode = GW_QMODE_INTERRUPT;
    m.message_id = "2";
    gw_queue_action a = cm_gw_queue_on_inbound(q, &s, true, false, false, &m, 1);
    size_t depth = cm_gw_queue_depth(q);
    cm_gw_queue_close(q);
    EXPECT_INT(a, GW_QACT_INTERRUPT);
    EXPECT_INT(depth, 0);
}

/* Queues texts "m1".."mN" (ids "1".."N") from telegram:42 during a run. */
static void S_fill(gw_queue *q, const gw_queue_settings *s, int n, int64_t t0, int *enq)
{
    char id[16], text[16];
    for (int i = 1; i <= n; i++) {
        snprintf(id, sizeof id, "%d", i);
        snprintf(text, sizeof text, "m%d", i);
        gw_queue_item m = {.prompt = text, .message_id = id, .channel = "telegram", .peer = "42"};
        *enq += cm_gw_queue_on_inbound(q, s, true, false, false, &m, t0 + i) == GW_QACT_ENQUEUE;
    }
}

TEST(gw_in_queue_collect)
{
    gw_queue *q = NULL;
    gw_queue_settings s;
    cm_gw_queue_settings_resolve(NULL, "telegram", NULL, &s);
    EXPECT_INT(cm_gw_queue_open("k", NULL, &q), CM_OK);
    int enq = 0;
    S_fill(q, &s, 3, 0, &enq);
    gw_queue_run r;
    bool early = true, ready = false;
    cm_rc rc1 = cm_gw_queue_next(q, &s, 3 + 999, &r, &early); /* 1000 ms after the last */
    int64_t deadline = cm_gw_queue_deadline(q, &s);
    cm_rc rc2 = cm_gw_queue_next(q, &s, 3 + 1000, &r, &ready);
    size_t depth = cm_gw_queue_depth(q);
    bool again = true;
    gw_queue_run r2;
    cm_gw_queue_next(q, &s, 10000, &r2, &again);
    cm_gw_queue_close(q);
    char *prompt = r.prompt, *id = r.message_id;
    size_t count = r.count;
    r.prompt = r.message_id = NULL;
    cm_gw_queue_run_release(&r);
    bool ok = rc1 == CM_OK && rc2 == CM_OK && !early && ready && !again;
    bool text_ok = prompt && strcmp(prompt, "[Queued messages while agent was busy]\n\n"
                                            "---\nQueued #1\nm1\n\n---\nQueued #2\nm2\n\n"
                                            "---\nQueued #3\nm3") == 0;
    bool id_ok = id && strcmp(id, "3") == 0;
    if (!text_ok) test_fail(__FILE__, __LINE__, "prompt: %s", prompt ? prompt : "(null)");
    free(prompt);
    free(id);
    EXPECT_INT(enq, 3);
    EXPECT(ok);
    EXPECT(text_ok && id_ok);
    EXPECT_INT(count, 3);
    EXPECT_INT(deadline, 1003);
    EXPECT_INT(depth, 0);
}

/* Drains q into "prompt | prompt | …" (ids after '#'). */
static void S_drain(gw_queue *q, const gw_queue_settings *s, buf *out)
{
    gw_queue_run r;
    bool ready = true;
    for (int guard = 0; guard < 50 && ready; guard++) {
        if (cm_gw_queue_next(q, s, INT64_MAX / 2, &r, &ready) || !ready) break;
        cm_buf_printf(out, "%s%s#%s", out->len ? " | " : "", r.prompt,
                      r.message_id ? r.message_id : "-");
        cm_gw_queue_run_release(&r);
    }
}

TEST(gw_in_queue_cap_and_drop)
{
    static const struct {
        gw_queue_mode mode;
        gw_queue_drop drop;
        int enqueued; /* of 4 messages with cap 2 */
        const char *want;
    } cases[] = {
        {GW_QMODE_FOLLOWUP, GW_QDROP_NEW, 2, "m1#1 | m2#2"},
        {GW_QMODE_FOLLOWUP, GW_QDROP_OLD, 4, "m3#3 | m4#4"},
        {GW_QMODE_FOLLOWUP, GW_QDROP_SUMMARIZE, 4,
         "[Queue overflow] Dropped 2 messages due to cap.\nSummary:\n- m1\n- m2#3 | m3#3 | m4#4"},
        {GW_QMODE_COLLECT, GW_QDROP_SUMMARIZE, 4,
         "[Queued messages while agent was busy]\n\n[Queue overflow] Dropped 2 messages due "
         "to cap.\nSummary:\n- m1\n- m2\n\n---\nQueued #1\nm3\n\n---\nQueued #2\nm4#4"},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        gw_queue *q = NULL;
        gw_queue_settings s;
        gw_queue_override o = {.debounce_ms = -1, .cap = 2};
        cm_gw_queue_settings_resolve(NULL, NULL, &o, &s);
        s.mode = cases[i].mode;
        s.drop = cases[i].drop;
        EXPECT_INT(cm_gw_queue_open("k", NULL, &q), CM_OK);
        int enq = 0;
        S_fill(q, &s, 4, 0, &enq);
        buf out;
        cm_buf_init(&out, 0);
        S_drain(q, &s, &out);
        cm_gw_queue_close(q);
        bool ok = enq == cases[i].enqueued && out.len && strcmp(out.data, cases[i].want) == 0;
        if (!ok)
            test_fail(__FILE__, __LINE__, "case %zu: enqueued %d, drained:\n%s\nwant:\n%s", i, enq,
                      out.len ? out.data : "", cases[i].want);
        cm_buf_release(&out);
    }
}

TEST(gw_in_queue_routes_and_duplicates)
{
    gw_dedupe *recent = NULL;
    EXPECT_INT(cm_gw_dedupe_open(GW_QUEUE_RECENT_TTL_MS, GW_QUEUE_RECENT_MAX, &recent), CM_OK);
    gw_queue *q = NULL;
    gw_queue_settings s;
    cm_gw_queue_settings_resolve(NULL, NULL, NULL, &s);
    EXPECT_INT(cm_gw_queue_open("agent:main:main", recent, &q), CM_OK);
    /* collect over two routes drains one by one */
    gw_queue_item a = {
        .prompt = "from telegram", .message_id = "1", .channel = "telegram", .peer = "42"};
    gw_queue_item b = {.prompt = "from http", .message_id = "9", .channel = "http", .peer = "u1"};
    gw_queue_action a1 = cm_gw_queue_on_inbound(q, &s, true, false, false, &a, 0);
    gw_queue_action a2 = cm_gw_queue_on_inbound(q, &s, true, false, false, &a, 1); /* again */
    gw_queue_action a3 = cm_gw_queue_on_inbound(q, &s, true, false, false, &b, 2);
    buf out;
    cm_buf_init(&out, 0);
    S_drain(q, &s, &out);
    /* drained, but redelivered within 5 minutes: still not queued again */
    gw_queue_action a4 = cm_gw_queue_on_inbound(q, &s, true, false, false, &a, 60000);
    gw_queue_action a5 =
        cm_gw_queue_on_inbound(q, &s, true, false, false, &a, 2 + GW_QUEUE_RECENT_TTL_MS);
    cm_gw_queue_close(q);
    cm_gw_dedupe_close(recent);
    bool drained_ok = out.len && strcmp(out.data, "from telegram#1 | from http#9") == 0;
    if (!drained_ok) test_fail(__FILE__, __LINE__, "drained: %s", out.len ? out.data : "");
    cm_buf_release(&out);
    EXPECT(drained_ok);
    EXPECT_INT(a1, GW_QACT_ENQUEUE);
    EXPECT_INT(a2, GW_QACT_DROP);
    EXPECT_INT(a3, GW_QACT_ENQUEUE);
    EXPECT_INT(a4, GW_QACT_DROP);
    EXPECT_INT(a5, GW_QACT_ENQUEUE);
}

TEST(gw_in_queue_command)
{
    static const struct {
        const char *text;
        bool is_cmd, reset;
        const char *mode, *drop;
        int64_t debounce;
        long cap;
    } cases[] = {
        {"/queue collect", true, false, "collect", NULL, -1, 0},
        {"/queue steer+backlog debounce:2s cap:25 drop:summarize", true, false, "steer-backlog",
         "summarize", 2000, 25},
        {"/queue: followup debounce=1500 cap=0 drop=oldest", true, false, "followup", "old", 1500,
         0},
        {"/queue interrupt nonsense cap:5", true, false, "interrupt", NULL, -1, 0},
        {"/QUEUE reset", true, true, NULL, NULL, -1, 0},
        {"/queue default", true, true, NULL, NULL, -1, 0},
        {"/queued", false, false, NULL, NULL, -1, 0},
        {"hello /queue collect", false, false, NULL, NULL, -1, 0},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        gw_queue_override o;
        bool reset;
        bool is = cm_gw_queue_parse_command(cases[i].text, &o, &reset);
        bool ok = is == cases[i].is_cmd && reset == cases[i].reset &&
                  (cases[i].mode ? o.mode && !strcmp(o.mode, cases[i].mode) : !o.mode) &&
                  (cases[i].drop ? o.drop && !strcmp(o.drop, cases[i].drop) : !o.drop) &&
                  o.debounce_ms == cases[i].debounce && o.cap == cases[i].cap;
        if (!ok)
            test_fail(__FILE__, __LINE__, "\"%s\": is %d reset %d mode %s drop %s deb %lld cap %ld",
                      cases[i].text, is, reset, o.mode ? o.mode : "-", o.drop ? o.drop : "-",
                      (long long)o.debounce_ms, o.cap);
    }
}

/* `clawmem pairing list|approve` on the store the gateway wrote: the code
 * is listed, approved in lower case, and its sender is then allowed. */
TEST(gw_in_pairing_cli_lists_and_approves)
{
    char *state = tmp_dir();
    char *st = cm_strdup(state);
    json_t *root = json_object();
    char code[16], lower[16];
    int64_t now = cm_wall_ms();
    EXPECT_INT(S_dm(root, st, "4242", now, code), GW_ACCESS_PAIRING_ISSUED);
    const char *list[] = {"--state-dir", st, "pairing", "list", "Telegram", "--json", NULL};
    run_result r = run_clawmem(NULL, list);
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.out, "\"channel\":\"telegram\"");
    EXPECT_CONTAINS(r.out, code);
    EXPECT_CONTAINS(r.out, "\"id\":\"4242\"");
    run_result_release(&r);
    for (size_t i = 0; i <= strlen(code); i++)
        lower[i] = (char)tolower((unsigned char)code[i]);
    const char *bad[] = {"--state-dir", st, "pairing", "approve", "telegram", "ZZZZ2222", NULL};
    r = run_clawmem(NULL, bad);
    EXPECT_INT(r.status, 1);
    EXPECT_CONTAINS(r.err, "no pending pairing request");
    run_result_release(&r);
    EXPECT(S_dm(root, st, "4242", now + 1, NULL) != GW_ACCESS_ALLOW);
    const char *ok[] = {"--state-dir", st, "pairing", "approve", "telegram", lower, NULL};
    r = run_clawmem(NULL, ok);
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.out, "approved 4242 on telegram");
    run_result_release(&r);
    EXPECT_INT(S_dm(root, st, "4242", now + 2, NULL), GW_ACCESS_ALLOW);
    r = run_clawmem(NULL, list);
    EXPECT_CONTAINS(r.out, "\"requests\":[]");
    run_result_release(&r);
    json_decref(root);
    free(st);
}
