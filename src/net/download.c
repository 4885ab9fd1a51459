/*
 * download.c — cm_net_model_resolve(): "hf:" specs to cache files, downloaded by
 * cm_http_fetch_run() into "<final>.part" under an flock, resumed with Range,
 * size-checked, fsynced and renamed into place (contract in download.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../base/fs.h"
#include "../base/sha256.h"
#include "download.h"
#include "http.h"
#include "../base/caps.h"

#define DL_MAX_FAILS     5                     /* failures in a row without a new byte */
#define DL_MAX_ATTEMPTS  100                   /* attempts in all, progress or not */
#define DL_MAX_BACKOFF   30000                 /* ms */
#define DL_NAME_MAX      240                   /* cache file name, ".part" still fits NAME_MAX */
#define DL_TICK_MS       100                   /* progress at most this often */
#define DL_ERRBODY       CM_CAP_DOWNLOAD_ERROR /* bytes of an error response kept for the message */
#define DL_ERRSHOWN      160                   /* characters of it shown, after redaction */
#define DL_FAIL_WAIT     60000                 /* ms before the first retry of a failed download */
#define DL_FAIL_WAIT_MAX 3600000 /* ms, the longest wait (doubling from DL_FAIL_WAIT) */

/* Why a transfer was stopped from inside a callback. */
enum { STOP_NONE, STOP_CANCEL, STOP_WRITE, STOP_BAD_RANGE, STOP_TOO_LONG };

typedef struct dl {
    const char *url, *part, *final;
    const char *shown;         /* url for messages: no userinfo, no query */
    const cm_strlist *headers; /* of the request, for redaction */
    int fd;
    uint64_t have;                /* bytes in the .part */
    int64_t total;                /* the file's size as announced, -1 unknown */
    char sha[SHA256_HEX_LEN + 1]; /* the file's sha256 as announced (X-Linked-Etag), "" unknown */
    dl_progress_fn progress;
    void *ctx;
    int64_t last_tick_ms;
    /* per attempt */
    bool begun, to_file;
    int stop, write_errno;
    int64_t bad_first; /* the Content-Range start of a refused 206 */
    buf errbody;
} dl;

static void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) < 0 && errno == EINTR) {
    }
}

/* Reports progress unless it did less than DL_TICK_MS ago (or force); false
 * when the caller cancels. */
static bool tick(dl *d, bool force)
{
    if (!d->progress) return true;
    int64_t t = cm_now_ms();
    if (!force && d->last_tick_ms && t - d->last_tick_ms < DL_TICK_MS) return true;
    d->last_tick_ms = t;
    if (d->progress(d->ctx, d->have, d->total > 0 ? (uint64_t)d->total : 0)) {
        d->stop = STOP_CANCEL;
        return false;
    }
    return true;
}

/* ---- specs, URL and cache name ---- */

static bool name_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
}

/* Appends s[0..n) with every byte outside name_char (and '~' when tilde) as %XX. */
static cm_rc add_encoded(buf *b, const char *s, size_t n, bool tilde)
{
    cm_rc rc = CM_OK;
    for (size_t i = 0; i < n && !rc; i++) {
        unsigned char c = (unsigned char)s[i];
        if (name_char((char)c) || (tilde && c == '~'))
            rc = cm_buf_addc(b, (char)c);
        else
            rc = cm_buf_printf(b, "%%%02X", c);
    }
    return rc;
}

typedef struct hf_spec {
    const char *owner, *repo, *path; /* slices of the spec */
    size_t owner_len, repo_len;
} hf_spec;

static cm_rc parse_spec(const char *spec, hf_spec *h, char *err, size_t errlen)
{
    const char *s = spec + 3, *a = strchr(s, '/'), *b = a ? strchr(a + 1, '/') : NULL;
    if (!a || !b || a == s || b == a + 1 || !b[1])
        return cm_seterr(err, errlen, CM_EINVAL,
                         "local.modelPath \"%.200s\": expected hf:<owner>/<repo>/<file>", spec);
    h->owner = s;
    h->owner_len = (size_t)(a - s);
    h->repo = a + 1;
    h->repo_len = (size_t)(b - a - 1);
    h->path = b + 1;
    for (const char *p = s; p < b; p++)
        if (p != a && !name_char(*p))
            return cm_seterr(err, errlen, CM_EINVAL,
                             "local.modelPath \"%.200s\": owner and repo may hold only letters, "
                             "digits, '.', '_' and '-'",
                             spec);
    for (const char *seg = h->path; seg;) {
        const char *end = strchr(seg, '/');
        size_t n = end ? (size_t)(end - seg) : strlen(seg);
        if (n == 0 || (n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
            return cm_seterr(err, errlen, CM_EINVAL,
                             "local.modelPath \"%.200s\": empty, '.' or '..' part in the file path",
                             spec);
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)seg[i] < 0x20 || seg[i] == 0x7f)
                return cm_seterr(err, errlen, CM_EINVAL,
                                 "local.modelPath: control character in the file path");
        seg = end ? end + 1 : NULL;
    }
    return CM_OK;
}

static cm_rc make_url(const hf_spec *h, buf *url)
{
    const char *ep = getenv("CLAWMEM_HF_ENDPOINT");
    if (!ep || !*ep) ep = "https://huggingface.co";
    size_t eplen = strlen(ep);
    while (eplen > 0 && ep[eplen - 1] == '/')
        eplen--;
    cm_rc rc = CM_OK;
    CHECK(cm_buf_add(url, ep, eplen));
    CHECK(cm_buf_addc(url, '/'));
    CHECK(cm_buf_add(url, h->owner, h->owner_len));
    CHECK(cm_buf_addc(url, '/'));
    CHECK(cm_buf_add(url, h->repo, h->repo_len));
    CHECK(cm_buf_adds(url, "/resolve/main"));
    for (const char *seg = h->path; seg;) {
        const char *end = strchr(seg, '/');
        CHECK(cm_buf_addc(url, '/'));
        CHECK(add_encoded(url, seg, end ? (size_t)(end - seg) : strlen(seg), true));
        seg = end ? end + 1 : NULL;
    }
out:
    return rc;
}

/* The cache file's name (see download.h). */
static cm_rc make_name(const hf_spec *h, buf *name)
{
    cm_rc rc = CM_OK;
    const char *id = h->owner; /* "owner/repo/path": the rest of the spec */
    CHECK(cm_buf_adds(name, "hf-"));
    CHECK(add_encoded(name, id, strlen(id), false));
    if (name->len > DL_NAME_MAX) {
        char hex[SHA256_HEX_LEN + 1];
        cm_sha256_hex(id, strlen(id), hex);
        const char *base = strrchr(h->path, '/');
        base = base ? base + 1 : h->path;
        buf tail = BUF_INIT;
        rc = add_encoded(&tail, base, strlen(base), false);
        if (!rc) {
            cm_buf_reset(name);
            rc = cm_buf_printf(name, "hf-%s-%s", hex,
                               tail.len > 100 ? tail.data + tail.len - 100 : tail.data);
        }
        cm_buf_release(&tail);
    }
out:
    return rc;
}

/* ---- the record of a failed download ("<final>.failed") ---- */

typedef struct dl_failure {
    int64_t time_ms; /* unix ms of the last failure */
    long count;      /* failures in a row */
    char reason[400];
} dl_failure;

static int64_t failure_wait_ms(long count)
{
    long shift = CM_MIN(CM_MAX(count, 1) - 1, 16);
    return CM_MIN((int64_t)DL_FAIL_WAIT_MAX, (int64_t)DL_FAIL_WAIT << shift);
}

/* Reads the record; false when there is none (or it is not one of ours). */
static bool failure_read(const char *path, dl_failure *f)
{
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    json_t *t = json_object_get(j, "time"), *c = json_object_get(j, "failures");
    const char *r = json_string_value(json_object_get(j, "reason"));
    bool ok = json_is_integer(t) && json_is_integer(c) && json_integer_value(c) > 0;
    if (ok) {
        f->time_ms = (int64_t)json_integer_value(t);
        f->count = (long)CM_MIN(json_integer_value(c), 1000000);
        snprintf(f->reason, sizeof f->reason, "%s", r ? r : "");
    }
    json_decref(j);
    return ok;
}

/* Written whole (temp + rename): another process may be reading it. Best
 * effort: without the record the next call simply tries again. */
static void failure_write(const char *path, const dl_failure *f)
{
    json_t *j = json_pack("{s:I,s:i,s:s}", "time", (json_int_t)f->time_ms, "failures",
                          (int)f->count, "reason", f->reason);
    buf tmp = BUF_INIT;
    if (j && cm_buf_printf(&tmp, "%s.tmp-%ld", path, (long)getpid()) == CM_OK &&
        json_dump_file(j, tmp.data, JSON_COMPACT) == 0 && rename(tmp.data, path) < 0)
        unlink(tmp.data);
    json_decref(j);
    cm_buf_release(&tmp);
}

/* CM_EIO with the reason when the record says to wait (now_ms within the
 * backoff after the last failure), else CM_OK. */
static cm_rc failure_check(const char *path, const char *url, int64_t now_ms, char *err,
                           size_t errlen)
{
    dl_failure f;
    if (!failure_read(path, &f)) return CM_OK;
    int64_t since = now_ms - f.time_ms, wait = failure_wait_ms(f.count);
    if (since < 0 || since >= wait) return CM_OK; /* due again (or the clock went back) */
    return cm_seterr(err, errlen, CM_EIO,
                     "download of %s failed %ld time%s in a row, the last %llds ago (%s); next "
                     "attempt in %llds (delete %s to try now)",
                     url, f.count, f.count == 1 ? "" : "s", (long long)(since / 1000), f.reason,
                     (long long)((wait - since + 999) / 1000), path);
}

/* ---- the .part and its lock ---- */

static bool same_file(int fd, const char *path)
{
    struct stat a, b;
    return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

/* Opens and locks the .part into d->fd. *done when, once the lock was ours,
 * the final file existed (another download finished it). */
static cm_rc lock_part(dl *d, bool *done, char *err, size_t errlen)
{
    struct stat st;
    *done = false;
    for (;;) {
        int fd = open(d->part, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) return cm_seterr(err, errlen, CM_EIO, "open %s: %s", d->part, strerror(errno));
        while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
            if (errno == EINTR) continue;
            if (errno != EWOULDBLOCK) {
                int e = errno;
                close(fd);
                return cm_seterr(err, errlen, CM_EIO, "lock %s: %s", d->part, strerror(e));
            }
            /* Another process or thread is downloading it: report its progress. */
            if (fstat(fd, &st) == 0) d->have = (uint64_t)st.st_size;
            if (!tick(d, false)) {
                close(fd);
                return cm_seterr(err, errlen, CM_ECANCELED,
                                 "waiting for another download of %s: cancelled", d->shown);
            }
            sleep_ms(DL_TICK_MS);
        }
        if (stat(d->final, &st) == 0) {
            /* Finished meanwhile; an empty .part we just created is litter. */
            struct stat ps;
            if (fstat(fd, &ps) == 0 && ps.st_size == 0 && same_file(fd, d->part)) unlink(d->part);
            close(fd);
            *done = true;
            return CM_OK;
        }
        if (same_file(fd, d->part) && fstat(fd, &st) == 0) {
            d->fd = fd;
            d->have = (uint64_t)st.st_size;
            return CM_OK;
        }
        close(fd); /* renamed or removed while we waited: open the new one */
    }
}

static bool restart_part(dl *d)
{
    if (ftruncate(d->fd, 0) < 0) {
        d->write_errno = errno;
        return false;
    }
    d->have = 0;
    return true;
}

/* ---- one transfer ---- */

/* The response's status and headers are known: decide where its body goes. */
static bool begin(dl *d, const http_fetch *f)
{
    d->begun = true;
    if (f->status == 206) {
        if (f->range_first != (int64_t)d->have) {
            d->bad_first = f->range_first;
            d->stop = STOP_BAD_RANGE;
            return false;
        }
        d->total = f->range_total >= 0      ? f->range_total
                   : f->content_length >= 0 ? (int64_t)d->have + f->content_length
                                            : -1;
        d->to_file = true;
    } else if (f->status == 200) { /* the whole file, Range ignored or not sent */
        if (d->have > 0 && !restart_part(d)) {
            d->stop = STOP_WRITE;
            return false;
        }
        d->total = f->content_length;
        d->to_file = true;
    }
    return true;
}

static bool on_data(http_fetch *f, const char *p, size_t n)
{
    dl *d = f->ctx;
    if (!d->begun && !begin(d, f)) return false;
    if (!d->to_file) { /* an error page: keep its start for the message */
        size_t room = DL_ERRBODY > d->errbody.len ? DL_ERRBODY - d->errbody.len : 0;
        return !room || !cm_buf_add(&d->errbody, p, CM_MIN(n, room)); /* false: out of memory */
    }
    if (d->total >= 0 && d->have + n > (uint64_t)d->total) {
        d->stop = STOP_TOO_LONG;
        return false;
    }
    while (n > 0) {
        ssize_t w = pwrite(d->fd, p, n, (off_t)d->have);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            d->write_errno = w < 0 ? errno : EIO;
            d->stop = STOP_WRITE;
            return false;
        }
        p += w;
        n -= (size_t)w;
        d->have += (uint64_t)w;
    }
    return tick(d, false);
}

static bool on_tick(http_fetch *f)
{
    return tick(f->ctx, false);
}

/* "URL: HTTP 404: <start of the body>" plus a hint, into out. The body is
 * shown after redaction: it may echo our Authorization header. */
static void http_error(const dl *d, long status, char *out, size_t n)
{
    buf body = BUF_INIT;
    if (d->errbody.len)
        cm_http_error_text(d->url, d->headers, d->errbody.data, d->errbody.len, DL_ERRSHOWN, &body);
    const char *hint = status == 401 || status == 403
                           ? " (a gated or private repository: accept its terms on Hugging Face "
                             "and set HF_TOKEN)"
                       : status == 404 ? " (check the owner, repo and file of local.modelPath)"
                                       : "";
    snprintf(out, n, "%s: HTTP %ld%s%s%s", d->shown, status, body.len ? ": " : "",
             body.len ? body.data : "", hint);
    cm_buf_release(&body);
}

static bool is_sha256(const char *s)
{
    size_t n = strspn(s, "0123456789abcdef");
    return n == SHA256_HEX_LEN && s[n] == 0;
}

/* The whole file against the sha256 the server announced. A file that does
 * not match is garbage, not a partial download: it is discarded. */
static cm_rc check_sha(dl *d, char *err, size_t errlen)
{
    char got[SHA256_HEX_LEN + 1];
    void *map = d->have ? mmap(NULL, d->have, PROT_READ, MAP_PRIVATE, d->fd, 0) : NULL;
    if (map == MAP_FAILED)
        return cm_seterr(err, errlen, CM_EIO, "download of %s: mapping %s: %s", d->shown, d->part,
                         strerror(errno));
    cm_sha256_hex(map ? map : "", d->have, got);
    if (map) munmap(map, d->have);
    if (strcmp(got, d->sha) == 0) return CM_OK;
    restart_part(d);
    return cm_seterr(err, errlen, CM_EIO,
                     "%s: the file's sha256 is %s, the server announced %s; download discarded",
                     d->shown, got, d->sha);
}

static cm_rc download(dl *d, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    const char *token = getenv("HF_TOKEN");
    char *auth = NULL;
    cm_strlist hdrs = {&auth, 0};
    if (token && *token) {
        buf a = BUF_INIT;
        if (cm_buf_printf(&a, "Authorization: Bearer %s", token)) FAIL(CM_ENOMEM, "out of memory");
        auth = cm_buf_detach(&a);
        hdrs.n = 1;
    }
    long backoff = cm_http_defaults(0).backoff_ms;
    int fails = 0;
    for (int attempt = 1;; attempt++) {
        uint64_t before = d->have;
        d->begun = d->to_file = false;
        d->stop = STOP_NONE;
        cm_buf_reset(&d->errbody);
        http_fetch f = {0};
        f.url = d->url;
        f.headers = &hdrs;
        d->headers = &hdrs;
        f.range_from = d->have;
        f.on_data = on_data;
        f.on_tick = on_tick;
        f.ctx = d;
        char why[400];
        cm_rc r = cm_http_fetch_run(&f, why, sizeof why);
        if (is_sha256(f.linked_etag)) memcpy(d->sha, f.linked_etag, sizeof d->sha);
        if (r == CM_OK && !d->begun && (f.status == 200 || f.status == 206))
            begin(d, &f); /* an empty body: on_data never ran */
        switch (d->stop) {
        case STOP_CANCEL:
            FAIL(CM_ECANCELED, "download of %s cancelled; %llu bytes kept in %s", d->shown,
                 (unsigned long long)d->have, d->part);
        case STOP_WRITE:
            FAIL(CM_EIO, "download of %s: writing %s: %s", d->shown, d->part,
                 strerror(d->write_errno));
        case STOP_TOO_LONG:
            restart_part(d);
            FAIL(CM_EIO,
                 "%s: the server sent more than the %lld bytes it announced; download "
                 "discarded",
                 d->shown, (long long)d->total);
        case STOP_BAD_RANGE:
            snprintf(why, sizeof why, "%s: asked for bytes from %llu, the server sent from %lld",
                     d->shown, (unsigned long long)d->have, (long long)d->bad_first);
            if (!restart_part(d))
                FAIL(CM_EIO, "download of %s: truncating %s: %s", d->shown, d->part,
                     strerror(d->write_errno));
            f.retryable = true;
            r = CM_EIO;
            break;
        default:
            break;
        }
        if (r == CM_OK && (f.status == 200 || f.status == 206)) {
            if (d->total >= 0 && d->have != (uint64_t)d->total)
                FAIL(CM_EIO,
                     "%s: size mismatch, have %llu of the %lld bytes announced; %s is kept for a "
                     "later resume",
                     d->shown, (unsigned long long)d->have, (long long)d->total, d->part);
            break;
        }
        if (r == CM_OK && f.status == 416 && d->have > 0) {
            /* Nothing past our end: complete if the server's size is ours. */
            if (f.range_total == (int64_t)d->have) {
                d->total = f.range_total;
                break;
            }
            snprintf(why, sizeof why, "%s: HTTP 416 for bytes from %llu (size %lld)", d->shown,
                     (unsigned long long)d->have, (long long)f.range_total);
            if (!restart_part(d))
                FAIL(CM_EIO, "download of %s: truncating %s: %s", d->shown, d->part,
                     strerror(d->write_errno));
            f.retryable = true;
            r = CM_EIO;
        } else if (r == CM_OK) {
            http_error(d, f.status, why, sizeof why);
        }
        fails = d->have > before ? 0 : fails + 1;
        if (!f.retryable || fails >= DL_MAX_FAILS || attempt >= DL_MAX_ATTEMPTS) {
            char tries[32] = "";
            if (attempt > 1) snprintf(tries, sizeof tries, " (after %d attempts)", attempt);
            if (d->have > 0)
                FAIL(CM_EIO, "%s%s; %llu bytes kept in %s for a later resume", why, tries,
                     (unsigned long long)d->have, d->part);
            FAIL(CM_EIO, "%s%s", why, tries);
        }
        /* Back off, still answering to cancellation. */
        long delay = CM_MIN((long)DL_MAX_BACKOFF, backoff << CM_MIN(CM_MAX(fails, 1) - 1, 10));
        for (int64_t until = cm_now_ms() + delay; cm_now_ms() < until;) {
            if (!tick(d, false))
                FAIL(CM_ECANCELED, "download of %s cancelled; %llu bytes kept in %s", d->shown,
                     (unsigned long long)d->have, d->part);
            sleep_ms(CM_MIN((long)DL_TICK_MS, (long)(until - cm_now_ms()) + 1));
        }
    }
    d->total = (int64_t)d->have;
    if (!tick(d, true))
        FAIL(CM_ECANCELED, "download of %s cancelled; %llu bytes kept in %s", d->shown,
             (unsigned long long)d->have, d->part);
    if (d->sha[0]) CHECK(check_sha(d, err, errlen));
    if (fsync(d->fd) < 0)
        FAIL(CM_EIO, "download of %s: fsync %s: %s", d->shown, d->part, strerror(errno));
    if (rename(d->part, d->final) < 0)
        FAIL(CM_EIO, "download of %s: rename %s: %s", d->shown, d->part, strerror(errno));
    cm_fs_sync_dir(d->final);
out:
    free(auth);
    return rc;
}

cm_rc cm_net_model_resolve(const char *spec, const char *cache_dir, bool fetch,
                           dl_progress_fn progress, void *ctx, char **path_out, char *err,
                           size_t errlen)
{
    return cm_net_model_resolve_at(spec, cache_dir, fetch, 0, progress, ctx, path_out, err, errlen);
}

cm_rc cm_net_model_resolve_at(const char *spec, const char *cache_dir, bool fetch, int64_t now_ms,
                              dl_progress_fn progress, void *ctx, char **path_out, char *err,
                              size_t errlen)
{
    cm_rc rc = CM_OK;
    buf url = BUF_INIT, name = BUF_INIT, final = BUF_INIT, part = BUF_INIT, shown = BUF_INIT,
        failed = BUF_INIT;
    char *dir = NULL;
    hf_spec h = {0};
    dl d = {0};
    d.fd = -1;
    d.total = -1;
    cm_buf_init(&d.errbody, 0);
    *path_out = NULL;
    if (!spec || !*spec) FAIL(CM_EINVAL, "local.modelPath is empty");
    if (strncmp(spec, "hf:", 3) != 0) {
        if (!(*path_out = cm_fs_expand_home(spec))) FAIL(CM_ENOMEM, "out of memory");
        goto out;
    }
    CHECK(parse_spec(spec, &h, err, errlen));
    if (!cache_dir || !*cache_dir)
        FAIL(CM_EINVAL, "no model cache directory for local.modelPath \"%.200s\"", spec);
    if (!(dir = cm_fs_expand_home(cache_dir))) FAIL(CM_ENOMEM, "out of memory");
    if (make_url(&h, &url) || make_name(&h, &name) || cm_fs_join(&final, dir, name.data) ||
        cm_buf_add(&part, final.data, final.len) || cm_buf_adds(&part, ".part") ||
        cm_buf_add(&failed, final.data, final.len) || cm_buf_adds(&failed, ".failed"))
        FAIL(CM_ENOMEM, "out of memory");
    d.url = url.data;
    if (cm_redact_url(url.data, 200, &shown)) FAIL(CM_ENOMEM, "out of memory");
    d.shown = shown.data;
    d.final = final.data;
    d.part = part.data;
    d.progress = progress;
    d.ctx = ctx;
    struct stat st;
    if (stat(d.final, &st) == 0) {
        if (!S_ISREG(st.st_mode)) FAIL(CM_EIO, "model file %s is not a regular file", d.final);
    } else {
        /* A download that failed lately is not tried again before its time:
         * offline, every call would otherwise wait out the retries. */
        if (!now_ms) now_ms = cm_wall_ms();
        CHECK(failure_check(failed.data, d.shown, now_ms, err, errlen));
        if (!fetch)
            FAIL(CM_ENOTFOUND, "model %s is not downloaded yet (from %s)", d.final, d.shown);
        CHECK(cm_fs_mkdirs(dir, err, errlen));
        bool done;
        CHECK(lock_part(&d, &done, err, errlen));
        if (!done) {
            uint64_t start = d.have;
            rc = download(&d, err, errlen);
            /* An empty .part helps no later resume: remove it while it is ours. */
            if (rc && d.have == 0 && same_file(d.fd, d.part)) unlink(d.part);
            /* Remembered only when it brought no byte: a cut download that
             * progressed resumes at the next call. */
            if (rc == CM_EIO && d.have <= start) {
                dl_failure f = {0};
                f.count = failure_read(failed.data, &f) ? f.count + 1 : 1;
                f.time_ms = now_ms;
                snprintf(f.reason, sizeof f.reason, "%s", err);
                failure_write(failed.data, &f);
            }
            if (rc) goto out;
            unlink(failed.data);
        }
    }
    *path_out = cm_buf_detach(&final);
    if (!*path_out) FAIL(CM_ENOMEM, "out of memory");
out:
    if (d.fd >= 0) close(d.fd); /* releases the lock */
    cm_buf_release(&d.errbody);
    cm_buf_release(&url);
    cm_buf_release(&shown);
    cm_buf_release(&name);
    cm_buf_release(&final);
    cm_buf_release(&part);
    cm_buf_release(&failed);
    free(dir);
    return rc;
}
