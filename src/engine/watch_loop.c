/*
 * watch_loop.c — cm_engine_watch: syncs on start, then after changes
 * (debounced), on the interval and, when the watcher is degraded, on a
 * periodic rescan; publishes the watcher's record (lock.c) as it goes.
 */
#include <errno.h>
#include <poll.h>

#include "../index/watch.h"
#include "engine_int.h"

#define WATCH_DEGRADED_RESCAN_MS 10000

/* *stop, read atomically (set by another thread or a signal handler). */
static bool stopped(const cm_watch_opts *o)
{
    return o->stop && __atomic_load_n(o->stop, __ATOMIC_ACQUIRE);
}

static int stop_requested(void *ctx, const cm_progress *p)
{
    (void)p;
    const cm_watch_opts *o = ctx;
    return stopped(o);
}

cm_rc cm_engine_watch(cm_engine *e, const cm_watch_opts *opts, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    watcher *w = NULL;
    cm_watch_opts o = *opts;
    int debounce = o.debounce_ms >= 0 ? o.debounce_ms : e->cfg.watch_debounce_ms;
    int session_debounce = o.session_debounce_ms > 0 ? o.session_debounce_ms : 5000;
    int64_t interval = (int64_t)(e->cfg.sync_interval_minutes * 60000.0);
    int live = -1;
    uint64_t seq = 0;
    CHECK(cm_watcher_open(&e->cfg, &e->lg, &w, err, errlen));
    live = cm_engine_watch_claim(e); /* published from here on; pending until the first sync */
    cm_engine_watch_publish(e, live, "pending", seq);
    int64_t due = cm_now_ms(); /* sync on start */
    int64_t first_change = -1, last_sync = 0;
    while (!stopped(&o)) {
        int64_t t = cm_now_ms();
        if (due >= 0 && t >= due) {
            cm_sync_stats st;
            char msg[1024] = "";
            cm_rc r = cm_engine_sync(e, CM_SYNC_NOWAIT, stop_requested, &o, &st, msg, sizeof msg);
            if (r == CM_ECANCELED) break;
            if (o.on_sync) o.on_sync(o.ctx, r, &st, r ? msg : "");
            if (r) cm_logf(&e->lg, CM_LOG_WARN, "sync: %s", msg);
            /* another writer: try again after a debounce period */
            due = r == CM_EBUSY ? t + CM_MAX(debounce, 200) : -1;
            /* embedding batches still at the provider: collected by a later sync */
            if (!r && st.batches_pending) due = t + CM_MAX(e->cfg.batch_poll_ms, 200);
            first_change = -1;
            last_sync = cm_now_ms();
            /* fresh only when the sync succeeded, no event arrived meanwhile
             * (those are read and debounced by the loop as usual) and events
             * are reliable */
            /* no record yet (a fresh install: the index dir came with the
             * first sync, or another watcher had it): claim it now */
            if (!r && live < 0) live = cm_engine_watch_claim(e);
            struct pollfd ev = {cm_watcher_fd(w), POLLIN, 0};
            if (!r && !cm_watcher_degraded(w) && poll(&ev, 1, 0) == 0)
                cm_engine_watch_publish(e, live, "fresh", ++seq);
            continue;
        }
        /* When to wake up next: a pending sync, the interval, the degraded rescan. */
        int64_t next = due;
        if (interval > 0 && (next < 0 || last_sync + interval < next)) next = last_sync + interval;
        if (cm_watcher_degraded(w) && (next < 0 || last_sync + WATCH_DEGRADED_RESCAN_MS < next))
            next = last_sync + WATCH_DEGRADED_RESCAN_MS;
        int timeout = next < 0 ? -1 : (int)CM_MAX(0, CM_MIN(next - t, 3600000));
        /* Without a wake descriptor, look at *stop at least every 250 ms. */
        if (o.wake_fd < 0 && (timeout < 0 || timeout > 250)) timeout = 250;
        struct pollfd p[2] = {{cm_watcher_fd(w), POLLIN, 0}, {o.wake_fd, POLLIN, 0}};
        int n = poll(p, o.wake_fd >= 0 ? 2 : 1, timeout);
        if (n < 0 && errno != EINTR) FAIL(CM_EIO, "poll: %s", strerror(errno));
        t = cm_now_ms();
        if (n > 0 && (p[0].revents & POLLIN)) {
            unsigned what = cm_watcher_read(w);
            if (what & (WATCH_CHANGED | WATCH_OVERFLOW | WATCH_SESSIONS))
                cm_engine_watch_publish(e, live, "pending", seq);
            if (what & WATCH_OVERFLOW)
                cm_logf(&e->lg, CM_LOG_INFO, "inotify queue overflowed; rescanning everything");
            if (what & WATCH_CHANGED) {
                /* Debounce: wait for quiet, but never longer than 10 periods. */
                if (first_change < 0) first_change = t;
                due = CM_MIN(t + debounce, first_change + 10 * (int64_t)CM_MAX(debounce, 1));
            } else if ((what & WATCH_SESSIONS) && due < 0) {
                /* only transcripts: their own, longer wait (a Markdown change
                 * or a sync already due keeps its time) */
                due = t + session_debounce;
            }
        }
        if (next >= 0 && t >= next && due < 0) due = t; /* interval or degraded rescan */
    }
out:
    cm_engine_watch_unclaim(e, live);
    cm_watcher_close(w);
    return rc;
}
