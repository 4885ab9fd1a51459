/*
 * bench_batch.c — `make bench`, a 100k-chunk backfill through each fake
 * batch API (tests/fake_batch.h on the loopback fake server: OpenAI, Gemini,
 * Voyage), every batch completing after a simulated delay, against the
 * synchronous /embeddings path in the same run: HTTP requests made, request
 * bytes sent, wall and CPU time (the fake server's included: it runs in
 * this process), and the vectors stored. A workspace of 10,000
 * notes × 10 one-line chunks (chunking.tokens 32), 64 dimensions. Prints
 * one JSON object.
 * Usage: bench_batch WORKDIR [DELAY_MS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "../src/base/fs.h"
#include "../tests/fake_batch.h"
#include "clawmem.h"

#define DIMS 64

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* CPU seconds of this process (the fake server's threads included). */
static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static uint64_t rng = 4242;
static unsigned rnd(unsigned n)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)((rng >> 33) % n);
}

static const char *syl[] = {"ka", "lo", "mi",  "ten", "ra", "so", "vin", "du", "pe", "zor",
                            "an", "el", "qui", "ba",  "ro", "ny", "fa",  "gi", "hu", "wex"};

static void word(char *out, unsigned id)
{
    unsigned n = 2 + id % 3;
    size_t len = 0;
    out[0] = 0;
    for (unsigned i = 0; i < n; i++)
        len += (size_t)snprintf(out + len, 32 - len, "%s", syl[(id >> (i * 4)) % 20]);
}

/* One backfill into a fresh index; appends its JSON to out. */
static int run(const char *work, const char *ws, const char *label, const char *provider,
               bool batch, long delay_ms, char *out, size_t outlen)
{
    char state[4096], cfgp[4096], base[64], url[128], err[1024];
    snprintf(state, sizeof state, "%s/state-%s", work, label);
    snprintf(cfgp, sizeof cfgp, "%s/qc-%s.json", work, label);
    fake_server *srv = fake_start(DIMS, base);
    fake_batch *fb = fake_batch_start(srv, DIMS);
    for (int i = 0; i < 8; i++) {
        fake_batch_plan plan = {.delay_ms = delay_ms};
        fake_batch_script(fb, &plan);
    }
    snprintf(url, sizeof url, "%s/%s", base, strcmp(provider, "gemini") ? "v1" : "v1beta");
    FILE *f = fopen(cfgp, "w");
    fprintf(
        f,
        "{agents:{defaults:{memorySearch:{provider:'%s',remote:{baseUrl:'%s',apiKey:'k',"
        "batch:{enabled:%s,concurrency:2,pollIntervalMs:250}},chunking:{tokens:32,overlap:0}}}}}",
        provider, url, batch ? "true" : "false");
    fclose(f);
    cm_options o = {NULL, ws, cfgp, state, NULL, NULL, 0};
    cm_engine *e = NULL;
    if (cm_engine_open(&o, &e, err, sizeof err)) {
        fprintf(stderr, "bench_batch: %s\n", err);
        return 1;
    }
    cm_sync_stats st;
    double t0 = now_ms(), c0 = cpu_s();
    if (cm_engine_sync(e, 0, NULL, NULL, &st, err, sizeof err)) {
        fprintf(stderr, "bench_batch: %s\n", err);
        return 1;
    }
    double wall = (now_ms() - t0) / 1e3, cpu = cpu_s() - c0;
    char *js = NULL;
    long long vectors = 0;
    if (cm_engine_status(e, 0, &js, err, sizeof err) == CM_OK) {
        const char *v = strstr(js, "\"vectors\":");
        if (v) vectors = strtoll(v + 10, NULL, 10);
    }
    cm_free(js);
    cm_engine_close(e);
    fake_batch_counts c = fake_batch_counts_get(fb);
    int requests = c.uploads + c.creates + c.polls + c.downloads + c.sync_posts + c.other;
    size_t len = strlen(out);
    snprintf(out + len, outlen - len,
             "%s\"%s\":{\"chunks\":%zu,\"vectors\":%lld,\"requests\":%d,\"uploads\":%d,"
             "\"polls\":%d,\"downloads\":%d,\"sync_embedding_requests\":%d,\"batches\":%zu,"
             "\"bytes_sent_mb\":%.2f,\"wall_s\":%.2f,\"cpu_s\":%.2f}",
             len > 1 ? "," : "", label, st.chunks_written, vectors, requests, c.uploads, c.polls,
             c.downloads, c.sync_posts, st.batches_submitted, (double)c.bytes_in / 1e6, wall, cpu);
    fake_batch_stop(fb);
    fake_stop(srv);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_batch WORKDIR [DELAY_MS]\n");
        return 1;
    }
    long delay = argc > 2 ? strtol(argv[2], NULL, 10) : 3000;
    char ws[4096], dir[4200];
    snprintf(ws, sizeof ws, "%s/ws", argv[1]);
    snprintf(dir, sizeof dir, "%s/memory", ws);
    char merr[256];
    if (cm_fs_mkdirs(dir, merr, sizeof merr)) {
        fprintf(stderr, "bench_batch: %s\n", merr);
        return 1;
    }
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
    static char out[8192] = "{";
    int rc = 0;
    rc |= run(argv[1], ws, "sync_openai", "openai", false, 0, out, sizeof out);
    rc |= run(argv[1], ws, "batch_openai", "openai", true, delay, out, sizeof out);
    rc |= run(argv[1], ws, "batch_gemini", "gemini", true, delay, out, sizeof out);
    rc |= run(argv[1], ws, "batch_voyage", "voyage", true, delay, out, sizeof out);
    size_t len = strlen(out);
    snprintf(out + len, sizeof out - len, ",\"simulated_completion_delay_ms\":%ld}", delay);
    puts(out);
    return rc;
}
