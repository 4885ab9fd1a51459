/*
 * test_leaks.c — secrets never leave through a message, a status or a
 * payload, end to end: each test gives clawmem a secret, makes the path
 * under test fail or answer in the way that would carry it out (a libpq
 * parse error quoting the DSN, a Control UI config payload, a token
 * endpoint echoing the refresh token), and looks for the secret's bytes in
 * everything that comes back.
 */
#include <jansson.h>

#include "test.h"
#include "ws_client.h"

/* Whether secret occurs in s (NULL: it does not). */
static bool shows(const char *s, const char *secret)
{
    return s && strstr(s, secret) != NULL;
}

/* ---- PostgreSQL: libpq quotes a DSN it cannot parse ------------------------------- */

/* libpq names what it could not parse, and for some mistakes that is the
 * whole DSN or the password: "end of string reached when looking for
 * matching "]" in IPv6 host address in URI: "postgresql://u:pw@[::1/db"",
 * "invalid percent-encoded token: "pw"", "missing "=" after "half"". Each
 * case fails before any connection is tried, so no server is needed. */
TEST(leaks_pg_dsn_libpq_cannot_parse_is_never_shown)
{
    static const struct {
        const char *dsn, *secret;
    } cases[] = {
        {"postgresql://clawuser:PgLeakPw4417@[::1/db", "PgLeakPw4417"},
        {"postgresql://clawuser:PgLeak%zzPw4417@127.0.0.1:1/db", "PgLeak%zzPw4417"},
        {"host=127.0.0.1 port=1 user=x password=PgLeak Pw4417half", "Pw4417half"},
    };
    char *dir = tmp_dir();
    char ws[1024], state[1024], cfg[1024];
    snprintf(ws, sizeof ws, "%s/ws", dir);
    snprintf(state, sizeof state, "%s/state", dir);
    snprintf(cfg, sizeof cfg, "%s/qc.json", dir);
    write_file(ws, "MEMORY.md", "# Facts\nthe keeper notes\n");
    write_file(dir, "qc.json", "{}");
    write_file(state, "clawmem.json",
               "{agents: {defaults: {memorySearch: {provider: 'none', store: {driver: "
               "'postgres', dsn: '${CM_LEAK_DSN}'}}}}}");
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        char env[256];
        snprintf(env, sizeof env, "CM_LEAK_DSN=%s", cases[i].dsn);
        const char *e[] = {env, NULL};
        const char *status[] = {"--workspace", ws,       "--state-dir", state, "--config",
                                cfg,           "status", "--json",      NULL};
        const char *index[] = {"--workspace", ws,  "--state-dir", state,
                               "--config",    cfg, "index",       NULL};
        const char *search[] = {"--workspace", ws,       "--state-dir", state, "--config",
                                cfg,           "search", "keeper",      NULL};
        const char *const *runs[] = {status, index, search};
        for (size_t k = 0; k < ARRAY_LEN(runs); k++) {
            run_result r = run_clawmem(e, runs[k]);
            EXPECT(!shows(r.out, cases[i].secret));
            EXPECT(!shows(r.err, cases[i].secret));
            /* the failure is still said: libpq's message, the secret redacted */
            EXPECT(shows(r.out, "cannot connect") || shows(r.err, "cannot connect"));
            if (shows(r.out, cases[i].secret) || shows(r.err, cases[i].secret))
                test_fail(__FILE__, __LINE__, "dsn %zu, run %zu: %s%s", i, k, r.out ? r.out : "",
                          r.err ? r.err : "");
            run_result_release(&r);
        }
    }
}
