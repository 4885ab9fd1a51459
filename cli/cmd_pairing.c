/*
 * cmd_pairing.c — `clawmem pairing list|approve CHANNEL [CODE]`: the pending
 * pairing requests of a chat channel and their approval, in QuantumClaw's own
 * pairing store (so codes issued by its gateway are approved here too).
 */
#include <jansson.h>
#include <stdbool.h>
#include <string.h>

#include "cli.h"

const char usage_pairing[] =
    "usage: clawmem pairing list CHANNEL [--json]\n"
    "       clawmem pairing approve CHANNEL CODE [--json]\n"
    "With channels.<channel>.dmPolicy \"pairing\" (the default) a sender the agent does not\n"
    "know gets a one-time code and no answer. list shows the channel's pending codes (they\n"
    "expire after an hour); approve lets the sender of CODE reach the agent from now on\n"
    "(<stateDir>/credentials/<channel>-<account>-allowFrom.json).\n";

int cmd_pairing(const cm_options *opt, int argc, char **argv)
{
    const char *pos[3] = {NULL, NULL, NULL};
    int npos = 0, json = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help")) return fputs(usage_pairing, stdout), 0;
        if (!strcmp(a, "--json"))
            json = 1;
        else if (a[0] == '-' && a[1])
            return unknown_option("pairing", a, "--json|--help");
        else if (npos < 3)
            pos[npos++] = a;
        else
            return die("pairing: too many arguments (see clawmem help pairing)");
    }
    const char *sub = pos[0];
    bool list = sub && !strcmp(sub, "list"), approve = sub && !strcmp(sub, "approve");
    if (!list && !approve) return die("pairing: list or approve (see clawmem help pairing)");
    if (!pos[1]) return die("pairing %s: a CHANNEL is needed (telegram, …)", sub);
    if (approve && !pos[2]) return die("pairing approve: a CODE is needed");
    if (list && pos[2]) return die("pairing list: CHANNEL only");
    char err[CM_ERR_SIZE], *out = NULL;
    cm_rc rc = list ? cm_pairing_list(opt, pos[1], &out, err, sizeof err)
                    : cm_pairing_approve(opt, pos[1], pos[2], &out, err, sizeof err);
    if (rc) return die("pairing %s: %s", sub, err);
    json_t *j = json_loads(out, 0, NULL);
    if (json || !j) {
        put_safe(stdout, out, 0);
        putchar('\n');
    } else if (approve) {
        printf("approved ");
        put_safe(stdout, json_string_value(json_object_get(j, "approved")), 0);
        printf(" on %s\n", pos[1]);
    } else {
        json_t *reqs = json_object_get(j, "requests");
        if (!json_array_size(reqs)) printf("no pending pairing requests on %s\n", pos[1]);
        size_t i;
        json_t *r;
        json_array_foreach(reqs, i, r)
        {
            put_safe(stdout, json_string_value(json_object_get(r, "code")), 0);
            printf("  ");
            put_safe(stdout, json_string_value(json_object_get(r, "id")), 0);
            printf("  account ");
            put_safe(stdout, json_string_value(json_object_get(r, "accountId")), 0);
            const char *t = json_string_value(json_object_get(r, "createdAt"));
            if (t) {
                printf("  since ");
                put_safe(stdout, t, 0);
            }
            putchar('\n');
        }
    }
    json_decref(j);
    cm_free(out);
    return 0;
}
