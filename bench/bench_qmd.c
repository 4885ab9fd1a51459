/*
 * bench_qmd.c — memory_search through the QMD backend against the builtin
 * engine on the same workspace in one run, and the QMD backend's own cost
 * over running `qmd search` directly (the same command line, environment and
 * QMD home). Each query runs through the three, interleaved, ROUNDS times.
 * Usage: bench_qmd WORKSPACE STATE_DIR QUERIES_FILE QMD_COMMAND
 * Prints one JSON object; progress on stderr.
 */
#include <jansson.h>
#include <time.h>

#include "../src/backend/qmd.h"
#include "clawmem.h"

#define MAX_QUERIES 40
#define ROUNDS      3

extern char **environ;

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double p50(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_d);
    return n ? v[n / 2] : 0;
}

static cm_engine *open_with(const char *ws, const char *state, const char *cfg_path)
{
    cm_options o = {NULL, ws, cfg_path, state, NULL, NULL, 0};
    cm_engine *e = NULL;
    char err[512];
    if (cm_engine_open(&o, &e, err, sizeof err)) {
        fprintf(stderr, "bench_qmd: open: %s\n", err);
        exit(1);
    }
    return e;
}

/* The first result's path of a payload ("" when none). */
static void top_path(const char *js, char *out, size_t cap)
{
    json_t *o = json_loads(js, 0, NULL);
    const char *p = json_string_value(
        json_object_get(json_array_get(json_object_get(o, "results"), 0), "path"));
    snprintf(out, cap, "%s", p ? p : "");
    json_decref(o);
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: bench_qmd WORKSPACE STATE_DIR QUERIES_FILE QMD_COMMAND\n");
        return 2;
    }
    const char *ws = argv[1], *state = argv[2], *qfile = argv[3], *qmd = argv[4];
    char *queries[MAX_QUERIES];
    size_t nq = 0;
    FILE *f = fopen(qfile, "r");
    char line[512];
    while (f && nq < MAX_QUERIES && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        if (*line) queries[nq++] = cm_strdup(line);
    }
    if (f) fclose(f);
    if (!nq) return fprintf(stderr, "bench_qmd: no queries\n"), 1;
    /* two configs over one state dir: the builtin index and the QMD home side by side */
    char bcfg[4096], qcfg[4096], text[8192];
    snprintf(bcfg, sizeof bcfg, "%s/builtin.json", state);
    snprintf(qcfg, sizeof qcfg, "%s/qmd.json", state);
    FILE *w = fopen(bcfg, "w");
    if (!w) return perror(bcfg), 1;
    fputs("{}\n", w);
    fclose(w);
    snprintf(text, sizeof text,
             "{memory: {backend: 'qmd', qmd: {command: '%s', update: {waitForBootSync: true, "
             "interval: '0', debounceMs: 0}, scope: {default: 'allow'}, limits: {timeoutMs: "
             "30000}}}}\n",
             qmd);
    w = fopen(qcfg, "w");
    if (!w) return perror(qcfg), 1;
    fputs(text, w);
    fclose(w);
    char err[512];
    fprintf(stderr, "bench_qmd: builtin index\n");
    double t0 = now_ms();
    cm_engine *be = open_with(ws, state, bcfg);
    if (cm_engine_sync(be, 0, NULL, NULL, NULL, err, sizeof err))
        return fprintf(stderr, "bench_qmd: sync: %s\n", err), 1;
    double builtin_index_ms = now_ms() - t0;
    fprintf(stderr, "bench_qmd: QMD collections and update (boot)\n");
    t0 = now_ms();
    cm_engine *qe = open_with(ws, state, qcfg);
    double qmd_boot_ms = now_ms() - t0;
    /* the direct command: what the backend runs, in the same home */
    char xc[4200], xk[4200], cc[4300], ck[4300], dc[4300];
    snprintf(xc, sizeof xc, "%s/agents/main/qmd/xdg-config", state);
    snprintf(xk, sizeof xk, "%s/agents/main/qmd/xdg-cache", state);
    snprintf(cc, sizeof cc, "XDG_CONFIG_HOME=%s", xc);
    snprintf(dc, sizeof dc, "QMD_CONFIG_DIR=%s", xc);
    snprintf(ck, sizeof ck, "XDG_CACHE_HOME=%s", xk);
    size_t ne = 0;
    while (environ[ne])
        ne++;
    char **env = calloc(ne + 5, sizeof *env);
    size_t k = 0;
    for (size_t i = 0; i < ne; i++)
        if (strncmp(environ[i], "XDG_", 4) && strncmp(environ[i], "QMD_", 4) &&
            strncmp(environ[i], "INDEX_PATH=", 11))
            env[k++] = environ[i];
    env[k++] = cc;
    env[k++] = dc;
    env[k++] = ck;
    env[k++] = (char *)"NO_COLOR=1";
    char *cols[] = {(char *)"memory-root-main", (char *)"memory-alt-main",
                    (char *)"memory-dir-main"};
    double tb[MAX_QUERIES * ROUNDS], tq[MAX_QUERIES * ROUNDS], td[MAX_QUERIES * ROUNDS];
    size_t n = 0, same_top = 0, qmd_found = 0, builtin_hits = 0, fallbacks = 0;
    cm_search_opts so = {6, -1, 0};
    for (int r = 0; r < ROUNDS; r++) {
        for (size_t i = 0; i < nq; i++, n++) {
            char *js = NULL, pb[1024], pq[1024];
            t0 = now_ms();
            cm_memory_search_session(be, queries[i], &so, NULL, &js, err, sizeof err);
            tb[n] = now_ms() - t0;
            top_path(js ? js : "{}", pb, sizeof pb);
            cm_free(js);
            js = NULL;
            t0 = now_ms();
            cm_memory_search_session(qe, queries[i], &so, NULL, &js, err, sizeof err);
            tq[n] = now_ms() - t0;
            top_path(js ? js : "{}", pq, sizeof pq);
            if (js && strstr(js, "\"fallback\":\"qmd")) fallbacks++;
            cm_free(js);
            const char *args[32];
            char nb[64];
            cm_backend_qmd_search_argv("search", queries[i], 6, cols, 3, args + 1, 30, nb);
            args[0] = qmd;
            qmd_run_result res;
            t0 = now_ms();
            cm_backend_qmd_run(args, env, ws, 30000, false, NULL, &res, err, sizeof err);
            td[n] = now_ms() - t0;
            cm_backend_qmd_run_result_release(&res);
            if (r == 0) {
                builtin_hits += *pb != 0;
                qmd_found += *pq != 0;
                same_top += *pb && !strcmp(pb, pq);
            }
        }
    }
    double mb = p50(tb, n), mq = p50(tq, n), md = p50(td, n);
    printf("{\"queries\":%zu,\"rounds\":%d,\"builtin_index_ms\":%.1f,\"qmd_boot_ms\":%.1f,"
           "\"builtin_search_p50_ms\":%.2f,\"qmd_backend_search_p50_ms\":%.2f,"
           "\"qmd_direct_search_p50_ms\":%.2f,\"backend_overhead_p50_ms\":%.2f,"
           "\"queries_with_hits\":{\"builtin\":%zu,\"qmd\":%zu},\"same_top_hit\":%zu,"
           "\"fallbacks\":%zu}\n",
           nq, ROUNDS, builtin_index_ms, qmd_boot_ms, mb, mq, md, mq - md, builtin_hits, qmd_found,
           same_top, fallbacks);
    cm_engine_close(be);
    cm_engine_close(qe);
    free(env);
    for (size_t i = 0; i < nq; i++)
        free(queries[i]);
    return fallbacks ? 1 : 0;
}
