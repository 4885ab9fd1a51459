/*
 * store_pg.h — the PostgreSQL half of store.h, for store.c, vector_tables.c and batches.c
 * only: each store_* function of store.h hands a store opened with
 * cm_store_open_pg (s->pg set) to its store_pg_* counterpart here, so the engine
 * runs unchanged over either database. Contracts are those of store.h.
 */
#ifndef CM_STORE_PG_H
#define CM_STORE_PG_H

#include "store.h"

void cm_store_pg_close(store *s);
cm_rc cm_store_pg_meta_get(store *s, const char *key, char **json, char *err, size_t errlen);
cm_rc cm_store_pg_meta_set(store *s, const char *key, const char *json, char *err, size_t errlen);
cm_rc cm_store_pg_begin(store *s, char *err, size_t errlen);
cm_rc cm_store_pg_commit(store *s, char *err, size_t errlen);
void cm_store_pg_rollback(store *s);
/* cm_store_checkpoint: merges the keyword index's pending list when this
 * connection inserted chunks since it last did (store_pg.c). */
void cm_store_pg_merge_pending(store *s);
cm_rc cm_store_pg_files_load(store *s, stored_files *out, char *err, size_t errlen);
cm_rc cm_store_pg_file_replace(store *s, const char *path, const char *source, const char *hash,
                               int64_t mtime_ns, int64_t size, const char *problem,
                               const chunk_list *chunks, char *err, size_t errlen);
cm_rc cm_store_pg_file_touch(store *s, const char *path, int64_t mtime_ns, int64_t size, char *err,
                             size_t errlen);
cm_rc cm_store_pg_file_delete(store *s, const char *path, char *err, size_t errlen);
cm_rc cm_store_pg_fts_search(store *s, const char *match, const char *or_match, int limit,
                             fts_hits *out, bool *used_or, char *err, size_t errlen);
cm_rc cm_store_pg_meta_get_recent(store *s, const char *key, char **json, char *err,
                                  size_t errlen);
cm_rc cm_store_pg_file_problems(store *s, buf *out, char *err, size_t errlen);
cm_rc cm_store_pg_count(store *s, const char *from, int64_t *n, char *err, size_t errlen);
cm_rc cm_store_pg_check(store *s, bool *ok, char *err, size_t errlen);
cm_rc cm_store_pg_months(store *s, store_month_fn fn, void *ctx, char *err, size_t errlen);
cm_rc cm_store_pg_pending_vectors(store *s, int64_t after_id, size_t limit, pending_chunk **out,
                                  size_t *n, char *err, size_t errlen);
cm_rc cm_store_pg_cache_get(store *s, const char *provider, const char *model, const char *key,
                            const char *hash, float **out, int *dims, char *err, size_t errlen);
cm_rc cm_store_pg_cache_put(store *s, const char *provider, const char *model, const char *key,
                            const char *hash, const float *v, int dims, char *err, size_t errlen);
cm_rc cm_store_pg_cache_trim(store *s, int max_entries, char *err, size_t errlen);
cm_rc cm_store_pg_vector_put(store *s, int64_t chunk_id, const float *v, int dims, char *err,
                             size_t errlen);
cm_rc cm_store_pg_vectors_load(store *s, int dims, vec_index *x, int64_t *seq, char *err,
                               size_t errlen);
cm_rc cm_store_pg_vectors_update(store *s, int dims, vec_index *x, int64_t *seq, bool *reload,
                                 char *err, size_t errlen);
cm_rc cm_store_pg_chunk_get(store *s, int64_t id, fts_hit *out, char *err, size_t errlen);
int64_t cm_store_pg_data_version(store *s);
/* store_pg_batches.c */
cm_rc cm_store_pg_batches_ensure(store *s, char *err, size_t errlen);
cm_rc cm_store_pg_batches_list(store *s, store_batch **out, size_t *n, char *err, size_t errlen);
cm_rc cm_store_pg_batch_add(store *s, const store_batch *b, const char *const *hashes, size_t n,
                            char *err, size_t errlen);
cm_rc cm_store_pg_batch_hashes(store *s, const char *id, char ***hashes, size_t *n, char *err,
                               size_t errlen);
cm_rc cm_store_pg_batch_state(store *s, const char *id, const char *state, int64_t now, char *err,
                              size_t errlen);
cm_rc cm_store_pg_batch_delete(store *s, const char *id, char *err, size_t errlen);
cm_rc cm_store_pg_chunk_text(store *s, int64_t id, char **text, char *err, size_t errlen);
cm_rc cm_store_pg_batch_lease(store *s, bool wait, bool *held, char *err, size_t errlen);
bool cm_store_pg_batch_leased(store *s);
void cm_store_pg_batch_unlease(store *s);

#endif
