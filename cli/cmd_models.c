/*
 * cmd_models.c — `clawmem models`: status (the model chain, each
 * provider's auth profiles in the order they would be tried, cooldowns and
 * disables) and run (one turn through the runner with the memory tools,
 * streamed to the terminal, in a session or not).
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

const char usage_models[] =
    "usage: clawmem models status [--json]\n"
    "       clawmem models run [--session KEY] [--model PROVIDER/MODEL] [--json] PROMPT\n"
    "status shows the model chain (agents.defaults.model: primary, then fallbacks) and, for each\n"
    "provider, its auth profiles (auth-profiles.json) in the order they would be tried, with\n"
    "cooldowns and billing disables and when they end. run sends PROMPT through the runner —\n"
    "profile rotation, cooldowns, model fallback — with memory_search and memory_get (and\n"
    "memory_write when enabled) available to the model, and prints the reply as it streams.\n"
    "With --session the turn is part of that session (history, transcript, the memory flush\n"
    "and compaction).\n";

static void on_text(void *ctx, const char *s, size_t n)
{
    (void)ctx;
    char *t = strndup(s, n);
    if (t) put_safe(stdout, t, 1);
    free(t);
    fflush(stdout);
}

static void print_status(json_t *j)
{
    printf("Auth store: ");
    put_safe(stdout, json_string_value(json_object_get(j, "authStore")), 0);
    printf("\nModels:");
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(j, "chain"), i, m)
    {
        printf(" %s", i ? "→ " : "");
        put_safe(stdout, json_string_value(m), 0);
    }
    putchar('\n');
    const char *prov;
    json_t *p;
    json_object_foreach(json_object_get(j, "providers"), prov, p)
    {
        printf("\n");
        put_safe(stdout, prov, 0);
        printf(" (%s)\n", json_string_value(json_object_get(p, "api")));
        json_t *profiles = json_object_get(p, "profiles");
        if (!json_array_size(profiles))
            printf("  no auth profiles: models.providers.%s.apiKey or the environment\n", prov);
        size_t k;
        json_t *r;
        json_array_foreach(profiles, k, r)
        {
            printf("  %zu. ", k + 1);
            put_safe(stdout, json_string_value(json_object_get(r, "id")), 0);
            printf(" [%s]", json_string_value(json_object_get(r, "type")));
            json_t *until = json_object_get(r, "unusableUntil");
            if (until) {
                time_t t = (time_t)(json_integer_value(until) / 1000);
                struct tm tm;
                char when[32];
                gmtime_r(&t, &tm);
                strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
                const char *why = json_string_value(json_object_get(r, "disabledReason"));
                printf(" %s until %s", why ? "disabled" : "cooling down", when);
                if (why) printf(" (%s)", why);
            } else {
                printf(" ready");
            }
            long long errs = json_integer_value(json_object_get(r, "errorCount"));
            if (errs) printf(", %lld recent failure%s", errs, errs == 1 ? "" : "s");
            putchar('\n');
        }
    }
}

int cmd_models(const cm_options *opt, int argc, char **argv)
{
    const char *sub = NULL, *session = NULL, *model = NULL, *prompt = NULL;
    int json = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help")) return fputs(usage_models, stdout), 0;
        if (!strcmp(a, "--json"))
            json = 1;
        else if (!strcmp(a, "--session") || !strcmp(a, "--model")) {
            if (i + 1 >= argc) return die("models: %s needs a value", a);
            if (!strcmp(a, "--session"))
                session = argv[++i];
            else
                model = argv[++i];
        } else if (a[0] == '-' && a[1]) {
            return unknown_option("models", a, "--json|--session|--model|--help");
        } else if (!sub)
            sub = a;
        else if (!prompt)
            prompt = a;
        else
            return die("models: too many arguments (quote the PROMPT)");
    }
    if (!sub || (strcmp(sub, "status") && strcmp(sub, "run")))
        return die("models: say status or run (see clawmem models --help)");
    if (!strcmp(sub, "run") && (!prompt || !*prompt)) return die("models run: a PROMPT is needed");
    char err[CM_ERR_SIZE], *out = NULL;
    cm_agent *a = NULL;
    if (cm_agent_open(opt, &a, err, sizeof err)) return die("%s", err);
    cm_rc rc = !strcmp(sub, "status")
                   ? cm_models_status(a, &out, err, sizeof err)
                   : cm_agent_turn(a, session, prompt, model, json ? NULL : on_text, NULL, &out,
                                   err, sizeof err);
    cm_agent_close(a);
    if (rc) {
        if (!json && !strcmp(sub, "run")) putchar('\n');
        return die("models %s: %s", sub, err);
    }
    if (json) {
        puts(out);
    } else if (!strcmp(sub, "status")) {
        json_t *j = json_loads(out, 0, NULL);
        print_status(j);
        json_decref(j);
    } else {
        json_t *j = json_loads(out, 0, NULL);
        if (json_is_true(json_object_get(j, "silent"))) printf("(no reply: NO_REPLY)");
        putchar('\n');
        fprintf(stderr, "[%s%s%s]\n", json_string_value(json_object_get(j, "model")),
                json_is_true(json_object_get(j, "flushed")) ? ", memory flushed first" : "",
                json_is_true(json_object_get(j, "compacted")) ? ", session compacted" : "");
        json_decref(j);
    }
    cm_free(out);
    return 0;
}
