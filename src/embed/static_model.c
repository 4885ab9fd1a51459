/*
 * static_model.c — reading, writing and applying the static word-vector model
 * of static_model.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/buf.h"
#include "static_model.h"

#define HEADER 64
#define SIF_A 1e-3

static uint64_t fnv(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

/* A checksum against damage, 8 bytes a step (a 44 MB model in ~5 ms). */
static uint32_t crc(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ull, w;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 1099511628211ull;
        h ^= h >> 29;
    }
    for (; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return (uint32_t)(h ^ (h >> 32));
}

static size_t row_bytes(uint32_t dims)
{
    return dims + 8;
}

/* The process's mappings, one a model file (by device, inode, size and
 * mtime), counted by users: every engine, view and provider of a process
 * reads one mapping of a file instead of mapping its 44 MB again. The mutex
 * guards the table only; open, fstat and mmap run outside it. */
#define MAPS_MAX 8
typedef struct model_map {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    const uint8_t *map;
    size_t refs;
} model_map;
static model_map maps[MAPS_MAX];
static pthread_mutex_t maps_mu = PTHREAD_MUTEX_INITIALIZER;

static bool same_file(const model_map *e, const struct stat *st)
{
    return e->refs && e->dev == st->st_dev && e->ino == st->st_ino && e->size == st->st_size &&
           e->mtime.tv_sec == st->st_mtim.tv_sec && e->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

/* A mapping of fd's file (st): the process's one, or a new one entered in
 * the table (kept private when the table is full); MAP_FAILED on failure. */
static const uint8_t *map_shared(int fd, const struct stat *st)
{
    pthread_mutex_lock(&maps_mu);
    for (size_t i = 0; i < MAPS_MAX; i++)
        if (same_file(&maps[i], st)) {
            maps[i].refs++;
            pthread_mutex_unlock(&maps_mu);
            return maps[i].map;
        }
    pthread_mutex_unlock(&maps_mu);
    void *map = mmap(NULL, (size_t)st->st_size, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) return map;
    const uint8_t *use = map;
    pthread_mutex_lock(&maps_mu);
    model_map *free_slot = NULL;
    for (size_t i = 0; i < MAPS_MAX && use == map; i++) {
        if (same_file(&maps[i], st)) { /* another thread mapped it meanwhile */
            maps[i].refs++;
            use = maps[i].map;
        } else if (!maps[i].refs && !free_slot) {
            free_slot = &maps[i];
        }
    }
    if (use == map && free_slot)
        *free_slot = (model_map){st->st_dev, st->st_ino, st->st_size, st->st_mtim, map, 1};
    pthread_mutex_unlock(&maps_mu);
    if (use != map) munmap(map, (size_t)st->st_size);
    return use;
}

void cm_static_model_close(static_model *m)
{
    if (m->map) {
        bool unmap = true;
        pthread_mutex_lock(&maps_mu);
        for (size_t i = 0; i < MAPS_MAX; i++)
            if (maps[i].refs && maps[i].map == m->map) {
                unmap = --maps[i].refs == 0;
                break;
            }
        pthread_mutex_unlock(&maps_mu);
        if (unmap) munmap((void *)m->map, m->size);
    }
    memset(m, 0, sizeof *m);
}

cm_rc cm_static_model_peek(const char *path, uint32_t *dims, uint32_t *words, uint32_t *checksum,
                           char *err, size_t errlen)
{
    uint8_t h[HEADER];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return cm_seterr(err, errlen, errno == ENOENT ? CM_ENOTFOUND : CM_EIO, "%s: %s", path,
                         strerror(errno));
    ssize_t r = pread(fd, h, HEADER, 0);
    close(fd);
    uint32_t version = 0;
    if (r == HEADER) memcpy(&version, h + 8, 4);
    if (r != HEADER || memcmp(h, "CMSTATIC", 8) != 0 || version != 2)
        return cm_seterr(err, errlen, CM_ECORRUPT, "%s: not a clawmem static model", path);
    memcpy(dims, h + 12, 4);
    memcpy(words, h + 16, 4);
    memcpy(checksum, h + 32, 4);
    return CM_OK;
}

/* Maps the model and checks its header and sizes; the checksum too when
 * check is set (it reads all 44 MB). */
static cm_rc map_model(static_model *m, const char *path, bool check, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return cm_seterr(err, errlen, errno == ENOENT ? CM_ENOTFOUND : CM_EIO, "%s: %s", path,
                         strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0 || st.st_size < HEADER) {
        close(fd);
        return cm_seterr(err, errlen, CM_ECORRUPT, "%s: not a clawmem static model (too short)", path);
    }
    const uint8_t *map = map_shared(fd, &st);
    close(fd);
    if (map == MAP_FAILED) return cm_seterr(err, errlen, CM_EIO, "%s: %s", path, strerror(errno));
    m->map = map;
    m->size = (size_t)st.st_size;
    const uint8_t *h = m->map;
    uint32_t version;
    memcpy(&version, h + 8, 4);
    memcpy(&m->dims, h + 12, 4);
    memcpy(&m->words, h + 16, 4);
    memcpy(&m->slots, h + 20, 4);
    memcpy(&m->pool_bytes, h + 24, 8);
    memcpy(&m->checksum, h + 32, 4);
    uint64_t need = HEADER + (uint64_t)m->slots * 4 + (uint64_t)m->words * 4 +
                    (uint64_t)m->words * row_bytes(m->dims) + m->pool_bytes;
    if (memcmp(h, "CMSTATIC", 8) != 0 || version != 2 || !m->dims || m->dims > 4096 || !m->words ||
        m->slots < m->words || !m->pool_bytes || need != m->size) {
        cm_static_model_close(m);
        return cm_seterr(err, errlen, CM_ECORRUPT,
                         "%s: not a clawmem static model, or damaged (rebuild it with "
                         "scripts/install-static-model.sh)",
                         path);
    }
    if (check && crc(h + HEADER, m->size - HEADER) != m->checksum) {
        cm_static_model_close(m);
        return cm_seterr(err, errlen, CM_ECORRUPT, "%s: checksum mismatch (damaged file)", path);
    }
    m->table = (const uint32_t *)(h + HEADER);
    m->offsets = m->table + m->slots;
    m->rows = (const uint8_t *)(m->offsets + m->words);
    m->pool = (const char *)(m->rows + (size_t)m->words * row_bytes(m->dims));
    if (m->pool[m->pool_bytes - 1] != 0) { /* every lookup's strncmp ends in the pool */
        cm_static_model_close(m);
        return cm_seterr(err, errlen, CM_ECORRUPT, "%s: damaged word list", path);
    }
    return CM_OK;
}

cm_rc cm_static_model_map(static_model *m, const char *path, char *err, size_t errlen)
{
    return map_model(m, path, false, err, errlen);
}

cm_rc cm_static_model_open(static_model *m, const char *path, char *err, size_t errlen)
{
    return map_model(m, path, true, err, errlen);
}

static int64_t lookup(const static_model *m, const char *w, size_t n)
{
    uint64_t i = fnv(w, n) % m->slots;
    for (uint32_t probes = 0; probes < m->slots; probes++) {
        uint32_t e = m->table[i];
        if (!e || e > m->words) return -1;
        uint32_t off = m->offsets[e - 1];
        if (off < m->pool_bytes && strncmp(m->pool + off, w, n) == 0 && m->pool[off + n] == 0)
            return e - 1;
        i = (i + 1) % m->slots;
    }
    return -1;
}

int64_t cm_static_model_lookup(const static_model *m, const char *w, size_t n)
{
    return n && n < 64 ? lookup(m, w, n) : -1;
}

const char *cm_static_model_word(const static_model *m, uint32_t i)
{
    uint32_t off = i < m->words ? m->offsets[i] : UINT32_MAX;
    return off < m->pool_bytes ? m->pool + off : "";
}

/* The int8 dot product of two rows and a row's squared length. */
static int32_t dot8(const int8_t *a, const int8_t *b, uint32_t dims)
{
    int32_t s = 0;
    for (uint32_t d = 0; d < dims; d++) s += (int32_t)a[d] * (int32_t)b[d];
    return s;
}

float cm_static_model_cosine(const static_model *m, uint32_t i, uint32_t j)
{
    if (i >= m->words || j >= m->words) return 0;
    size_t rb = row_bytes(m->dims);
    const int8_t *a = (const int8_t *)(m->rows + i * rb), *b = (const int8_t *)(m->rows + j * rb);
    double na = dot8(a, a, m->dims), nb = dot8(b, b, m->dims);
    return na > 0 && nb > 0 ? (float)(dot8(a, b, m->dims) / sqrt(na * nb)) : 0;
}

size_t cm_static_model_neighbours(const static_model *m, uint32_t i, uint32_t among, size_t k,
                                  float min_cos, uint32_t *idx, float *cos)
{
    if (i >= m->words || !k) return 0;
    if (among > m->words) among = m->words;
    size_t rb = row_bytes(m->dims), n = 0;
    const int8_t *q = (const int8_t *)(m->rows + i * rb);
    double nq = dot8(q, q, m->dims);
    if (nq <= 0) return 0;
    for (uint32_t j = 0; j < among; j++) {
        if (j == i) continue;
        const int8_t *r = (const int8_t *)(m->rows + j * rb);
        int32_t d = dot8(q, r, m->dims);
        if (d <= 0) continue;
        double nr = dot8(r, r, m->dims);
        float c = nr > 0 ? (float)(d / sqrt(nq * nr)) : 0;
        if (c < min_cos || (n == k && c <= cos[n - 1])) continue;
        size_t at = n < k ? n++ : n - 1; /* insertion into the sorted list */
        while (at > 0 && cos[at - 1] < c) {
            cos[at] = cos[at - 1];
            idx[at] = idx[at - 1];
            at--;
        }
        cos[at] = c;
        idx[at] = j;
    }
    return n;
}

/* English suffixes for a word's family: a root is the word less one of them,
 * a candidate is a root plus one of them ("allergies" → allerg → allergic).
 * Each candidate is a lookup, a page fault or two in a cold process, so
 * words under MIN_WORD letters have no family. */
static const char *const suffixes[] = {
    "",      "s",    "es",    "e",    "ed",   "d",     "ing",  "er",  "ers", "y",
    "ies",   "ied",  "ic",    "ics",  "ical", "al",    "ally", "ly",  "ion", "ions",
    "ation", "ment", "ments", "ness", "ity",  "ities", "ist",  "ists", "ism", "ive",
    "age",   "ous",  "ful",   "en",   "able", "ically", "ations"};
#define NSUFFIX (sizeof suffixes / sizeof *suffixes)
#define MIN_ROOT 3
#define MIN_WORD 4

static bool has_variant(const static_variant *v, size_t n, const char *text)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].text, text) == 0) return true;
    return false;
}

/* Adds text to v (n of cap) when new, keeping v sorted by cosine, best first;
 * '-' in text becomes a space (a phrase of its parts). */
static void add_variant(static_variant *v, size_t *n, size_t cap, const char *text, float cos,
                        bool morph)
{
    static_variant x = {{0}, cos, morph};
    size_t len = strlen(text);
    if (len >= sizeof x.text) return;
    for (size_t i = 0; i < len; i++)
        x.text[i] = text[i] == '-' ? ' ' : text[i];
    if (has_variant(v, *n, x.text)) return;
    if (*n == cap && (!cap || v[cap - 1].cos >= cos)) return;
    size_t at = *n < cap ? (*n)++ : cap - 1;
    while (at > 0 && v[at - 1].cos < cos) {
        v[at] = v[at - 1];
        at--;
    }
    v[at] = x;
}

static bool plain_word(const char *w, size_t n, bool spaces)
{
    for (size_t i = 0; i < n; i++)
        if (!((w[i] >= 'a' && w[i] <= 'z') || (w[i] >= '0' && w[i] <= '9') ||
              (spaces && w[i] == ' ')))
            return false;
    return n > 0;
}

size_t cm_static_model_variants(const static_model *m, const char *w, size_t n,
                                const static_variant_opts *o, static_variant *out, size_t cap)
{
    size_t nv = 0;
    char cand[64];
    if (!m->map || !cap || n < MIN_ROOT || n >= sizeof cand - 8 || !plain_word(w, n, true))
        return 0;
    if (memchr(w, ' ', n)) { /* "wi fi": the joined word, when the model knows it */
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (w[i] != ' ') cand[k++] = w[i];
        int64_t j = lookup(m, cand, k);
        if (j >= 0) {
            cand[k] = 0;
            add_variant(out, &nv, cap, cand, 1.0f, true);
        }
        return nv;
    }
    if (n < MIN_WORD) return 0;
    int64_t self = lookup(m, w, n);
    if (self < 0) return 0;
    /* hyphenated forms the model knows: wifi → wi-fi */
    for (size_t i = 2; i + 2 <= n; i++) {
        memcpy(cand, w, i);
        cand[i] = '-';
        memcpy(cand + i + 1, w + i, n - i);
        cand[n + 1] = 0;
        int64_t j = lookup(m, cand, n + 1);
        float c = j >= 0 ? cm_static_model_cosine(m, (uint32_t)self, (uint32_t)j) : 0;
        if (j >= 0 && c >= o->min_cos_morph) add_variant(out, &nv, cap, cand, c, true);
    }
    /* the word's family: roots × suffixes */
    for (size_t r = 0; r < NSUFFIX; r++) {
        size_t sl = strlen(suffixes[r]);
        if (n < sl + MIN_ROOT || memcmp(w + n - sl, suffixes[r], sl) != 0) continue;
        size_t rl = n - sl;
        for (size_t a = 0; a < NSUFFIX; a++) {
            size_t al = strlen(suffixes[a]);
            if (a == r || rl + al >= sizeof cand) continue;
            memcpy(cand, w, rl);
            memcpy(cand + rl, suffixes[a], al + 1);
            int64_t j = lookup(m, cand, rl + al);
            if (j < 0 || j == self || (o->among && (uint64_t)j >= o->among)) continue;
            float c = cm_static_model_cosine(m, (uint32_t)self, (uint32_t)j);
            if (c >= o->min_cos_morph) add_variant(out, &nv, cap, cand, c, true);
        }
    }
    /* the nearest words */
    if (o->neighbours > 0) {
        uint32_t idx[32];
        float cos[32];
        size_t want = o->neighbours + nv < 32 ? o->neighbours + nv : 32;
        size_t k = cm_static_model_neighbours(m, (uint32_t)self, o->among ? o->among : m->words, want, o->min_cos,
                                              idx, cos);
        size_t added = 0;
        for (size_t i = 0; i < k && added < o->neighbours && nv < cap; i++) {
            const char *t = cm_static_model_word(m, idx[i]);
            size_t before = nv;
            if (strlen(t) < sizeof cand && plain_word(t, strlen(t), false))
                add_variant(out, &nv, cap, t, cos[i], false);
            added += nv > before;
        }
    }
    return nv;
}

size_t cm_static_model_embed(const static_model *m, const char *text, float *out)
{
    double acc[4096];
    memset(acc, 0, m->dims * sizeof *acc);
    size_t found = 0;
    char w[64];
    for (const char *p = text; *p;) {
        size_t n = 0;
        while (*p && !((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9'))) p++;
        while (*p && ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '\'')) {
            if (n < sizeof w - 1) w[n++] = (*p >= 'A' && *p <= 'Z') ? (char)(*p + 32) : *p;
            p++;
        }
        if (!n) continue;
        int64_t k = lookup(m, w, n);
        if (k < 0) continue;
        const uint8_t *row = m->rows + (size_t)k * row_bytes(m->dims);
        float scale, weight;
        memcpy(&scale, row + m->dims, 4);
        memcpy(&weight, row + m->dims + 4, 4);
        for (uint32_t d = 0; d < m->dims; d++) acc[d] += (double)((const int8_t *)row)[d] * scale * weight;
        found++;
    }
    double ss = 0;
    for (uint32_t d = 0; d < m->dims; d++) ss += acc[d] * acc[d];
    double inv = ss > 0 ? 1.0 / sqrt(ss) : 0;
    for (uint32_t d = 0; d < m->dims; d++) out[d] = (float)(acc[d] * inv);
    return found;
}

cm_rc cm_static_model_write(const char *path, const char *const *words, const float *vectors,
                            uint32_t n, uint32_t dims, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    uint32_t slots = n * 2 + 1;
    buf b = BUF_INIT, tmp = BUF_INIT, pool = BUF_INIT;
    uint32_t *table = calloc(slots, 4), *offsets = calloc(n ? n : 1, 4);
    if (!table || !offsets) CHECK(CM_ENOMEM);
    for (uint32_t i = 0; i < n; i++) {
        offsets[i] = (uint32_t)pool.len;
        CHECK(cm_buf_add(&pool, words[i], strlen(words[i]) + 1));
        uint64_t h = fnv(words[i], strlen(words[i])) % slots;
        while (table[h]) h = (h + 1) % slots;
        table[h] = i + 1;
    }
    uint8_t header[HEADER] = {0};
    CHECK(cm_buf_add(&b, header, HEADER));
    CHECK(cm_buf_add(&b, table, (size_t)slots * 4));
    CHECK(cm_buf_add(&b, offsets, (size_t)n * 4));
    for (uint32_t i = 0; i < n; i++) {
        const float *v = vectors + (size_t)i * dims;
        float mx = 0;
        for (uint32_t d = 0; d < dims; d++) mx = fmaxf(mx, fabsf(v[d]));
        float scale = mx > 0 ? mx / 127.0f : 1.0f;
        for (uint32_t d = 0; d < dims; d++) {
            int8_t q = (int8_t)lrintf(v[d] / scale);
            CHECK(cm_buf_add(&b, &q, 1));
        }
        /* SIF: a / (a + p(w)), p from the frequency rank by Zipf's law */
        double p = 1.0 / ((double)(i + 1) * log(1.78 * (double)n));
        float weight = (float)(SIF_A / (SIF_A + p));
        CHECK(cm_buf_add(&b, &scale, 4));
        CHECK(cm_buf_add(&b, &weight, 4));
    }
    CHECK(cm_buf_add(&b, pool.data, pool.len));
    uint32_t version = 2;
    uint64_t pool_bytes = pool.len;
    uint32_t sum = crc((const uint8_t *)b.data + HEADER, b.len - HEADER);
    memcpy(b.data, "CMSTATIC", 8);
    memcpy(b.data + 8, &version, 4);
    memcpy(b.data + 12, &dims, 4);
    memcpy(b.data + 16, &n, 4);
    memcpy(b.data + 20, &slots, 4);
    memcpy(b.data + 24, &pool_bytes, 8);
    memcpy(b.data + 32, &sum, 4);
    CHECK(cm_buf_printf(&tmp, "%s.tmp-%ld", path, (long)getpid()));
    FILE *f = fopen(tmp.data, "wb");
    if (!f) FAIL(CM_EIO, "%s: %s", tmp.data, strerror(errno));
    size_t wr = fwrite(b.data, 1, b.len, f);
    if (fclose(f) != 0 || wr != b.len) FAIL(CM_EIO, "%s: write failed", tmp.data);
    if (rename(tmp.data, path) < 0) FAIL(CM_EIO, "rename %s: %s", tmp.data, strerror(errno));
out:
    if (rc && tmp.len) unlink(tmp.data);
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    cm_buf_release(&pool);
    cm_buf_release(&b);
    cm_buf_release(&tmp);
    free(table);
    free(offsets);
    return rc;
}
