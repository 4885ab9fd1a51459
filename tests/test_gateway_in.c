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
