/*
 * preview.c — the pacing of a streamed preview (preview.h).
 */
#include "preview.h"

void cm_gw_preview_init(gw_preview *p, int64_t throttle_ms, size_t min_chars, size_t max_chars)
{
    memset(p, 0, sizeof *p);
    p->text = (buf)BUF_INIT;
    p->shown = (buf)BUF_INIT;
    p->out = (buf)BUF_INIT;
    p->throttle_ms = throttle_ms < 250 ? 250 : throttle_ms; /* 2026.3.22's floor */
    p->min_chars = min_chars;
    p->max_chars = max_chars;
}

void cm_gw_preview_release(gw_preview *p)
{
    cm_buf_release(&p->text);
    cm_buf_release(&p->shown);
    cm_buf_release(&p->out);
}

cm_rc cm_gw_preview_add(gw_preview *p, const char *s, size_t n)
{
    return cm_buf_add(&p->text, s, n);
}

cm_rc cm_gw_preview_set(gw_preview *p, const char *s, size_t n)
{
    cm_buf_reset(&p->text);
    return cm_buf_add(&p->text, s, n);
}

static size_t S_trimmed_len(const gw_preview *p)
{
    size_t n = p->text.len;
    while (n && (p->text.data[n - 1] == ' ' || p->text.data[n - 1] == '\n' ||
                 p->text.data[n - 1] == '\t' || p->text.data[n - 1] == '\r'))
        n--;
    return n;
}

static size_t S_chars(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((unsigned char)s[i] & 0xc0) != 0x80;
    return c;
}

gw_preview_act cm_gw_preview_next(gw_preview *p, int64_t now_ms)
{
    if (p->stopped || now_ms < p->next_ms) return GW_PREVIEW_NONE;
    size_t n = S_trimmed_len(p);
    if (!n) return GW_PREVIEW_NONE;
    size_t chars = S_chars(p->text.data, n);
    if (chars > p->max_chars) {
        p->stopped = true; /* outgrown: the final reply goes out in pieces */
        return GW_PREVIEW_NONE;
    }
    if (!p->id[0] && chars < p->min_chars) return GW_PREVIEW_NONE;
    if (p->shown.len == n && !memcmp(p->shown.data, p->text.data, n)) return GW_PREVIEW_NONE;
    return p->id[0] ? GW_PREVIEW_EDIT : GW_PREVIEW_SEND;
}

const char *cm_gw_preview_text(gw_preview *p)
{
    cm_buf_reset(&p->out);
    if (cm_buf_add(&p->out, p->text.data ? p->text.data : "", S_trimmed_len(p))) return "";
    return p->out.data ? p->out.data : "";
}

void cm_gw_preview_done(gw_preview *p, const char *id, int64_t now_ms)
{
    size_t n = S_trimmed_len(p);
    cm_buf_reset(&p->shown);
    if (cm_buf_add(&p->shown, p->text.data, n)) p->stopped = true;
    if (id) snprintf(p->id, sizeof p->id, "%s", id);
    p->next_ms = now_ms + p->throttle_ms;
}

void cm_gw_preview_failed(gw_preview *p, long retry_after_ms, int64_t now_ms)
{
    if (retry_after_ms >= 0)
        p->next_ms = now_ms + (retry_after_ms > p->throttle_ms ? retry_after_ms : p->throttle_ms);
    else
        p->stopped = true;
}
