/*
 * bench_scale.c — `make bench`, scale curve: how cost grows with the corpus.
 * For N chunks (N/10 notes of 10 one-line chunks, chunking.tokens 32, words
 * from a 20,000-word vocabulary with a Zipf-like frequency), two indexes of
 * the same files: keyword-only (provider none) and hybrid (the static
 * 100-dimensional model, in process). For each: full index time, index
 * size, then 200 two-word searches through cm_memory_search (p50, p99).
 * The process's peak RSS covers both. One N per process, so the RSS is
 * that N's. Prints one JSON object.
 * Usage: bench_scale WORKDIR CHUNKS STATIC_MODEL_PATH
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "../src/base/fs.h"
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

static uint64_t rng = 4242;
static double u01(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static const char *syl[] = {"ka", "lo", "mi",  "ten", "ra", "so", "vin", "du", "pe", "zor",
                            "an", "el", "qui", "ba",  "ro", "ny", "fa",  "gi", "hu", "wex"};

/* Word id → a made-up word of 2-4 syllables (out: 32 bytes). */
static void word(char *out, unsigned id)
{
    unsigned n = 2 + id % 3;
    size_t len = 0;
    out[0] = 0;
    for (unsigned i = 0; i < n; i++)
        len += (size_t)snprintf(out + len, 32 - len, "%s", syl[(id >> (i * 4)) % 20]);
}

/* Zipf-like over 20,000 words: id = 20000^u - 1 (frequent words small). */
static unsigned zipf(void)
{
    return (unsigned)(exp(u01() * log(20000.0)) - 1.0) % 20000;
}

typedef struct side {
    size_t chunks;
    double index_s, p50, p99;
    long long bytes;
    size_t hits;
} side;

static int run(const char *ws, const char *state, const char *cfg, side *out)
{
    cm_options o = {NULL, ws, cfg, state, NULL, NULL, 0};
    cm_engine *e = NULL;
    char err[1024];
    if (cm_engine_open(&o, &e, err, sizeof err)) {
        fprintf(stderr, "bench_scale: %s\n", err);
        return 1;
    }
    double t0 = now_ms();
    cm_sync_stats st0;
    if (cm_engine_sync(e, 0, NULL, NULL, &st0, err, sizeof err)) {
        fprintf(stderr, "bench_scale: %s\n", err);
        return 1;
    }
    out->index_s = (now_ms() - t0) / 1e3;
    out->chunks = st0.chunks_written;
    char db[4200];
    snprintf(db, sizeof db, "%s/memory/main.clawmem.sqlite", state);
    struct stat st;
    out->bytes = stat(db, &st) == 0 ? (long long)st.st_size : -1;
    enum { NQ = 200 };
    double lat[NQ];
    char *js = NULL;
    cm_memory_search(e, "warm up", NULL, &js, err, sizeof err); /* loads vectors */
    cm_free(js);
    uint64_t keep = rng;
    rng = 777; /* the same queries on both sides */
    out->hits = 0;
    for (int i = 0; i < NQ; i++) {
        char q[80], w1[32], w2[32];
        word(w1, zipf() % 4000);
        word(w2, zipf() % 4000);
        snprintf(q, sizeof q, "%s %s", w1, w2);
        t0 = now_ms();
        cm_memory_search(e, q, NULL, &js, err, sizeof err);
        lat[i] = now_ms() - t0;
        out->hits += js && strstr(js, "\"path\"") != NULL;
        cm_free(js);
    }
    rng = keep;
    qsort(lat, NQ, sizeof *lat, cmp);
    out->p50 = lat[NQ / 2];
    out->p99 = lat[NQ * 99 / 100];
    cm_engine_close(e);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: bench_scale WORKDIR CHUNKS STATIC_MODEL_PATH\n");
        return 1;
    }
    char *end;
    long chunks = strtol(argv[2], &end, 10);
    if (*end || chunks < 10) return 1;
    char ws[4096], dir[4200], kcfg[4200], hcfg[4200], kst[4200], hst[4200];
    snprintf(ws, sizeof ws, "%s/ws", argv[1]);
    snprintf(dir, sizeof dir, "%s/memory", ws);
    snprintf(kcfg, sizeof kcfg, "%s/keyword.json", argv[1]);
    snprintf(hcfg, sizeof hcfg, "%s/hybrid.json", argv[1]);
    snprintf(kst, sizeof kst, "%s/state-keyword", argv[1]);
    snprintf(hst, sizeof hst, "%s/state-hybrid", argv[1]);
    cm_fs_mkdirs(dir, NULL, 0);
    FILE *f = fopen(kcfg, "w");
    fprintf(f,
            "{agents:{defaults:{memorySearch:{provider:'none',chunking:{tokens:32,overlap:0}}}}}");
    fclose(f);
    f = fopen(hcfg, "w");
    fprintf(f,
            "{agents:{defaults:{memorySearch:{provider:'static',chunking:{tokens:32,overlap:0}}}},"
            "clawmem:{staticModel:'%s'}}",
            argv[3]);
    fclose(f);
    long notes = chunks / 10;
    double t0 = now_ms();
    for (long i = 0; i < notes; i++) {
        char p[4300];
        snprintf(p, sizeof p, "%s/%03ld/note-%07ld.md", dir, i / 1000, i);
        if (i % 1000 == 0) {
            char sub[4300];
            snprintf(sub, sizeof sub, "%s/%03ld", dir, i / 1000);
            cm_fs_mkdirs(sub, NULL, 0);
        }
        FILE *nf = fopen(p, "w");
        if (!nf) return 1;
        for (int l = 0; l < 10; l++) {
            for (int w = 0; w < 12; w++) {
                char wd[32];
                word(wd, zipf());
                fprintf(nf, "%s%s", w ? " " : "", wd);
            }
            fputc('\n', nf);
        }
        fclose(nf);
    }
    double gen_s = (now_ms() - t0) / 1e3;
    side k, h;
    if (run(ws, kst, kcfg, &k) || run(ws, hst, hcfg, &h)) return 1;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("{\"chunks\":%zu,\"notes\":%ld,\"generate_s\":%.1f,\"peak_rss_mb\":%.0f,"
           "\"keyword\":{\"index_s\":%.2f,\"index_mb\":%.1f,\"search_ms_p50\":%.3f,"
           "\"search_ms_p99\":%.3f,\"queries_with_hits\":%zu},"
           "\"hybrid_static\":{\"index_s\":%.2f,\"index_mb\":%.1f,\"search_ms_p50\":%.3f,"
           "\"search_ms_p99\":%.3f,\"queries_with_hits\":%zu}}\n",
           k.chunks, notes, gen_s, (double)ru.ru_maxrss / 1024, k.index_s, (double)k.bytes / 1e6,
           k.p50, k.p99, k.hits, h.index_s, (double)h.bytes / 1e6, h.p50, h.p99, h.hits);
    return 0;
}
