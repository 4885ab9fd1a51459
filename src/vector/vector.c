/*
 * vector.c — the vector index of vector.h: row storage, normalisation,
 * symmetric int8 quantisation, sign-bit codes, replacing and removing rows
 * by id, the exact, the int8 and the binary top-k scans.
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

/* aligned_alloc wants a size that is a multiple of the alignment. */
static void *alloc_aligned(size_t n)
{
    return aligned_alloc(ALIGN, (n + ALIGN - 1) & ~(size_t)(ALIGN - 1));
}

cm_rc cm_vec_index_init(vec_index *x, size_t dims)
{
    memset(x, 0, sizeof *x);
    if (dims == 0 || dims > 65536) return CM_EINVAL;
    x->dims = dims;
    x->stride = round16(dims);
    x->words = (dims + 63) / 64;
    return CM_OK;
}

size_t cm_vec_index_bytes(const vec_index *x)
{
    size_t row = x->stride * sizeof(float) + x->stride + sizeof(float) + x->words * 8 +
                 sizeof(int64_t) + 1;
    return x->cap * row + x->map_cap * (sizeof(int64_t) + sizeof(uint32_t));
}

/* n bytes of src into a new block (aligned when asked); NULL only on failure
 * of a non-empty copy. */
static void *dup_block(const void *src, size_t n, bool aligned)
{
    if (!src || !n) return NULL;
    void *d = aligned ? alloc_aligned(n) : malloc(n);
    if (d) memcpy(d, src, n);
    return d;
}

cm_rc cm_vec_index_copy(vec_index *dst, const vec_index *src)
{
    *dst = *src;
    size_t cap = src->cap;
    dst->m = dup_block(src->m, cap * src->stride * sizeof *src->m, true);
    dst->q = dup_block(src->q, cap * src->stride, true);
    dst->qs = dup_block(src->qs, cap * sizeof *src->qs, false);
    dst->ids = dup_block(src->ids, cap * sizeof *src->ids, false);
    dst->src = dup_block(src->src, cap, false);
    dst->b = dup_block(src->b, cap * src->words * sizeof *src->b, false);
    dst->map_id = dup_block(src->map_id, src->map_cap * sizeof *src->map_id, false);
    dst->map_row = dup_block(src->map_row, src->map_cap * sizeof *src->map_row, false);
    bool ok = (!src->m || dst->m) && (!src->q || dst->q) && (!src->qs || dst->qs) &&
              (!src->ids || dst->ids) && (!src->src || dst->src) && (!src->b || dst->b) &&
              (!src->map_id || dst->map_id) && (!src->map_row || dst->map_row);
    if (ok) return CM_OK;
    cm_vec_index_release(dst);
    return CM_ENOMEM;
}

void cm_vec_index_release(vec_index *x)
{
    free(x->m);
    free(x->q);
    free(x->qs);
    free(x->ids);
    free(x->src);
    free(x->b);
    free(x->map_id);
    free(x->map_row);
    memset(x, 0, sizeof *x);
}

bool cm_vec_normalise(float *v, size_t dims)
{
    double ss = 0;
    for (size_t i = 0; i < dims; i++)
        ss += (double)v[i] * v[i];
    if (!(ss > 0) || !isfinite(ss)) return false;
    float inv = (float)(1.0 / sqrt(ss));
    for (size_t i = 0; i < dims; i++)
        v[i] *= inv;
    return true;
}

static cm_rc grow(vec_index *x)
{
    size_t cap = x->cap ? x->cap * 2 : 1024;
    float *m = alloc_aligned(cap * x->stride * sizeof *m);
    int8_t *q = alloc_aligned(cap * x->stride);
    float *qs = realloc(x->qs, cap * sizeof *qs);
    if (qs) x->qs = qs;
    int64_t *ids = realloc(x->ids, cap * sizeof *ids);
    if (ids) x->ids = ids;
    uint8_t *src = realloc(x->src, cap);
    if (src) x->src = src;
    uint64_t *b = realloc(x->b, cap * x->words * sizeof *b);
    if (b) x->b = b;
    if (!m || !q || !qs || !ids || !src || !b) {
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
    for (size_t i = 0; i < n; i++)
        mx = fmaxf(mx, fabsf(v[i]));
    float s = mx > 0 ? mx / 127.0f : 1.0f;
    for (size_t i = 0; i < n; i++)
        q[i] = (int8_t)lrintf(v[i] / s);
    return s;
}

/* Sign bits: bit d of the code is set when component d is positive; the
 * padding stays 0 in every code, so it never counts. */
static void sign_code(const float *v, size_t dims, size_t words, uint64_t *code)
{
    memset(code, 0, words * sizeof *code);
    for (size_t d = 0; d < dims; d++)
        if (v[d] > 0) code[d >> 6] |= 1ull << (d & 63);
}

/* Writes row i from v (normalised here); false for a zero vector. */
static bool set_row(vec_index *x, size_t i, const float *v, int64_t id, uint8_t source)
{
    float *row = x->m + i * x->stride;
    memcpy(row, v, x->dims * sizeof *row);
    memset(row + x->dims, 0, (x->stride - x->dims) * sizeof *row);
    if (!cm_vec_normalise(row, x->dims)) return false;
    x->qs[i] = quantise(row, x->stride, x->q + i * x->stride);
    sign_code(row, x->dims, x->words, x->b + i * x->words);
    x->ids[i] = id;
    x->src[i] = source;
    return true;
}

static size_t row_zeros(const vec_index *x, size_t i)
{
    const float *row = x->m + i * x->stride;
    size_t z = 0;
    for (size_t d = 0; d < x->dims; d++)
        z += row[d] == 0;
    return z;
}

/* ---- id → row map: linear probing, backward-shift deletion ------------- */

static size_t map_slot(const vec_index *x, int64_t id)
{
    uint64_t h = (uint64_t)id * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 17) & (x->map_cap - 1);
}

static void map_set(vec_index *x, int64_t id, size_t row)
{
    size_t i = map_slot(x, id);
    while (x->map_row[i] && x->map_id[i] != id)
        i = (i + 1) & (x->map_cap - 1);
    x->map_id[i] = id;
    x->map_row[i] = (uint32_t)row + 1;
}

/* The row of id, or (size_t)-1; *slot receives its slot. */
static size_t map_get(const vec_index *x, int64_t id, size_t *slot)
{
    size_t i = map_slot(x, id);
    while (x->map_row[i]) {
        if (x->map_id[i] == id) {
            if (slot) *slot = i;
            return x->map_row[i] - 1;
        }
        i = (i + 1) & (x->map_cap - 1);
    }
    return (size_t)-1;
}

static void map_delete(vec_index *x, size_t i)
{
    size_t mask = x->map_cap - 1;
    x->map_row[i] = 0;
    for (size_t j = (i + 1) & mask; x->map_row[j]; j = (j + 1) & mask) {
        size_t home = map_slot(x, x->map_id[j]);
        /* the entry at j may move to the hole at i when i lies on its probe path */
        if (((j - home) & mask) >= ((j - i) & mask)) {
            x->map_id[i] = x->map_id[j];
            x->map_row[i] = x->map_row[j];
            x->map_row[j] = 0;
            i = j;
        }
    }
}

/* (Re)builds the map for at least need rows, at most half full. */
static cm_rc map_build(vec_index *x, size_t need)
{
    size_t cap = 1024;
    while (cap < 2 * need)
        cap *= 2;
    int64_t *id = malloc(cap * sizeof *id);
    uint32_t *row = calloc(cap, sizeof *row);
    if (!id || !row || need > UINT32_MAX - 1) {
        free(id);
        free(row);
        return CM_ENOMEM;
    }
    free(x->map_id);
    free(x->map_row);
    x->map_id = id;
    x->map_row = row;
    x->map_cap = cap;
    for (size_t i = 0; i < x->n; i++)
        map_set(x, x->ids[i], i);
    return CM_OK;
}

cm_rc cm_vec_index_add(vec_index *x, int64_t id, const float *v, uint8_t source)
{
    if (x->n == x->cap) {
        cm_rc rc = grow(x);
        if (rc) return rc;
    }
    if (!set_row(x, x->n, v, id, source)) return CM_EINVAL;
    x->zeros += row_zeros(x, x->n);
    if (x->map_row && 2 * (x->n + 1) > x->map_cap) {
        x->n++; /* the map is rebuilt with the new row in it */
        cm_rc rc = map_build(x, x->n);
        if (rc) x->n--;
        return rc;
    }
    if (x->map_row) map_set(x, id, x->n);
    x->n++;
    return CM_OK;
}

cm_rc cm_vec_index_put(vec_index *x, int64_t id, const float *v, uint8_t source)
{
    if (!x->map_row) {
        cm_rc rc = map_build(x, x->n + 1);
        if (rc) return rc;
    }
    size_t row = map_get(x, id, NULL);
    if (row == (size_t)-1) return cm_vec_index_add(x, id, v, source);
    /* a zero vector leaves the old row as it was */
    float *keep = malloc(x->stride * sizeof *keep);
    if (!keep) return CM_ENOMEM;
    memcpy(keep, x->m + row * x->stride, x->stride * sizeof *keep);
    x->zeros -= row_zeros(x, row);
    bool ok = set_row(x, row, v, id, source);
    x->zeros += ok ? row_zeros(x, row) : 0;
    if (!ok) {
        set_row(x, row, keep, id, x->src[row]);
        x->zeros += row_zeros(x, row);
    }
    free(keep);
    return ok ? CM_OK : CM_EINVAL;
}

cm_rc cm_vec_index_remove(vec_index *x, int64_t id, bool *removed)
{
    *removed = false;
    if (!x->map_row) {
        cm_rc rc = map_build(x, x->n);
        if (rc) return rc;
    }
    size_t slot, row = map_get(x, id, &slot);
    if (row == (size_t)-1) return CM_OK;
    map_delete(x, slot);
    x->zeros -= row_zeros(x, row);
    size_t last = x->n - 1;
    if (row != last) { /* the last row fills the hole */
        memcpy(x->m + row * x->stride, x->m + last * x->stride, x->stride * sizeof *x->m);
        memcpy(x->q + row * x->stride, x->q + last * x->stride, x->stride);
        memcpy(x->b + row * x->words, x->b + last * x->words, x->words * sizeof *x->b);
        x->qs[row] = x->qs[last];
        x->ids[row] = x->ids[last];
        x->src[row] = x->src[last];
        map_set(x, x->ids[row], row);
    }
    x->n--;
    *removed = true;
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
    float *q = alloc_aligned(x->stride * sizeof *q);
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
        s[t] = (scan){x,
                      k,
                      q,
                      qi,
                      mask,
                      x->n * (size_t)t / (size_t)parts,
                      x->n * (size_t)(t + 1) / (size_t)parts,
                      {t ? second : out, 0, want}};
    }
    pthread_t tid;
    bool threaded = parts == 2 && pthread_create(&tid, NULL, scan_rows, &s[1]) == 0;
    scan_rows(&s[0]);
    if (parts == 2 && !threaded) scan_rows(&s[1]);
    if (threaded) pthread_join(tid, NULL);
    for (int t = 1; t < parts; t++)
        for (size_t i = 0; i < s[t].h.n; i++)
            heap_push(&s[0].h, s[t].h.v[i].id, s[t].h.v[i].score);
    free(second);
    return heap_finish(&s[0].h);
}

size_t cm_vec_search(const vec_index *x, const vec_kernels *kern, const float *query, size_t k,
                     uint32_t source_mask, vec_hit *out)
{
    if (!k || !x->n) return 0;
    float *q = pad_query(x, query);
    if (!q) return 0;
    size_t n = scan_all(x, kern, q, NULL, source_mask, k, out);
    free(q);
    return n;
}

size_t cm_vec_search_int8(const vec_index *x, const vec_kernels *kern, const float *query, size_t k,
                          size_t oversample, uint32_t source_mask, vec_hit *out)
{
    if (!k || !x->n) return 0;
    size_t cand = k * (oversample ? oversample : 1);
    float *q = pad_query(x, query);
    int8_t *qi = alloc_aligned(x->stride);
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

/* ---- binary codes: popcount scan, int8 then float rescoring ------------ */

typedef struct ham_part {
    const vec_index *x;
    const vec_kernels *k;
    const uint64_t *qc;
    uint32_t mask;
    size_t from, to;
    uint16_t *dist;
    size_t *hist, maxd; /* this part's histogram of distances (maxd + 2 bins) */
} ham_part;

static void *ham_rows(void *arg)
{
    ham_part *p = arg;
    const vec_index *x = p->x;
    /* blocks of rows, so the distances are counted while still in cache */
    for (size_t from = p->from; from < p->to; from += 4096) {
        size_t to = CM_MIN(from + 4096, p->to);
        p->k->hamming(p->qc, x->b + from * x->words, x->words, to - from, p->dist + from);
        if (p->mask != ~0u)
            for (size_t i = from; i < to; i++)
                if (!(p->mask & (1u << x->src[i]))) p->dist[i] = UINT16_MAX;
        for (size_t i = from; i < to; i++)
            p->hist[p->dist[i] == UINT16_MAX ? p->maxd + 1 : p->dist[i]]++;
    }
    return NULL;
}

/* The binary path's stages read less per row than a float scan: a second
 * thread pays from this many bytes on. */
#define VEC_PARALLEL_BINARY_BYTES (4u << 20)

/* Distances of every row's code to the query's, on two threads when the
 * codes are large enough for it to pay. Filtered-out rows get UINT16_MAX. */
static void ham_all(const vec_index *x, const vec_kernels *k, const uint64_t *qc, uint32_t mask,
                    uint16_t *dist, size_t *hist, size_t maxd)
{
    int parts = x->n * x->words * 8 >= VEC_PARALLEL_BINARY_BYTES ? 2 : 1;
    size_t *hist2 = parts == 2 ? calloc(maxd + 2, sizeof *hist2) : NULL;
    if (!hist2) parts = 1;
    ham_part p[2];
    for (int t = 0; t < parts; t++)
        p[t] = (ham_part){x,
                          k,
                          qc,
                          mask,
                          x->n * (size_t)t / (size_t)parts,
                          x->n * (size_t)(t + 1) / (size_t)parts,
                          dist,
                          t ? hist2 : hist,
                          maxd};
    pthread_t tid;
    bool threaded = parts == 2 && pthread_create(&tid, NULL, ham_rows, &p[1]) == 0;
    ham_rows(&p[0]);
    if (parts == 2 && !threaded) ham_rows(&p[1]);
    if (threaded) pthread_join(tid, NULL);
    for (size_t d = 0; hist2 && d < maxd + 2; d++)
        hist[d] += hist2[d];
    free(hist2);
}

/* The query's code and weight planes (3 × words): a dimension where the
 * query's component is in the top quarter by magnitude weighs 4, the next
 * quarters 3, 2 and 1 (a sign that disagrees where the query is large says
 * more). *sumw2 receives Σ weight². */
static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

static bool query_code(const vec_index *x, const float *q, uint64_t *qc, double *sumw2)
{
    size_t d = x->dims, w = x->words;
    float *mag = malloc(d * sizeof *mag);
    if (!mag) return false;
    for (size_t j = 0; j < d; j++)
        mag[j] = fabsf(q[j]);
    qsort(mag, d, sizeof *mag, cmp_float);
    float q1 = mag[d / 4], q2 = mag[d / 2], q3 = mag[3 * d / 4];
    free(mag);
    sign_code(q, d, w, qc);
    memset(qc + w, 0, 2 * w * sizeof *qc);
    *sumw2 = 0;
    for (size_t j = 0; j < d; j++) {
        float a = fabsf(q[j]);
        unsigned wt = a >= q3 ? 4 : a >= q2 ? 3 : a >= q1 ? 2 : 1; /* = 1 + b0 + 2·b1 */
        if ((wt - 1) & 1) qc[w + (j >> 6)] |= 1ull << (j & 63);
        if ((wt - 1) & 2) qc[2 * w + (j >> 6)] |= 1ull << (j & 63);
        *sumw2 += (double)(wt * wt);
    }
    return true;
}

/* The adaptive pool: the rows as close as the k-th closest code plus a
 * margin of about 2 standard deviations of a weighted code distance (for
 * bits that disagree with probability p, sd = sqrt(Σw²·p(1-p)) ≤
 * sqrt(Σw²)/2), at least VEC_POOL_MIN and k × 40, at most an eighth of the
 * rows. Clustered data puts the neighbours well inside the margin and keeps
 * the pool small; unstructured data (random vectors) widens it. */
#define VEC_POOL_MIN 256
static size_t adaptive_pool(const vec_index *x, const size_t *hist, size_t maxd, double sumw2,
                            size_t k)
{
    size_t seen = 0, dk = 0;
    while (dk <= maxd && (seen += hist[dk]) < k)
        dk++;
    size_t margin = (size_t)(1.0 * sqrt(sumw2)); /* about 2 sd */
    size_t lim = CM_MIN(dk + margin, maxd), pool = 0;
    for (size_t d = 0; d <= lim; d++)
        pool += hist[d];
    pool = CM_MAX(pool, CM_MAX((size_t)VEC_POOL_MIN, k * 40));
    return CM_MIN(pool, CM_MAX(x->n / 8, k));
}

/* One thread's share of the int8 rescoring: candidates [from, to). */
typedef struct rescore {
    const vec_index *x;
    const vec_kernels *k;
    const int8_t *qi;
    const uint32_t *cand;
    size_t from, to;
    heap h; /* ids are row numbers */
} rescore;

static void *rescore_rows(void *arg)
{
    rescore *r = arg;
    const vec_index *x = r->x;
    for (size_t j = r->from; j < r->to; j++) {
        size_t i = r->cand[j];
        if (j + 8 < r->to) { /* candidates are scattered: fetch a row ahead */
            const int8_t *ahead = x->q + (size_t)r->cand[j + 8] * x->stride;
            for (size_t off = 0; off < x->stride; off += 64)
                __builtin_prefetch(ahead + off);
        }
        float s = (float)r->k->dot_i8(r->qi, x->q + i * x->stride, x->stride) * x->qs[i];
        if (r->h.n < r->h.k || s > r->h.v[0].score) heap_push(&r->h, (int64_t)i, s);
    }
    return NULL;
}

size_t cm_vec_search_binary(const vec_index *x, const vec_kernels *kern, const float *query,
                            size_t k, size_t pool, uint32_t source_mask, vec_hit *out)
{
    if (!k || !x->n) return 0;
    size_t got = 0, nc = 0;
    float *q = pad_query(x, query);
    int8_t *qi = alloc_aligned(x->stride);
    uint64_t *qc = malloc(3 * x->words * sizeof *qc);
    uint16_t *dist = malloc(x->n * sizeof *dist);
    size_t maxd = 4 * x->dims; /* every bit disagreeing at weight 4 */
    size_t *hist = calloc(maxd + 2, sizeof *hist);
    vec_hit *c = NULL;
    uint32_t *cand = NULL;
    double sumw2 = 0;
    if (!q || !qi || !qc || !dist || !hist || maxd >= UINT16_MAX) goto out;
    if (!query_code(x, q, qc, &sumw2)) goto out;
    ham_all(x, kern, qc, source_mask, dist, hist, maxd);
    if (!pool) pool = adaptive_pool(x, hist, maxd, sumw2, k);
    pool = CM_MIN(CM_MAX(pool, k), x->n);
    /* the distance threshold that admits pool rows (ties at it partly) */
    size_t t = 0, below = 0;
    while (t <= maxd && below + hist[t] < pool)
        below += hist[t++];
    size_t at = pool - below; /* rows at distance t still admitted */
    if (!(cand = malloc((below + (t <= maxd ? hist[t] : 0) + 1) * sizeof *cand))) goto out;
    size_t nle = kern->select(dist, x->n, (uint16_t)CM_MIN(t, (size_t)UINT16_MAX - 1), cand);
    for (size_t j = 0; j < nle; j++) { /* all under t, the first `at` at t */
        uint16_t d = dist[cand[j]];
        if (d < t)
            cand[nc++] = cand[j];
        else if (d == t && at) {
            cand[nc++] = cand[j];
            at--;
        }
    }
    /* int8 rescoring keeps the best k × 8 (at least 64) for the exact pass */
    size_t keep = CM_MIN(CM_MAX(k * 8, (size_t)64), nc);
    if (!(c = malloc(2 * keep * sizeof *c))) goto out;
    (void)quantise(q, x->stride, qi);
    int parts = nc * x->stride >= VEC_PARALLEL_BINARY_BYTES ? 2 : 1;
    rescore r[2];
    for (int p = 0; p < parts; p++)
        r[p] = (rescore){x,
                         kern,
                         qi,
                         cand,
                         nc * (size_t)p / (size_t)parts,
                         nc * (size_t)(p + 1) / (size_t)parts,
                         {c + (size_t)p * keep, 0, keep}};
    pthread_t tid;
    bool threaded = parts == 2 && pthread_create(&tid, NULL, rescore_rows, &r[1]) == 0;
    rescore_rows(&r[0]);
    if (parts == 2 && !threaded) rescore_rows(&r[1]);
    if (threaded) pthread_join(tid, NULL);
    heap h = r[0].h;
    for (size_t j = 0; parts == 2 && j < r[1].h.n; j++)
        heap_push(&h, r[1].h.v[j].id, r[1].h.v[j].score);
    heap best = {out, 0, k};
    for (size_t j = 0; j < h.n; j++) {
        size_t i = (size_t)c[j].id;
        heap_push(&best, x->ids[i], kern->dot(q, x->m + i * x->stride, x->stride));
    }
    got = heap_finish(&best);
out:
    free(q);
    free(qi);
    free(qc);
    free(dist);
    free(hist);
    free(cand);
    free(c);
    return got;
}

bool cm_vec_index_sparse(const vec_index *x)
{
    return x->zeros * 10 > x->n * x->dims;
}

const char *cm_vec_search_path(const vec_index *x)
{
    if (x->n * x->stride * sizeof(float) < VEC_EXACT_MAX_BYTES) return "float32";
    if (x->dims < VEC_BINARY_MIN_DIMS || x->dims > VEC_BINARY_MAX_DIMS || cm_vec_index_sparse(x))
        return "int8";
    return "binary";
}

size_t cm_vec_search_auto(const vec_index *x, const vec_kernels *kern, const float *query, size_t k,
                          uint32_t source_mask, vec_hit *out)
{
    const char *path = cm_vec_search_path(x);
    if (path[0] == 'f') return cm_vec_search(x, kern, query, k, source_mask, out);
    if (path[0] == 'i') return cm_vec_search_int8(x, kern, query, k, 10, source_mask, out);
    return cm_vec_search_binary(x, kern, query, k, 0, source_mask, out);
}
