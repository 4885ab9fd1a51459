/*
 * bench_local.c — `make bench`, local embedding part: tokens per second of
 * the local provider on a GGUF model over a file of texts (one per line),
 * all texts in one batched call, and the first 40 one text per call; and chunks per second
 * of the static model over the same texts when its file is given. Model load
 * time is left out, as llama-embedding's own figure leaves it out. Prints one
 * JSON object.
 * Usage: bench_local MODEL.gguf TEXTS.txt THREADS [STATIC_MODEL.bin]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../src/embed/local.h"
#include "../src/embed/static_model.h"

#define SINGLE_TEXTS 40

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static char **read_lines(const char *path, size_t *n)
{
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char **v = NULL, *line = NULL;
    size_t cap = 0, len = 0;
    ssize_t r;
    while ((r = getline(&line, &len, f)) > 0) {
        while (r && (line[r - 1] == '\n' || line[r - 1] == '\r')) line[--r] = 0;
        if (!r) continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 256;
            char **nv = realloc(v, cap * sizeof *v);
            if (!nv) exit(1);
            v = nv;
        }
        v[(*n)++] = strdup(line);
    }
    free(line);
    fclose(f);
    return v;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: bench_local MODEL.gguf TEXTS.txt THREADS [STATIC_MODEL.bin]\n");
        return 2;
    }
    size_t n = 0;
    char **texts = read_lines(argv[2], &n);
    if (!texts || !n) {
        fprintf(stderr, "bench_local: no texts in %s\n", argv[2]);
        return 1;
    }
    char err[512];
    local_model *m;
    double t0 = now_ms();
    if (cm_local_open(argv[1], (int)strtol(argv[3], NULL, 10), &m, err, sizeof err)) {
        fprintf(stderr, "bench_local: %s\n", err);
        return 1;
    }
    double load_ms = now_ms() - t0;
    float *v = malloc(n * (size_t)cm_local_dims(m) * sizeof *v);
    if (!v) return 1;

    /* batched: every text in one call (packed into calls by local.c); the
     * first call also warms the context up, so run it once untimed */
    if (cm_local_embed(m, (const char *const *)texts, n < 64 ? n : 64, false, v, err, sizeof err))
        goto fail;
    uint64_t tok0 = cm_local_tokens(m), ns0 = cm_local_llama_ns(m);
    t0 = now_ms();
    if (cm_local_embed(m, (const char *const *)texts, n, false, v, err, sizeof err)) goto fail;
    double batch_ms = now_ms() - t0;
    uint64_t batch_tokens = cm_local_tokens(m) - tok0;
    double batch_in_llama = (double)(cm_local_llama_ns(m) - ns0) / 1e6 / batch_ms;

    /* one by one: the first SINGLE_TEXTS texts, one call each */
    size_t ns = n < SINGLE_TEXTS ? n : SINGLE_TEXTS;
    tok0 = cm_local_tokens(m);
    ns0 = cm_local_llama_ns(m);
    t0 = now_ms();
    for (size_t i = 0; i < ns; i++)
        if (cm_local_embed(m, (const char *const *)&texts[i], 1, false, v, err, sizeof err))
            goto fail;
    double single_ms = now_ms() - t0;
    uint64_t single_tokens = cm_local_tokens(m) - tok0;
    double single_in_llama = (double)(cm_local_llama_ns(m) - ns0) / 1e6 / single_ms;

    printf("{\"model\":\"%s\",\"texts\":%zu,\"tokens\":%llu,\"single_texts\":%zu,"
           "\"single_tokens\":%llu,\"load_ms\":%.1f,\"batched_tokens_per_s\":%.1f,"
           "\"single_tokens_per_s\":%.1f,\"batched_share_in_llama\":%.4f,"
           "\"single_share_in_llama\":%.4f",
           cm_local_desc(m), n, (unsigned long long)batch_tokens, ns,
           (unsigned long long)single_tokens, load_ms, batch_tokens / (batch_ms / 1e3),
           single_tokens / (single_ms / 1e3), batch_in_llama, single_in_llama);
    if (argc > 4) {
        static_model sm;
        if (cm_static_model_open(&sm, argv[4], err, sizeof err)) goto fail;
        float *sv = malloc(sm.dims * sizeof *sv);
        if (!sv) return 1;
        int rounds = 0;
        t0 = now_ms();
        do {
            for (size_t i = 0; i < n; i++)
                cm_static_model_embed(&sm, texts[i], sv);
            rounds++;
        } while (now_ms() - t0 < 1000);
        printf(",\"static_chunks_per_s\":%.0f", (double)n * rounds / ((now_ms() - t0) / 1e3));
        free(sv);
        cm_static_model_close(&sm);
    }
    printf("}\n");
    cm_local_close(m);
    return 0;
fail:
    fprintf(stderr, "bench_local: %s\n", err);
    return 1;
}
