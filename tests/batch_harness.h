/*
 * batch_harness.h — the batch tests' fixture (test_batch.c), shared with
 * test_pgbatch.c: a workspace of four notes (three distinct texts), a config
 * with memorySearch.remote.batch on for a provider served by fake_batch.h,
 * and the injected polling clock (a sleep only moves time on). Over
 * PostgreSQL (pg_dsn set) the state dir's overlay chooses its store.
 */
#ifndef CM_BATCH_HARNESS_H
#define CM_BATCH_HARNESS_H

#include <jansson.h>

#include "fake_batch.h"
#include "test.h"

typedef struct bt {
    char *dir;
    char ws[1024], state[1024], cfg[1024], base[64];
    fake_server *srv;
    fake_batch *fb;
    const char *provider;
} bt;

/* Sets up t for provider ("openai", "gemini", "voyage"); batch_extra is
 * appended to remote.batch's keys (",wait:false"). */
void bt_init(bt *t, const char *provider, const char *batch_extra);
void bt_done(bt *t);
/* An engine over t (NULL on failure, said on stderr). */
cm_engine *bt_open(bt *t);
/* One sync of a fresh engine with flags. */
cm_rc bt_sync(bt *t, unsigned flags, cm_sync_stats *st);
/* cm_engine_status as JSON (the caller decrefs). */
json_t *bt_status(bt *t);
long long vectors_of(json_t *s);
size_t pending_of(json_t *s);

#endif
