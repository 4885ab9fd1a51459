/*
 * static_model.c — reading, writing and applying the static word-vector model
 * of static_model.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
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

void cm_static_model_close(static_model *m)
{
    if (m->map) munmap((void *)m->map, m->size);
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

cm_rc cm_static_model_open(static_model *m, const char *path, char *err, size_t errlen)
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
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
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
        m->slots < m->words || need != m->size) {
        cm_static_model_close(m);
        return cm_seterr(err, errlen, CM_ECORRUPT,
                         "%s: not a clawmem static model, or damaged (rebuild it with "
                         "scripts/install-static-model.sh)",
                         path);
    }
    if (crc(h + HEADER, m->size - HEADER) != m->checksum) {
        cm_static_model_close(m);
        return cm_seterr(err, errlen, CM_ECORRUPT, "%s: checksum mismatch (damaged file)", path);
    }
    m->table = (const uint32_t *)(h + HEADER);
    m->offsets = m->table + m->slots;
    m->rows = (const uint8_t *)(m->offsets + m->words);
    m->pool = (const char *)(m->rows + (size_t)m->words * row_bytes(m->dims));
    return CM_OK;
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
