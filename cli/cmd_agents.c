/*
 * cmd_agents.c — `clawmem agents list|delete ID`: the agents whose memory
 * the store holds (those of the config and any other with rows there), and
 * the removal of every row of one of them (clawmem/agents.h). delete asks
 * for --yes: without it, it only says what it would remove.
 */
#include <jansson.h>
#include <stdbool.h>
#include <string.h>

#include "cli.h"

const char usage_agents[] =
    "usage: clawmem agents list [--json]\n"
    "       clawmem agents delete ID --yes [--json]\n"
    "list shows the config's agents (agents.list) and every other agent the store holds:\n"
    "rows in the PostgreSQL database (memorySearch.store.driver \"postgres\"), or index\n"
    "files at the default place, with the rows of each table.\n"
    "delete removes everything agent ID has in the store: on PostgreSQL its rows of every\n"
    "clawmem_* table in one transaction (under the agent's write lock), on SQLite its index\n"
    "file with -wal, -shm, lock and watcher files. Memory files, sessions and other agents\n"
    "are untouched. Without --yes it only lists what is there. Stop the watchers and\n"
    "servers that keep the agent first (and take it out of agents.list, or the next sync\n"
    "builds its index again).\n";

/* "table rows, table rows" of an object of counts. */
static void print_rows(json_t *rows)
{
    const char *k;
    json_t *v;
    bool first = true;
    json_object_foreach(rows, k, v)
    {
        printf("%s%s %lld", first ? "" : ", ", k, (long long)json_integer_value(v));
        first = false;
    }
    if (first) printf("no rows");
}

static int agents_list(const cm_options *opt, bool json)
{
    char err[CM_ERR_SIZE], *out = NULL;
    if (cm_agents_list(opt, &out, err, sizeof err)) return die("agents list: %s", err);
    json_t *j = json_loads(out, 0, NULL);
    if (json || !j) {
        put_safe(stdout, out, 0);
        putchar('\n');
    } else {
        size_t i;
        json_t *a;
        json_array_foreach(json_object_get(j, "agents"), i, a)
        {
            put_safe(stdout, json_string_value(json_object_get(a, "id")), 0);
            printf("  %s%s  ", json_string_value(json_object_get(a, "store")),
                   json_is_true(json_object_get(a, "configured")) ? "" : "  (not in the config)");
            const char *idx = json_string_value(json_object_get(a, "index"));
            if (!idx) printf("no index  ");
            print_rows(json_object_get(a, "rows"));
            putchar('\n');
        }
        if (!json_array_size(json_object_get(j, "agents"))) puts("No agents.");
    }
    json_decref(j);
    cm_free(out);
    return 0;
}

static int agents_delete(const cm_options *opt, const char *id, bool yes, bool json)
{
    char err[CM_ERR_SIZE], *out = NULL;
    cm_options o = *opt;
    o.agent_id = id;
    if (!yes) { /* what is there, and how to remove it */
        if (cm_agents_list(&o, &out, err, sizeof err)) return die("agents delete: %s", err);
        json_t *j = json_loads(out, 0, NULL), *found = NULL, *a;
        size_t i;
        json_array_foreach(json_object_get(j, "agents"), i, a)
        {
            if (!strcmp(json_string_value(json_object_get(a, "id")), id)) found = a;
        }
        fputs("agents delete: would remove agent ", stderr);
        put_safe(stderr, id, 0);
        fputs(found ? "'s rows (" : " (nothing in the store)", stderr);
        if (found) {
            json_t *rows = json_object_get(found, "rows");
            const char *k;
            json_t *v;
            bool first = true;
            json_object_foreach(rows, k, v)
            {
                fprintf(stderr, "%s%s %lld", first ? "" : ", ", k,
                        (long long)json_integer_value(v));
                first = false;
            }
            fputs(")", stderr);
        }
        fputs("; give --yes to do it\n", stderr);
        json_decref(j);
        cm_free(out);
        return 1;
    }
    if (cm_agents_delete(&o, &out, err, sizeof err)) return die("agents delete: %s", err);
    json_t *j = json_loads(out, 0, NULL);
    if (json || !j) {
        put_safe(stdout, out, 0);
        putchar('\n');
    } else if (!json_is_true(json_object_get(j, "found"))) {
        printf("Nothing to delete: agent ");
        put_safe(stdout, id, 0);
        printf(" has nothing in the %s store.\n", json_string_value(json_object_get(j, "store")));
    } else {
        printf("Deleted agent ");
        put_safe(stdout, id, 0);
        printf(" from the %s store: ", json_string_value(json_object_get(j, "store")));
        print_rows(json_object_get(j, "removed"));
        putchar('\n');
        size_t i;
        json_t *p;
        json_array_foreach(json_object_get(j, "paths"), i, p)
        {
            printf("removed ");
            put_safe(stdout, json_string_value(p), 0);
            putchar('\n');
        }
    }
    json_decref(j);
    cm_free(out);
    return 0;
}

int cmd_agents(const cm_options *opt, int argc, char **argv)
{
    const char *pos[2] = {NULL, NULL};
    int npos = 0;
    bool json = false, yes = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help")) return fputs(usage_agents, stdout), 0;
        if (!strcmp(a, "--json"))
            json = true;
        else if (!strcmp(a, "--yes") || !strcmp(a, "-y"))
            yes = true;
        else if (a[0] == '-' && a[1])
            return unknown_option("agents", a, "--json|--yes|--help");
        else if (npos < 2)
            pos[npos++] = a;
        else
            return die("agents: too many arguments (see clawmem help agents)");
    }
    const char *sub = pos[0];
    if (sub && !strcmp(sub, "list")) {
        if (pos[1]) return die("agents list: no argument expected");
        return agents_list(opt, json);
    }
    if (sub && !strcmp(sub, "delete")) {
        if (!pos[1] || !*pos[1]) return die("agents delete: an agent ID is needed");
        return agents_delete(opt, pos[1], yes, json);
    }
    return die("agents: list or delete (see clawmem help agents)");
}
