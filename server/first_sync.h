/*
 * first_sync.h — the gate between an agent's first sync and its first
 * memory_search, shared by `clawmem mcp` and `clawmem serve`: a search that
 * comes while the first sync of the agent (the watcher's, or the one sync
 * with --no-watch) still runs waits for it, so that an agent whose index is
 * missing or stale does not answer `results: []` from it. The wait is
 * bounded: it ends at most wait_ms after the first search began to wait,
 * and searches after that answer at once (their payload's "status" says the
 * index is still being built). Uses only pthreads.
 */
#ifndef CM_FIRST_SYNC_H
#define CM_FIRST_SYNC_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct first_sync {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;        /* the first sync ended (or never will) */
    int64_t deadline; /* monotonic ms the waits end at; -1 until a search waits */
} first_sync;

/* Default bound of the wait (--first-sync-wait). */
#define FIRST_SYNC_WAIT_MS 5000

void mcp_first_sync_init(first_sync *f);
void mcp_first_sync_release(first_sync *f);
/* The syncing thread: the first sync ended (done or failed), or the thread
 * will never sync. Idempotent. */
void mcp_first_sync_done(first_sync *f);
/* A search: waits until the first sync ended, or until wait_ms after the
 * first search that waited (wait_ms <= 0: no wait), or until stop_fd (a
 * stop pipe, or -1) is readable. True when the first sync ended. */
bool mcp_first_sync_wait(first_sync *f, int wait_ms, int stop_fd);
/* The "status" a search's payload carries when mcp_first_sync_wait was false. */
void mcp_first_sync_status(char *out, size_t outlen, int wait_ms);

#endif
