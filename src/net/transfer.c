/*
 * transfer.c — the transfer engine of transfer.h on libcurl's multi
 * interface. A call takes a multi handle from the pool (the one returned
 * last: its connection cache is the warmest), runs its fetches on it —
 * retries are scheduled, not slept, so a fetch waiting out its backoff does
 * not hold up the others — and gives it back with its idle connections.
 * The pool's lock guards the list of handles only, never a transfer.
 *
 * libcurl is loaded with dlopen() on first use: linking it costs every
 * process ~12 ms of start-up (its dependencies), which a keyword search or
 * memory_get never needs.
 */
#include <curl/curl.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http_headers.h"
#include "transfer.h"

/* The part of libcurl we use, resolved at run time. */
static struct {
    CURLcode (*global_init)(long);
    CURLM *(*multi_init)(void);
    CURLMcode (*multi_cleanup)(CURLM *);
    CURLMcode (*multi_setopt)(CURLM *, CURLMoption, ...);
    CURLMcode (*multi_add_handle)(CURLM *, CURL *);
    CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
    CURLMcode (*multi_perform)(CURLM *, int *);
    CURLMsg *(*multi_info_read)(CURLM *, int *);
    CURLMcode (*multi_poll)(CURLM *, struct curl_waitfd *, unsigned, int, int *);
    CURLSH *(*share_init)(void);
    CURLSHcode (*share_setopt)(CURLSH *, CURLSHoption, ...);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    const char *(*easy_strerror)(CURLcode);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
} cu;
static char curl_load_error[256];
static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

/* The pool: idle multi handles (LIFO) and the share of DNS and TLS sessions
 * every easy handle uses, with one lock per kind of shared data. */
#define POOL_IDLE_MAX 8   /* idle handles kept; more are closed */
#define POOL_MAX_CONNS 16 /* idle connections one handle keeps */
static struct {
    pthread_mutex_t mu;
    CURLM *idle[POOL_IDLE_MAX];
    size_t n;
    CURLSH *share;
    pthread_mutex_t locks[CURL_LOCK_DATA_LAST];
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void share_lock(CURL *e, curl_lock_data data, curl_lock_access access, void *ud)
{
    (void)e, (void)access, (void)ud;
    if (data >= 0 && data < CURL_LOCK_DATA_LAST) pthread_mutex_lock(&pool.locks[data]);
}

static void share_unlock(CURL *e, curl_lock_data data, void *ud)
{
    (void)e, (void)ud;
    if (data >= 0 && data < CURL_LOCK_DATA_LAST) pthread_mutex_unlock(&pool.locks[data]);
}

static void load_curl(void)
{
    void *h = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(curl_load_error, sizeof curl_load_error,
                 "libcurl.so.4 not found (%s); install it: apt-get install libcurl4", dlerror());
        return;
    }
    struct {
        void **slot;
        const char *name;
    } syms[] = {
        {(void **)&cu.global_init, "curl_global_init"},
        {(void **)&cu.multi_init, "curl_multi_init"},
        {(void **)&cu.multi_cleanup, "curl_multi_cleanup"},
        {(void **)&cu.multi_setopt, "curl_multi_setopt"},
        {(void **)&cu.multi_add_handle, "curl_multi_add_handle"},
        {(void **)&cu.multi_remove_handle, "curl_multi_remove_handle"},
        {(void **)&cu.multi_perform, "curl_multi_perform"},
        {(void **)&cu.multi_info_read, "curl_multi_info_read"},
        {(void **)&cu.multi_poll, "curl_multi_poll"},
        {(void **)&cu.share_init, "curl_share_init"},
        {(void **)&cu.share_setopt, "curl_share_setopt"},
        {(void **)&cu.easy_init, "curl_easy_init"},
        {(void **)&cu.easy_cleanup, "curl_easy_cleanup"},
        {(void **)&cu.easy_setopt, "curl_easy_setopt"},
        {(void **)&cu.easy_getinfo, "curl_easy_getinfo"},
        {(void **)&cu.easy_strerror, "curl_easy_strerror"},
        {(void **)&cu.slist_append, "curl_slist_append"},
        {(void **)&cu.slist_free_all, "curl_slist_free_all"},
    };
    for (size_t i = 0; i < ARRAY_LEN(syms); i++) {
        *syms[i].slot = dlsym(h, syms[i].name);
        if (!*syms[i].slot) {
            snprintf(curl_load_error, sizeof curl_load_error, "libcurl.so.4 lacks %s (too old)",
                     syms[i].name);
            return;
        }
    }
    if (cu.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(curl_load_error, sizeof curl_load_error, "libcurl failed to initialise");
        return;
    }
    for (size_t i = 0; i < ARRAY_LEN(pool.locks); i++)
        pthread_mutex_init(&pool.locks[i], NULL);
    /* Without the share every handle resolves and handshakes on its own:
     * slower, still correct. */
    CURLSH *sh = cu.share_init();
    if (sh && cu.share_setopt(sh, CURLSHOPT_LOCKFUNC, share_lock) == CURLSHE_OK &&
        cu.share_setopt(sh, CURLSHOPT_UNLOCKFUNC, share_unlock) == CURLSHE_OK &&
        cu.share_setopt(sh, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS) == CURLSHE_OK &&
        cu.share_setopt(sh, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION) == CURLSHE_OK)
        pool.share = sh;
}

cm_rc cm_http_engine_ready(char *err, size_t errlen)
{
    pthread_once(&curl_once, load_curl);
    if (curl_load_error[0]) return cm_seterr(err, errlen, CM_EIO, "%s", curl_load_error);
    return CM_OK;
}

static CURLM *pool_take(void)
{
    CURLM *m = NULL;
    pthread_mutex_lock(&pool.mu);
    if (pool.n > 0) m = pool.idle[--pool.n];
    pthread_mutex_unlock(&pool.mu);
    if (m) return m;
    /* libcurl 7.x opens the multi handle's wake-up socketpair without
     * close-on-exec; a pooled handle lives long, so a child process would
     * inherit it. It takes the lowest free descriptors: mark those. */
    int lo = fcntl(0, F_DUPFD_CLOEXEC, 3);
    if (lo >= 0) close(lo);
    if ((m = cu.multi_init())) cu.multi_setopt(m, CURLMOPT_MAXCONNECTS, (long)POOL_MAX_CONNS);
    for (int fd = lo; m && lo >= 0 && fd < lo + 4; fd++) {
        int dom = 0, fl = fcntl(fd, F_GETFD);
        socklen_t dl = sizeof dom;
        if (fl >= 0 && !(fl & FD_CLOEXEC) &&
            getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &dl) == 0 && dom == AF_UNIX)
            fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
    }
    return m;
}

/* Every connection's socket is close-on-exec: a pooled connection outlives
 * the call, and a child process must not inherit it. */
static int on_sockopt(void *ud, curl_socket_t fd, curlsocktype purpose)
{
    (void)ud, (void)purpose;
    int fl = fcntl(fd, F_GETFD);
    if (fl >= 0) fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
    return CURL_SOCKOPT_OK;
}

static void pool_give(CURLM *m)
{
    pthread_mutex_lock(&pool.mu);
    bool kept = pool.n < POOL_IDLE_MAX;
    if (kept) pool.idle[pool.n++] = m;
    pthread_mutex_unlock(&pool.mu);
    if (!kept) cu.multi_cleanup(m);
}

void cm_http_pool_drain(void)
{
    if (curl_load_error[0] || !cu.multi_cleanup) return;
    CURLM *gone[POOL_IDLE_MAX];
    pthread_mutex_lock(&pool.mu);
    size_t n = pool.n;
    memcpy(gone, pool.idle, n * sizeof *gone);
    pool.n = 0;
    pthread_mutex_unlock(&pool.mu);
    for (size_t i = 0; i < n; i++)
        cu.multi_cleanup(gone[i]);
}

/* ---- one fetch ---- */

#define DISCARD_MAX (64 * 1024) /* body of an answer to retry read before dropping it */

typedef struct job {
    http_fetch *f;
    CURL *easy;
    struct curl_slist *hdrs;
    http_meta meta;
    int64_t not_before_ms; /* when the next attempt may start */
    int64_t tick_ms;       /* last on_tick while waiting */
    bool active, done;
    bool aborted;   /* a callback of the caller said stop */
    bool started;   /* this attempt's body began */
    bool discard;   /* ...and it is the answer of a fetch to retry */
    bool delivered; /* bytes went to on_data (this attempt or an earlier one) */
    size_t discarded;
    cm_rc rc;
    char cerr[CURL_ERROR_SIZE];
} job;

static bool net_retryable(CURLcode cc)
{
    return cc == CURLE_COULDNT_CONNECT || cc == CURLE_OPERATION_TIMEDOUT ||
           cc == CURLE_GOT_NOTHING || cc == CURLE_RECV_ERROR || cc == CURLE_SEND_ERROR ||
           cc == CURLE_PARTIAL_FILE || cc == CURLE_COULDNT_RESOLVE_HOST;
}

/* The results of the answer so far, as http.h names them. */
static void publish(job *j)
{
    http_fetch *f = j->f;
    f->status = j->meta.status;
    f->content_length = j->meta.content_length;
    f->range_first = j->meta.range_first;
    f->range_total = j->meta.range_total;
    f->retry_after_ms = j->meta.retry_after_ms;
    memcpy(f->content_type, j->meta.content_type, sizeof f->content_type);
    memcpy(f->linked_etag, j->meta.linked_etag, sizeof f->linked_etag);
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    job *j = ud;
    cm_http_meta_line(&j->meta, p, size * n, (int64_t)time(NULL));
    return size * n;
}

/* The policy's word on an answer of status (seed copied: asking twice gives
 * the same answer). */
static bool will_retry(const job *j, const http_outcome *o, uint64_t seed)
{
    if (j->delivered && !j->f->on_restart) return false;
    return cm_http_retry_delay(&j->f->retry, j->f->attempts, o, &seed) >= 0;
}

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    job *j = ud;
    http_fetch *f = j->f;
    size_t len = size * n;
    if (!j->started) {
        j->started = true;
        publish(j);
        http_outcome o = {j->meta.status, j->meta.retry_after_ms, false};
        j->discard = cm_http_status_retryable(j->meta.status) && will_retry(j, &o, 0);
    }
    if (j->discard) {
        j->discarded += len;
        return j->discarded > DISCARD_MAX ? 0 : len; /* the answer is not wanted */
    }
    j->delivered = true;
    if (f->on_data && !f->on_data(f, p, len)) {
        j->aborted = true;
        return 0; /* != len: libcurl stops */
    }
    return len;
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    job *j = ud;
    if (j->f->on_tick && !j->f->on_tick(j->f)) {
        j->aborted = true;
        return 1;
    }
    return 0;
}

/* Before each request (redirects and reused connections included): the
 * address it goes to must be allowed. */
static int on_prereq(void *ud, char *ip, char *local_ip, int remote_port, int local_port)
{
    (void)local_ip, (void)remote_port, (void)local_port;
    http_fetch *f = ((job *)ud)->f;
    if (f->allow_ip(ip, f->ctx)) return CURL_PREREQFUNC_OK;
    f->refused = true;
    return CURL_PREREQFUNC_ABORT;
}

/* The one option set. */
static cm_rc set_options(job *j)
{
    http_fetch *f = j->f;
    CURL *e = j->easy;
    if (!j->hdrs) {
        struct curl_slist *t;
        for (size_t i = 0; f->headers && i < f->headers->n; i++) {
            if (!(t = cu.slist_append(j->hdrs, f->headers->v[i]))) return CM_ENOMEM;
            j->hdrs = t;
        }
        if (f->body) { /* no 100-continue round trip */
            if (!(t = cu.slist_append(j->hdrs, "Expect:"))) return CM_ENOMEM;
            j->hdrs = t;
        }
    }
    long stall_s = f->stall_ms > 0 ? CM_MAX(1L, f->stall_ms / 1000) : 60;
    cu.easy_setopt(e, CURLOPT_URL, f->url);
    cu.easy_setopt(e, CURLOPT_HTTPHEADER, j->hdrs);
    cu.easy_setopt(e, CURLOPT_USERAGENT, f->user_agent ? f->user_agent : "clawmem/" CM_VERSION);
    if (pool.share) cu.easy_setopt(e, CURLOPT_SHARE, pool.share);
    cu.easy_setopt(e, CURLOPT_SOCKOPTFUNCTION, on_sockopt);
    /* a GET follows redirects; a POST is never redirected */
    cu.easy_setopt(e, CURLOPT_FOLLOWLOCATION, f->max_redirects < 0 || f->body ? 0L : 1L);
    cu.easy_setopt(e, CURLOPT_MAXREDIRS, f->max_redirects > 0 ? f->max_redirects : 10L);
    if (f->allow_ip) {
        cu.easy_setopt(e, CURLOPT_PREREQFUNCTION, on_prereq);
        cu.easy_setopt(e, CURLOPT_PREREQDATA, j);
    }
#if LIBCURL_VERSION_NUM >= 0x075500
    cu.easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    cu.easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#endif
    cu.easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                   f->connect_timeout_ms > 0 ? f->connect_timeout_ms : 30000L);
    cu.easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1024L);
    cu.easy_setopt(e, CURLOPT_LOW_SPEED_TIME, stall_s);
    cu.easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    cu.easy_setopt(e, CURLOPT_ERRORBUFFER, j->cerr);
    if (f->range_from > 0) {
        char range[48];
        snprintf(range, sizeof range, "%llu-", (unsigned long long)f->range_from);
        cu.easy_setopt(e, CURLOPT_RANGE, range); /* copied by libcurl */
    } else if (f->compressed) {
        cu.easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
    }
    if (f->body) {
        cu.easy_setopt(e, CURLOPT_POST, 1L);
        cu.easy_setopt(e, CURLOPT_POSTFIELDS, f->body);
        cu.easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)f->body_len);
    }
    if (f->timeout_ms > 0) cu.easy_setopt(e, CURLOPT_TIMEOUT_MS, f->timeout_ms);
    cu.easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    cu.easy_setopt(e, CURLOPT_HEADERDATA, j);
    cu.easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    cu.easy_setopt(e, CURLOPT_WRITEDATA, j);
    cu.easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
    cu.easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
    cu.easy_setopt(e, CURLOPT_XFERINFODATA, j);
    cu.easy_setopt(e, CURLOPT_PRIVATE, j);
    return CM_OK;
}

static cm_rc start(CURLM *m, job *j)
{
    http_fetch *f = j->f;
    if (j->delivered && f->on_restart) {
        f->on_restart(f);
        j->delivered = false;
    }
    if (j->easy) {
        cu.easy_cleanup(j->easy); /* a fresh handle: no state of the last attempt */
        j->easy = NULL;
    }
    if (!(j->easy = cu.easy_init())) return CM_ENOMEM;
    cm_rc rc = set_options(j);
    if (rc) return rc;
    cm_http_meta_init(&j->meta);
    j->started = j->discard = false;
    j->discarded = 0;
    j->cerr[0] = 0;
    f->attempts++;
    if (cu.multi_add_handle(m, j->easy) != CURLM_OK) return CM_EIO;
    j->active = true;
    return CM_OK;
}

/* The URL for messages: no userinfo, no query string (either may carry a
 * key). */
static void url_for_message(const char *url, char *out, size_t n)
{
    cm_redact_url_to(url, out, CM_MIN(n, (size_t)150));
}

/* Ends a fetch for good with rc and its message. */
static void settle(job *j, cm_rc rc, CURLcode cc)
{
    http_fetch *f = j->f;
    char url[160];
    j->done = true;
    j->rc = rc;
    if (!rc) return;
    url_for_message(f->url, url, sizeof url);
    if (f->refused) {
        j->rc = CM_EINVAL;
        snprintf(f->error, sizeof f->error, "%s: the address is not allowed", url);
    } else if (rc == CM_ECANCELED) {
        snprintf(f->error, sizeof f->error, "%s: transfer stopped", url);
    } else if (rc == CM_EIO) {
        /* libcurl's name for the failure, then its detail (which may quote
         * the URL: redacted) */
        buf shown = BUF_INIT;
        const char *what = cu.easy_strerror(cc);
        if (j->cerr[0] && strcmp(j->cerr, what) != 0 &&
            cm_http_error_text(f->url, f->headers, j->cerr, strlen(j->cerr), 200, &shown) == CM_OK)
            snprintf(f->error, sizeof f->error, "%s: %s (%s)", url, what, shown.data);
        else
            snprintf(f->error, sizeof f->error, "%s: %s", url, what);
        cm_buf_release(&shown);
    } else {
        snprintf(f->error, sizeof f->error, "%s: %s", url, cm_strerror(rc));
    }
}

/* Decides what a finished attempt means: done, or another attempt later. */
static void finish(job *j, CURLcode cc, uint64_t *seed)
{
    http_fetch *f = j->f;
    char *eff = NULL;
    if (cu.easy_getinfo(j->easy, CURLINFO_EFFECTIVE_URL, &eff) == CURLE_OK && eff)
        snprintf(f->final_url, sizeof f->final_url, "%s", eff);
    if (!j->meta.status) cu.easy_getinfo(j->easy, CURLINFO_RESPONSE_CODE, &j->meta.status);
    publish(j);
    if (f->refused || j->aborted) {
        settle(j, CM_ECANCELED, cc);
        return;
    }
    http_outcome o = {0, -1, false};
    if (cc == CURLE_OK || j->discard) { /* an answer (one we chose to drop is one too) */
        o.status = j->meta.status;
        o.retry_after_ms = j->meta.retry_after_ms;
    } else {
        o.net_failed = net_retryable(cc);
    }
    f->retryable = o.status ? cm_http_status_retryable(o.status) : o.net_failed;
    long delay = -1;
    if (!j->delivered || f->on_restart) delay = cm_http_retry_delay(&f->retry, f->attempts, &o, seed);
    if (delay >= 0) {
        j->not_before_ms = cm_now_ms() + delay;
        j->tick_ms = cm_now_ms();
        return;
    }
    settle(j, cc == CURLE_OK ? CM_OK : CM_EIO, cc);
}

cm_rc cm_http_fetch_all(http_fetch *const *fs, size_t n, int concurrency, char *err, size_t errlen)
{
    cm_rc rc = cm_http_engine_ready(err, errlen);
    if (rc) return rc;
    job *jobs = calloc(n ? n : 1, sizeof *jobs);
    CURLM *m = pool_take();
    if (!jobs || !m) {
        rc = cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
        goto out;
    }
    uint64_t seed = (uint64_t)cm_now_ms() ^ (uint64_t)(uintptr_t)jobs;
    for (size_t i = 0; i < n; i++) {
        http_fetch *f = fs[i];
        jobs[i].f = f;
        cm_http_meta_init(&jobs[i].meta);
        publish(&jobs[i]);
        f->retryable = f->refused = false;
        f->final_url[0] = f->error[0] = 0;
        f->attempts = 0;
    }
    if (concurrency < 1) concurrency = 1;
    size_t left = n;
    int running = 0;
    while (left > 0) {
        /* Start what may start; ask the waiting whether they still want to. */
        int64_t t = cm_now_ms(), next = -1;
        for (size_t i = 0; i < n; i++) {
            job *j = &jobs[i];
            if (j->done || j->active) continue;
            if (j->not_before_ms > t) {
                if (j->f->on_tick && t - j->tick_ms >= 1000) {
                    j->tick_ms = t;
                    if (!j->f->on_tick(j->f)) {
                        j->aborted = true;
                        settle(j, CM_ECANCELED, CURLE_OK);
                        left--;
                        continue;
                    }
                }
                if (next < 0 || j->not_before_ms < next) next = j->not_before_ms;
                continue;
            }
            if (running >= concurrency) continue;
            if ((rc = start(m, j))) {
                cm_seterr(err, errlen, rc, "could not start an HTTP request (%s)", cm_strerror(rc));
                goto out;
            }
            running++;
        }
        if (left == 0) break;
        int still = 0;
        cu.multi_perform(m, &still);
        CURLMsg *msg;
        int q;
        while ((msg = cu.multi_info_read(m, &q))) {
            if (msg->msg != CURLMSG_DONE) continue;
            job *j = NULL;
            cu.easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&j);
            CURLcode cc = msg->data.result;
            cu.multi_remove_handle(m, msg->easy_handle);
            j->active = false;
            running--;
            finish(j, cc, &seed);
            if (j->done) left--;
        }
        if (left == 0) break;
        /* all in flight finished together and the rest may start now: start
         * them, instead of polling no handle for a second */
        if (running == 0 && next < 0) continue;
        int wait = 1000;
        if (next >= 0) wait = (int)CM_MAX(0, CM_MIN(next - cm_now_ms(), 1000));
        if (running > 0 || wait > 0) cu.multi_poll(m, NULL, 0, running ? wait : CM_MAX(wait, 1), NULL);
    }
    for (size_t i = 0; i < n; i++) {
        if (jobs[i].rc) {
            rc = cm_seterr(err, errlen, jobs[i].rc, "%s", jobs[i].f->error);
            break;
        }
    }
out:
    for (size_t i = 0; jobs && i < n; i++) {
        if (jobs[i].easy) {
            if (jobs[i].active) cu.multi_remove_handle(m, jobs[i].easy);
            cu.easy_cleanup(jobs[i].easy);
        }
        cu.slist_free_all(jobs[i].hdrs);
    }
    free(jobs);
    if (m) pool_give(m);
    return rc;
}

cm_rc cm_http_fetch_run(http_fetch *f, char *err, size_t errlen)
{
    return cm_http_fetch_all(&f, 1, 1, err, errlen);
}
