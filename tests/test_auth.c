/*
 * test_auth.c — auth profiles (src/auth): the cooldown and billing
 * schedules, the failure classes, the rotation order from a table of
 * profiles and stats, the first-use import, and the store under two writing
 * processes and kill -9. Time is passed in; nothing sleeps for a cooldown.
 */
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../src/auth/auth.h"
#include "../src/base/fs.h"
#include "../src/base/jnum.h"
#include "test.h"

#define MIN  60000LL
#define HOUR (60 * MIN)
#define T0   1800000000000LL /* a fixed "now" */

TEST(auth_cooldown_schedule)
{
    EXPECT_INT(cm_auth_cooldown_ms(0), 1 * MIN);
    EXPECT_INT(cm_auth_cooldown_ms(1), 1 * MIN);
    EXPECT_INT(cm_auth_cooldown_ms(2), 5 * MIN);
    EXPECT_INT(cm_auth_cooldown_ms(3), 25 * MIN);
    EXPECT_INT(cm_auth_cooldown_ms(4), 60 * MIN);
    EXPECT_INT(cm_auth_cooldown_ms(50), 60 * MIN);
}

TEST(auth_billing_schedule)
{
    EXPECT_INT(cm_auth_billing_disable_ms(NULL, "openai", 1), 5 * HOUR);
    EXPECT_INT(cm_auth_billing_disable_ms(NULL, "openai", 2), 10 * HOUR);
    EXPECT_INT(cm_auth_billing_disable_ms(NULL, "openai", 3), 20 * HOUR);
    EXPECT_INT(cm_auth_billing_disable_ms(NULL, "openai", 4), 24 * HOUR);
    EXPECT_INT(cm_auth_billing_disable_ms(NULL, "openai", 40), 24 * HOUR);
    json_t *by = json_pack("{s:f}", "Anthropic", 1.0);
    auth_cooldowns c = {2, 6, 0, by};
    EXPECT_INT(cm_auth_billing_disable_ms(&c, "openai", 1), 2 * HOUR);
    EXPECT_INT(cm_auth_billing_disable_ms(&c, "openai", 3), 6 * HOUR);
    EXPECT_INT(cm_auth_billing_disable_ms(&c, "anthropic", 1), 1 * HOUR);
    EXPECT_INT(cm_auth_billing_disable_ms(&c, "anthropic", 2), 2 * HOUR);
    json_decref(by);
}

static int64_t num(const json_t *o, const char *k)
{
    return json_integer_value(json_object_get(o, k));
}

TEST(auth_failure_stats)
{
    /* Rate limits, each when the last window has passed: 1, 5, 25, 60, 60
     * minutes (the counter runs until the failure window passes). */
    json_t *st = NULL;
    int64_t now = T0, want[] = {1 * MIN, 5 * MIN, 25 * MIN, 60 * MIN, 60 * MIN};
    for (int i = 0; i < 5; i++) {
        json_t *next = cm_auth_stats_after_failure(st, "openai", AUTH_R_RATE_LIMIT, NULL, now);
        json_decref(st);
        st = next;
        EXPECT_INT(num(st, "errorCount"), i + 1);
        EXPECT_INT(num(st, "cooldownUntil"), now + want[i]);
        EXPECT_INT(num(st, "lastFailureAt"), now);
        now += want[i];
    }
    EXPECT_INT(num(json_object_get(st, "failureCounts"), "rate_limit"), 5);
    /* A failure inside an active window keeps the window (not extended). */
    json_t *again = cm_auth_stats_after_failure(st, "openai", AUTH_R_TIMEOUT, NULL,
                                                num(st, "cooldownUntil") - 1);
    EXPECT_INT(num(again, "cooldownUntil"), num(st, "cooldownUntil"));
    EXPECT_INT(num(again, "errorCount"), 6);
    json_decref(again);
    /* 24 h without a failure: the counters start again. */
    int64_t later = num(st, "lastFailureAt") + 24 * HOUR + 1;
    json_t *fresh = cm_auth_stats_after_failure(st, "openai", AUTH_R_AUTH, NULL, later);
    EXPECT_INT(num(fresh, "errorCount"), 1);
    EXPECT_INT(num(fresh, "cooldownUntil"), later + MIN);
    EXPECT(json_object_get(json_object_get(fresh, "failureCounts"), "rate_limit") == NULL);
    json_decref(fresh);
    /* A longer failure window keeps counting. */
    auth_cooldowns wide = {0, 0, 48, NULL};
    fresh = cm_auth_stats_after_failure(st, "openai", AUTH_R_AUTH, &wide, later);
    EXPECT_INT(num(fresh, "errorCount"), 6);
    EXPECT_INT(num(fresh, "cooldownUntil"), later + 60 * MIN);
    json_decref(fresh);
    json_decref(st);

    /* Billing disables 5 → 10 → 20 → 24 → 24 h, by billing count, with the
     * reason; no cooldown window. auth_permanent disables the same way. */
    st = NULL;
    now = T0;
    int64_t bill[] = {5 * HOUR, 10 * HOUR, 20 * HOUR, 24 * HOUR, 24 * HOUR};
    for (int i = 0; i < 5; i++) {
        json_t *next = cm_auth_stats_after_failure(st, "openai", AUTH_R_BILLING, NULL, now);
        json_decref(st);
        st = next;
        EXPECT_INT(num(st, "disabledUntil"), now + bill[i]);
        EXPECT_STR(json_string_value(json_object_get(st, "disabledReason")), "billing");
        EXPECT(json_object_get(st, "cooldownUntil") == NULL);
        now += bill[i]; /* when it ends: still within the 24 h failure window */
    }
    json_decref(st);
    st = cm_auth_stats_after_failure(NULL, "openai", AUTH_R_AUTH_PERMANENT, NULL, T0);
    EXPECT_INT(num(st, "disabledUntil"), T0 + 5 * HOUR);
    EXPECT_STR(json_string_value(json_object_get(st, "disabledReason")), "auth_permanent");
    json_decref(st);
}

TEST(auth_classify_errors)
{
    struct {
        int status;
        const char *msg;
        auth_reason want;
    } cases[] = {
        {402, NULL, AUTH_R_BILLING},
        {402, "Payment Required: insufficient credits", AUTH_R_BILLING},
        {402, "daily limit reached, try again in 3 hours", AUTH_R_RATE_LIMIT},
        {429, "slow down", AUTH_R_RATE_LIMIT},
        {401, "Unauthorized", AUTH_R_AUTH},
        {401, "Incorrect API key provided", AUTH_R_AUTH},
        {401, "{\"error\":{\"code\":\"invalid_api_key\"}}", AUTH_R_AUTH_PERMANENT},
        {403, "Your API key has been revoked; key has been revoked", AUTH_R_AUTH_PERMANENT},
        {408, "", AUTH_R_TIMEOUT},
        {500, "Internal Server Error", AUTH_R_TIMEOUT},
        {503, "The model is overloaded", AUTH_R_OVERLOADED},
        {503, "", AUTH_R_TIMEOUT},
        {529, "", AUTH_R_OVERLOADED},
        {400, "messages.1.content.1.tool_use.id: String should match pattern", AUTH_R_FORMAT},
        {400, "Your credit balance is too low to access the API", AUTH_R_BILLING},
        {0, "Unhandled stop reason: error", AUTH_R_TIMEOUT},
        {0, "Billing: please upgrade your plan", AUTH_R_BILLING},
        {0, "Credit balance too low", AUTH_R_BILLING},
        {0, "insufficient credits", AUTH_R_BILLING},
        {0, "You exceeded your current quota", AUTH_R_RATE_LIMIT},
        {0, "429 Too Many Requests", AUTH_R_RATE_LIMIT},
        {0, "503 Service Unavailable", AUTH_R_TIMEOUT},
        {0, "socket hang up", AUTH_R_TIMEOUT},
        {0, "connect ECONNREFUSED 127.0.0.1:9", AUTH_R_TIMEOUT},
        {0, "The model `gpt-9` does not exist or you do not have access to it",
         AUTH_R_MODEL_NOT_FOUND},
        {0, "HTTP 401: token has expired", AUTH_R_AUTH},
        {0, "all good", AUTH_R_NONE},
        {0, "", AUTH_R_NONE},
        {404, "page not found", AUTH_R_NONE},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        auth_reason got = cm_auth_classify(cases[i].status, cases[i].msg);
        if (got != cases[i].want)
            test_fail(__FILE__, __LINE__, "%d \"%s\": got %s, want %s", cases[i].status,
                      cases[i].msg ? cases[i].msg : "(null)", cm_auth_reason_name(got),
                      cm_auth_reason_name(cases[i].want));
    }
    EXPECT_INT(cm_auth_reason_parse("rate_limit"), AUTH_R_RATE_LIMIT);
    EXPECT_INT(cm_auth_reason_parse("nope"), AUTH_R_NONE);
}

/* A store document from JSON text. */
static auth_store store_of(const char *json)
{
    auth_store s = {0};
    json_error_t je;
    s.doc = json_loads(json, 0, &je);
    if (!s.doc) test_fail(__FILE__, __LINE__, "bad fixture: %s", je.text);
    return s;
}

static char *joined(char **v)
{
    buf b = BUF_INIT;
    for (size_t i = 0; v && v[i]; i++)
        cm_buf_printf(&b, "%s%s", i ? "," : "", v[i]);
    if (!b.data) cm_buf_adds(&b, "");
    return cm_buf_detach(&b);
}

/* The order for provider as "a,b,c". */
static char *order_of(auth_store *s, const char *cfg, const char *provider, const char *pref,
                      int64_t now)
{
    json_t *c = cfg ? json_loads(cfg, 0, NULL) : NULL;
    char **v = NULL;
    if (cm_auth_profile_order(s, c, provider, pref, now, &v) != CM_OK) return NULL;
    char *j = joined(v);
    cm_auth_strv_free(v);
    json_decref(c);
    return j;
}

#define ORDER(s, cfg, prov, pref, now, want)                                                       \
    do {                                                                                           \
        char *got_ = order_of(s, cfg, prov, pref, now);                                            \
        bool ok_ = got_ && strcmp(got_, want) == 0;                                                \
        if (!ok_) test_fail(__FILE__, __LINE__, "order: got %s, want %s", got_, want);             \
        free(got_);                                                                                \
        if (!ok_) return;                                                                          \
    } while (0)

TEST(auth_order_rules)
{
    /* Round robin: OAuth before token before API keys, oldest lastUsed
     * first; another provider's and unusable credentials left out. */
    auth_store s = store_of(
        "{\"version\":1,\"profiles\":{"
        "\"openai:k1\":{\"type\":\"api_key\",\"provider\":\"openai\",\"key\":\"sk-1\"},"
        "\"openai:k2\":{\"type\":\"api_key\",\"provider\":\"OpenAI\",\"key\":\"sk-2\"},"
        "\"openai:me@x\":{\"type\":\"oauth\",\"provider\":\"openai\",\"access\":\"a\",\"refresh\":"
        "\"r\",\"expires\":1},"
        "\"openai:tok\":{\"type\":\"token\",\"provider\":\"openai\",\"token\":\"t\"},"
        "\"openai:old\":{\"type\":\"token\",\"provider\":\"openai\",\"token\":\"t\",\"expires\":5},"
        "\"openai:nokey\":{\"type\":\"api_key\",\"provider\":\"openai\"},"
        "\"anthropic:default\":{\"type\":\"api_key\",\"provider\":\"anthropic\",\"key\":\"x\"}},"
        "\"usageStats\":{\"openai:k1\":{\"lastUsed\":300},\"openai:k2\":{\"lastUsed\":100}}}");
    ORDER(&s, NULL, "openai", NULL, T0, "openai:me@x,openai:tok,openai:k2,openai:k1");
    ORDER(&s, NULL, "anthropic", NULL, T0, "anthropic:default");
    ORDER(&s, NULL, "mistral", NULL, T0, "");
    /* A preferred (pinned) profile comes first when it is usable. */
    ORDER(&s, NULL, "openai", "openai:k1", T0, "openai:k1,openai:me@x,openai:tok,openai:k2");
    ORDER(&s, NULL, "openai", "openai:nokey", T0, "openai:me@x,openai:tok,openai:k2,openai:k1");

    /* Cooling down or disabled: last, soonest expiry first; an expired
     * window no longer counts and is cleared (its counters stay until the
     * failure window passes). */
    json_t *u = json_object_get(s.doc, "usageStats");
    json_object_set_new(
        u, "openai:me@x",
        json_pack("{s:I,s:i}", "cooldownUntil", (json_int_t)(T0 + 10 * MIN), "errorCount", 2));
    json_object_set_new(u, "openai:tok",
                        json_pack("{s:I,s:s}", "disabledUntil", (json_int_t)(T0 + 5 * MIN),
                                  "disabledReason", "billing"));
    json_object_set_new(json_object_get(u, "openai:k2"), "cooldownUntil", json_integer(T0 - 1));
    json_object_set_new(json_object_get(u, "openai:k2"), "errorCount", json_integer(3));
    ORDER(&s, NULL, "openai", NULL, T0, "openai:k2,openai:k1,openai:tok,openai:me@x");
    EXPECT(json_object_get(json_object_get(u, "openai:k2"), "cooldownUntil") == NULL);
    EXPECT_INT(num(json_object_get(u, "openai:k2"), "errorCount"), 3);
    EXPECT(cm_auth_profile_unusable(&s, "openai:me@x", T0));
    EXPECT(!cm_auth_profile_unusable(&s, "openai:me@x", T0 + 10 * MIN));
    /* A pinned profile in cooldown still leads (a preference QuantumClaw
     * keeps; the runner rotates away on failure). */
    ORDER(&s, NULL, "openai", "openai:me@x", T0, "openai:me@x,openai:k2,openai:k1,openai:tok");

    /* The config's order is kept as written (cooling ones still last);
     * the stored order wins over it. */
    const char *cfg =
        "{\"order\":{\"openai\":[\"openai:k1\",\"openai:me@x\",\"openai:k2\",\"openai:gone\"]}}";
    ORDER(&s, cfg, "openai", NULL, T0, "openai:k1,openai:k2,openai:me@x");
    json_object_set_new(s.doc, "order", json_pack("{s:[s,s]}", "OPENAI", "openai:k2", "openai:k1"));
    ORDER(&s, cfg, "openai", NULL, T0, "openai:k2,openai:k1");
    json_object_del(s.doc, "order");

    /* Configured profiles filter the provider's profiles; a mode that does
     * not match the stored type drops the profile (oauth accepts a token). */
    const char *prof =
        "{\"profiles\":{\"openai:k1\":{\"provider\":\"openai\",\"mode\":\"api_key\"},"
        "\"openai:tok\":{\"provider\":\"openai\",\"mode\":\"oauth\"},"
        "\"openai:k2\":{\"provider\":\"openai\",\"mode\":\"oauth\"}}}";
    ORDER(&s, prof, "openai", NULL, T0 + HOUR, "openai:tok,openai:k1");
    /* Configured profiles that are all missing from the store: the stored ones. */
    const char *ghost =
        "{\"profiles\":{\"openai:ghost\":{\"provider\":\"openai\",\"mode\":\"api_key\"}}}";
    ORDER(&s, ghost, "openai", NULL, T0 + HOUR, "openai:me@x,openai:tok,openai:k2,openai:k1");
    /* Provider aliases fold: z.ai is zai. */
    json_object_set_new(
        json_object_get(s.doc, "profiles"), "zai:default",
        json_pack("{s:s,s:s,s:s}", "type", "api_key", "provider", "z.ai", "key", "k"));
    ORDER(&s, NULL, "ZAI", NULL, T0, "zai:default");
    cm_auth_store_release(&s);
}

TEST(auth_unavailable_reason_prefers_disables)
{
    auth_store s =
        store_of("{\"profiles\":{},\"usageStats\":{"
                 "\"a\":{\"cooldownUntil\":9000000000000,\"failureCounts\":{\"rate_limit\":3}},"
                 "\"b\":{\"cooldownUntil\":9000000000000,\"failureCounts\":{\"timeout\":1}},"
                 "\"c\":{\"cooldownUntil\":1}}}");
    const char *ab[] = {"a", "b", NULL}, *bc[] = {"b", "c", NULL}, *c[] = {"c", NULL};
    EXPECT_INT(cm_auth_unavailable_reason(&s, ab, T0), AUTH_R_RATE_LIMIT);
    EXPECT_INT(cm_auth_unavailable_reason(&s, bc, T0), AUTH_R_TIMEOUT);
    EXPECT_INT(cm_auth_unavailable_reason(&s, c, T0), AUTH_R_NONE);
    json_object_set_new(json_object_get(json_object_get(s.doc, "usageStats"), "b"), "disabledUntil",
                        json_integer(9000000000000LL));
    json_object_set_new(json_object_get(json_object_get(s.doc, "usageStats"), "b"),
                        "disabledReason", json_string("billing"));
    EXPECT_INT(cm_auth_unavailable_reason(&s, ab, T0), AUTH_R_BILLING);
    cm_auth_store_release(&s);
}

static char *read_text(const char *path)
{
    buf b = BUF_INIT;
    char err[256];
    if (cm_fs_read_file(path, 1 << 20, &b, err, sizeof err) != CM_OK) return NULL;
    if (!b.data) cm_buf_adds(&b, "");
    return cm_buf_detach(&b);
}

TEST(auth_store_marks_and_mode)
{
    char *d = tmp_dir();
    char err[512];
    write_file(d, "agents/main/agent/auth-profiles.json",
               "{\"version\":1,\"profiles\":{\"openai:default\":{\"type\":\"api_key\",\"provider\":"
               "\"openai\",\"key\":\"sk-secret-123\"}},\"custom\":{\"kept\":true}}");
    auth_store s;
    EXPECT_INT(cm_auth_store_init(&s, d, "main", err, sizeof err), CM_OK);
    EXPECT_STR(cm_auth_profile_secret(&s, "openai:default"), "sk-secret-123");
    const char *path = path_in(d, "agents/main/agent/auth-profiles.json");
    char *p = cm_strdup(path);
    EXPECT_INT(
        cm_auth_mark_failure(&s, p, "openai:default", AUTH_R_RATE_LIMIT, NULL, T0, err, sizeof err),
        CM_OK);
    EXPECT(cm_auth_profile_unusable(&s, "openai:default", T0));
    EXPECT_INT(cm_auth_profile_unusable_until(&s, "openai:default"), T0 + MIN);
    EXPECT_INT(cm_auth_mark_used(&s, p, "openai:default", T0 + 2 * MIN, err, sizeof err), CM_OK);
    EXPECT(!cm_auth_profile_unusable(&s, "openai:default", T0));
    EXPECT_INT(cm_auth_mark_good(&s, p, "openai", "openai:default", T0, err, sizeof err), CM_OK);
    /* A failure of an unknown profile records nothing. */
    EXPECT_INT(cm_auth_mark_failure(&s, p, "openai:ghost", AUTH_R_AUTH, NULL, T0, err, sizeof err),
               CM_OK);
    cm_auth_store_release(&s);

    char *text = read_text(p);
    json_t *doc = json_loads(text, 0, NULL);
    EXPECT(doc != NULL);
    json_t *st = json_object_get(json_object_get(doc, "usageStats"), "openai:default");
    EXPECT_INT(num(st, "lastUsed"), T0 + 2 * MIN);
    EXPECT_INT(num(st, "errorCount"), 0);
    EXPECT(json_object_get(st, "cooldownUntil") == NULL);
    EXPECT(json_object_get(json_object_get(doc, "usageStats"), "openai:ghost") == NULL);
    EXPECT_STR(json_string_value(json_object_get(json_object_get(doc, "lastGood"), "openai")),
               "openai:default");
    EXPECT(json_is_true(json_object_get(json_object_get(doc, "custom"), "kept")));
    EXPECT(text[strlen(text) - 1] == '\n');
    json_decref(doc);
    free(text);
    struct stat sb;
    EXPECT(stat(p, &sb) == 0 && (sb.st_mode & 0777) == 0600);
    EXPECT(access(path_in(d, "agents/main/agent/auth-profiles.json.lock"), F_OK) != 0);

    /* A damaged file is an error naming the place, never its content. */
    write_file(d, "agents/main/agent/auth-profiles.json",
               "{\"profiles\":{\"openai:default\":{\"key\": sk-secret-123}}}");
    EXPECT_INT(cm_auth_store_init(&s, d, "main", err, sizeof err), CM_ECONFIG);
    EXPECT_CONTAINS(err, "auth-profiles.json:1:");
    EXPECT(strstr(err, "sk-secret") == NULL);
    free(p);
}

TEST(auth_store_first_use_imports)
{
    char *d = tmp_dir();
    char err[512];
    auth_store s;
    /* Nothing anywhere: an empty store and no file. */
    EXPECT_INT(cm_auth_store_init(&s, d, "main", err, sizeof err), CM_OK);
    EXPECT_INT(json_object_size(json_object_get(s.doc, "profiles")), 0);
    cm_auth_store_release(&s);
    EXPECT(access(path_in(d, "agents/main/agent/auth-profiles.json"), F_OK) != 0);

    /* Legacy auth.json and oauth.json are imported once; auth.json goes. */
    write_file(
        d, "agents/main/agent/auth.json",
        "{\"anthropic\":{\"type\":\"api_key\",\"key\":\"ak\"},\"bad\":{\"type\":\"weird\"}}");
    write_file(d, "credentials/oauth.json",
               "{\"openai-codex\":{\"access\":\"acc\",\"refresh\":\"ref\",\"expires\":99}}");
    EXPECT_INT(cm_auth_store_init(&s, d, "main", err, sizeof err), CM_OK);
    json_t *a = cm_auth_profile(&s, "anthropic:default");
    EXPECT(a != NULL);
    EXPECT_STR(json_string_value(json_object_get(a, "provider")), "anthropic");
    EXPECT(cm_auth_profile(&s, "bad:default") == NULL);
    json_t *o = cm_auth_profile(&s, "openai-codex:default");
    EXPECT(o != NULL);
    EXPECT_STR(json_string_value(json_object_get(o, "type")), "oauth");
    EXPECT_STR(cm_auth_profile_secret(&s, "openai-codex:default"), "acc");
    cm_auth_store_release(&s);
    EXPECT(access(path_in(d, "agents/main/agent/auth-profiles.json"), F_OK) == 0);
    EXPECT(access(path_in(d, "agents/main/agent/auth.json"), F_OK) != 0);

    /* Another agent inherits the main agent's profiles. */
    EXPECT_INT(cm_auth_store_init(&s, d, "work", err, sizeof err), CM_OK);
    EXPECT(cm_auth_profile(&s, "anthropic:default") != NULL);
    cm_auth_store_release(&s);
    EXPECT(access(path_in(d, "agents/work/agent/auth-profiles.json"), F_OK) == 0);

    /* The seeds' legacy <stateDir>/agent/auth-profiles.json. */
    char *d2 = tmp_dir();
    write_file(d2, "agent/auth-profiles.json",
               "{\"version\":1,\"profiles\":{\"mistral:default\":{\"type\":\"api_key\","
               "\"provider\":\"mistral\",\"key\":\"mk\"}}}");
    EXPECT_INT(cm_auth_store_init(&s, d2, "main", err, sizeof err), CM_OK);
    EXPECT_STR(cm_auth_profile_secret(&s, "mistral:default"), "mk");
    cm_auth_store_release(&s);
}

/* Counts one failure of profile "p" per call, with a window that never
 * expires, so errorCount counts every update that landed. */
static int hammer(const char *path, int n)
{
    char err[512];
    auth_cooldowns c = {0, 0, 1e6, NULL};
    for (int i = 0; i < n; i++)
        if (cm_auth_mark_failure(NULL, path, "p", AUTH_R_TIMEOUT, &c, T0, err, sizeof err) !=
            CM_OK) {
            fprintf(stderr, "hammer: %s\n", err);
            return 1;
        }
    return 0;
}

TEST(auth_store_two_processes_lose_nothing)
{
    char *d = tmp_dir();
    write_file(d, "agent/auth-profiles.json",
               "{\"version\":1,\"profiles\":{\"p\":{\"type\":\"api_key\",\"provider\":\"openai\","
               "\"key\":\"k\"}}}");
    char *path = cm_strdup(path_in(d, "agent/auth-profiles.json"));
    enum { PER = 500 };
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        if (kids[k] == 0) _exit(hammer(path, PER));
    }
    /* Meanwhile the file is always whole JSON. */
    int reads = 0, bad = 0;
    for (int alive = 2; alive > 0;) {
        char *t = read_text(path);
        json_t *j = t ? json_loads(t, 0, NULL) : NULL;
        bad += !j;
        reads++;
        json_decref(j);
        free(t);
        alive = 0;
        for (int k = 0; k < 2; k++)
            if (kids[k] > 0) {
                int status;
                if (waitpid(kids[k], &status, WNOHANG) == kids[k]) {
                    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
                    kids[k] = 0;
                } else {
                    alive++;
                }
            }
    }
    EXPECT_INT(bad, 0);
    EXPECT(reads > 0);
    auth_store s;
    char err[512];
    EXPECT_INT(cm_auth_store_read(&s, path, err, sizeof err), CM_OK);
    EXPECT_INT(num(json_object_get(json_object_get(s.doc, "usageStats"), "p"), "errorCount"),
               2 * PER);
    cm_auth_store_release(&s);
    free(path);
}

TEST(auth_store_survives_kill9)
{
    char *d = tmp_dir();
    write_file(d, "agent/auth-profiles.json",
               "{\"version\":1,\"profiles\":{\"p\":{\"type\":\"api_key\",\"provider\":\"openai\","
               "\"key\":\"k\"}}}");
    char *path = cm_strdup(path_in(d, "agent/auth-profiles.json"));
    char err[512];
    int64_t last = 0;
    for (int round = 0; round < 15; round++) {
        pid_t pid = fork();
        if (pid == 0) _exit(hammer(path, 100000));
        struct timespec ts = {0, (long)(1 + (round * 7) % 13) * 1000000L};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        /* The old or the new file, never a torn one; the dead writer's
         * sidecar lock does not block the next update. */
        auth_store s;
        EXPECT_INT(cm_auth_store_read(&s, path, err, sizeof err), CM_OK);
        int64_t n = num(json_object_get(json_object_get(s.doc, "usageStats"), "p"), "errorCount");
        EXPECT(n >= last);
        cm_auth_store_release(&s);
        EXPECT_INT(cm_auth_mark_failure(&s, path, "p", AUTH_R_TIMEOUT,
                                        &(auth_cooldowns){0, 0, 1e6, NULL}, T0, err, sizeof err),
                   CM_OK);
        EXPECT_INT(num(json_object_get(json_object_get(s.doc, "usageStats"), "p"), "errorCount"),
                   n + 1);
        last = n + 1;
        cm_auth_store_release(&s);
    }
    /* What the killed writers left (temporary files, private lock names)
     * is gone after the next update. */
    int leftovers = 0;
    DIR *dir = opendir(path_in(d, "agent"));
    for (struct dirent *e; dir && (e = readdir(dir));)
        leftovers += e->d_name[0] != '.' ? 0 : strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (dir) closedir(dir);
    EXPECT_INT(leftovers, 0);
    free(path);
}

/* Numbers in auth-profiles.json are range-checked before they become
 * int64_t: cooldownUntil 1e300 was cast as it was (undefined; on x86 it
 * read as INT64_MIN, so the profile looked usable). Huge times mean "not
 * before the far future", negative ones "not set". */
TEST(auth_state_numbers_range_checked)
{
    static const struct {
        const char *stats; /* the profile's usageStats */
        bool unusable;
    } cases[] = {
        {"{\"cooldownUntil\":1e300}", true},
        {"{\"cooldownUntil\":1.7976931348623157e308}", true},
        {"{\"disabledUntil\":1e19}", true},
        {"{\"cooldownUntil\":9223372036854775807}", true},
        {"{\"cooldownUntil\":-1e300}", false},
        {"{\"cooldownUntil\":-5}", false},
        {"{\"cooldownUntil\":-9223372036854775807}", false},
        {"{\"cooldownUntil\":\"1e300\"}", false},
        {"{\"cooldownUntil\":null,\"disabledUntil\":-1e19}", false},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        char doc[512];
        snprintf(doc, sizeof doc,
                 "{\"version\":1,\"profiles\":{\"openai:k\":{\"type\":\"api_key\","
                 "\"provider\":\"openai\",\"key\":\"sk\"}},\"usageStats\":{\"openai:k\":%s}}",
                 cases[i].stats);
        auth_store s = store_of(doc);
        if (cm_auth_profile_unusable(&s, "openai:k", T0) != cases[i].unusable)
            test_fail(__FILE__, __LINE__, "%s: unusable should be %d", cases[i].stats,
                      cases[i].unusable);
        int64_t until = cm_auth_profile_unusable_until(&s, "openai:k");
        EXPECT(until >= 0 && until <= CM_JNUM_MS_MAX);
        json_decref(s.doc);
    }
    /* A token's expiry: 1e300 is valid for ever, -1e300 long expired. */
    auth_store s = store_of("{\"version\":1,\"profiles\":{"
                            "\"openai:a\":{\"type\":\"token\",\"provider\":\"openai\",\"token\":"
                            "\"t\",\"expires\":1e300},"
                            "\"openai:b\":{\"type\":\"token\",\"provider\":\"openai\",\"token\":"
                            "\"t\",\"expires\":-1e300}}}");
    ORDER(&s, NULL, "openai", NULL, T0, "openai:a");
    json_decref(s.doc);
    /* Counters out of range: the next failure still cools down from now. */
    json_t *st = json_loads("{\"errorCount\":1e300,\"failureCounts\":{\"rate_limit\":-1e300},"
                            "\"lastFailureAt\":1e300}",
                            0, NULL);
    json_t *next = cm_auth_stats_after_failure(st, "openai", AUTH_R_RATE_LIMIT, NULL, T0);
    EXPECT(next);
    json_int_t cu = json_integer_value(json_object_get(next, "cooldownUntil"));
    EXPECT(cu > T0 && cu <= T0 + 24 * 60 * MIN);
    EXPECT(json_integer_value(json_object_get(next, "errorCount")) > 0);
    EXPECT_INT(json_integer_value(json_object_get(json_object_get(next, "failureCounts"),
                                                  "rate_limit")),
               1);
    json_decref(st);
    json_decref(next);
}
