/*
 * eval_batch.c — `make eval`'s fast path: one process indexes a workspace
 * and answers every query of a dataset through the public API, instead of
 * one `clawmem search --no-sync` process per query (the same engine, the
 * same answers: bench/eval_common.mjs uses it when it is built).
 * Usage: eval_batch WORKSPACE STATE_DIR CONFIG_FILE MAX_RESULTS < queries
 *   one query a line in; one line out per query: the payload of
 *   cm_memory_search with minScore 0 (a query that fails: {"results":[]}).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clawmem.h"

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: eval_batch WORKSPACE STATE_DIR CONFIG_FILE MAX_RESULTS\n");
        return 2;
    }
    cm_options o = {NULL, argv[1], argv[3], argv[2], NULL, NULL, 0};
    char err[1024];
    cm_engine *e = NULL;
    if (cm_engine_open(&o, &e, err, sizeof err)) {
        fprintf(stderr, "eval_batch: %s\n", err);
        return 1;
    }
    cm_sync_stats st;
    if (cm_engine_sync(e, CM_SYNC_FORCE, NULL, NULL, &st, err, sizeof err)) {
        fprintf(stderr, "eval_batch: %s\n", err);
        cm_engine_close(e);
        return 1;
    }
    cm_search_opts so = {(int)strtol(argv[4], NULL, 10), 0, 0};
    static char line[65536];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = 0;
        char *json = NULL;
        if (cm_memory_search(e, line, &so, &json, err, sizeof err) || !json)
            fputs("{\"results\":[]}\n", stdout);
        else
            printf("%s\n", json);
        cm_free(json);
    }
    cm_engine_close(e);
    return 0;
}
