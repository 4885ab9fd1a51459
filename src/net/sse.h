/*
 * sse.h — an incremental parser of server-sent events (the WHATWG
 * EventSource format) for the chat clients' streams: feed it the body as it
 * arrives, in pieces of any size; it calls back once per complete event with
 * the event name ("message" when none) and the data lines joined by "\n".
 * Lines end in "\n", "\r\n" or "\r"; comment lines (": keep-alive") and
 * unknown fields are ignored; an event without data is not dispatched. A
 * line or an event over max bytes is an error (a hostile server cannot take
 * all memory). Not thread-safe; one parser per stream.
 */
#ifndef CM_SSE_H
#define CM_SSE_H

#include "../base/buf.h"

/* Returns false to stop parsing (cm_sse_feed then returns CM_ECANCELED). */
typedef bool (*sse_event_fn)(void *ctx, const char *event, const char *data, size_t len);

typedef struct sse_parser {
    sse_event_fn on_event;
    void *ctx;
    size_t max;     /* cap on a line and on an event's data */
    buf line;       /* the line being read */
    buf data;       /* the event's data so far */
    char event[64]; /* the event's name ("" = message) */
    bool has_data;  /* a data field was seen */
    bool after_cr;  /* the last byte was '\r' (a following '\n' belongs to it) */
    bool started;   /* past a leading byte-order mark */
} sse_parser;

void cm_sse_init(sse_parser *p, size_t max, sse_event_fn fn, void *ctx);
void cm_sse_release(sse_parser *p);
/* Parses n more bytes. CM_ETOOBIG past the cap, CM_ECANCELED when the
 * callback stopped, CM_ENOMEM. */
cm_rc cm_sse_feed(sse_parser *p, const char *s, size_t n);
/* The stream ended: an event still pending without its blank line is
 * dropped, as EventSource does. True when nothing was pending. */
bool cm_sse_finish(sse_parser *p);

#endif
