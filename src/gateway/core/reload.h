/*
 * reload.h — the config reloaded while the gateway runs (reload.c), as
 * 2026.3.22's gateway does it (src/gateway/config-reload.ts and
 * config-reload-plan.ts): the config files read again, the changed key
 * paths sorted into those the next message reads from the new snapshot
 * (hot) and those read once at start (restart), and the new snapshot
 * swapped into the runtime (cm_gw_runtime_reload: a run under way keeps
 * its own). A file that fails to load changes nothing. A reloader's thread
 * watches the config files (inotify on their directories, events
 * debounced by gateway.reload.debounceMs) and takes explicit requests
 * (SIGHUP), so that every reload runs on that one thread.
 */
#ifndef CM_GW_RELOAD_H
#define CM_GW_RELOAD_H

#include <jansson.h>

#include "../../base/buf.h"
#include "../../base/log.h"
#include "../../config/config.h"
#include "runtime.h"

/* 2026.3.22 config-reload.ts DEFAULT_RELOAD_SETTINGS: hybrid, 300 ms. */
#define GW_RELOAD_DEBOUNCE_MS 300
/* How often the reloader's thread looks for a watched directory that is
 * absent (removed, moved away, not yet made) to watch it again. */
#define GW_RELOAD_REWATCH_MS 200

/* gateway.reload.mode (runtime_config.h's CM_RT_RELOAD_* order). */
typedef enum gw_reload_mode {
    GW_RELOAD_OFF,     /* no file watch (a SIGHUP still reloads, as hybrid) */
    GW_RELOAD_RESTART, /* nothing applied: a change is logged as needing a restart */
    GW_RELOAD_HOT,     /* hot keys applied; restart keys logged */
    GW_RELOAD_HYBRID   /* the default: as hot (clawmem never restarts itself) */
} gw_reload_mode;

/* gateway.reload of cfg: *mode (default hybrid) and *debounce_ms (default
 * GW_RELOAD_DEBOUNCE_MS). cfg may be NULL. */
void cm_gw_reload_settings(const cm_rtcfg *cfg, gw_reload_mode *mode, int64_t *debounce_ms);

typedef enum gw_reload_kind {
    GW_RKEY_HOT,     /* read from the snapshot per message: applies to the next one */
    GW_RKEY_RESTART, /* read once at start (listeners, channels' wire, agents) */
    GW_RKEY_NONE     /* read by nothing that runs (meta, wizard) */
} gw_reload_kind;

/* The kind of a changed key path ("messages.responsePrefix",
 * "channels.telegram.accounts.ops.botToken"); a table, first prefix match
 * wins, anything unlisted needs a restart. */
gw_reload_kind cm_gw_reload_kind(const char *path);

/* The changed key paths of a reload, each list ", "-joined. */
typedef struct gw_reload_plan {
    buf hot, restart, none;
    size_t nhot, nrestart, nnone;
} gw_reload_plan;

/* Diffs prev and next as 2026.3.22's diffConfigPaths does (objects key by
 * key, any other value compared whole, "<root>" for two roots of different
 * kinds; NULL is an empty object) into plan (released first), each path
 * sorted by cm_gw_reload_kind. CM_ENOMEM only. */
cm_rc cm_gw_reload_plan_build(const json_t *prev, const json_t *next, gw_reload_plan *plan);
void cm_gw_reload_plan_release(gw_reload_plan *plan);

typedef struct gw_reloader gw_reloader;

typedef struct gw_reloader_opts {
    gw_runtime *rt;
    /* How the gateway loaded its config (strings copied): the same files
     * are read again. */
    cm_config_args args;
    /* The config file existed at start: then a reload that finds it gone
     * is skipped (an editor between delete and write), not a reload to
     * every default. */
    bool config_found;
    /* The files to watch (copied; NULL entries ignored): the config file
     * and clawmem.json. */
    const char *watch[2];
    const cm_logger *log; /* copied; may be NULL */
} gw_reloader_opts;

cm_rc cm_gw_reloader_new(const gw_reloader_opts *o, gw_reloader **out, char *err, size_t errlen);

/* Reads the config files again and applies them: a load error (err:
 * "file:line:col: …") or a missing file changes nothing and is logged;
 * else the changed paths are logged, and unless gateway.reload.mode (the
 * new file's) is "restart" the new snapshot replaces the runtime's, with
 * the paths that need a restart logged as a warning. The new file's
 * gateway.reload settings are taken either way. Not to be called
 * concurrently on one reloader (once started, its thread is the caller). */
cm_rc cm_gw_reloader_apply(gw_reloader *r, char *err, size_t errlen);

/* Starts the reloader's thread: a change to a watched file (written,
 * replaced, created, removed) is applied once no other came for the
 * debounce time, unless the mode is off; a request is applied at once. The
 * watch is on the file's directory, so a file replaced by rename stays
 * watched; a directory removed and made again (or moved away and another
 * moved in, or absent at start) is watched again within
 * GW_RELOAD_REWATCH_MS of its return, and its file reloaded. The watch is
 * skipped (a warning) where inotify is refused; requests work. */
cm_rc cm_gw_reloader_start(gw_reloader *r, char *err, size_t errlen);

/* Asks the thread for a reload now: one write(2) to its eventfd, so safe
 * from a signal handler. A no-op before start. */
void cm_gw_reloader_request(gw_reloader *r);

/* Reloads the thread has run so far (applied or refused). */
uint64_t cm_gw_reloader_count(gw_reloader *r);
/* Waits at most timeout_ms (real time) until that count reaches n; false
 * when it did not. */
bool cm_gw_reloader_wait(gw_reloader *r, uint64_t n, int64_t timeout_ms);

/* Stops the thread and frees. NULL is a no-op. */
void cm_gw_reloader_free(gw_reloader *r);

#endif
