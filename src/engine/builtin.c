/*
 * builtin.c — the builtin backend: clawmem's own SQLite index in the state
 * directory, synced by sync.c, searched by search.c, reported by status.c.
 * Open removes the leftovers of rebuilds whose process died and chooses the
 * embedding provider; close releases the index and the provider.
 */
#include "engine_int.h"

static cm_rc builtin_open(cm_engine *e, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    /* of rebuilds whose process died; not this process's own: without the
     * writer lock, another engine of it may be rebuilding */
    cm_store_remove_leftovers(e->cfg.store_path, false);
    cm_engine_choose_provider(e);
    return CM_OK;
}

static void builtin_close(cm_engine *e)
{
    cm_engine_close_store(e);
    if (e->have_prov) cm_embed_close(&e->prov);
    free(e->provider_note);
    e->provider_note = NULL;
}

const engine_backend cm_engine_builtin = {
    "builtin",     builtin_open, cm_builtin_sync, cm_builtin_search, cm_builtin_status,
    builtin_close, NULL,          NULL,
};
