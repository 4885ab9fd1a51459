/*
 * cmd_chat.c — `clawmem chat [MESSAGE]`: a terminal conversation with the
 * agent's main session, through the running gateway's HTTP channel when one
 * runs on the state dir, else in this process. Without MESSAGE it reads
 * lines from stdin until EOF or "/exit".
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

const char usage_chat[] =
    "usage: clawmem chat [MESSAGE] [--timeout MS]\n"
    "Talks to the agent's main session: through the gateway running on the state dir (its\n"
    "HTTP channel, gateway.auth.token), else straight to the agent in this process. With\n"
    "MESSAGE, one turn; without, one turn per line of input until EOF or /exit.\n";

static void S_print(void *ctx, const char *text)
{
    (void)ctx;
    put_safe(stdout, text ? text : "", 1);
    putchar('\n');
    fflush(stdout);
}

static int S_turn(const cm_options *opt, const char *text, int timeout_ms)
{
    char err[1024];
    const char *via = "";
    if (cm_chat_send(opt, text, timeout_ms, S_print, NULL, &via, err, sizeof err))
        return die("chat: %s", err);
    return 0;
}

int cmd_chat(const cm_options *base, int argc, char **argv)
{
    const char *msg = NULL;
    long timeout_ms = 300000;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help")) return fputs(usage_chat, stdout), 0;
        if (!strcmp(a, "--timeout")) {
            char *end;
            if (i + 1 >= argc) return die("chat: --timeout needs a value");
            timeout_ms = strtol(argv[++i], &end, 10);
            if (*end || timeout_ms <= 0 || timeout_ms > 86400000L)
                return die("chat: --timeout: milliseconds are needed");
        } else if (a[0] == '-' && a[1]) {
            return unknown_option("chat", a, "--timeout|--help");
        } else if (!msg) {
            msg = a;
        } else {
            return die("chat: one MESSAGE (quote it)");
        }
    }
    cm_options opt = *base;
    opt.allow_write = 1;
    if (msg) return S_turn(&opt, msg, (int)timeout_ms);
    bool tty = isatty(0);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int rc = 0;
    for (;;) {
        if (tty) fputs("> ", stdout), fflush(stdout);
        if ((n = getline(&line, &cap, stdin)) < 0) break;
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = 0;
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) break;
        if (!n) continue;
        rc = S_turn(&opt, line, (int)timeout_ms);
    }
    free(line);
    return rc;
}
