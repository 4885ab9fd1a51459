/*
 * test_gateway_in_access.c — the gateway's access rules
 * (src/gateway/core/access.h, pairing.h): config errors, DM policies,
 * groups, the pairing flow and a store written by QuantumClaw, and the
 * pairing command, from tables of senders.
 */
#include <ctype.h>

#include "../src/base/fs.h"
#include "../src/gateway/core/access.h"
#include "../src/gateway/core/pairing.h"
#include "gw_fixture.h"
#include "test.h"

/* ---- access ------------------------------------------------------------- */

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
