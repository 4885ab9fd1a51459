/*
 * vector.c — the vector index of vector.h: row storage, normalisation,
 * symmetric int8 quantisation, the exact and the quantised top-k scans.
 */
#include <math.h>
#include <pthread.h>

#include "vector.h"

#define ALIGN 64
/* Scans over more bytes than this use a second thread. */
#define VEC_PARALLEL_BYTES (16u << 20)

static size_t round16(size_t n)
{
    return (n + 15) & ~(size_t)15;
}

cm_rc vec_index_init(vec_index *x, size_t dims)
{
    memset(x, 0, sizeof *x);
    if (dims == 0 || dims > 65536) return CM_EINVAL;
    x->dims = dims;
    x->stride = round16(dims);
    return CM_OK;
}

void vec_index_release(vec_index *x)
{
    free(x->m);
    free(x->q);
    free(x->qs);
    free(x->ids);
    free(x->src);
    memset(x, 0, sizeof *x);
}

bool vec_normalise(float *v, size_t dims)
{
    double ss = 0;
    for (size_t i = 0; i < dims; i++) ss += (double)v[i] * v[i];
    if (!(ss > 0) || !isfinite(ss)) return false;
    float inv = (float)(1.0 / sqrt(ss));
    for (size_t i = 0; i < dims; i++) v[i] *= inv;
    return true;
}

static cm_rc grow(vec_index *x)
{
    size_t cap = x->cap ? x->cap * 2 : 1024;
    float *m = aligned_alloc(ALIGN, cap * x->stride * sizeof *m);
    int8_t *q = aligned_alloc(ALIGN, cap * x->stride);
    float *qs = realloc(x->qs, cap * sizeof *qs);
    if (qs) x->qs = qs;
    int64_t *ids = realloc(x->ids, cap * sizeof *ids);
    if (ids) x->ids = ids;
    uint8_t *src = realloc(x->src, cap);
    if (src) x->src = src;
    if (!m || !q || !qs || !ids || !src) {
        free(m);
        free(q);
        return CM_ENOMEM;
    }
    if (x->n) {
        memcpy(m, x->m, x->n * x->stride * sizeof *m);
        memcpy(q, x->q, x->n * x->stride);
    }
    free(x->m);
    free(x->q);
    x->m = m;
    x->q = q;
    x->cap = cap;
    return CM_OK;
}

/* Symmetric per-row int8: q = round(v / s), s = max|v| / 127. */
static float quantise(const float *v, size_t n, int8_t *q)
{
    float mx = 0;
    for (size_t i = 0; i < n; i++) mx = fmaxf(mx, fabsf(v[i]));
    float s = mx > 0 ? mx / 127.0f : 1.0f;
    for (size_t i = 0; i < n; i++) q[i] = (int8_t)lrintf(v[i] / s);
    return s;
}

cm_rc vec_index_add(vec_index *x, int64_t id, const float *v, uint8_t source)
{
    if (x->n == x->cap) {
        cm_rc rc = grow(x);
        if (rc) return rc;
    }
    float *row = x->m + x->n * x->stride;
    memcpy(row, v, x->dims * sizeof *row);
    memset(row + x->dims, 0, (x->stride - x->dims) * sizeof *row);
    if (!vec_normalise(row, x->dims)) return CM_EINVAL;
    x->qs[x->n] = quantise(row, x->stride, x->q + x->n * x->stride);
    x->ids[x->n] = id;
    x->src[x->n] = source;
    x->n++;
    return CM_OK;
}

/* ---- top-k: a min-heap on score, the worst kept hit at the root ---------- */

typedef struct heap {
    vec_hit *v;
    size_t n, k;
} heap;

static void sift_down(heap *h, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && h->v[l].score < h->v[m].score) m = l;
        if (r < h->n && h->v[r].score < h->v[m].score) m = r;
        if (m == i) return;
        vec_hit t = h->v[i];
        h->v[i] = h->v[m];
        h->v[m] = t;
        i = m;
    }
}

static void heap_push(heap *h, int64_t id, float score)
{
    if (h->n < h->k) {
        size_t i = h->n++;
        h->v[i] = (vec_hit){id, score};
        while (i && h->v[(i - 1) / 2].score > h->v[i].score) {
            vec_hit t = h->v[i];
            h->v[i] = h->v[(i - 1) / 2];
            h->v[(i - 1) / 2] = t;
            i = (i - 1) / 2;
        }
    } else if (score > h->v[0].score) {
        h->v[0] = (vec_hit){id, score};
        sift_down(h, 0);
    }
}

static int by_score_desc(const void *a, const void *b)
{
    const vec_hit *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static size_t heap_finish(heap *h)
{
    qsort(h->v, h->n, sizeof *h->v, by_score_desc);
    return h->n;
}

/* The query, zero-padded to the stride. */
static float *pad_query(const vec_index *x, const float *query)
{
    float *q = aligned_alloc(ALIGN, x->stride * sizeof *q);
    if (!q) return NULL;
    memcpy(q, query, x->dims * sizeof *q);
    memset(q + x->dims, 0, (x->stride - x->dims) * sizeof *q);
    return q;
}

/* One thread's share of a scan: rows [from, to) into its own heap. For the
 * int8 pass, ids in the heap are row numbers (for the rescore). */
typedef struct scan {
    const vec_index *x;
    const vec_kernels *k;
    const float *q;
    const int8_t *qi;
    uint32_t mask;
    size_t from, to;
    heap h;
} scan;

static void *scan_rows(void *arg)
{
    scan *s = arg;
    const vec_index *x = s->x;
    for (size_t i = s->from; i < s->to; i++) {
        if (!(s->mask & (1u << x->src[i]))) continue;
        float score = s->qi ? (float)s->k->dot_i8(s->qi, x->q + i * x->stride, x->stride) * x->qs[i]
                            : s->k->dot(s->q, x->m + i * x->stride, x->stride);
        if (s->h.n < s->h.k || score > s->h.v[0].score)
            heap_push(&s->h, s->qi ? (int64_t)i : x->ids[i], score);
    }
    return NULL;
}

/* Scans every row into out (k best), on two threads when the matrix is
 * large enough for the second core's memory bandwidth to pay. */
static size_t scan_all(const vec_index *x, const vec_kernels *k, const float *q, const int8_t *qi,
                       uint32_t mask, size_t want, vec_hit *out)
{
    size_t bytes = x->n * x->stride * (qi ? 1 : sizeof(float));
    int parts = bytes >= VEC_PARALLEL_BYTES ? 2 : 1;
    scan s[2];
    vec_hit *second = parts == 2 ? malloc(want * sizeof *second) : NULL;
    if (parts == 2 && !second) parts = 1;
    for (int t = 0; t < parts; t++) {
        s[t] = (scan){x, k, q, qi, mask, x->n * (size_t)t / (size_t)parts,
                      x->n * (size_t)(t + 1) / (size_t)parts, {t ? second : out, 0, want}};
    }
    pthread_t tid;
    bool threaded = parts == 2 && pthread_create(&tid, NULL, scan_rows, &s[1]) == 0;
    scan_rows(&s[0]);
    if (parts == 2 && !threaded) scan_rows(&s[1]);
    if (threaded) pthread_join(tid, NULL);
    for (int t = 1; t < parts; t++)
        for (size_t i = 0; i < s[t].h.n; i++) heap_push(&s[0].h, s[t].h.v[i].id, s[t].h.v[i].score);
    free(second);
    return heap_finish(&s[0].h);
}

size_t vec_search(const vec_index *x, const vec_kernels *kern, const float *query, size_t k,
                  uint32_t source_mask, vec_hit *out)
{
    if (!k || !x->n) return 0;
    float *q = pad_query(x, query);
    if (!q) return 0;
    size_t n = scan_all(x, kern, q, NULL, source_mask, k, out);
    free(q);
    return n;
}

size_t vec_search_int8(const vec_index *x, const vec_kernels *kern, const float *query, size_t k,
                       size_t oversample, uint32_t source_mask, vec_hit *out)
{
    if (!k || !x->n) return 0;
    size_t cand = k * (oversample ? oversample : 1);
    float *q = pad_query(x, query);
    int8_t *qi = aligned_alloc(ALIGN, x->stride);
    vec_hit *c = malloc(cand * sizeof *c);
    size_t got = 0;
    if (!q || !qi || !c) goto out;
    (void)quantise(q, x->stride, qi); /* the query's scale is common to all rows: unneeded */
    size_t nc = scan_all(x, kern, q, qi, source_mask, cand, c); /* ids are row numbers */
    heap best = {out, 0, k};
    for (size_t j = 0; j < nc; j++) {
        size_t i = (size_t)c[j].id;
        heap_push(&best, x->ids[i], kern->dot(q, x->m + i * x->stride, x->stride));
    }
    got = heap_finish(&best);
out:
    free(q);
    free(qi);
    free(c);
    return got;
}
