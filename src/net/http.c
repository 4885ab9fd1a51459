/*
 * http.c — the two faces of the transfer engine (transfer.h) that callers
 * use: cm_http_fetch_run (in transfer.c) for one streamed request, and here
 * cm_http_post_all, a batch of POSTs answered whole (the embedding
 * providers), plus the redaction of what a request carries that is secret.
 * Connections, options, headers and retries are the engine's.
 */
#include "http.h"
#include "transfer.h"

struct http_client {
    int unused; /* the connection pool is the engine's, shared by every caller */
};

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

cm_rc cm_http_client_open(http_client **out, char *err, size_t errlen)
{
    cm_rc rc = cm_http_engine_ready(err, errlen);
    if (rc) return rc;
    http_client *c = calloc(1, sizeof *c);
    if (!c) return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    *out = c;
    return CM_OK;
}

void cm_http_client_close(http_client *c)
{
    free(c);
}

/* One POST of cm_http_post_all: its answer is kept whole, up to max_body. */
typedef struct post_one {
    http_fetch f;
    http_req *r;
    cm_strlist hdrs; /* Content-Type, then the request's own */
    size_t max_body;
    bool too_big;
} post_one;

static bool post_data(http_fetch *f, const char *p, size_t n)
{
    post_one *o = f->ctx;
    if (o->r->resp.len + n > o->max_body) {
        o->too_big = true;
        return false; /* aborts the transfer */
    }
    return cm_buf_add(&o->r->resp, p, n) == CM_OK;
}

static void post_restart(http_fetch *f)
{
    cm_buf_reset(&((post_one *)f->ctx)->r->resp);
}

/* r->err for a request the engine is done with. */
static void post_message(post_one *o, cm_rc frc)
{
    http_req *r = o->r;
    char url[160];
    url_for_message(r->url, url, sizeof url);
    r->status = o->f.status;
    r->attempts = o->f.attempts;
    r->err[0] = 0;
    if (o->too_big) {
        snprintf(r->err, sizeof r->err, "%s: response larger than %zu bytes", url, o->max_body);
    } else if (frc) {
        snprintf(r->err, sizeof r->err, "%s", o->f.error);
    } else if (r->status < 200 || r->status >= 300) {
        /* The body may echo our request: shown only after redaction. */
        int k = snprintf(r->err, sizeof r->err, "%s: HTTP %ld", url, r->status);
        buf shown;
        cm_buf_init(&shown, sizeof r->err - (size_t)k - 3);
        if (r->resp.len)
            cm_http_error_text(r->url, r->headers, r->resp.data, r->resp.len, 100, &shown);
        if (shown.len) snprintf(r->err + k, sizeof r->err - (size_t)k, ": %s", shown.data);
        cm_buf_release(&shown);
    }
}

cm_rc cm_http_post_all(http_client *c, http_req *reqs, size_t n, const http_opts *o, char *err,
                       size_t errlen)
{
    (void)c;
    static char ctype[] = "Content-Type: application/json";
    cm_rc rc = CM_OK;
    post_one *ones = calloc(n ? n : 1, sizeof *ones);
    http_fetch **fs = calloc(n ? n : 1, sizeof *fs);
    if (!ones || !fs) FAIL(CM_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        post_one *p = &ones[i];
        http_req *r = &reqs[i];
        r->status = 0;
        r->attempts = 0;
        r->err[0] = 0;
        cm_buf_init(&r->resp, 0);
        p->r = r;
        p->max_body = o->max_body;
        size_t nh = r->headers ? r->headers->n : 0;
        if (!(p->hdrs.v = calloc(nh + 1, sizeof *p->hdrs.v))) FAIL(CM_ENOMEM, "out of memory");
        p->hdrs.v[p->hdrs.n++] = ctype;
        for (size_t h = 0; h < nh; h++)
            p->hdrs.v[p->hdrs.n++] = r->headers->v[h];
        http_fetch *f = &p->f;
        f->url = r->url;
        f->headers = &p->hdrs;
        f->body = r->body ? r->body : "";
        f->body_len = r->body_len;
        f->timeout_ms = o->timeout_ms;
        f->connect_timeout_ms = o->timeout_ms > 0 ? CM_MIN(o->timeout_ms, 10000L) : 10000L;
        f->stall_ms = o->timeout_ms > 0 ? o->timeout_ms + 1000 : 0;
        f->compressed = true;
        f->on_data = post_data;
        f->on_restart = post_restart;
        f->ctx = p;
        f->retry = (http_retry){o->max_attempts, o->backoff_ms, o->max_backoff_ms, 0, false, false};
        fs[i] = f;
    }
    char ferr[320] = "";
    cm_rc frc = cm_http_fetch_all(fs, n, o->concurrency, ferr, sizeof ferr);
    bool said = false;
    for (size_t i = 0; i < n; i++) {
        post_message(&ones[i], ones[i].f.error[0] ? CM_EIO : CM_OK);
        http_req *r = &reqs[i];
        if (r->err[0] && !said) {
            rc = cm_seterr(err, errlen, ones[i].too_big ? CM_ETOOBIG : CM_EIO, "%s (after %d attempt%s)",
                           r->err, r->attempts, r->attempts == 1 ? "" : "s");
            said = true;
        }
    }
    if (frc && !said) rc = cm_seterr(err, errlen, frc, "%s", ferr);
out:
    for (size_t i = 0; ones && i < n; i++)
        free(ones[i].hdrs.v);
    free(ones);
    free(fs);
    return rc;
}
