/*
 * http.c — cm_http_post_all() on one CURLM handle kept for the client's life, so
 * that its connection cache serves every request to the same host. Retries
 * are scheduled, not slept: a request waiting out its backoff does not hold
 * up the others.
 *
 * libcurl is loaded with dlopen() on first use: linking it costs every
 * process ~12 ms of start-up (its dependencies), which a keyword search or
 * memory_get never needs.
 */
#include <curl/curl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <strings.h>
#include <time.h>

#include "http.h"

/* The part of libcurl we use, resolved at run time. */
static struct {
    CURLcode (*global_init)(long);
    CURLM *(*multi_init)(void);
    CURLMcode (*multi_cleanup)(CURLM *);
    CURLMcode (*multi_add_handle)(CURLM *, CURL *);
    CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
    CURLMcode (*multi_perform)(CURLM *, int *);
    CURLMsg *(*multi_info_read)(CURLM *, int *);
    CURLMcode (*multi_poll)(CURLM *, struct curl_waitfd *, unsigned, int, int *);
    CURL *(*easy_init)(void);
    void (*easy_reset)(CURL *);
    void (*easy_cleanup)(CURL *);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    CURLcode (*easy_perform)(CURL *);
    const char *(*easy_strerror)(CURLcode);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
    time_t (*getdate)(const char *, const time_t *);
} cu;
static char curl_load_error[256];
static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

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
        {(void **)&cu.multi_add_handle, "curl_multi_add_handle"},
        {(void **)&cu.multi_remove_handle, "curl_multi_remove_handle"},
        {(void **)&cu.multi_perform, "curl_multi_perform"},
        {(void **)&cu.multi_info_read, "curl_multi_info_read"},
        {(void **)&cu.multi_poll, "curl_multi_poll"},
        {(void **)&cu.easy_init, "curl_easy_init"},
        {(void **)&cu.easy_reset, "curl_easy_reset"},
        {(void **)&cu.easy_cleanup, "curl_easy_cleanup"},
        {(void **)&cu.easy_setopt, "curl_easy_setopt"},
        {(void **)&cu.easy_getinfo, "curl_easy_getinfo"},
        {(void **)&cu.easy_perform, "curl_easy_perform"},
        {(void **)&cu.easy_strerror, "curl_easy_strerror"},
        {(void **)&cu.slist_append, "curl_slist_append"},
        {(void **)&cu.slist_free_all, "curl_slist_free_all"},
        {(void **)&cu.getdate, "curl_getdate"},
    };
    for (size_t i = 0; i < ARRAY_LEN(syms); i++) {
        *syms[i].slot = dlsym(h, syms[i].name);
        if (!*syms[i].slot) {
            snprintf(curl_load_error, sizeof curl_load_error, "libcurl.so.4 lacks %s (too old)",
                     syms[i].name);
            return;
        }
    }
    if (cu.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        snprintf(curl_load_error, sizeof curl_load_error, "libcurl failed to initialise");
}

struct http_client {
    CURLM *multi;
    uint64_t seed;
};

typedef struct job {
    http_req *r;
    CURL *easy;
    struct curl_slist *hdrs;
    int64_t not_before_ms; /* when the next attempt may start */
    long retry_after_ms;   /* from the last response, -1 when absent */
    bool done, too_big;
    size_t max_body;
} job;

static long env_ms(const char *name, long dflt)
{
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end;
    long ms = strtol(v, &end, 10);
    return (*end || ms < 0) ? dflt : ms;
}

http_opts cm_http_defaults(long timeout_ms)
{
    http_opts o = {env_ms("CLAWMEM_HTTP_TIMEOUT_MS", timeout_ms), 4,
                   env_ms("CLAWMEM_HTTP_BACKOFF_MS", 500), 60000, 2, 64u << 20};
    return o;
}

cm_rc cm_http_client_open(http_client **out, char *err, size_t errlen)
{
    pthread_once(&curl_once, load_curl);
    if (curl_load_error[0]) return cm_seterr(err, errlen, CM_EIO, "%s", curl_load_error);
    http_client *c = calloc(1, sizeof *c);
    if (!c) return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    c->multi = cu.multi_init();
    if (!c->multi) {
        free(c);
        return CM_ENOMEM;
    }
    c->seed = (uint64_t)cm_now_ms() ^ (uint64_t)(uintptr_t)c;
    *out = c;
    return CM_OK;
}

void cm_http_client_close(http_client *c)
{
    if (!c) return;
    cu.multi_cleanup(c->multi);
    free(c);
}

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    job *j = ud;
    size_t len = size * n;
    if (j->r->resp.len + len > j->max_body) {
        j->too_big = true;
        return 0; /* aborts the transfer */
    }
    return cm_buf_add(&j->r->resp, p, len) == CM_OK ? len : 0;
}

/* A Retry-After value (seconds or an HTTP date) in ms, or -1. */
static long parse_retry_after(const char *v)
{
    char *end;
    long secs = strtol(v, &end, 10);
    if (end != v && *end == 0 && secs >= 0) return CM_MIN(secs, 86400L) * 1000; /* capped later anyway */
    time_t when = cu.getdate(v, NULL);
    return when > 0 ? CM_MAX(0, (long)(when - time(NULL)) * 1000) : -1;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    job *j = ud;
    size_t len = size * n;
    if (len > 12 && strncasecmp(p, "retry-after:", 12) == 0) {
        char v[128];
        size_t vl = CM_MIN(len - 12, sizeof v - 1);
        memcpy(v, p + 12, vl);
        v[vl] = 0;
        char *s = v + strspn(v, " \t");
        s[strcspn(s, "\r\n")] = 0;
        long ms = parse_retry_after(s);
        if (ms >= 0) j->retry_after_ms = ms;
    }
    return len;
}

static bool retryable(CURLcode cc, long status)
{
    if (cc == CURLE_OK) return status == 429 || status >= 500;
    return cc == CURLE_COULDNT_CONNECT || cc == CURLE_OPERATION_TIMEDOUT ||
           cc == CURLE_GOT_NOTHING || cc == CURLE_RECV_ERROR || cc == CURLE_SEND_ERROR ||
           cc == CURLE_PARTIAL_FILE || cc == CURLE_COULDNT_RESOLVE_HOST;
}

/* The URL for messages: no userinfo, no query string (either may carry a
 * key). */
static void url_for_message(const char *url, char *out, size_t n)
{
    cm_redact_url_to(url, out, CM_MIN(n, (size_t)150));
}

cm_rc cm_http_redact_init(redact *r, const char *url, const cm_strlist *headers)
{
    cm_redact_init(r);
    cm_rc rc = cm_redact_add_url(r, url);
    for (size_t i = 0; !rc && headers && i < headers->n; i++)
        rc = cm_redact_add_header(r, headers->v[i]);
    if (rc) cm_redact_release(r);
    return rc;
}

cm_rc cm_http_error_text(const char *url, const cm_strlist *headers, const char *body, size_t n,
                         size_t max_chars, buf *out)
{
    redact r;
    cm_rc rc = cm_http_redact_init(&r, url, headers);
    if (rc) return rc;
    rc = cm_redact_text(&r, body, n, max_chars, out);
    cm_redact_release(&r);
    return rc;
}

static cm_rc start(http_client *c, job *j, const http_opts *o)
{
    http_req *r = j->r;
    cm_buf_reset(&r->resp);
    j->retry_after_ms = -1;
    j->too_big = false;
    if (!j->easy && !(j->easy = cu.easy_init())) return CM_ENOMEM;
    CURL *e = j->easy;
    cu.easy_reset(e);
    if (!j->hdrs) {
        j->hdrs = cu.slist_append(NULL, "Content-Type: application/json");
        for (size_t i = 0; r->headers && i < r->headers->n; i++)
            j->hdrs = cu.slist_append(j->hdrs, r->headers->v[i]);
        j->hdrs = cu.slist_append(j->hdrs, "Expect:"); /* no 100-continue round trip */
        if (!j->hdrs) return CM_ENOMEM;
    }
    cu.easy_setopt(e, CURLOPT_URL, r->url);
    cu.easy_setopt(e, CURLOPT_HTTPHEADER, j->hdrs);
    cu.easy_setopt(e, CURLOPT_POST, 1L);
    cu.easy_setopt(e, CURLOPT_POSTFIELDS, r->body);
    cu.easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
    cu.easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    cu.easy_setopt(e, CURLOPT_WRITEDATA, j);
    cu.easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    cu.easy_setopt(e, CURLOPT_HEADERDATA, j);
    cu.easy_setopt(e, CURLOPT_TIMEOUT_MS, o->timeout_ms);
    cu.easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, CM_MIN(o->timeout_ms, 10000L));
    cu.easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    cu.easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
    cu.easy_setopt(e, CURLOPT_PRIVATE, j);
    r->attempts++;
    return cu.multi_add_handle(c->multi, e) == CURLM_OK ? CM_OK : CM_EIO;
}

/* Decides what a finished attempt means: done, failed for good, or retry. */
static void finish(http_client *c, job *j, CURLcode cc, const http_opts *o)
{
    http_req *r = j->r;
    long status = 0;
    cu.easy_getinfo(j->easy, CURLINFO_RESPONSE_CODE, &status);
    r->status = status;
    char url[160];
    url_for_message(r->url, url, sizeof url);
    if (cc == CURLE_OK && status >= 200 && status < 300) {
        j->done = true;
        r->err[0] = 0;
        return;
    }
    if (j->too_big) {
        snprintf(r->err, sizeof r->err, "%s: response larger than %zu bytes", url, o->max_body);
        j->done = true;
        return;
    }
    if (cc == CURLE_OK) {
        /* The body may echo our request: shown only after redaction. */
        int k = snprintf(r->err, sizeof r->err, "%s: HTTP %ld", url, status);
        buf shown;
        cm_buf_init(&shown, sizeof r->err - (size_t)k - 3);
        if (r->resp.len)
            cm_http_error_text(r->url, r->headers, r->resp.data, r->resp.len, 100, &shown);
        if (shown.len) snprintf(r->err + k, sizeof r->err - (size_t)k, ": %s", shown.data);
        cm_buf_release(&shown);
    } else
        snprintf(r->err, sizeof r->err, "%s: %s", url, cu.easy_strerror(cc));
    if (!retryable(cc, status) || r->attempts >= o->max_attempts) {
        j->done = true;
        return;
    }
    /* Exponential backoff with ±25% jitter; Retry-After wins when longer. */
    long delay = o->backoff_ms << CM_MIN(r->attempts - 1, 16);
    c->seed = c->seed * 6364136223846793005ull + 1442695040888963407ull;
    delay += (long)((double)delay * ((double)(c->seed >> 33) / 4294967296.0 - 0.5) / 2.0);
    if (j->retry_after_ms > delay) delay = j->retry_after_ms;
    if (delay > o->max_backoff_ms) delay = o->max_backoff_ms;
    j->not_before_ms = cm_now_ms() + delay;
}

cm_rc cm_http_post_all(http_client *c, http_req *reqs, size_t n, const http_opts *o, char *err,
                       size_t errlen)
{
    cm_rc rc = CM_OK;
    job *jobs = calloc(n ? n : 1, sizeof *jobs);
    if (!jobs) return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        jobs[i].r = &reqs[i];
        jobs[i].max_body = o->max_body;
        reqs[i].status = 0;
        reqs[i].attempts = 0;
        reqs[i].err[0] = 0;
        cm_buf_init(&reqs[i].resp, 0);
    }
    size_t left = n;
    int running = 0;
    while (left > 0) {
        /* Start what may start. */
        int64_t t = cm_now_ms(), next = -1;
        for (size_t i = 0; i < n && running < o->concurrency; i++) {
            job *j = &jobs[i];
            bool active = j->easy && j->r->attempts > 0 && j->not_before_ms == 0;
            if (j->done || active) continue;
            if (j->not_before_ms > t) {
                if (next < 0 || j->not_before_ms < next) next = j->not_before_ms;
                continue;
            }
            j->not_before_ms = 0;
            if ((rc = start(c, j, o))) {
                cm_seterr(err, errlen, rc, "could not start an HTTP request (%s)", cm_strerror(rc));
                goto out;
            }
            running++;
        }
        int still = 0;
        cu.multi_perform(c->multi, &still);
        CURLMsg *m;
        int q;
        while ((m = cu.multi_info_read(c->multi, &q))) {
            if (m->msg != CURLMSG_DONE) continue;
            job *j = NULL;
            cu.easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&j);
            cu.multi_remove_handle(c->multi, m->easy_handle);
            running--;
            finish(c, j, m->data.result, o);
            if (j->done) left--;
        }
        if (left == 0) break;
        /* all in flight finished together and the rest may start now: start
         * them, instead of polling no handle for a second */
        if (running == 0 && next < 0) continue;
        int wait = 1000;
        if (next >= 0) wait = (int)CM_MAX(0, CM_MIN(next - cm_now_ms(), 1000));
        if (running > 0 || wait > 0) cu.multi_poll(c->multi, NULL, 0, running ? wait : CM_MAX(wait, 1), NULL);
    }
    for (size_t i = 0; i < n; i++) {
        if (reqs[i].err[0]) {
            rc = cm_seterr(err, errlen, jobs[i].too_big ? CM_ETOOBIG : CM_EIO, "%s (after %d attempt%s)",
                           reqs[i].err, reqs[i].attempts, reqs[i].attempts == 1 ? "" : "s");
            break;
        }
    }
out:
    for (size_t i = 0; i < n; i++) {
        if (jobs[i].easy) {
            cu.multi_remove_handle(c->multi, jobs[i].easy);
            cu.easy_cleanup(jobs[i].easy);
        }
        cu.slist_free_all(jobs[i].hdrs);
    }
    free(jobs);
    return rc;
}

/* ---- cm_http_fetch_run: one streaming GET on the easy interface ---- */

typedef struct fetch_run {
    http_fetch *f;
    bool aborted;
} fetch_run;

/* A non-negative decimal at *s (advanced past it), or -1. */
static int64_t parse_size(const char **s)
{
    const char *p = *s;
    int64_t v = 0;
    if (*p < '0' || *p > '9') return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (INT64_MAX - 9) / 10) return -1;
        v = v * 10 + (*p - '0');
    }
    *s = p;
    return v;
}

static size_t fetch_header(char *p, size_t size, size_t n, void *ud)
{
    http_fetch *f = ((fetch_run *)ud)->f;
    size_t len = size * n;
    char line[256];
    size_t l = CM_MIN(len, sizeof line - 1);
    memcpy(line, p, l);
    line[l] = 0;
    line[strcspn(line, "\r\n")] = 0;
    const char *v;
    if (strncmp(line, "HTTP/", 5) == 0) { /* a new response (redirect, 100): forget the last */
        const char *sp = strchr(line, ' ');
        f->status = sp ? strtol(sp + 1, NULL, 10) : 0;
        f->content_length = f->range_first = f->range_total = -1;
        f->retry_after_ms = -1;
        f->content_type[0] = 0;
    } else if (strncasecmp(line, "retry-after:", 12) == 0) {
        f->retry_after_ms = parse_retry_after(line + 12 + strspn(line + 12, " \t"));
    } else if (strncasecmp(line, "content-type:", 13) == 0) {
        v = line + 13 + strspn(line + 13, " \t");
        snprintf(f->content_type, sizeof f->content_type, "%.*s", (int)strcspn(v, "; \t"), v);
    } else if (strncasecmp(line, "content-length:", 15) == 0) {
        v = line + 15 + strspn(line + 15, " \t");
        f->content_length = parse_size(&v);
    } else if (strncasecmp(line, "x-linked-etag:", 14) == 0) {
        v = line + 14 + strspn(line + 14, " \t");
        if (strncmp(v, "W/", 2) == 0) v += 2;
        v += *v == '"';
        snprintf(f->linked_etag, sizeof f->linked_etag, "%.*s", (int)strcspn(v, "\" \t"), v);
    } else if (strncasecmp(line, "content-range:", 14) == 0) {
        v = line + 14 + strspn(line + 14, " \t");
        if (strncasecmp(v, "bytes", 5) != 0) return len;
        v += 5 + strspn(v + 5, " \t");
        int64_t first = -1;
        if (*v == '*') {
            v++;
        } else {
            first = parse_size(&v);
            if (first < 0 || *v++ != '-' || parse_size(&v) < 0) return len;
        }
        if (*v++ != '/') return len;
        f->range_first = first;
        f->range_total = *v == '*' ? -1 : parse_size(&v);
    }
    return len;
}

static size_t fetch_body(char *p, size_t size, size_t n, void *ud)
{
    fetch_run *r = ud;
    size_t len = size * n;
    if (r->f->on_data && !r->f->on_data(r->f, p, len)) {
        r->aborted = true;
        return 0; /* != len: libcurl stops */
    }
    return len;
}

static int fetch_xferinfo(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                          curl_off_t ulnow)
{
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    fetch_run *r = ud;
    if (r->f->on_tick && !r->f->on_tick(r->f)) {
        r->aborted = true;
        return 1;
    }
    return 0;
}

/* Before each request: the address it connected to must be allowed. */
static int fetch_prereq(void *ud, char *ip, char *local_ip, int remote_port, int local_port)
{
    (void)local_ip, (void)remote_port, (void)local_port;
    http_fetch *f = ((fetch_run *)ud)->f;
    if (f->allow_ip(ip, f->ctx)) return CURL_PREREQFUNC_OK;
    f->refused = true;
    return CURL_PREREQFUNC_ABORT;
}

cm_rc cm_http_fetch_run(http_fetch *f, char *err, size_t errlen)
{
    pthread_once(&curl_once, load_curl);
    if (curl_load_error[0]) return cm_seterr(err, errlen, CM_EIO, "%s", curl_load_error);
    f->status = 0;
    f->content_length = f->range_first = f->range_total = -1;
    f->retry_after_ms = -1;
    f->content_type[0] = 0;
    f->retryable = false;
    f->refused = false;
    f->final_url[0] = 0;
    cm_rc rc = CM_OK;
    struct curl_slist *hdrs = NULL, *t;
    fetch_run run = {f, false};
    char range[48], cerr[CURL_ERROR_SIZE] = "", url[160];
    url_for_message(f->url, url, sizeof url);
    CURL *e = cu.easy_init();
    if (!e) return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    for (size_t i = 0; f->headers && i < f->headers->n; i++) {
        if (!(t = cu.slist_append(hdrs, f->headers->v[i]))) FAIL(CM_ENOMEM, "out of memory");
        hdrs = t;
    }
    long stall_s = f->stall_ms > 0 ? CM_MAX(1L, f->stall_ms / 1000) : 60;
    cu.easy_setopt(e, CURLOPT_URL, f->url);
    cu.easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
    cu.easy_setopt(e, CURLOPT_USERAGENT, f->user_agent ? f->user_agent : "clawmem/" CM_VERSION);
    cu.easy_setopt(e, CURLOPT_FOLLOWLOCATION, f->max_redirects < 0 ? 0L : 1L);
    cu.easy_setopt(e, CURLOPT_MAXREDIRS, f->max_redirects > 0 ? f->max_redirects : 10L);
    if (f->allow_ip) {
        cu.easy_setopt(e, CURLOPT_PREREQFUNCTION, fetch_prereq);
        cu.easy_setopt(e, CURLOPT_PREREQDATA, &run);
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
    cu.easy_setopt(e, CURLOPT_ERRORBUFFER, cerr);
    if (f->range_from > 0) {
        snprintf(range, sizeof range, "%llu-", (unsigned long long)f->range_from);
        cu.easy_setopt(e, CURLOPT_RANGE, range);
    }
    if (f->body) {
        cu.easy_setopt(e, CURLOPT_POST, 1L);
        cu.easy_setopt(e, CURLOPT_POSTFIELDS, f->body);
        cu.easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)f->body_len);
        cu.easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L); /* a POST is never redirected */
    }
    if (f->timeout_ms > 0) cu.easy_setopt(e, CURLOPT_TIMEOUT_MS, f->timeout_ms);
    cu.easy_setopt(e, CURLOPT_HEADERFUNCTION, fetch_header);
    cu.easy_setopt(e, CURLOPT_HEADERDATA, &run);
    cu.easy_setopt(e, CURLOPT_WRITEFUNCTION, fetch_body);
    cu.easy_setopt(e, CURLOPT_WRITEDATA, &run);
    cu.easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
    cu.easy_setopt(e, CURLOPT_XFERINFOFUNCTION, fetch_xferinfo);
    cu.easy_setopt(e, CURLOPT_XFERINFODATA, &run);
    CURLcode cc = cu.easy_perform(e);
    char *eff = NULL;
    if (cu.easy_getinfo(e, CURLINFO_EFFECTIVE_URL, &eff) == CURLE_OK && eff)
        snprintf(f->final_url, sizeof f->final_url, "%s", eff);
    if (f->refused) FAIL(CM_EINVAL, "%s: the address is not allowed", url);
    if (run.aborted) FAIL(CM_ECANCELED, "%s: transfer stopped", url);
    if (cc != CURLE_OK) {
        f->retryable = retryable(cc, 0);
        buf shown = BUF_INIT;
        const char *why = cerr[0] ? cerr : cu.easy_strerror(cc);
        if (cm_http_error_text(f->url, f->headers, why, strlen(why), 200, &shown))
            FAIL(CM_EIO, "%s: %s", url, cu.easy_strerror(cc));
        rc = cm_seterr(err, errlen, CM_EIO, "%s: %s", url, shown.data);
        cm_buf_release(&shown);
        goto out;
    }
    if (!f->status) cu.easy_getinfo(e, CURLINFO_RESPONSE_CODE, &f->status);
    f->retryable = retryable(CURLE_OK, f->status);
out:
    cu.easy_cleanup(e);
    cu.slist_free_all(hdrs);
    return rc;
}
