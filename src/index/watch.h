/*
 * watch.h — one inotify descriptor over everything that is memory: the
 * workspace root (for MEMORY.md / memory.md / memory appearing or going),
 * every directory under memory/ and under directory extraPaths, and the
 * parent directory of each file extraPath. New directories are watched as
 * they appear. The watcher only says that something changed; the sync that
 * follows finds what. When the kernel's watch limit is reached the watcher is
 * "degraded": the caller must rescan periodically instead.
 */
#ifndef CM_WATCH_H
#define CM_WATCH_H

#include "../base/log.h"
#include "../config/config.h"

typedef struct watcher watcher;

/* Watches cfg's memory roots. Fails only on out-of-memory or when inotify
 * itself is unavailable; a missing root is watched from its parent. */
cm_rc cm_watcher_open(const cm_config *cfg, const cm_logger *lg, watcher **out, char *err,
                      size_t errlen);
void cm_watcher_close(watcher *w);

/* The descriptor to poll for POLLIN. */
int cm_watcher_fd(const watcher *w);

enum {
    WATCH_CHANGED = 1 << 0,  /* a memory file or directory changed */
    WATCH_OVERFLOW = 1 << 1, /* events were lost: everything must be rescanned */
    WATCH_SESSIONS = 1 << 2, /* a session transcript changed (debounced longer) */
};

/* Drains pending events (non-blocking) and returns WATCH_* flags. */
unsigned cm_watcher_read(watcher *w);

/* Directories watched, and whether the watch limit was hit. */
size_t cm_watcher_count(const watcher *w);
bool cm_watcher_degraded(const watcher *w);

#endif
