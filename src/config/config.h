/*
 * config.h — QuantumClaw's config (JSON5) resolved into one typed struct for
 * one agent: agents.defaults.memorySearch overlaid by that agent's
 * agents.list[].memorySearch, memory.*, the workspace and the state dir, with
 * every default and clamp of QuantumClaw's memory search. Pure: reads the
 * config file and the environment, touches nothing else.
 */
#ifndef CM_CONFIG_H
#define CM_CONFIG_H

#include <jansson.h>

#include "../base/buf.h"
#include "../base/log.h"
#include "runtime_config.h"

typedef enum cm_citations { CM_CITE_AUTO, CM_CITE_ON, CM_CITE_OFF } cm_citations;
/* memory.citations as the config spells it: "auto", "on" or "off". */
static inline const char *config_citations_name(cm_citations c)
{
    return c == CM_CITE_ON ? "on" : c == CM_CITE_OFF ? "off" : "auto";
}

typedef struct cm_strlist {
    char **v;
    size_t n;
} cm_strlist;

/* models.providers.<name>: credentials and endpoint of a model provider. */
typedef struct cm_provider_cfg {
    char *api_key, *base_url;
    cm_strlist headers; /* "Name: value" */
} cm_provider_cfg;

/* The providers of models.providers that embeddings can use, in this order. */
enum { CM_PROV_OPENAI, CM_PROV_GEMINI, CM_PROV_VOYAGE, CM_PROV_MISTRAL, CM_PROV_OLLAMA, CM_PROV_N };
extern const char *const cm_provider_names[CM_PROV_N]; /* "openai", "gemini", ... */

/* Modalities of multimodal memory (cm_config.multimodal). */
enum { CM_MEDIA_IMAGE = 1, CM_MEDIA_AUDIO = 2 };
/* multimodal.maxFileBytes when unset: 2026.3.22's 10 MiB */
#define CM_MEDIA_MAX_BYTES_DEFAULT (10 * 1024 * 1024)

/* clawmem.hybridMerge: QuantumClaw's weighted sum of the raw scores (the
 * default), the weighted sum of scores min-max normalised over the query's
 * candidates, or weighted reciprocal-rank fusion (docs/QUALITY.md). */
typedef enum cm_merge { CM_MERGE_WEIGHTED, CM_MERGE_MINMAX, CM_MERGE_RRF } cm_merge;
/* provider "static" without hybridMerge or weights: minmax at this vectorWeight */
#define CM_STATIC_VECTOR_WEIGHT 0.005

/* memory.qmd.scope (the schema of session.sendPolicy): the first rule whose
 * match fits the caller's session key decides; else default_allow. */
typedef struct cm_qmd_rule {
    bool allow;
    char *channel, *chat_type, *key_prefix, *raw_key_prefix; /* NULL: any */
} cm_qmd_rule;

/* memory.qmd.paths[]: a collection (path as written; pattern NULL: every .md file beneath). */
typedef struct cm_qmd_path {
    char *path, *name, *pattern;
} cm_qmd_path;

/* memory.qmd.*, with QuantumClaw 2026.3.22's defaults (durations in ms). */
typedef struct cm_qmd_config {
    char *command;     /* NULL: "qmd" on PATH; only its first word is run */
    char *search_mode; /* NULL: "search"; "vsearch" or "query" */
    bool include_default_memory;
    cm_qmd_path *paths;
    size_t npaths;
    bool sessions_enabled;
    char *sessions_export_dir;   /* NULL: <stateDir>/agents/<id>/qmd/sessions */
    int sessions_retention_days; /* 0: keep all */
    int64_t interval_ms, embed_interval_ms, debounce_ms;
    bool on_boot, wait_for_boot_sync;
    int64_t command_timeout_ms, update_timeout_ms, embed_timeout_ms;
    int max_results, max_snippet_chars, max_injected_chars;
    int64_t timeout_ms;
    bool scope_set; /* memory.qmd.scope given (else DM-only) */
    bool scope_default_allow;
    cm_qmd_rule *rules;
    size_t nrules;
} cm_qmd_config;

/* session.maintenance (QuantumClaw 2026.3.22, src/config/sessions/store-maintenance.ts):
 * applied whenever sessions.json is written. "warn" only reports; "enforce"
 * prunes entries idle longer than prune_after_ms, caps the store to the
 * max_entries most recently updated, archives their transcripts, deletes
 * `.deleted.`/`.reset.` archives past their retention, rotates sessions.json
 * past rotate_bytes, and keeps the sessions directory under max_disk_bytes. */
typedef struct cm_session_maint {
    bool enforce;                /* mode: "warn" (default) or "enforce" */
    int64_t prune_after_ms;      /* pruneAfter (or the older pruneDays): 30 days */
    int64_t max_entries;         /* maxEntries: 500 */
    int64_t rotate_bytes;        /* rotateBytes: 10 MiB */
    int64_t reset_retention_ms;  /* resetArchiveRetention: pruneAfter; -1: false (kept) */
    int64_t max_disk_bytes;      /* maxDiskBytes: -1 (no budget) */
    int64_t high_water_bytes;    /* highWaterBytes: 80% of maxDiskBytes, at most it; -1: none */
    bool reset_retention_set, high_water_set; /* given (else derived by finish) */
} cm_session_maint;

/* 2026.3.22's defaults (the derived fields resolved). */
void cm_session_maint_defaults(cm_session_maint *m);

/* Parses a QuantumClaw byte size ("10mb", "1.5g", 4096; units b, kb/k, mb/m,
 * gb/g, tb/t of 1024; a bare number in bytes) into *bytes; false when
 * malformed. */
bool cm_config_byte_size(const char *s, int64_t *bytes);

typedef struct cm_config {
    char *agent_id;
    char *state_dir;   /* absolute */
    char *config_path; /* the file read, or the default path when none existed */
    bool config_found;
    char *overlay_path; /* clawmem.json: clawmem's own settings over config_path's */
    bool overlay_found;
    char *workspace; /* absolute */
    /* where workspace came from, for hints: "--workspace" (the caller's
     * argument), the config key that set it ("agents.defaults.workspace"), or
     * "" (the default, <stateDir>/workspace) */
    char workspace_from[96];

    /* agents.*.memorySearch */
    bool enabled;
    char *provider; /* "auto" unless set */
    char *model, *fallback, *remote_base_url, *remote_api_key, *local_model_path;
    char *local_cache_dir;     /* local.modelCacheDir, NULL: <stateDir>/models */
    int local_threads;         /* clawmem.localThreads, 0: one per CPU (at most 8) */
    cm_strlist remote_headers; /* "Name: value"; a later layer wins per name */
    int output_dims;           /* outputDimensionality, 0: the model's */
    int batch_concurrency;     /* remote.batch.concurrency: requests in flight */
    bool batch_enabled;        /* remote.batch.enabled: batch APIs for openai/gemini/voyage */
    bool batch_wait;           /* remote.batch.wait (true): a sync waits for its batches */
    int batch_poll_ms;         /* remote.batch.pollIntervalMs (2000) */
    int batch_timeout_min;     /* remote.batch.timeoutMinutes (60) */
    int embed_max_inputs;      /* clawmem.embedMaxInputs: inputs per request, 0: provider's */
    cm_provider_cfg providers[CM_PROV_N];
    cm_strlist extra_paths; /* as written (absolute or workspace-relative) */
    /* multimodal.*: image and audio files under extraPaths (Gemini Embedding 2) */
    bool multimodal_enabled;          /* multimodal.enabled as written */
    cm_strlist multimodal_modalities; /* as written: "image", "audio", "all"; none: all */
    int multimodal_max_bytes;         /* multimodal.maxFileBytes, default 10 MiB */
    unsigned multimodal;              /* what is on: CM_MEDIA_IMAGE | CM_MEDIA_AUDIO, 0: off */
    cm_strlist sources;               /* "memory", "sessions" */
    bool session_memory; /* experimental.sessionMemory: transcripts are indexed (with "sessions") */
    char *sessions_dir;  /* <stateDir>/agents/<agentId>/sessions, absolute */
    int sessions_delta_bytes, sessions_delta_messages; /* sync.sessions.*: 100000, 50 */
    char *store_path; /* absolute, {agentId} expanded; default <stateDir>/memory/<agentId>.clawmem.sqlite */
    /* store.path not set: clawmem's earlier default,
     * <stateDir>/memory/<agentId>.sqlite (QuantumClaw's own index's path), from
     * which an index of clawmem's is moved once; NULL when store.path is set */
    char *store_path_legacy;
    char *store_driver; /* "sqlite" (default) or "postgres" (store.dsn then names the database) */
    char *store_dsn;    /* libpq connection string (a secret input), for "postgres" */
    char *fts_tokenizer; /* "porter" (default), "unicode61" or "trigram" */
    bool vector_enabled;
    char *vector_extension_path;
    int chunk_tokens, chunk_overlap;
    bool sync_watch, sync_on_search, sync_on_session_start;
    int watch_debounce_ms;
    double sync_interval_minutes;
    int max_results;
    double min_score;
    bool hybrid_enabled;
    double vector_weight, text_weight; /* normalised: they sum to 1 */
    int candidate_multiplier;
    bool mmr_enabled;
    double mmr_lambda;
    bool decay_enabled;
    double half_life_days;
    bool cache_enabled;
    int cache_max_entries;

    cm_session_maint session_maint; /* session.maintenance */

    /* memory.* */
    char *backend; /* "builtin" or "qmd" */
    cm_citations citations;
    cm_qmd_config qmd; /* memory.qmd (read whatever the backend) */

    /* Both files merged key by key (objects recursively, the overlay's other
     * values replace), as written: the sections the runtime layers read
     * themselves (auth, models, agents.defaults.model and .compaction,
     * session, channels, …). Never NULL after a successful load. */
    json_t *root;
    /* The runtime's settings of root, typed (runtime_config.h): one
     * reference, dropped by cm_config_release. Never NULL after a load. */
    cm_rtcfg *rt;

    /* clawmem.* (clawmem's own section, in clawmem.json) */
    bool memory_write;       /* the memory_write tool is enabled */
    char *static_model_path; /* clawmem.staticModel: the static model file */
    cm_merge hybrid_merge;   /* clawmem.hybridMerge: how the two sides' scores combine */
    bool hybrid_merge_set;   /* hybridMerge given (else provider "static" defaults to minmax) */
} cm_config;

typedef struct cm_config_args {
    const char *agent_id, *workspace, *config_path, *state_dir; /* NULL: resolved */
} cm_config_args; /* clawmem.json: $CLAWMEM_CONFIG_PATH, else <stateDir>/clawmem.json */

/* One config file's text (NULL: absent) and the name used in its messages. */
typedef struct config_text {
    const char *text;
    size_t n;
    const char *name;
} config_text;

/* Resolves the config for one agent from QuantumClaw's quantumclaw.json
 * overlaid by clawmem's own clawmem.json (same structure; objects merge key by
 * key, a scalar or array in the overlay replaces the other file's, except
 * extraPaths, which accumulate over both files and over defaults and agent;
 * agents.list entries match by id). A missing file at its default path means
 * no settings from it; a file named explicitly (argument or environment) must
 * exist. A malformed file or a bad value fails with CM_ECONFIG and one line
 * naming file:line:column and the key path. Warnings (file:line:column): a key
 * QuantumClaw 2026.3.22 does not know in any section clawmem reads, clawmem's
 * own keys written in quantumclaw.json (which break QuantumClaw there), the
 * later OpenClaw layout (memory.search, agents.entries: read as aliases).
 * Secret inputs (remote.apiKey, models.providers.*.apiKey and headers) may be
 * env or file secret references, resolved here. On success the caller owns
 * cfg (cm_config_release). */
cm_rc cm_config_init(const cm_config_args *args, const cm_logger *lg, cm_config *cfg, char *err,
                     size_t errlen);

/* Same, from config text already in memory (name is used in messages). */
cm_rc cm_config_parse(const char *text, size_t n, const char *name, const cm_config_args *args,
                      const cm_logger *lg, cm_config *cfg, char *err, size_t errlen);

/* Same, from both files' text (overlay may be NULL). */
cm_rc cm_config_parse_files(const config_text *main, const config_text *overlay,
                            const cm_config_args *args, const cm_logger *lg, cm_config *cfg,
                            char *err, size_t errlen);

void cm_config_release(cm_config *cfg);

/* Appends extraPaths[i] as an absolute, lexically normalised path (~ and
 * workspace-relative resolved). CM_EPATH when its ".." climb above "/" (the
 * entry is then ignored by every user of it). */
cm_rc cm_config_extra_path(const cm_config *cfg, size_t i, buf *out);

/* Sets a "Name: value" header line in l: a line with the same name (any case)
 * is replaced, else the line is appended. */
cm_rc cm_config_header_set(cm_strlist *l, const char *line);

/* Whether model names gemini-embedding-2-preview (with 2026.3.22's prefixes
 * "models/", "gemini/", "google/" allowed): the model of multimodal memory. */
bool cm_config_gemini2_model(const char *model);
/* Parses a QuantumClaw duration ("5m", "90s", "1h30m", "250ms"; a bare
 * number in unit_ms units) into *ms; false when malformed. */
bool cm_config_duration_ms(const char *s, int64_t unit_ms, int64_t *ms);

/* Candidate pool per side: maxResults × candidateMultiplier, at most 200. */
int cm_config_candidates(const cm_config *cfg, int max_results);

#endif
