/*
 * bench_vector.c — `make bench`, vector part: top-10 over N unit vectors,
 * random Gaussian (N = 10k, 100k; 768 and 1536 dimensions) and clustered (100k × 768:
 * 1,000 Gaussian centres, rows and queries a centre plus Gaussian noise of
 * 1.2× its scale), clawmem's in-process float32 scan, int8 scan with float
 * rescoring, binary (sign-bit) scan with int8 and float rescoring and the
 * automatic choice the engine makes, against sqlite-vec's vec0 (float[D] and
 * int8[D] with `MATCH ... AND k = 10`) on the same vectors in the same run;
 * GB/s scanned against a measured sequential-read bandwidth, recall@10
 * against the exact float32 result. With CLAWMEM_BENCH_1M=1 also 1M × 768
 * (random and clustered; sqlite-vec skipped there), with p50 and the RSS
 * (VmRSS after the searches: the index, and for sets with sqlite-vec the
 * rows kept for it).
 * Prints one JSON object.
 * Usage: bench_vector [PATH_TO_vec0.so]   (without it, sqlite-vec is skipped)
 */
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../src/vector/vector.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float gauss(void)
{
    double a = (frand() + 1.0) * 0.5 + 1e-12, b = (frand() + 1.0) * 0.5;
    return (float)(sqrt(-2.0 * log(a)) * cos(6.283185307179586 * b));
}

/* The process's resident set now, in MiB (VmRSS), or -1. */
static double rss_mb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double mb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) mb = strtod(line + 6, NULL) / 1024;
    if (f) fclose(f);
    return mb;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Sequential read bandwidth: sum a 1 GiB buffer with the best dot kernel. */
static double read_bandwidth(const vec_kernels *k)
{
    size_t n = (1u << 30) / sizeof(float);
    float *a = aligned_alloc(64, n * sizeof *a), *one = aligned_alloc(64, 4096 * sizeof *one);
    for (size_t i = 0; i < n; i++)
        a[i] = 1.0f;
    for (size_t i = 0; i < 4096; i++)
        one[i] = 1.0f;
    double best = 0;
    volatile float sink = 0;
    for (int r = 0; r < 3; r++) {
        double t0 = now_ms();
        for (size_t i = 0; i < n; i += 4096)
            sink += k->dot(a + i, one, 4096);
        double gbs = (double)n * 4 / ((now_ms() - t0) / 1e3) / 1e9;
        if (gbs > best) best = gbs;
    }
    (void)sink;
    free(a);
    free(one);
    return best;
}

typedef struct vecdb {
    sqlite3 *db;
    sqlite3_stmt *q;
} vecdb;

/* Loads vectors into vec0 (float or int8); 0 on success. */
static int vec0_load(vecdb *v, const char *so, const float *m, size_t n, size_t d, bool int8)
{
    char *err = NULL, sql[256];
    if (sqlite3_open(":memory:", &v->db)) return -1;
    sqlite3_enable_load_extension(v->db, 1);
    if (sqlite3_load_extension(v->db, so, NULL, &err) != SQLITE_OK) {
        fprintf(stderr, "bench_vector: sqlite-vec: %s\n", err ? err : "load failed");
        sqlite3_free(err);
        return -1;
    }
    snprintf(sql, sizeof sql, "CREATE VIRTUAL TABLE v USING vec0(e %s[%zu])",
             int8 ? "int8" : "float", d);
    if (sqlite3_exec(v->db, sql, NULL, NULL, NULL)) return -1;
    sqlite3_stmt *ins = NULL;
    sqlite3_prepare_v2(v->db,
                       int8 ? "INSERT INTO v(rowid, e) VALUES(?1, vec_quantize_int8(?2, 'unit'))"
                            : "INSERT INTO v(rowid, e) VALUES(?1, ?2)",
                       -1, &ins, NULL);
    sqlite3_exec(v->db, "BEGIN", NULL, NULL, NULL);
    for (size_t i = 0; i < n; i++) {
        sqlite3_bind_int64(ins, 1, (sqlite3_int64)i);
        sqlite3_bind_blob(ins, 2, m + i * d, (int)(d * 4), SQLITE_STATIC);
        if (sqlite3_step(ins) != SQLITE_DONE) {
            fprintf(stderr, "bench_vector: vec0 insert: %s\n", sqlite3_errmsg(v->db));
            return -1;
        }
        sqlite3_reset(ins);
    }
    sqlite3_exec(v->db, "COMMIT", NULL, NULL, NULL);
    sqlite3_finalize(ins);
    sqlite3_prepare_v2(
        v->db,
        int8 ? "SELECT rowid FROM v WHERE e MATCH vec_quantize_int8(?1, 'unit') AND k = 10"
             : "SELECT rowid FROM v WHERE e MATCH ?1 AND k = 10",
        -1, &v->q, NULL);
    return 0;
}

static double vec0_query_ms(vecdb *v, const float *q, size_t d)
{
    double t0 = now_ms();
    sqlite3_bind_blob(v->q, 1, q, (int)(d * 4), SQLITE_STATIC);
    int rows = 0;
    while (sqlite3_step(v->q) == SQLITE_ROW)
        rows++;
    sqlite3_reset(v->q);
    return rows == 10 ? now_ms() - t0 : -1;
}

typedef struct dataset {
    size_t n, d;
    bool clustered;
    bool peer; /* sqlite-vec on it */
} dataset;

/* Row i of the dataset (rows first, then the queries), in order. */
static void gen_row(const dataset *ds, const float *cent, size_t i, float *row)
{
    const float *c = cent ? cent + ((i * 7919) % 1000) * ds->d : NULL;
    for (size_t j = 0; j < ds->d; j++)
        row[j] = c ? c[j] + 1.2f * gauss() : gauss();
    cm_vec_normalise(row, ds->d);
}

static size_t overlap(const vec_hit *a, const vec_hit *b)
{
    size_t f = 0;
    for (int p = 0; p < 10; p++)
        for (int r = 0; r < 10; r++)
            f += a[p].id == b[r].id;
    return f;
}

int main(int argc, char **argv)
{
    const char *so = argc > 1 ? argv[1] : NULL;
    const vec_kernels *k = cm_vec_kernels_best();
    double bw = read_bandwidth(k);
    printf("{\"kernel\":\"%s\",\"read_bandwidth_gbs\":%.1f,\"exact_max_bytes\":%u,\"runs\":[",
           k->name, bw, VEC_EXACT_MAX_BYTES);
    dataset sets[] = {{10000, 768, false, true},  {10000, 1536, false, true},
                      {100000, 768, false, true}, {100000, 1536, false, true},
                      {100000, 768, true, true},  {1000000, 768, false, false},
                      {1000000, 768, true, false}};
    const char *big = getenv("CLAWMEM_BENCH_1M");
    size_t nsets = big && *big == '1' ? 7 : 5;
    int first = 1;
    for (size_t a = 0; a < nsets; a++) {
        const dataset *ds = &sets[a];
        size_t n = ds->n, d = ds->d, nq = n >= 1000000 ? 50 : 20;
        /* rows kept outside the index only for sqlite-vec */
        float *m = malloc((ds->peer ? n : 1) * d * sizeof *m), *q = malloc(nq * d * sizeof *q);
        float *cent = NULL;
        if (ds->clustered) {
            cent = malloc(1000 * d * sizeof *cent);
            for (size_t i = 0; i < 1000 * d; i++)
                cent[i] = gauss();
        }
        vec_index x;
        cm_vec_index_init(&x, d);
        for (size_t i = 0; i < n; i++) {
            float *row = ds->peer ? m + i * d : m;
            gen_row(ds, cent, i, row);
            cm_vec_index_add(&x, (int64_t)i, row, 0);
        }
        for (size_t i = 0; i < nq; i++)
            gen_row(ds, cent, n + i, q + i * d);
        free(cent);
        double tf = 0, ti = 0, *tb = malloc(nq * sizeof *tb), *ta = malloc(nq * sizeof *ta);
        size_t fi = 0, fb = 0, fa = 0;
        for (size_t i = 0; i < nq; i++) {
            vec_hit ex[10], ap[10];
            double t0 = now_ms();
            cm_vec_search(&x, k, q + i * d, 10, ~0u, ex);
            double t1 = now_ms();
            cm_vec_search_int8(&x, k, q + i * d, 10, 10, ~0u, ap);
            double t2 = now_ms();
            tf += t1 - t0;
            ti += t2 - t1;
            fi += overlap(ex, ap);
            t0 = now_ms();
            cm_vec_search_binary(&x, k, q + i * d, 10, 0, ~0u, ap);
            tb[i] = now_ms() - t0;
            fb += overlap(ex, ap);
            t0 = now_ms();
            cm_vec_search_auto(&x, k, q + i * d, 10, ~0u, ap);
            ta[i] = now_ms() - t0;
            fa += overlap(ex, ap);
        }
        tf /= (double)nq;
        ti /= (double)nq;
        qsort(tb, nq, sizeof *tb, cmp_d);
        qsort(ta, nq, sizeof *ta, cmp_d);
        double vf = -1, vi = -1;
        if (so && ds->peer) {
            for (int int8 = 0; int8 < 2; int8++) {
                vecdb v = {0};
                double sum = 0;
                int ok = vec0_load(&v, so, m, n, d, int8) == 0;
                for (size_t i = 0; ok && i < 5; i++) {
                    double t = vec0_query_ms(&v, q + i * d, d);
                    if (t < 0) ok = 0;
                    sum += t;
                }
                if (ok) *(int8 ? &vi : &vf) = sum / 5;
                sqlite3_finalize(v.q);
                sqlite3_close(v.db);
            }
        }
        double rss = rss_mb();
        double gbs = (double)n * (double)x.stride * 4 / (tf / 1e3) / 1e9, tbm = tb[nq / 2],
               tam = ta[nq / 2];
        printf("%s{\"n\":%zu,\"dims\":%zu,\"data\":\"%s\",\"queries\":%zu,\"float_ms\":%.3f,"
               "\"float_gbs\":%.1f,\"float_pct_of_bandwidth\":%.0f,\"int8_ms\":%.3f,"
               "\"int8_recall10\":%.3f,\"binary_ms_p50\":%.3f,\"binary_ms_p99\":%.3f,"
               "\"binary_recall10\":%.3f,\"auto_path\":\"%s\",\"auto_ms_p50\":%.3f,"
               "\"auto_recall10\":%.3f,\"sqlite_vec_float_ms\":%.2f,\"sqlite_vec_int8_ms\":%.2f,"
               "\"speedup_float\":%.1f,\"speedup_int8\":%.1f,\"speedup_binary\":%.1f,"
               "\"speedup_auto\":%.1f,\"index_mb\":%.0f,\"rss_mb\":%.0f}",
               first ? "" : ",", n, d, ds->clustered ? "clustered" : "random", nq, tf, gbs,
               100 * gbs / bw, ti, (double)fi / (double)(nq * 10), tbm, tb[nq - 1 - nq / 100],
               (double)fb / (double)(nq * 10), cm_vec_search_path(&x), tam,
               (double)fa / (double)(nq * 10), vf, vi, vf > 0 ? vf / tf : 0, vi > 0 ? vi / ti : 0,
               vf > 0 ? vf / tbm : 0, vf > 0 ? vf / tam : 0,
               (double)(n * x.stride * 5 + n * x.words * 8 + n * 13) / 1048576.0, rss);
        first = 0;
        fflush(stdout);
        cm_vec_index_release(&x);
        free(m);
        free(q);
        free(tb);
        free(ta);
    }
    printf("]}\n");
    return 0;
}
