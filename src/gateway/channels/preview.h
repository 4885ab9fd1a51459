/*
 * preview.h — the streamed preview of a reply as 2026.3.22's Telegram draft
 * stream paces it: nothing until the answer has GW_PREVIEW_MIN_CHARS
 * characters, then one message sent and edited in place as the answer
 * grows, at most one send or edit per throttle interval, a 429's
 * retry_after waited out, and the preview stopped for good on any other
 * failure or once the text outgrows max_chars. Pure logic over an injected
 * clock: the caller performs what cm_gw_preview_next asks and reports back.
 * Not thread safe: one owner.
 */
#ifndef CM_GW_PREVIEW_H
#define CM_GW_PREVIEW_H

#include "../../base/buf.h"
#include "../../base/common.h"

typedef struct gw_preview {
    buf text;        /* the answer so far */
    buf shown;       /* what the preview message shows (text as last sent) */
    buf out;         /* cm_gw_preview_text's answer */
    char id[32];     /* the preview message's id, "" before the first send */
    int64_t next_ms; /* no send or edit before this */
    int64_t throttle_ms;
    size_t min_chars, max_chars;
    bool stopped; /* failed or outgrown: no more sends or edits */
} gw_preview;

typedef enum gw_preview_act {
    GW_PREVIEW_NONE,
    GW_PREVIEW_SEND, /* send the first preview message with cm_gw_preview_text */
    GW_PREVIEW_EDIT  /* edit message id to cm_gw_preview_text */
} gw_preview_act;

void cm_gw_preview_init(gw_preview *p, int64_t throttle_ms, size_t min_chars, size_t max_chars);
void cm_gw_preview_release(gw_preview *p);

/* Appends streamed answer text. */
cm_rc cm_gw_preview_add(gw_preview *p, const char *s, size_t n);
/* Replaces the text so far (a stream that sends its whole text each time:
 * the reasoning's). */
cm_rc cm_gw_preview_set(gw_preview *p, const char *s, size_t n);

/* What to do at now_ms: nothing (too early, too short, unchanged,
 * stopped), or a send / an edit of cm_gw_preview_text. */
gw_preview_act cm_gw_preview_next(gw_preview *p, int64_t now_ms);

/* The text to send or edit to: the answer so far without trailing blanks
 * (valid until the next call on p). */
const char *cm_gw_preview_text(gw_preview *p);

/* The send or edit went out at now_ms (id: the new message's id for a
 * send, else NULL). */
void cm_gw_preview_done(gw_preview *p, const char *id, int64_t now_ms);

/* It failed: rate limited (retry_after_ms >= 0: tried again after that)
 * or for good (the preview stops). */
void cm_gw_preview_failed(gw_preview *p, long retry_after_ms, int64_t now_ms);

#endif
