/*
 * bench_hybrid.c — `make bench`, end-to-end hybrid memory_search at 100k
 * chunks: a workspace of 10,000 notes × 10 one-line chunks (chunking.tokens
 * 32) embedded through the loopback fake server (384 dimensions), then
 * memory_search latency p50/p99 with the query embedding included, and the
 * fake server's query round trip, whose p50 is subtracted for the figure
 * "excluding the query embedding". Then the first search after a one-note
 * edit synced by another engine (as the MCP server's writer thread does):
 * the warm engine applies the vector log's changes, against the first search
 * of an engine that loads all 100k vectors (what every edit cost before the
 * log). Prints one JSON object. With CLAWMEM_BENCH_PG_DSN set, the index
 * is the PostgreSQL store of that database.
 * Usage: bench_hybrid WORKDIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "../src/base/fs.h"
#include "../src/embed/embed.h"
#include "../tests/fakeserver.h"
#include "clawmem.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static uint64_t rng = 12345;
static unsigned rnd(unsigned n)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)((rng >> 33) % n);
}

static const char *syl[] = {"ka", "lo", "mi",  "ten", "ra", "so", "vin", "du", "pe", "zor",
                            "an", "el", "qui", "ba",  "ro", "ny", "fa",  "gi", "hu", "wex"};

/* A made-up word of 2-4 syllables; out holds at least 32 bytes. */
static void word(char *out, unsigned id)
{
    unsigned n = 2 + id % 3;
    size_t len = 0;
    out[0] = 0;
    for (unsigned i = 0; i < n; i++)
        len += (size_t)snprintf(out + len, 32 - len, "%s", syl[(id >> (i * 4)) % 20]);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: bench_hybrid WORKDIR\n");
        return 1;
    }
    char ws[4096], state[4096], cfgp[4096], base[64];
    snprintf(ws, sizeof ws, "%s/ws", argv[1]);
    snprintf(state, sizeof state, "%s/state", argv[1]);
    snprintf(cfgp, sizeof cfgp, "%s/qc.json", argv[1]);
    fake_server *srv = fake_start(384, base);
    /* the PostgreSQL store instead of SQLite: CLAWMEM_BENCH_PG_DSN (e.g. the
     * cluster of scripts/pg-test-cluster.sh) */
    const char *dsn = getenv("CLAWMEM_BENCH_PG_DSN");
    char store[1200] = "";
    if (dsn && *dsn) snprintf(store, sizeof store, ",store:{driver:'postgres',dsn:'%s'}", dsn);
    FILE *f = fopen(cfgp, "w");
    fprintf(f,
            "{agents:{defaults:{memorySearch:{provider:'openai',remote:{baseUrl:'%s',apiKey:'k',"
            "batch:{concurrency:2}},chunking:{tokens:32,overlap:0}%s}}}}",
            base, store);
    fclose(f);
    /* 10,000 notes of 10 lines of 12 words from a 4,000-word vocabulary */
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/memory", ws);
    cm_fs_mkdirs(dir, NULL, 0);
    for (int i = 0; i < 10000; i++) {
        char p[4300];
        snprintf(p, sizeof p, "%s/note-%05d.md", dir, i);
        FILE *nf = fopen(p, "w");
        for (int l = 0; l < 10; l++) {
            for (int w = 0; w < 12; w++) {
                char wd[32];
                word(wd, rnd(4000));
                fprintf(nf, "%s%s", w ? " " : "", wd);
            }
            fputc('\n', nf);
        }
        fclose(nf);
    }
    cm_options o = {NULL, ws, cfgp, state, NULL, NULL, 0};
    cm_engine *e = NULL;
    char err[1024];
    if (cm_engine_open(&o, &e, err, sizeof err)) {
        fprintf(stderr, "bench_hybrid: %s\n", err);
        return 1;
    }
    cm_sync_stats st;
    double t0 = now_ms();
    if (cm_engine_sync(e, 0, NULL, NULL, &st, err, sizeof err)) {
        fprintf(stderr, "bench_hybrid: %s\n", err);
        return 1;
    }
    double index_s = (now_ms() - t0) / 1e3;
    enum { NQ = 200 };
    double lat[NQ], rt[NQ];
    char *js = NULL;
    cm_memory_search(e, "warm up", NULL, &js, err, sizeof err); /* loads the vectors */
    cm_free(js);
    /* the fake server's query round trip alone, through the same client code */
    cm_config cfg;
    cm_config_args a = {NULL, ws, cfgp, state};
    embed_provider p;
    if (cm_config_init(&a, NULL, &cfg, err, sizeof err) ||
        cm_embed_open(&cfg, "openai", &p, err, sizeof err)) {
        fprintf(stderr, "bench_hybrid: %s\n", err);
        return 1;
    }
    size_t hits = 0;
    for (int i = 0; i < NQ; i++) {
        char q[128], w1[32], w2[32];
        word(w1, rnd(4000));
        word(w2, rnd(4000));
        snprintf(q, sizeof q, "%s %s", w1, w2);
        float *v = NULL;
        t0 = now_ms();
        cm_embed_query(&p, q, &v, err, sizeof err);
        rt[i] = now_ms() - t0;
        free(v);
        t0 = now_ms();
        cm_memory_search(e, q, NULL, &js, err, sizeof err);
        lat[i] = now_ms() - t0;
        hits += strstr(js, "\"path\"") != NULL;
        cm_free(js);
    }
    qsort(lat, NQ, sizeof *lat, cmp);
    qsort(rt, NQ, sizeof *rt, cmp);
    /* one-note edits: 5 rounds, medians */
    enum { NE = 5 };
    double after[NE], reload[NE], sync_ms[NE];
    cm_engine *w = NULL;
    if (cm_engine_open(&o, &w, err, sizeof err)) {
        fprintf(stderr, "bench_hybrid: %s\n", err);
        return 1;
    }
    for (int r = 0; r < NE; r++) {
        char p2[4300], wd[32];
        snprintf(p2, sizeof p2, "%s/note-%05d.md", dir, 42 + r);
        FILE *nf = fopen(p2, "w");
        for (int l = 0; l < 10; l++) {
            word(wd, rnd(4000));
            fprintf(nf, "edited %d %s\n", r, wd);
        }
        fclose(nf);
        t0 = now_ms();
        if (cm_engine_sync(w, 0, NULL, NULL, NULL, err, sizeof err)) {
            fprintf(stderr, "bench_hybrid: %s\n", err);
            return 1;
        }
        sync_ms[r] = now_ms() - t0;
        t0 = now_ms();
        cm_memory_search(e, "edited kalo", NULL, &js, err, sizeof err);
        after[r] = now_ms() - t0;
        cm_free(js);
        cm_engine *fresh = NULL;
        t0 = now_ms();
        if (!cm_engine_open(&o, &fresh, err, sizeof err))
            cm_memory_search(fresh, "edited kalo", NULL, &js, err, sizeof err);
        reload[r] = now_ms() - t0;
        cm_free(js);
        cm_engine_close(fresh);
    }
    qsort(after, NE, sizeof *after, cmp);
    qsort(reload, NE, sizeof *reload, cmp);
    qsort(sync_ms, NE, sizeof *sync_ms, cmp);
    char *status = NULL;
    cm_engine_status(e, 0, &status, err, sizeof err);
    const char *im = status ? strstr(status, "\"inMemory\":") : NULL;
    char imbuf[128] = "null";
    if (im) snprintf(imbuf, sizeof imbuf, "%.*s", (int)(strchr(im, '}') - im - 10), im + 11);
    cm_free(status);
    cm_engine_close(w);
    printf("{\"chunks\":%zu,\"dims\":384,\"index_s\":%.1f,\"queries\":%d,\"queries_with_hits\":%zu,"
           "\"search_ms_p50\":%.2f,\"search_ms_p99\":%.2f,\"query_embedding_ms_p50\":%.2f,"
           "\"search_ms_p50_excluding_query_embedding\":%.2f,"
           "\"one_note_edit\":{\"rounds\":%d,\"writer_sync_ms_p50\":%.1f,"
           "\"first_search_warm_ms_p50\":%.2f,\"first_search_full_load_ms_p50\":%.2f,"
           "\"speedup\":%.1f,\"warm_engine\":%s}}\n",
           st.chunks_written, index_s, NQ, hits, lat[NQ / 2], lat[NQ * 99 / 100], rt[NQ / 2],
           lat[NQ / 2] - rt[NQ / 2], NE, sync_ms[NE / 2], after[NE / 2], reload[NE / 2],
           reload[NE / 2] / after[NE / 2], imbuf);
    cm_embed_close(&p);
    cm_config_release(&cfg);
    cm_engine_close(e);
    fake_stop(srv);
    return 0;
}
