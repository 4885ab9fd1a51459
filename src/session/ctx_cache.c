/*
 * ctx_cache.c — the parsed model context of each session (ctx_cache.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/buf.h"
#include "ctx_cache.h"
#include "transcript.h"

#define TAIL 64

typedef struct ctx_ent {
    char *path; /* NULL: a free slot */
    dev_t dev;
    ino_t ino;
    int64_t from, end; /* the context's start; the end of the last whole line read */
    unsigned char tail[TAIL]; /* the bytes before end (tail_len of them) */
    size_t tail_len;
    json_t *recs; /* never changed once here: a later read makes a new array */
    uint64_t used;
} ctx_ent;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* guards every static below */
static ctx_ent g_ent[CTX_CACHE_MAX];
static uint64_t g_clock;
static int64_t g_bytes; /* the text of every entry's records */
static ctx_cache_stats g_st;

void cm_ctx_cache_stats_get(ctx_cache_stats *out)
{
    pthread_mutex_lock(&g_mu);
    *out = g_st;
    pthread_mutex_unlock(&g_mu);
}

/* Under g_mu: path's entry, or NULL. */
static ctx_ent *find(const char *path)
{
    for (size_t i = 0; i < CTX_CACHE_MAX; i++)
        if (g_ent[i].path && !strcmp(g_ent[i].path, path)) return &g_ent[i];
    return NULL;
}

static void drop(ctx_ent *e)
{
    if (e->path) g_bytes -= e->end - e->from;
    free(e->path);
    json_decref(e->recs);
    memset(e, 0, sizeof *e);
}

static cm_rc pread_all(int fd, void *p, size_t n, int64_t off)
{
    for (size_t got = 0; got < n;) {
        ssize_t r = pread(fd, (char *)p + got, n - got, (off_t)(off + (int64_t)got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return CM_EIO;
        got += (size_t)r;
    }
    return CM_OK;
}

typedef struct collect {
    json_t *recs;
    int64_t lines;
    bool compaction; /* a compaction record among them */
} collect;

static bool keep(void *ctx, int line, json_t *rec)
{
    (void)line;
    collect *c = ctx;
    const char *t = json_string_value(json_object_get(rec, "type"));
    if (t && !strcmp(t, "compaction")) c->compaction = true;
    c->lines++;
    return json_array_append(c->recs, rec) == 0;
}

/* The whole lines of fd in [from, size) given to keep; *end: after the
 * last one. A line that does not parse as an object is skipped, as
 * cm_transcript_read_from skips it. */
static cm_rc parse_tail(int fd, int64_t from, int64_t size, collect *c, int64_t *end)
{
    cm_rc rc = CM_OK;
    buf b = BUF_INIT;
    *end = from;
    if (size <= from) return CM_OK;
    if (cm_buf_grow(&b, (size_t)(size - from) + 1)) return CM_ENOMEM;
    rc = pread_all(fd, b.data, (size_t)(size - from), from);
    if (rc) goto out;
    b.len = (size_t)(size - from);
    size_t i = 0;
    for (char *nl; (nl = memchr(b.data + i, '\n', b.len - i));) {
        size_t e = (size_t)(nl - b.data);
        if (e > i) {
            json_t *j = json_loadb(b.data + i, e - i, 0, NULL);
            if (json_is_object(j) && !keep(c, 0, j)) rc = CM_ENOMEM;
            json_decref(j);
            if (rc) goto out;
        }
        i = e + 1;
    }
    *end = from + (int64_t)i;
out:
    cm_buf_release(&b);
    return rc;
}

/* Keeps recs for path (a reference taken). */
static void store(const char *path, const struct stat *st, int64_t from, int64_t end,
                  const unsigned char *tail, size_t tail_len, json_t *recs, int64_t reads,
                  int64_t hits, int64_t lines)
{
    pthread_mutex_lock(&g_mu);
    g_st.reads += reads;
    g_st.hits += hits;
    g_st.parsed += lines;
    ctx_ent *e = recs ? find(path) : NULL;
    if (recs && !e) { /* a free slot, or the least recently used */
        e = &g_ent[0];
        for (size_t i = 0; i < CTX_CACHE_MAX && e->path; i++)
            if (!g_ent[i].path || g_ent[i].used < e->used) e = &g_ent[i];
    }
    char *p = e && e->path && !strcmp(e->path, path) ? e->path : NULL;
    if (e) {
        if (!p && !(p = cm_strdup(path))) {
            e = NULL;
        } else {
            if (e->path) g_bytes -= e->end - e->from;
            if (e->path != p) free(e->path);
            json_decref(e->recs);
            *e = (ctx_ent){p,  st->st_dev, st->st_ino, from, end, {0}, tail_len,
                           json_incref(recs), ++g_clock};
            memcpy(e->tail, tail, tail_len);
            g_bytes += end - from;
        }
    }
    while (g_bytes > (int64_t)CTX_CACHE_TOTAL) { /* the least recently used others go */
        ctx_ent *old = NULL;
        for (size_t i = 0; i < CTX_CACHE_MAX; i++)
            if (g_ent[i].path && &g_ent[i] != e && (!old || g_ent[i].used < old->used))
                old = &g_ent[i];
        if (!old) break;
        drop(old);
    }
    pthread_mutex_unlock(&g_mu);
}

static void forget(const char *path)
{
    pthread_mutex_lock(&g_mu);
    ctx_ent *e = find(path);
    if (e) drop(e);
    pthread_mutex_unlock(&g_mu);
}

/* The cached records of path still valid for fd (st), with the lines
 * appended since added, in a new array; NULL: read it again. */
static json_t *from_cache(const char *path, int fd, const struct stat *st, int64_t *from,
                          int64_t *end, unsigned char *tail, size_t *tail_len, int64_t *lines)
{
    pthread_mutex_lock(&g_mu);
    ctx_ent *e = find(path);
    json_t *old = NULL;
    if (e && e->dev == st->st_dev && e->ino == st->st_ino && st->st_size >= e->end &&
        st->st_size - e->end <= (int64_t)CTX_CACHE_BYTES) {
        old = json_incref(e->recs);
        *from = e->from;
        *end = e->end;
        *tail_len = e->tail_len;
        memcpy(tail, e->tail, e->tail_len);
        e->used = ++g_clock;
    }
    pthread_mutex_unlock(&g_mu);
    if (!old) return NULL;
    unsigned char now[TAIL];
    collect c = {json_array(), 0, false};
    int64_t new_end = *end;
    bool ok = c.recs && !pread_all(fd, now, *tail_len, *end - (int64_t)*tail_len) &&
              !memcmp(now, tail, *tail_len);
    for (size_t i = 0; ok && i < json_array_size(old); i++)
        ok = json_array_append(c.recs, json_array_get(old, i)) == 0;
    ok = ok && !parse_tail(fd, *end, st->st_size, &c, &new_end) && !c.compaction;
    json_decref(old);
    if (!ok) {
        json_decref(c.recs);
        return NULL;
    }
    *lines = c.lines;
    if (new_end > *end) { /* the bytes before the new end */
        size_t n = new_end - *from < TAIL ? (size_t)(new_end - *from) : TAIL;
        if (pread_all(fd, tail, n, new_end - (int64_t)n)) {
            json_decref(c.recs);
            return NULL;
        }
        *tail_len = n;
        *end = new_end;
    }
    return c.recs;
}

cm_rc cm_ctx_cache_read(const char *path, size_t max, json_t **out, bool *whole, char *err,
                        size_t errlen)
{
    cm_rc rc = CM_OK;
    struct stat st, after;
    unsigned char tail[TAIL];
    size_t tail_len = 0;
    int64_t from = 0, end = 0, lines = 0;
    collect c = {NULL, 0, false};
    *out = NULL;
    *whole = true;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
    if (fd < 0 && (errno == ENOENT || errno == ENOTDIR)) { /* nothing written yet */
        forget(path);
        *out = json_array();
        return *out ? CM_OK : cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    }
    if (fd < 0) FAIL(CM_EIO, "%s: %s", path, strerror(errno));
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) FAIL(CM_EIO, "%s: not a regular file", path);
    json_t *hit = from_cache(path, fd, &st, &from, &end, tail, &tail_len, &lines);
    if (hit) {
        *out = hit;
        *whole = from == 0;
        bool fits = end - from <= (int64_t)CTX_CACHE_BYTES;
        if (!fits) forget(path);
        store(path, &st, from, end, tail, tail_len, fits ? hit : NULL, 0, 1, lines);
        goto out;
    }
    /* from the context's start, as without the cache */
    if (!(c.recs = json_array())) FAIL(CM_ENOMEM, "out of memory");
    rc = cm_transcript_context_offset(path, &from, err, errlen);
    if (!rc) rc = cm_transcript_read_from(path, from, max, keep, &c, err, errlen);
    if (rc == CM_ENOTFOUND) rc = CM_OK;
    CHECK(rc);
    *whole = from == 0;
    /* kept when the file is still what fd has, and ends with a whole line */
    unsigned char last = 0;
    bool keepit = !stat(path, &after) && after.st_dev == st.st_dev && after.st_ino == st.st_ino &&
                  after.st_size == st.st_size && st.st_size > from &&
                  st.st_size - from <= (int64_t)CTX_CACHE_BYTES &&
                  !pread_all(fd, &last, 1, st.st_size - 1) && last == '\n';
    if (keepit) {
        tail_len = st.st_size - from < TAIL ? (size_t)(st.st_size - from) : TAIL;
        keepit = !pread_all(fd, tail, tail_len, st.st_size - (int64_t)tail_len);
    }
    if (!keepit) forget(path);
    store(path, &st, from, st.st_size, tail, tail_len, keepit ? c.recs : NULL, 1, 0, c.lines);
    *out = c.recs;
    c.recs = NULL;
out:
    if (fd >= 0) close(fd);
    json_decref(c.recs);
    return rc;
}
