/*
 * engine.h — what the engine offers the layer above it inside the library
 * (tools/, which shapes the agent-facing payloads and holds the cm_memory_*
 * entry points): a search's ranked hits with the facts a payload's head
 * reports, memory_get's text, memory_write's note. The engine returns data,
 * never payload text.
 */
#ifndef CM_ENGINE_H
#define CM_ENGINE_H

#include "clawmem.h"
#include "../config/config.h"
#include "../index/memfile.h"
#include "../search/rank.h"

/* What a search found: the hits ranked best first, and the head facts. */
typedef struct engine_result {
    search_hit *v;
    size_t n;
    char provider[32], model[128]; /* the effective embedding provider, or "qmd" */
    char *fallback;                /* why a fallback provider serves, or NULL */
    char *error;                   /* the search could not run: why (no hits then), else NULL */
    char *qmd_why;                 /* QMD failed and the builtin index answered: why, else NULL */
    const char *mode; /* the payload's "mode" when not the provider's (static), or NULL */
} engine_result;
void cm_engine_result_release(engine_result *r);

/* The backend's search (memory_search) for the caller's session (may be
 * NULL). A query that is NULL, empty or only white space is a bad argument:
 * CM_EINVAL, err quoting it (the one check every caller — CLI, MCP, agent —
 * relies on). A search that cannot run is not a failure: out->error says
 * why; the return is CM_OK then, and an error only for what fails the call
 * (CM_ENOMEM). Release *out with cm_engine_result_release (also after a
 * failure). */
cm_rc cm_engine_search(cm_engine *e, const char *query, const cm_search_opts *opts,
                       const char *session_key, engine_result *out, char *err, size_t errlen);

/* memory_get's text of path (NUL-terminated), through the backend (the QMD
 * collections' files too) or the memory files' rules (cm_index_memfile_read). Release
 * *out with cm_index_memfile_text_release (also after a failure). */
cm_rc cm_engine_get(cm_engine *e, const char *path, long from, long offset, long lines,
                    memfile_text *out, char *err, size_t errlen);

/* memory_write: cm_index_memfile_write, then the note's file is indexed (when the
 * index exists). The caller checks cm_engine_writable first. Free
 * out->path (also after a failure). */
cm_rc cm_engine_write(cm_engine *e, const char *path, const char *text, int64_t now,
                      memfile_note *out, char *err, size_t errlen);

/* Engines opened in this process so far (cm_engine_open and
 * cm_engine_open_shared; a shared engine's views are not engines): for
 * tests that count them. */
size_t cm_engine_opened_count(void);

/* The engine's settings. */
const cm_config *cm_engine_config(const cm_engine *e);

/* What the index holds by source and month (cm_store_months), as JSON
 * (malloc'd): {"months":[{"source","month","files","chunks"}],"files",
 * "chunks"}, by source then month. Reads the index as it is (no sync). */
cm_rc cm_engine_index_months(cm_engine *e, char **json, char *err, size_t errlen);

#endif
