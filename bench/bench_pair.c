/*
 * bench_pair.c — two engines (two stores over two copies of one corpus)
 * measured interleaved in one process, for `make bench-pg`: whatever load
 * the machine carries hits both alike. Each figure is taken in rounds that
 * alternate which engine goes first:
 *   full index      ROUNDS forced rebuilds of each (median; every round's ratio)
 *   no-op resync    best of 5 of each
 *   1% resync       ROUNDS times: the changed files appended to, then each synced
 *   keyword search  PASSES passes over the query file; per query and engine
 *                   one untimed run (the statement and the page cache warm),
 *                   then one timed run, the two engines taking turns query by
 *                   query; p50/p95/p99 per pass, reported as the median over
 *                   the passes, with each pass's p50 ratio
 * Usage: bench_pair WS_A STATE_A CHANGED_A WS_B STATE_B CHANGED_B QUERIES
 *   CLAWMEM_BENCH_ROUNDS (3), CLAWMEM_BENCH_PASSES (3)
 *   CLAWMEM_BENCH_QLOG=FILE  each timed search as a line "PASS<TAB>MS_A<TAB>MS_B<TAB>QUERY"
 * Prints one JSON object: "a" and "b" (each engine's figures) and "ratio" (b / a).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clawmem.h"

#define MAX_ROUNDS 16

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The p-quantile of v[0..n) (sorted here), nearest rank. */
static double pct(double *v, size_t n, double p)
{
    qsort(v, n, sizeof *v, cmp_double);
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

static double median(const double *v, size_t n)
{
    double t[MAX_ROUNDS];
    memcpy(t, v, n * sizeof *t);
    return pct(t, n, 0.5);
}

static int env_int(const char *name, int def, int max)
{
    const char *s = getenv(name);
    long v = s && *s ? strtol(s, NULL, 10) : def;
    return v < 1 ? 1 : v > max ? max : (int)v;
}

/* Appends a line to each file named in list (one path per line). */
static size_t touch_files(const char *list)
{
    FILE *f = fopen(list, "r");
    char line[4096];
    size_t n = 0;
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        FILE *m = fopen(line, "a");
        if (!m) continue;
        fputs("\nbench edit: a changed line\n", m);
        fclose(m);
        n++;
    }
    if (f) fclose(f);
    return n;
}

typedef struct side {
    const char *ws, *state, *changed;
    cm_engine *e;
    cm_sync_stats st;
    double index[MAX_ROUNDS], resync[MAX_ROUNDS], noop;
    size_t resync_files, hits;
    double p50[MAX_ROUNDS], p95[MAX_ROUNDS], p99[MAX_ROUNDS];
    double *lat; /* this pass's latencies, ms */
} side;

static int sync_timed(side *s, unsigned flags, double *secs, cm_sync_stats *st)
{
    char err[1024];
    double t0 = now();
    if (cm_engine_sync(s->e, flags, NULL, NULL, st, err, sizeof err)) {
        fprintf(stderr, "bench: %s: %s\n", s->state, err);
        return 1;
    }
    *secs = now() - t0;
    return 0;
}

/* One warm and one timed search; *ms the timed one. */
static int search_timed(side *s, const char *q, double *ms, bool count)
{
    char err[1024];
    char *json = NULL;
    cm_memory_search(s->e, q, NULL, &json, err, sizeof err);
    cm_free(json);
    json = NULL;
    double t0 = now();
    if (cm_memory_search(s->e, q, NULL, &json, err, sizeof err)) {
        fprintf(stderr, "bench: %s: %s\n", s->state, err);
        return 1;
    }
    *ms = (now() - t0) * 1e3;
    if (count && strstr(json, "\"path\"")) s->hits++;
    cm_free(json);
    return 0;
}

static void print_side(const side *s, int rounds, int passes)
{
    printf("{\"files\":%zu,\"bytes\":%llu,\"chunks\":%zu,\"index_s\":%.3f,\"index_rounds_s\":[",
           s->st.files_seen, (unsigned long long)s->st.bytes_read, s->st.chunks_written,
           median(s->index, (size_t)rounds));
    for (int r = 0; r < rounds; r++)
        printf("%s%.3f", r ? "," : "", s->index[r]);
    printf("],\"noop_resync_s\":%.4f,\"resync_1pct_s\":%.4f,\"resync_1pct_indexed\":%zu,"
           "\"queries_with_hits\":%zu,\"search_ms_p50\":%.3f,\"search_ms_p95\":%.3f,"
           "\"search_ms_p99\":%.3f,\"search_p50_passes_ms\":[",
           s->noop, median(s->resync, (size_t)rounds), s->resync_files, s->hits,
           median(s->p50, (size_t)passes), median(s->p95, (size_t)passes),
           median(s->p99, (size_t)passes));
    for (int p = 0; p < passes; p++)
        printf("%s%.3f", p ? "," : "", s->p50[p]);
    printf("]}");
}

int main(int argc, char **argv)
{
    if (argc != 8) {
        fprintf(stderr, "usage: bench_pair WS_A STATE_A CHANGED_A WS_B STATE_B CHANGED_B "
                        "QUERIES\n");
        return 1;
    }
    int rounds = env_int("CLAWMEM_BENCH_ROUNDS", 3, MAX_ROUNDS);
    int passes = env_int("CLAWMEM_BENCH_PASSES", 3, MAX_ROUNDS);
    side sd[2] = {{.ws = argv[1], .state = argv[2], .changed = argv[3]},
                  {.ws = argv[4], .state = argv[5], .changed = argv[6]}};
    unsetenv("QUANTUMCLAW_CONFIG_PATH");
    char err[1024];
    int rc = 1;
    char **qs = NULL;
    size_t nq = 0, qcap = 0;
    for (int k = 0; k < 2; k++) {
        cm_options o = {NULL, sd[k].ws, NULL, sd[k].state, NULL, NULL, 0}; /* no config file */
        if (cm_engine_open(&o, &sd[k].e, err, sizeof err)) {
            fprintf(stderr, "bench: %s: %s\n", sd[k].state, err);
            goto out;
        }
    }
    FILE *qf = fopen(argv[7], "r");
    char line[1024];
    while (qf && fgets(line, sizeof line, qf)) {
        line[strcspn(line, "\n")] = 0;
        if (!*line) continue;
        if (nq == qcap) {
            qcap = qcap ? qcap * 2 : 256;
            char **nv = realloc(qs, qcap * sizeof *nv);
            if (!nv) goto out;
            qs = nv;
        }
        if (!(qs[nq] = strdup(line))) goto out;
        nq++;
    }
    if (qf) fclose(qf);
    if (!nq) {
        fprintf(stderr, "bench: no queries in %s\n", argv[7]);
        goto out;
    }
    /* round r: engine r % 2 first */
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < 2; i++) {
            side *s = &sd[(r + i) % 2];
            if (sync_timed(s, CM_SYNC_FORCE, &s->index[r], &s->st)) goto out;
        }
    for (int r = 0; r < 5; r++)
        for (int i = 0; i < 2; i++) { /* best of 5: the cost of a stat pass */
            side *s = &sd[(r + i) % 2];
            cm_sync_stats st;
            double t;
            if (sync_timed(s, 0, &t, &st)) goto out;
            if (r == 0 || t < s->noop) s->noop = t;
        }
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < 2; i++) {
            side *s = &sd[(r + i) % 2];
            cm_sync_stats st;
            touch_files(s->changed);
            if (sync_timed(s, 0, &s->resync[r], &st)) goto out;
            s->resync_files = st.files_indexed;
        }
    for (int k = 0; k < 2; k++)
        if (!(sd[k].lat = malloc(nq * sizeof *sd[k].lat))) goto out;
    const char *qlog_path = getenv("CLAWMEM_BENCH_QLOG");
    FILE *qlog = qlog_path && *qlog_path ? fopen(qlog_path, "w") : NULL;
    for (int p = 0; p < passes; p++) {
        for (size_t q = 0; q < nq; q++) {
            for (int i = 0; i < 2; i++) {
                side *s = &sd[(p + q + (size_t)i) % 2];
                if (search_timed(s, qs[q], &s->lat[q], p == 0)) {
                    if (qlog) fclose(qlog);
                    goto out;
                }
            }
            if (qlog) fprintf(qlog, "%d\t%.3f\t%.3f\t%s\n", p, sd[0].lat[q], sd[1].lat[q], qs[q]);
        }
        for (int k = 0; k < 2; k++) {
            sd[k].p50[p] = pct(sd[k].lat, nq, 0.50);
            sd[k].p95[p] = pct(sd[k].lat, nq, 0.95);
            sd[k].p99[p] = pct(sd[k].lat, nq, 0.99);
        }
    }
    if (qlog) fclose(qlog);
    printf("{\"queries\":%zu,\"rounds\":%d,\"passes\":%d,\"a\":", nq, rounds, passes);
    print_side(&sd[0], rounds, passes);
    printf(",\"b\":");
    print_side(&sd[1], rounds, passes);
    double ri[MAX_ROUNDS], rp[MAX_ROUNDS];
    printf(",\"ratio\":{\"index_rounds\":[");
    for (int r = 0; r < rounds; r++) {
        ri[r] = sd[1].index[r] / sd[0].index[r];
        printf("%s%.2f", r ? "," : "", ri[r]);
    }
    printf("],\"search_p50_passes\":[");
    for (int p = 0; p < passes; p++) {
        rp[p] = sd[1].p50[p] / sd[0].p50[p];
        printf("%s%.2f", p ? "," : "", rp[p]);
    }
    printf("],\"index\":%.2f,\"search_p50\":%.2f,\"search_p95\":%.2f,\"search_p99\":%.2f}}\n",
           median(sd[1].index, (size_t)rounds) / median(sd[0].index, (size_t)rounds),
           median(sd[1].p50, (size_t)passes) / median(sd[0].p50, (size_t)passes),
           median(sd[1].p95, (size_t)passes) / median(sd[0].p95, (size_t)passes),
           median(sd[1].p99, (size_t)passes) / median(sd[0].p99, (size_t)passes));
    rc = 0;
out:
    for (int k = 0; k < 2; k++) {
        free(sd[k].lat);
        if (sd[k].e) cm_engine_close(sd[k].e);
    }
    for (size_t q = 0; q < nq; q++)
        free(qs[q]);
    free(qs);
    return rc;
}
