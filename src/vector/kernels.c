/*
 * kernels.c — dot-product and Hamming kernels: a scalar reference, and
 * AVX2+FMA (with the POPCNT instruction), AVX-512, AVX-512 VNNI (int8) and
 * AVX-512 VPOPCNTDQ (sign-bit codes) variants compiled for their targets with
 * function attributes (the rest of the program needs no special flags).
 * Chosen from cpuid (asked once) by cm_vec_kernels_best(). SIMD dot variants need n to
 * be a multiple of 16; Hamming variants take any number of words.
 */
#include <cpuid.h>
#include <immintrin.h>
#include <stdatomic.h>

#include "vector.h"

static float dot_scalar(const float *a, const float *b, size_t n)
{
    /* Four partial sums, like the SIMD lanes, so rounding differs little. */
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += a[i] * b[i];
        s1 += a[i + 1] * b[i + 1];
        s2 += a[i + 2] * b[i + 2];
        s3 += a[i + 3] * b[i + 3];
    }
    for (; i < n; i++)
        s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

static int32_t dot_i8_scalar(const int8_t *a, const int8_t *b, size_t n)
{
    int32_t s = 0;
    for (size_t i = 0; i < n; i++)
        s += (int32_t)a[i] * b[i];
    return s;
}

static unsigned popcount_swar(uint64_t x)
{
    x = x - ((x >> 1) & 0x5555555555555555ull);
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
    return (unsigned)((x * 0x0101010101010101ull) >> 56);
}

/* q holds three rows of words: the query's code, then weight planes p0 and
 * p1; a disagreeing bit d costs 1 + p0[d] + 2·p1[d]. */
static void hamming_scalar(const uint64_t *q, const uint64_t *codes, size_t words, size_t n,
                           uint16_t *out)
{
    const uint64_t *p0 = q + words, *p1 = q + 2 * words;
    for (size_t i = 0; i < n; i++, codes += words) {
        unsigned d = 0;
        for (size_t w = 0; w < words; w++) {
            uint64_t x = q[w] ^ codes[w]; /* portable popcount (SWAR), the reference */
            d += popcount_swar(x) + popcount_swar(x & p0[w]) + 2 * popcount_swar(x & p1[w]);
        }
        out[i] = (uint16_t)d;
    }
}

__attribute__((target("popcnt"))) static void
hamming_popcnt(const uint64_t *q, const uint64_t *codes, size_t words, size_t n, uint16_t *out)
{
    const uint64_t *p0 = q + words, *p1 = q + 2 * words;
    for (size_t i = 0; i < n; i++, codes += words) {
        _mm_prefetch((const char *)(codes + 16 * words), _MM_HINT_T0); /* as below */
        _mm_prefetch((const char *)(codes + 16 * words) + 64, _MM_HINT_T0);
        uint64_t d0 = 0, d1 = 0, d2 = 0;
        for (size_t w = 0; w < words; w++) {
            uint64_t x = q[w] ^ codes[w];
            d0 += (uint64_t)_mm_popcnt_u64(x);
            d1 += (uint64_t)_mm_popcnt_u64(x & p0[w]);
            d2 += (uint64_t)_mm_popcnt_u64(x & p1[w]);
        }
        out[i] = (uint16_t)(d0 + d1 + 2 * d2);
    }
}

/* Eight words per instruction; the tail of a row by a masked load. */
__attribute__((target("avx512f,avx512vpopcntdq"))) static void
hamming_vpopcnt(const uint64_t *q, const uint64_t *codes, size_t words, size_t n, uint16_t *out)
{
    const uint64_t *p0 = q + words, *p1 = q + 2 * words;
    size_t full = words / 8;
    __mmask8 tail = (__mmask8)((1u << (words % 8)) - 1);
    for (size_t i = 0; i < n; i++, codes += words) {
        /* the stream 16 rows ahead: a row of 12 words spans 1.5 lines */
        _mm_prefetch((const char *)(codes + 16 * words), _MM_HINT_T0);
        _mm_prefetch((const char *)(codes + 16 * words) + 64, _MM_HINT_T0);
        __m512i a1 = _mm512_setzero_si512(), a2 = _mm512_setzero_si512();
        size_t w = 0;
        for (size_t j = 0; j <= full; j++, w += 8) {
            __mmask8 m = j < full ? (__mmask8)0xFF : tail;
            if (!m) break;
            __m512i x = _mm512_xor_si512(_mm512_maskz_loadu_epi64(m, q + w),
                                         _mm512_maskz_loadu_epi64(m, codes + w));
            /* 1 + p0 in a1; p1 in a2, doubled at the end */
            a1 = _mm512_add_epi64(a1, _mm512_popcnt_epi64(x));
            a1 = _mm512_add_epi64(
                a1, _mm512_popcnt_epi64(_mm512_and_si512(x, _mm512_maskz_loadu_epi64(m, p0 + w))));
            a2 = _mm512_add_epi64(
                a2, _mm512_popcnt_epi64(_mm512_and_si512(x, _mm512_maskz_loadu_epi64(m, p1 + w))));
        }
        out[i] = (uint16_t)_mm512_reduce_add_epi64(_mm512_add_epi64(a1, _mm512_slli_epi64(a2, 1)));
    }
}

/* Indices of the distances ≤ t, in order. */
static size_t select_scalar(const uint16_t *dist, size_t n, uint16_t t, uint32_t *out)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (dist[i] <= t) out[m++] = (uint32_t)i;
    return m;
}

/* 32 distances a compare; most blocks have none at or under t. */
__attribute__((target("avx512f,avx512bw"))) static size_t
select_avx512(const uint16_t *dist, size_t n, uint16_t t, uint32_t *out)
{
    size_t m = 0, i = 0;
    const __m512i tv = _mm512_set1_epi16((short)t);
    for (; i + 32 <= n; i += 32) {
        uint32_t mask = _mm512_cmple_epu16_mask(_mm512_loadu_si512(dist + i), tv);
        while (mask) {
            out[m++] = (uint32_t)(i + (size_t)__builtin_ctz(mask));
            mask &= mask - 1;
        }
    }
    for (; i < n; i++)
        if (dist[i] <= t) out[m++] = (uint32_t)i;
    return m;
}

__attribute__((target("avx2,fma"))) static float dot_avx2(const float *a, const float *b, size_t n)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    for (size_t i = 0; i < n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    __m256 s = _mm256_add_ps(s0, s1);
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));
    return _mm_cvtss_f32(h);
}

__attribute__((target("avx2"))) static int32_t dot_i8_avx2(const int8_t *a, const int8_t *b,
                                                           size_t n)
{
    __m256i s = _mm256_setzero_si256();
    for (size_t i = 0; i < n; i += 16) {
        __m256i x = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(a + i)));
        __m256i y = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + i)));
        s = _mm256_add_epi32(s, _mm256_madd_epi16(x, y));
    }
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xB1));
    return _mm_cvtsi128_si32(h);
}

__attribute__((target("avx512f"))) static float dot_avx512(const float *a, const float *b, size_t n)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
    }
    if (i < n) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

__attribute__((target("avx512f,avx512bw"))) static int32_t dot_i8_avx512(const int8_t *a,
                                                                         const int8_t *b, size_t n)
{
    __m512i s = _mm512_setzero_si512();
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512i x = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(a + i)));
        __m512i y = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(b + i)));
        s = _mm512_add_epi32(s, _mm512_madd_epi16(x, y));
    }
    int32_t r = _mm512_reduce_add_epi32(s);
    for (; i < n; i++)
        r += (int32_t)a[i] * b[i];
    return r;
}

/* VNNI multiplies unsigned by signed bytes: the row is made unsigned by
 * flipping its sign bits (x + 128), and 128·Σb, summed alongside with a
 * vector of ones, is taken back off. */
__attribute__((target("avx512f,avx512bw,avx512vnni"))) static int32_t
dot_i8_vnni(const int8_t *a, const int8_t *b, size_t n)
{
    const __m512i flip = _mm512_set1_epi8((char)0x80), ones = _mm512_set1_epi8(1);
    __m512i s = _mm512_setzero_si512(), sb = _mm512_setzero_si512();
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512i x = _mm512_xor_si512(_mm512_loadu_si512(a + i), flip);
        __m512i y = _mm512_loadu_si512(b + i);
        s = _mm512_dpbusd_epi32(s, x, y);
        sb = _mm512_dpbusd_epi32(sb, ones, y);
    }
    int32_t r = _mm512_reduce_add_epi32(s) - 128 * _mm512_reduce_add_epi32(sb);
    for (; i < n; i++)
        r += (int32_t)a[i] * b[i];
    return r;
}

static const vec_kernels k_scalar = {"scalar", dot_scalar, dot_i8_scalar, hamming_scalar,
                                     select_scalar};
static const vec_kernels k_avx2 = {"avx2", dot_avx2, dot_i8_avx2, hamming_popcnt, select_scalar};
static const vec_kernels k_avx512 = {"avx512", dot_avx512, dot_i8_avx512, hamming_popcnt,
                                     select_avx512};
static const vec_kernels k_vnni = {"avx512vnni", dot_avx512, dot_i8_vnni, hamming_popcnt,
                                   select_avx512};
static const vec_kernels k_vpopcnt = {"avx512vnni+vpopcntdq", dot_avx512, dot_i8_vnni,
                                      hamming_vpopcnt, select_avx512};

/* What the processor and the kernel support, asked with cpuid (and xgetbv:
 * the kernel must save the wide registers) the first time a kernel is
 * chosen. Not __builtin_cpu_supports: it brings libgcc's start-up
 * constructor, whose dozen cpuid instructions (each a trap to the
 * hypervisor in a virtual machine) every process paid, vectors or not. */
enum { F_AVX2 = 1, F_AVX512 = 2, F_VNNI = 4, F_VPOPCNT = 8, F_KNOWN = 16 };

static unsigned cpu_features(void)
{
    static atomic_uint known;
    unsigned f = atomic_load_explicit(&known, memory_order_relaxed);
    if (f) return f;
    f = F_KNOWN;
    unsigned a, b, c, d;
    if (__get_cpuid(1, &a, &b, &c, &d) && (c & bit_OSXSAVE)) {
        bool fma = c & bit_FMA, popcnt = c & bit_POPCNT;
        unsigned lo, hi;
        __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        bool ymm = (lo & 0x6) == 0x6, zmm = (lo & 0xe6) == 0xe6;
        if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
            if (ymm && fma && popcnt && (b & bit_AVX2)) f |= F_AVX2;
            if (zmm && popcnt && (b & bit_AVX512F) && (b & bit_AVX512BW)) f |= F_AVX512;
            if ((f & F_AVX512) && (c & bit_AVX512VNNI)) f |= F_VNNI;
            if ((f & F_VNNI) && (c & bit_AVX512VPOPCNTDQ)) f |= F_VPOPCNT;
        }
    }
    atomic_store_explicit(&known, f, memory_order_relaxed);
    return f;
}

static bool has_avx2(void)
{
    return cpu_features() & F_AVX2;
}

static bool has_avx512(void)
{
    return cpu_features() & F_AVX512;
}

static bool has_vnni(void)
{
    return cpu_features() & F_VNNI;
}

static bool has_vpopcnt(void)
{
    return cpu_features() & F_VPOPCNT;
}

const vec_kernels *cm_vec_kernels_best(void)
{
    return has_vpopcnt()  ? &k_vpopcnt
           : has_vnni()   ? &k_vnni
           : has_avx512() ? &k_avx512
           : has_avx2()   ? &k_avx2
                          : &k_scalar;
}

size_t cm_vec_kernels_all(const vec_kernels **out, size_t max)
{
    size_t n = 0;
    if (n < max) out[n++] = &k_scalar;
    if (n < max && has_avx2()) out[n++] = &k_avx2;
    if (n < max && has_avx512()) out[n++] = &k_avx512;
    if (n < max && has_vnni()) out[n++] = &k_vnni;
    if (n < max && has_vpopcnt()) out[n++] = &k_vpopcnt;
    return n;
}
