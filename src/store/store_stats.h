/*
 * store_stats.h — counts and checks of an index for status and doctor
 * (store_stats.c). Included by store.h; needs its store type.
 */
#ifndef CM_STORE_STATS_H
#define CM_STORE_STATS_H

#include "store.h"

/* Appends to out a JSON array of {"path","problem"} for files indexed
 * imperfectly (binary, invalid UTF-8). */
cm_rc cm_store_file_problems(store *s, buf *out, char *err, size_t errlen);

cm_rc cm_store_counts(store *s, int64_t *files, int64_t *chunks, char *err, size_t errlen);
/* What the index holds by source and month: fn(ctx, source, "YYYY-MM" of
 * the file's mtime in UTC ("unknown" when out of range), files, chunks) for
 * each pair, by source then month; fn returns false to stop. */
typedef bool (*store_month_fn)(void *ctx, const char *source, const char *month, int64_t files,
                               int64_t chunks);
cm_rc cm_store_months(store *s, store_month_fn fn, void *ctx, char *err, size_t errlen);
/* count(*) FROM `from`: one of our tables, optionally with a WHERE clause
 * (a constant of ours, never user input). */
cm_rc cm_store_count(store *s, const char *from, int64_t *n, char *err, size_t errlen);

/* PRAGMA integrity_check plus the FTS5 integrity-check; *ok tells. */
cm_rc cm_store_check(store *s, bool *ok, char *err, size_t errlen);

#endif
