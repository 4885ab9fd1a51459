/*
 * first_sync.c — the first-sync gate of first_sync.h: a flag under a mutex,
 * a condition variable on the monotonic clock, and one deadline shared by
 * every search that comes before the first sync ends.
 */
#include <poll.h>
#include <stdio.h>
#include <time.h>

#include "first_sync.h"

static int64_t mono_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

void mcp_first_sync_init(first_sync *f)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, &a);
    pthread_condattr_destroy(&a);
    f->done = false;
    f->deadline = -1;
}

void mcp_first_sync_release(first_sync *f)
{
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->mu);
}

void mcp_first_sync_done(first_sync *f)
{
    pthread_mutex_lock(&f->mu);
    f->done = true;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

/* Whether fd (a stop pipe) is readable now. */
static bool stopping(int fd)
{
    struct pollfd p = {fd, POLLIN, 0};
    return fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

bool mcp_first_sync_wait(first_sync *f, int wait_ms, int stop_fd)
{
    bool done = false;
    for (;;) {
        pthread_mutex_lock(&f->mu);
        if (!f->done && f->deadline < 0) f->deadline = mono_ms() + (wait_ms > 0 ? wait_ms : 0);
        int64_t left = f->deadline - mono_ms();
        if (!f->done && left > 0) {
            /* in slices: the stop pipe is looked at between them, outside the lock */
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            int64_t ns = ts.tv_nsec + (left > 50 ? 50 : left) * 1000000;
            ts.tv_sec += (time_t)(ns / 1000000000);
            ts.tv_nsec = (long)(ns % 1000000000);
            pthread_cond_timedwait(&f->cv, &f->mu, &ts);
        }
        done = f->done;
        left = f->deadline - mono_ms();
        pthread_mutex_unlock(&f->mu);
        if (done || left <= 0 || stopping(stop_fd)) break;
    }
    return done;
}

void mcp_first_sync_status(char *out, size_t outlen, int wait_ms)
{
    snprintf(out, outlen,
             "indexing: the first sync of this agent's memory had not finished after %d ms; "
             "these results may be incomplete (search again shortly)",
             wait_ms > 0 ? wait_ms : 0);
}
