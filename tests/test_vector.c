/*
 * test_vector.c — every SIMD kernel against the scalar reference, top-k
 * against a full sort, source filtering, and the int8 pass's recall.
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

TEST(vector_kernels_match_scalar)
{
    const vec_kernels *k[4];
    size_t nk = vec_kernels_all(k, 4);
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
    EXPECT(strcmp(vec_kernels_best()->name, k[nk - 1]->name) == 0);
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
    EXPECT_INT(vec_index_init(&x, dims), CM_OK);
    float *v = malloc(dims * sizeof *v);
    for (size_t i = 0; i < n; i++) {
        for (size_t d = 0; d < dims; d++) v[d] = frand();
        EXPECT_INT(vec_index_add(&x, (int64_t)i + 1000, v, (uint8_t)(i % 2)), CM_OK);
    }
    memset(v, 0, dims * sizeof *v);
    EXPECT_INT(vec_index_add(&x, 1, v, 0), CM_EINVAL); /* a zero vector */
    float q[100];
    for (size_t d = 0; d < dims; d++) q[d] = frand();
    EXPECT(vec_normalise(q, dims));
    const vec_kernels *k[4];
    size_t nk = vec_kernels_all(k, 4);
    vec_hit *all = malloc(n * sizeof *all);
    for (size_t i = 0; i < n; i++) {
        all[i].id = x.ids[i];
        all[i].score = k[0]->dot(q, x.m + i * x.stride, dims);
    }
    qsort(all, n, sizeof *all, cmp_desc);
    for (size_t j = 0; j < nk; j++) {
        vec_hit out[10];
        EXPECT_INT(vec_search(&x, k[j], q, 10, ~0u, out), 10);
        for (int i = 0; i < 10; i++) EXPECT_INT(out[i].id, all[i].id);
        /* only source 1 (odd rows) */
        EXPECT_INT(vec_search(&x, k[j], q, 10, 1u << 1, out), 10);
        for (int i = 0; i < 10; i++) EXPECT_INT((out[i].id - 1000) % 2, 1);
    }
    free(all);
    free(v);
    vec_index_release(&x);
}

TEST(vector_int8_recall)
{
    /* 768-dimensional rows clustered around 50 centres, like real embeddings */
    size_t dims = 768, n = 6000, nq = 20; /* 18 MiB of floats: the two-thread scan */
    vec_index x;
    EXPECT_INT(vec_index_init(&x, dims), CM_OK);
    float *centres = malloc(50 * dims * sizeof *centres), *v = malloc(dims * sizeof *v);
    for (size_t i = 0; i < 50 * dims; i++) centres[i] = frand();
    for (size_t i = 0; i < n; i++) {
        for (size_t d = 0; d < dims; d++) v[d] = centres[(i % 50) * dims + d] + 0.8f * frand();
        EXPECT_INT(vec_index_add(&x, (int64_t)i, v, 0), CM_OK);
    }
    const vec_kernels *kern = vec_kernels_best();
    size_t found = 0;
    for (size_t t = 0; t < nq; t++) {
        for (size_t d = 0; d < dims; d++) v[d] = centres[(t * 7 % 50) * dims + d] + 0.8f * frand();
        EXPECT(vec_normalise(v, dims));
        vec_hit exact[10], approx[10];
        EXPECT_INT(vec_search(&x, kern, v, 10, ~0u, exact), 10);
        if (t == 0) { /* the two-thread scan agrees with a full sort */
            vec_hit *all = malloc(n * sizeof *all);
            for (size_t i = 0; i < n; i++)
                all[i] = (vec_hit){x.ids[i], kern->dot(v, x.m + i * x.stride, dims)};
            qsort(all, n, sizeof *all, cmp_desc);
            for (int i = 0; i < 10; i++) EXPECT_INT(all[i].id, exact[i].id);
            free(all);
        }
        EXPECT_INT(vec_search_int8(&x, kern, v, 10, 10, ~0u, approx), 10);
        for (int i = 0; i < 10; i++)
            for (int j = 0; j < 10; j++) found += exact[i].id == approx[j].id;
    }
    EXPECT((double)found / (double)(nq * 10) >= 0.99);
    free(centres);
    free(v);
    vec_index_release(&x);
}
