/*
 * test_vector.c — every SIMD kernel against the scalar reference, top-k
 * against a full sort, source filtering, the int8 pass's recall, the binary
 * (sign-bit) path's recall on clustered data, and rows replaced and removed
 * by id against an index built afresh.
 */
#include <math.h>

#include "../src/vector/vector.h"
#include "test.h"

static uint64_t rng = 88172645463325252ull;

static float frand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* The kernel chosen from cpuid and xgetbv is the one the kernel's own view
 * of the processor (/proc/cpuinfo's flags) allows. */
static bool cpu_flag(const char *flags, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = flags; (p = strstr(p, name)); p += n)
        if ((p == flags || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\n' || !p[n])) return true;
    return false;
}

TEST(vector_kernels_follow_cpuinfo)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) SKIP("/proc/cpuinfo", "no /proc/cpuinfo here");
    static char line[8192];
    const char *flags = NULL;
    while (!flags && fgets(line, sizeof line, f))
        if (!strncmp(line, "flags", 5)) flags = line;
    fclose(f);
    if (!flags) SKIP("/proc/cpuinfo", "no flags line (not x86?)");
    bool avx512 =
        cpu_flag(flags, "avx512f") && cpu_flag(flags, "avx512bw") && cpu_flag(flags, "popcnt");
    bool vnni = avx512 && cpu_flag(flags, "avx512_vnni");
    const char *want =
        vnni && cpu_flag(flags, "avx512_vpopcntdq") ? "avx512vnni+vpopcntdq"
        : vnni                                      ? "avx512vnni"
        : avx512                                    ? "avx512"
        : cpu_flag(flags, "avx2") && cpu_flag(flags, "fma") && cpu_flag(flags, "popcnt") ? "avx2"
                                                                                         : "scalar";
    EXPECT_STR(cm_vec_kernels_best()->name, want);
}

TEST(vector_kernels_match_scalar)
{
    const vec_kernels *k[5];
    size_t nk = cm_vec_kernels_all(k, 5);
    EXPECT(nk >= 1);
    EXPECT_STR(k[0]->name, "scalar");
    static float a[4096] __attribute__((aligned(64))), b[4096] __attribute__((aligned(64)));
    static int8_t ia[4096], ib[4096];
    for (size_t n = 16; n <= 4096; n += n < 256 ? 16 : 752) {
        for (size_t i = 0; i < n; i++) {
            a[i] = frand();
            b[i] = frand();
            ia[i] = (int8_t)(frand() * 127);
            ib[i] = (int8_t)(frand() * 127);
        }
        ia[0] = -128; /* the extremes multiply without overflow */
        ib[0] = -128;
        float ref = k[0]->dot(a, b, n);
        int32_t iref = k[0]->dot_i8(ia, ib, n);
        for (size_t j = 1; j < nk; j++) {
            EXPECT_NEAR(k[j]->dot(a, b, n), ref, 1e-4 * sqrt((double)n));
            EXPECT_INT(k[j]->dot_i8(ia, ib, n), iref);
        }
    }
    /* Weighted Hamming distances: every row length from 1 to 33 words
     * (masked tails of the 8-word AVX-512 loads), 5 rows, weight planes
     * zero (the plain distance) and random, against the scalar reference */
    static uint64_t qc[3 * 33], codes[5 * 33];
    uint16_t ref16[5], got16[5];
    for (int planes = 0; planes < 2; planes++)
        for (size_t words = 1; words <= 33; words++) {
            for (size_t i = 0; i < 3 * words; i++)
                qc[i] = i < words || planes ? ((uint64_t)rng << 7) ^ (uint64_t)(frand() * 1e9) : 0;
            for (size_t i = 0; i < 5 * words; i++)
                codes[i] = rng * (i + 1) ^ (uint64_t)(frand() * 1e9);
            codes[0] = ~qc[0]; /* all 64 bits of word 0 differ */
            codes[words] = qc[0];
            k[0]->hamming(qc, codes, words, 5, ref16);
            EXPECT(ref16[0] >= 64);
            if (!planes) { /* the plain distance, counted bit by bit */
                for (int r = 0; r < 5; r++) {
                    unsigned d = 0;
                    for (size_t bit = 0; bit < 64 * words; bit++)
                        d += (unsigned)(((qc[bit >> 6] ^ codes[r * words + (bit >> 6)]) >>
                                         (bit & 63)) &
                                        1);
                    EXPECT_INT(ref16[r], d);
                }
            }
            for (size_t j = 1; j < nk; j++) {
                memset(got16, 0xff, sizeof got16);
                k[j]->hamming(qc, codes, words, 5, got16);
                for (int r = 0; r < 5; r++)
                    EXPECT_INT(got16[r], ref16[r]);
            }
        }
    /* selecting the distances at or under a threshold, against the scalar one */
    static uint16_t dist[1000];
    static uint32_t ref_i[1000], got_i[1000];
    for (size_t n = 0; n <= 1000; n += n < 70 ? 1 : 233) {
        for (size_t i = 0; i < n; i++)
            dist[i] = (uint16_t)((frand() + 1) * 400);
        if (n) dist[n - 1] = 0; /* the tail after the last full block */
        size_t m = k[0]->select(dist, n, 100, ref_i);
        for (size_t i = 0, c = 0; i < n; i++)
            if (dist[i] <= 100) EXPECT_INT(ref_i[c++], i);
        for (size_t j = 1; j < nk; j++) {
            EXPECT_INT(k[j]->select(dist, n, 100, got_i), m);
            for (size_t i = 0; i < m; i++)
                EXPECT_INT(got_i[i], ref_i[i]);
        }
    }
    EXPECT(strcmp(cm_vec_kernels_best()->name, k[nk - 1]->name) == 0);
}

static int cmp_desc(const void *a, const void *b)
{
    float x = ((const vec_hit *)a)->score, y = ((const vec_hit *)b)->score;
    return x > y ? -1 : x < y;
}

TEST(vector_topk_exact_and_filtered)
{
    vec_index x;
    size_t dims = 100, n = 3000;
    EXPECT_INT(cm_vec_index_init(&x, dims), CM_OK);
    float *v = malloc(dims * sizeof *v);
    for (size_t i = 0; i < n; i++) {
        for (size_t d = 0; d < dims; d++)
            v[d] = frand();
        EXPECT_INT(cm_vec_index_add(&x, (int64_t)i + 1000, v, (uint8_t)(i % 2)), CM_OK);
    }
    memset(v, 0, dims * sizeof *v);
    EXPECT_INT(cm_vec_index_add(&x, 1, v, 0), CM_EINVAL); /* a zero vector */
    float q[100];
    for (size_t d = 0; d < dims; d++)
        q[d] = frand();
    EXPECT(cm_vec_normalise(q, dims));
    const vec_kernels *k[4];
    size_t nk = cm_vec_kernels_all(k, 4);
    vec_hit *all = malloc(n * sizeof *all);
    for (size_t i = 0; i < n; i++) {
        all[i].id = x.ids[i];
        all[i].score = k[0]->dot(q, x.m + i * x.stride, dims);
    }
    qsort(all, n, sizeof *all, cmp_desc);
    for (size_t j = 0; j < nk; j++) {
        vec_hit out[10];
        EXPECT_INT(cm_vec_search(&x, k[j], q, 10, ~0u, out), 10);
        for (int i = 0; i < 10; i++)
            EXPECT_INT(out[i].id, all[i].id);
        /* only source 1 (odd rows) */
        EXPECT_INT(cm_vec_search(&x, k[j], q, 10, 1u << 1, out), 10);
        for (int i = 0; i < 10; i++)
            EXPECT_INT((out[i].id - 1000) % 2, 1);
    }
    free(all);
    free(v);
    cm_vec_index_release(&x);
}

TEST(vector_int8_recall)
{
    /* 768-dimensional rows clustered around 50 centres, like real embeddings */
    size_t dims = 768, n = 6000, nq = 20; /* 18 MiB of floats: the two-thread scan */
    vec_index x;
    EXPECT_INT(cm_vec_index_init(&x, dims), CM_OK);
    float *centres = malloc(50 * dims * sizeof *centres), *v = malloc(dims * sizeof *v);
    for (size_t i = 0; i < 50 * dims; i++)
        centres[i] = frand();
    for (size_t i = 0; i < n; i++) {
        for (size_t d = 0; d < dims; d++)
            v[d] = centres[(i % 50) * dims + d] + 0.8f * frand();
        EXPECT_INT(cm_vec_index_add(&x, (int64_t)i, v, 0), CM_OK);
    }
    const vec_kernels *kern = cm_vec_kernels_best();
    size_t found = 0;
    for (size_t t = 0; t < nq; t++) {
        for (size_t d = 0; d < dims; d++)
            v[d] = centres[(t * 7 % 50) * dims + d] + 0.8f * frand();
        EXPECT(cm_vec_normalise(v, dims));
        vec_hit exact[10], approx[10];
        EXPECT_INT(cm_vec_search(&x, kern, v, 10, ~0u, exact), 10);
        if (t == 0) { /* the two-thread scan agrees with a full sort */
            vec_hit *all = malloc(n * sizeof *all);
            for (size_t i = 0; i < n; i++)
                all[i] = (vec_hit){x.ids[i], kern->dot(v, x.m + i * x.stride, dims)};
            qsort(all, n, sizeof *all, cmp_desc);
            for (int i = 0; i < 10; i++)
                EXPECT_INT(all[i].id, exact[i].id);
            free(all);
        }
        EXPECT_INT(cm_vec_search_int8(&x, kern, v, 10, 10, ~0u, approx), 10);
        for (int i = 0; i < 10; i++)
            for (int j = 0; j < 10; j++)
                found += exact[i].id == approx[j].id;
    }
    EXPECT((double)found / (double)(nq * 10) >= 0.99);
    free(centres);
    free(v);
    cm_vec_index_release(&x);
}

/* Rows like real embeddings: around 50 centres. */
static void clustered_row(const float *centres, size_t c, size_t dims, float *v)
{
    for (size_t d = 0; d < dims; d++)
        v[d] = centres[c * dims + d] + 0.8f * frand();
}

TEST(vector_binary_recall_on_clustered_data)
{
    size_t dims = 768, n = VEC_EXACT_MAX_BYTES / (768 * 4) + 2000, nq = 20;
    vec_index x;
    EXPECT_INT(cm_vec_index_init(&x, dims), CM_OK);
    float *centres = malloc(50 * dims * sizeof *centres), *v = malloc(dims * sizeof *v);
    for (size_t i = 0; i < 50 * dims; i++)
        centres[i] = frand();
    for (size_t i = 0; i < n; i++) {
        clustered_row(centres, i % 50, dims, v);
        EXPECT_INT(cm_vec_index_add(&x, (int64_t)i, v, (uint8_t)(i % 2)), CM_OK);
    }
    EXPECT_STR(cm_vec_search_path(&x), "binary");
    /* the code of a row is its sign bits */
    for (size_t d = 0; d < dims; d++)
        EXPECT_INT((int)((x.b[d >> 6] >> (d & 63)) & 1), x.m[d] > 0);
    const vec_kernels *k[5];
    size_t nk = cm_vec_kernels_all(k, 5);
    size_t found = 0, total = 0;
    for (size_t t = 0; t < nq; t++) {
        clustered_row(centres, t * 7 % 50, dims, v);
        EXPECT(cm_vec_normalise(v, dims));
        vec_hit exact[10], approx[10];
        EXPECT_INT(cm_vec_search(&x, k[0], v, 10, ~0u, exact), 10);
        /* the automatic path at this size is the binary one: every kernel set */
        for (size_t j = 0; j < nk; j++) {
            EXPECT_INT(cm_vec_search_auto(&x, k[j], v, 10, ~0u, approx), 10);
            for (int a = 0; a < 10; a++)
                for (int b = 0; b < 10; b++)
                    found += exact[a].id == approx[b].id;
            total += 10;
        }
        /* source filtering holds on the binary path */
        EXPECT_INT(cm_vec_search_binary(&x, k[nk - 1], v, 10, 0, 1u << 1, approx), 10);
        for (int i = 0; i < 10; i++)
            EXPECT_INT(approx[i].id % 2, 1);
    }
    EXPECT((double)found / (double)total >= 0.95);
    free(centres);
    free(v);
    cm_vec_index_release(&x);
}

/* Random puts (new ids and replacements) and removals against an index
 * built afresh from the same final rows: same rows, same search results. */
TEST(vector_put_remove_match_a_fresh_index)
{
    size_t dims = 40, universe = 3000;
    vec_index x, y;
    EXPECT_INT(cm_vec_index_init(&x, dims), CM_OK);
    float *rows = calloc(universe * dims, sizeof *rows);
    bool *live = calloc(universe, sizeof *live);
    uint8_t *src = calloc(universe, 1);
    for (size_t i = 0; i < universe / 2; i++) {
        for (size_t d = 0; d < dims; d++)
            rows[i * dims + d] = frand();
        EXPECT_INT(cm_vec_index_add(&x, (int64_t)i, rows + i * dims, 0), CM_OK);
        live[i] = true;
    }
    for (int step = 0; step < 20000; step++) {
        size_t id = (size_t)((frand() + 1) * 0.5 * (double)universe) % universe;
        if (frand() < 0.1) { /* remove */
            bool removed;
            EXPECT_INT(cm_vec_index_remove(&x, (int64_t)id, &removed), CM_OK);
            EXPECT_INT(removed, live[id]);
            live[id] = false;
        } else {                              /* add or replace */
            for (size_t d = 0; d < dims; d++) /* a third of the rows half zeros */
                rows[id * dims + d] = step % 3 == 0 && d % 2 ? 0.0f : frand();
            src[id] = (uint8_t)(step % 2);
            EXPECT_INT(cm_vec_index_put(&x, (int64_t)id, rows + id * dims, src[id]), CM_OK);
            live[id] = true;
        }
    }
    float zero[40] = {0};
    size_t some = 0;
    while (!live[some])
        some++;
    EXPECT_INT(cm_vec_index_put(&x, (int64_t)some, zero, 0), CM_EINVAL); /* refused, row kept */
    EXPECT_INT(cm_vec_index_init(&y, dims), CM_OK);
    size_t nlive = 0;
    for (size_t i = 0; i < universe; i++)
        if (live[i]) {
            EXPECT_INT(cm_vec_index_add(&y, (int64_t)i, rows + i * dims, src[i]), CM_OK);
            nlive++;
        }
    EXPECT_INT(x.n, nlive);
    EXPECT_INT(x.zeros, y.zeros); /* the zero count kept through puts and removals */
    EXPECT(x.zeros > 0);
    EXPECT_INT(cm_vec_index_sparse(&x), cm_vec_index_sparse(&y));
    const vec_kernels *kern = cm_vec_kernels_best();
    for (int t = 0; t < 20; t++) {
        float q[40];
        for (size_t d = 0; d < dims; d++)
            q[d] = frand();
        EXPECT(cm_vec_normalise(q, dims));
        for (uint32_t mask = 1; mask <= 3; mask++) {
            vec_hit a[10], b[10];
            size_t na = cm_vec_search(&x, kern, q, 10, mask, a),
                   nb = cm_vec_search(&y, kern, q, 10, mask, b);
            EXPECT_INT(na, nb);
            for (size_t i = 0; i < na && i < nb; i++) {
                EXPECT_INT(a[i].id, b[i].id);
                EXPECT_NEAR(a[i].score, b[i].score, 1e-6);
            }
            na = cm_vec_search_binary(&x, kern, q, 10, universe, mask, a); /* pool: every row */
            EXPECT_INT(na, nb);
            for (size_t i = 0; i < na && i < nb; i++)
                EXPECT_INT(a[i].id, b[i].id);
        }
    }
    free(rows);
    free(live);
    free(src);
    cm_vec_index_release(&x);
    cm_vec_index_release(&y);
}
