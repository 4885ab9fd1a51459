/*
 * vector.h — the in-memory vector index: a contiguous, 64-byte-aligned matrix
 * of L2-normalised float32 rows (cosine similarity = dot product), an int8
 * copy for a quantised first pass, sign-bit codes (one bit a dimension) for a
 * popcount first pass, and exact top-k by a bounded heap. Rows can be
 * replaced and removed by id (an id → row map built on first use), so a
 * warm index follows an edit without reloading.
 * Kernels come in a scalar reference and AVX2 / AVX-512 variants chosen once
 * from the CPU. Depends only on base/. Not thread-safe while being built;
 * searches on a built index may run concurrently.
 */
#ifndef CM_VECTOR_H
#define CM_VECTOR_H

#include "../base/common.h"

typedef struct vec_index {
    size_t n, cap, dims, stride; /* stride: dims rounded up to 16 floats / 64 bytes */
    float *m;                    /* n × stride, normalised, zero-padded */
    int8_t *q;                   /* n × stride, symmetric int8 of m (row scale in qs) */
    float *qs;                   /* per-row dequantisation scale */
    uint64_t *b;                 /* n × words sign bits of m (bit set: component > 0) */
    size_t words;                /* 64-bit words a row's code takes: ceil(dims / 64) */
    size_t zeros;                /* components exactly 0 over all rows (sparse data) */
    int64_t *ids;
    uint8_t *src; /* per-row source number, for filtering before top-k */
    /* id → row + 1 (0: empty), open addressing; NULL until the first
     * cm_vec_index_put / cm_vec_index_remove builds it */
    int64_t *map_id;
    uint32_t *map_row;
    size_t map_cap;
} vec_index;

typedef struct vec_hit {
    int64_t id;
    float score;
} vec_hit;

/* Kernels: dot products over n elements (n a multiple of 16 for the SIMD
 * variants; the index pads rows). */
typedef struct vec_kernels {
    const char *name; /* "avx512vnni", "avx512", "avx2" or "scalar" */
    float (*dot)(const float *a, const float *b, size_t n);
    int32_t (*dot_i8)(const int8_t *a, const int8_t *b, size_t n);
    /* Weighted Hamming distances of a query to n codes (words 64-bit words
     * each) laid out one after another. q holds 3 × words: the query's code,
     * then weight planes p0 and p1; with x = q XOR codes[i],
     * out[i] = popcount(x) + popcount(x & p0) + 2·popcount(x & p1) (each
     * disagreeing bit weighs 1 to 4; zero planes give the plain distance). */
    void (*hamming)(const uint64_t *q, const uint64_t *codes, size_t words, size_t n,
                    uint16_t *out);
    /* Writes the indices i < n with dist[i] ≤ t to out, in order; returns
     * how many. */
    size_t (*select)(const uint16_t *dist, size_t n, uint16_t t, uint32_t *out);
} vec_kernels;

/* The best kernels this CPU runs (decided once). */
const vec_kernels *cm_vec_kernels_best(void);
/* All variants this CPU can run, for tests: scalar first. Returns the count. */
size_t cm_vec_kernels_all(const vec_kernels **out, size_t max);

cm_rc cm_vec_index_init(vec_index *x, size_t dims);
void cm_vec_index_release(vec_index *x);
/* A deep copy of src into dst (dst's old contents are not released), for a
 * copy-on-write snapshot: the copy can be updated while src is searched.
 * CM_ENOMEM leaves dst empty. */
cm_rc cm_vec_index_copy(vec_index *dst, const vec_index *src);
/* The bytes x holds on the heap (its arrays at their capacity and the id map). */
size_t cm_vec_index_bytes(const vec_index *x);

/* Appends a row (normalised here; an all-zero or non-finite vector is
 * refused with CM_EINVAL). */
cm_rc cm_vec_index_add(vec_index *x, int64_t id, const float *v, uint8_t source);

/* Adds the row or replaces the row of id (in place). Same refusals as
 * cm_vec_index_add. */
cm_rc cm_vec_index_put(vec_index *x, int64_t id, const float *v, uint8_t source);

/* Removes the row of id (the last row moves into its place). Returns false
 * when id has no row. CM_ENOMEM can only come from building the id map. */
cm_rc cm_vec_index_remove(vec_index *x, int64_t id, bool *removed);

/* Normalises v in place (dims floats). Returns false for a zero or
 * non-finite vector. */
bool cm_vec_normalise(float *v, size_t dims);

/* Exact top-k by cosine among rows whose source bit is set in source_mask.
 * query must be normalised. Writes up to k hits, best first; returns how many.
 * A matrix over 16 MiB is scanned by two threads. */
size_t cm_vec_search(const vec_index *x, const vec_kernels *kern, const float *query, size_t k,
                     uint32_t source_mask, vec_hit *out);

/* Quantised search: an int8 scan keeps the best k × oversample candidates,
 * which are rescored in float32. oversample ≥ 1. */
size_t cm_vec_search_int8(const vec_index *x, const vec_kernels *kern, const float *query, size_t k,
                          size_t oversample, uint32_t source_mask, vec_hit *out);

/* Binary search: a popcount scan over the sign-bit codes — each
 * disagreeing bit weighted 1 to 4 by the magnitude of the query's component
 * there — keeps a pool of candidates (pool, or 0 for the adaptive size),
 * rescored with int8, then the best in float32. Returns 0 above
 * VEC_BINARY_MAX_DIMS. The recall it trades is measured by bench_vector. */
size_t cm_vec_search_binary(const vec_index *x, const vec_kernels *kern, const float *query,
                            size_t k, size_t pool, uint32_t source_mask, vec_hit *out);

/* cm_vec_search_auto scans float32 exactly while the matrix is under this many
 * bytes (32 MiB: 10,900 × 768 or 75,000 × 100 rows, a scan of ~2 ms). */
#define VEC_EXACT_MAX_BYTES (32u << 20)
/* Sign bits carry too little under this many dimensions: the int8 path. */
#define VEC_BINARY_MIN_DIMS 256
/* Weighted code distances are 16-bit: at most 4 × dims. */
#define VEC_BINARY_MAX_DIMS 16000

/* True when over 10% of the components are exactly 0 (sparse vectors, such
 * as hashed bags of words): a zero has no sign, so sign-bit codes say little. */
bool cm_vec_index_sparse(const vec_index *x);

/* The search the engine uses: exact float32 below VEC_EXACT_MAX_BYTES;
 * above, binary codes with rescoring, or — under VEC_BINARY_MIN_DIMS
 * dimensions or for sparse vectors — the int8 scan with float rescoring of
 * the best k × 10. cm_vec_search_path names the choice ("float32", "int8",
 * "binary"). */
const char *cm_vec_search_path(const vec_index *x);
size_t cm_vec_search_auto(const vec_index *x, const vec_kernels *kern, const float *query, size_t k,
                          uint32_t source_mask, vec_hit *out);

#endif
