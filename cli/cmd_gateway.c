/*
 * cmd_gateway.c — `clawmem gateway [run]`: the gateway in the foreground
 * until SIGTERM or SIGINT, which drain it (no new message accepted, queued
 * and running turns finished, exit 0), SIGHUP reloading its config;
 * `clawmem gateway status`: whether one runs on the state dir, its channels,
 * sessions with active runs, queue depths and the journal backlog.
 */
#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

const char usage_gateway[] =
    "usage: clawmem gateway [run] [--listen ADDR:PORT] [--workers N] [--drain-timeout MS]\n"
    "       clawmem gateway status [--json]\n"
    "Runs the gateway in the foreground: chat channels in (the HTTP channel when\n"
    "gateway.auth.token is set: POST /v1/messages, replies on GET /v1/events), agent turns\n"
    "with the memory tools, replies out. It listens on gateway.bind (loopback) and\n"
    "gateway.port (18789) unless --listen says otherwise. Every accepted message is\n"
    "journaled (<stateDir>/gateway/journal.jsonl) and answered after a crash. SIGTERM or\n"
    "Ctrl-C drains: nothing new is accepted (HTTP 503), pending turns finish, then exit 0.\n"
    "A change to the config file (gateway.reload) or SIGHUP reloads it without a restart.\n"
    "status shows whether a gateway runs, its channels, sessions with active runs or\n"
    "queued messages, and the journal backlog.\n";

static int S_status(const cm_options *opt, bool json)
{
    char err[1024], *out = NULL;
    if (cm_gateway_status(opt, &out, err, sizeof err)) return die("gateway status: %s", err);
    json_t *j = json_loads(out, 0, NULL);
    if (json || !j) {
        put_safe(stdout, out, 0);
        putchar('\n');
    } else {
        bool running = json_is_true(json_object_get(j, "running"));
        printf("gateway: %s", running ? "running" : "not running");
        if (running)
            printf(" (pid %lld)", (long long)json_integer_value(json_object_get(j, "pid")));
        putchar('\n');
        const char *addr = json_string_value(json_object_get(j, "address"));
        if (running && addr) {
            printf("address: http://");
            put_safe(stdout, addr, 0);
            putchar('\n');
        }
        size_t i;
        json_t *c;
        printf("channels:");
        json_array_foreach(json_object_get(j, "channels"), i, c)
        {
            putchar(' ');
            put_safe(stdout, json_string_value(json_object_get(c, "channel")), 0);
        }
        if (!json_array_size(json_object_get(j, "channels"))) printf(" none");
        putchar('\n');
        json_array_foreach(json_object_get(j, "channels"), i, c)
        {
            const char *why = json_string_value(json_object_get(c, "lastError"));
            if (!why || !*why) continue;
            printf("  ");
            put_safe(stdout, json_string_value(json_object_get(c, "channel")), 0);
            putchar('/');
            put_safe(stdout, json_string_value(json_object_get(c, "account")), 0);
            printf(" last error: ");
            put_safe(stdout, why, 0);
            putchar('\n');
        }
        printf("active runs: %lld, debounce batches: %lld, journal backlog: %lld\n",
               (long long)json_integer_value(json_object_get(j, "activeRuns")),
               (long long)json_integer_value(json_object_get(j, "debouncePending")),
               (long long)json_integer_value(json_object_get(j, "journalBacklog")));
        json_array_foreach(json_object_get(j, "sessions"), i, c)
        {
            printf("  ");
            put_safe(stdout, json_string_value(json_object_get(c, "key")), 0);
            printf("  %s, %lld queued\n",
                   json_is_true(json_object_get(c, "active")) ? "running" : "idle",
                   (long long)json_integer_value(json_object_get(c, "queued")));
        }
    }
    json_decref(j);
    cm_free(out);
    return 0;
}

int cmd_gateway(const cm_options *base, int argc, char **argv)
{
    cm_gateway_opts go = {NULL, 0};
    const char *sub = NULL;
    bool json = false;
    long drain_ms = 60000;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help")) return fputs(usage_gateway, stdout), 0;
        if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "--listen") || !strcmp(a, "--workers") ||
                   !strcmp(a, "--drain-timeout")) {
            if (i + 1 >= argc) return die("gateway: %s needs a value", a);
            const char *v = argv[++i];
            char *end;
            long n = strtol(v, &end, 10);
            if (!strcmp(a, "--listen"))
                go.listen = v;
            else if (*end || n < 0 || n > 100000000 || (!strcmp(a, "--workers") && n > 64))
                return die("gateway: %s: a number is needed", a);
            else if (!strcmp(a, "--workers"))
                go.workers = (int)n;
            else
                drain_ms = n;
        } else if (a[0] == '-' && a[1]) {
            return unknown_option("gateway", a, "--json|--listen|--workers|--drain-timeout|--help");
        } else if (!sub) {
            sub = a;
        } else {
            return die("gateway: too many arguments (see clawmem help gateway)");
        }
    }
    if (sub && !strcmp(sub, "status")) return S_status(base, json);
    if (sub && strcmp(sub, "run")) return die("gateway: run or status (see clawmem help gateway)");
    cm_options opt = *base;
    opt.allow_write = 1; /* the agent writes its memory down (memory_write, the flush) */
    /* The signals are taken by sigwait below: block them before any thread
     * starts, so every thread inherits the mask. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    char err[1024];
    cm_gateway *g = NULL;
    if (cm_gateway_start(&opt, &go, &g, err, sizeof err)) return die("gateway: %s", err);
    const char *addr = cm_gateway_address(g);
    if (addr) {
        printf("gateway: listening on http://");
        put_safe(stdout, addr, 0);
        putchar('\n');
    } else {
        printf("gateway: running\n");
    }
    fflush(stdout);
    int sig = 0;
    while (sigwait(&set, &sig) == 0 && sig == SIGHUP) {
        fprintf(stderr, "clawmem: gateway: SIGHUP: reloading the config\n");
        cm_gateway_reload(g); /* runs on the gateway's reloader thread; logged there */
    }
    fprintf(stderr, "clawmem: gateway: %s: draining\n", sig == SIGINT ? "interrupt" : "SIGTERM");
    int all = cm_gateway_drain(g, (int)drain_ms);
    if (!all)
        warn("gateway: stopped with unanswered messages left in the journal (they run at the next "
             "start)");
    cm_gateway_free(g);
    return 0;
}
