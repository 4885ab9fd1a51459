/*
 * sse.c — the server-sent-events parser of sse.h.
 */
#include "sse.h"
#include "../base/caps.h"

void cm_sse_init(sse_parser *p, size_t max, sse_event_fn fn, void *ctx)
{
    memset(p, 0, sizeof *p);
    p->on_event = fn;
    p->ctx = ctx;
    p->max = max ? max : CM_CAP_SSE_EVENT;
    cm_buf_init(&p->line, p->max);
    cm_buf_init(&p->data, p->max);
}

void cm_sse_release(sse_parser *p)
{
    cm_buf_release(&p->line);
    cm_buf_release(&p->data);
}

/* A blank line: dispatches the pending event, if it has data. */
static cm_rc dispatch(sse_parser *p)
{
    bool had = p->has_data;
    const char *name = p->event[0] ? p->event : "message";
    bool go = true;
    if (had) go = p->on_event(p->ctx, name, p->data.data, p->data.len);
    cm_buf_reset(&p->data);
    p->event[0] = 0;
    p->has_data = false;
    return go ? CM_OK : CM_ECANCELED;
}

/* One complete line (without its end). */
static cm_rc on_line(sse_parser *p, const char *s, size_t n)
{
    if (n == 0) return dispatch(p);
    if (s[0] == ':') return CM_OK; /* a comment */
    const char *colon = memchr(s, ':', n);
    size_t flen = colon ? (size_t)(colon - s) : n;
    const char *v = colon ? colon + 1 : s + n;
    size_t vlen = colon ? n - flen - 1 : 0;
    if (vlen && *v == ' ') v++, vlen--;
    if (flen == 4 && memcmp(s, "data", 4) == 0) {
        cm_rc rc = CM_OK;
        if (p->has_data) rc = cm_buf_addc(&p->data, '\n');
        if (!rc) rc = cm_buf_add(&p->data, v, vlen);
        if (rc) return rc;
        p->has_data = true;
        return CM_OK;
    }
    if (flen == 5 && memcmp(s, "event", 5) == 0) {
        snprintf(p->event, sizeof p->event, "%.*s", (int)CM_MIN(vlen, sizeof p->event - 1), v);
        return CM_OK;
    }
    return CM_OK; /* id, retry and unknown fields: not used here */
}

cm_rc cm_sse_feed(sse_parser *p, const char *s, size_t n)
{
    cm_rc rc = CM_OK;
    size_t i = 0;
    if (!p->started && n) {
        /* A UTF-8 byte-order mark may open the stream; only whole. */
        if (n >= 3 && (unsigned char)s[0] == 0xEF && (unsigned char)s[1] == 0xBB &&
            (unsigned char)s[2] == 0xBF)
            i = 3;
        p->started = true;
    }
    while (i < n) {
        if (p->after_cr && s[i] == '\n') { /* the "\n" of a "\r\n" */
            p->after_cr = false;
            i++;
            continue;
        }
        p->after_cr = false;
        /* The rest of this line in the input, at once. */
        size_t j = i;
        while (j < n && s[j] != '\n' && s[j] != '\r')
            j++;
        if (j > i && (rc = cm_buf_add(&p->line, s + i, j - i))) return rc;
        if (j == n) break; /* the line goes on in the next piece */
        p->after_cr = s[j] == '\r';
        rc = on_line(p, p->line.data, p->line.len);
        cm_buf_reset(&p->line);
        if (rc) return rc;
        i = j + 1;
    }
    return CM_OK;
}

bool cm_sse_finish(sse_parser *p)
{
    bool clean = !p->has_data && p->line.len == 0;
    cm_buf_reset(&p->line);
    cm_buf_reset(&p->data);
    p->has_data = false;
    p->event[0] = 0;
    return clean;
}
