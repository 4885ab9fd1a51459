/*
 * cdp.h — a small Chrome DevTools Protocol client for the browser tests:
 * starts a headless Chromium with --remote-debugging-pipe (our commands on
 * its fd 3, its answers and events on fd 4, each JSON message ended by a NUL),
 * opens one page and attaches to it. Every console message, log entry and
 * uncaught exception of the page is collected in `problems`; WebSocket frames
 * the page receives are collected in `ws_frames`. Test code only.
 */
#ifndef CM_TEST_CDP_H
#define CM_TEST_CDP_H

#include <jansson.h>
#include <sys/types.h>

#include "test.h"

typedef struct cdp {
    pid_t pid;
    int to, from; /* our ends: commands in, answers and events out */
    buf in;       /* bytes read from `from`, not yet a whole message */
    int next_id;
    char *profile;     /* the fresh --user-data-dir (under a tmp_dir) */
    char session[128]; /* the page's flat session id */
    json_t *problems;  /* array of strings: console messages, log entries, exceptions */
    json_t *ws_frames; /* array of strings: WebSocket frames the page received */
    char err[512];     /* why the last call failed */
} cdp;

/* The Chromium to use: $CLAWMEM_TEST_CHROMIUM, else /usr/bin/chromium when
 * executable, else NULL. */
const char *cdp_find_chromium(void);
/* Starts chromium headless (fresh profile, the flags of the tests) at a
 * window of width x height, opens about:blank and attaches to it with
 * Runtime, Log, Page and Network enabled. False (c->err says why) on failure;
 * cdp_close releases what was made either way. */
bool cdp_launch(cdp *c, const char *chromium, int width, int height);
/* Sends method with params (stolen; NULL for {}) to the page (page true) or
 * the browser; waits up to timeout_ms for its answer, collecting events
 * meanwhile. The result object (json_decref it), or NULL with c->err set. */
json_t *cdp_call(cdp *c, bool page, const char *method, json_t *params, int timeout_ms);
/* Evaluates expr in the page (promises awaited): its value (json_decref it),
 * or NULL with c->err set (an exception counts as failure). */
json_t *cdp_eval(cdp *c, const char *expr, int timeout_ms);
/* Evaluates the boolean expression expr until it is true or timeout_ms
 * passes (re-checked after every event and at least every 100 ms). */
bool cdp_wait(cdp *c, const char *expr, int timeout_ms);
/* Navigates to url and waits for its load event. */
bool cdp_goto(cdp *c, const char *url, int timeout_ms);
/* Sets the viewport (CSS pixels, device scale 1; mobile when narrow). */
bool cdp_viewport(cdp *c, int width, int height);
/* Writes a PNG of the viewport to path. */
bool cdp_screenshot(cdp *c, const char *path);
/* Ends chromium (SIGTERM, then SIGKILL), frees everything. */
void cdp_close(cdp *c);

#endif
