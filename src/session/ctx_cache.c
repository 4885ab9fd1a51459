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
    int hnext;        /* slot + 1 of the next in its hash chain, or of the next free slot (0: none) */
    int newer, older; /* the recency list's neighbours (-1: none) */
} ctx_ent;

/* Entries are found by their path's hash (chains through hnext) and kept in
 * order of use (g_newest first, through newer/older), so a look-up and an
 * eviction cost the same with 4 entries or CTX_CACHE_MAX. */
#define HASH_SLOTS (2 * CTX_CACHE_MAX)

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* guards every static below */
static ctx_ent g_ent[CTX_CACHE_MAX];
static int g_hash[HASH_SLOTS]; /* slot + 1 of each chain's first entry (0: none) */
static int g_newest = -1, g_oldest = -1;
static int g_fresh;     /* slots from here on were never used */
static int g_free;      /* slot + 1 of the first freed slot (0: none; linked by hnext) */
static int64_t g_bytes; /* the text of every entry's records */
static ctx_cache_stats g_st;

void cm_ctx_cache_stats_get(ctx_cache_stats *out)
{
    pthread_mutex_lock(&g_mu);
    *out = g_st;
    pthread_mutex_unlock(&g_mu);
}

static uint32_t hash_of(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h % HASH_SLOTS;
}

/* Under g_mu: path's entry, or NULL. */
static ctx_ent *find(const char *path)
{
    for (int i = g_hash[hash_of(path)]; i; i = g_ent[i - 1].hnext)
        if (!strcmp(g_ent[i - 1].path, path)) return &g_ent[i - 1];
    return NULL;
}

static void unlink_use(ctx_ent *e)
{
    if (e->newer >= 0)
        g_ent[e->newer].older = e->older;
    else
        g_newest = e->older;
    if (e->older >= 0)
        g_ent[e->older].newer = e->newer;
    else
        g_oldest = e->newer;
    e->newer = e->older = -1;
}

/* e (not in the recency list) becomes its most recently used. */
static void link_newest(ctx_ent *e)
{
    int i = (int)(e - g_ent);
    e->newer = -1;
    e->older = g_newest;
    if (g_newest >= 0) g_ent[g_newest].newer = i;
    g_newest = i;
    if (g_oldest < 0) g_oldest = i;
}

/* e (in use) becomes the most recently used. */
static void touch(ctx_ent *e)
{
    if (g_newest == (int)(e - g_ent)) return;
    unlink_use(e);
    link_newest(e);
}

/* Empties e's slot (nothing when it is free) and frees what it held. */
static void drop(ctx_ent *e)
{
    if (!e->path) return;
    int i = (int)(e - g_ent);
    int *p = &g_hash[hash_of(e->path)];
    while (*p && *p - 1 != i)
        p = &g_ent[*p - 1].hnext;
    if (*p) *p = e->hnext;
    unlink_use(e);
    g_bytes -= e->end - e->from;
    free(e->path);
    json_decref(e->recs);
    memset(e, 0, sizeof *e);
    e->hnext = g_free;
    g_free = i + 1;
}

/* A free slot for path (taking it: in the hash, the most recently used),
 * the least recently used one emptied when every slot is taken. */
static ctx_ent *take(char *path)
{
    int i;
    if (g_free) {
        i = g_free - 1;
        g_free = g_ent[i].hnext;
    } else if (g_fresh < CTX_CACHE_MAX) {
        i = g_fresh++;
    } else {
        i = g_oldest;
        drop(&g_ent[i]);
        g_free = g_ent[i].hnext;
    }
    ctx_ent *e = &g_ent[i];
    memset(e, 0, sizeof *e);
    e->path = path;
    uint32_t h = hash_of(path);
    e->hnext = g_hash[h];
    g_hash[h] = i + 1;
    link_newest(e);
    return e;
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

/* Once the transcripts kept hold CTX_CACHE_TOTAL of text, one new transcript
 * in ADMIT_WHEN_FULL is let in (the least recently used going to make room),
 * the others are read without being kept. Conversations taken in rotation
 * that outnumber what fits then still find most of what is kept (about the
 * share that fits), where letting each in would drop the very one whose turn
 * comes next and nothing would ever be found; a new set of busy
 * conversations still replaces an old one, more slowly. */
#define ADMIT_WHEN_FULL 8
static uint32_t g_declined; /* new transcripts not let in since the cache filled */

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
    bool admit = recs && !e &&
                 (g_bytes + (end - from) <= (int64_t)CTX_CACHE_TOTAL ||
                  ++g_declined % ADMIT_WHEN_FULL == 0);
    if (admit) { /* a free slot, or the least recently used */
        char *p = cm_strdup(path);
        e = p ? take(p) : NULL;
    }
    if (e) {
        g_bytes -= e->end - e->from;
        json_decref(e->recs);
        e->dev = st->st_dev;
        e->ino = st->st_ino;
        e->from = from;
        e->end = end;
        e->tail_len = tail_len;
        memcpy(e->tail, tail, tail_len);
        e->recs = json_incref(recs);
        touch(e);
        g_bytes += end - from;
    }
    while (g_bytes > (int64_t)CTX_CACHE_TOTAL && g_oldest >= 0 &&
           &g_ent[g_oldest] != e) /* the least recently used others go */
        drop(&g_ent[g_oldest]);
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
        touch(e);
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
