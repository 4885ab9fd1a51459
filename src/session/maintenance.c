/*
 * maintenance.c — session.maintenance (maintenance.h).
 */
#include <dirent.h>
#include <math.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../base/fs.h"
#include "maintenance.h"
#include "sessions.h"

void cm_session_maint_result_release(maint_result *r)
{
    json_decref(r->removed);
    free(r->backup);
    memset(r, 0, sizeof *r);
}

/* updatedAt, or `missing` when the entry has none. */
static double updated_of(const json_t *e, double missing)
{
    json_t *u = json_object_get(e, "updatedAt");
    return json_is_number(u) ? json_number_value(u) : missing;
}

typedef struct keyed {
    const char *key;
    double at;
} keyed;

static int newest_first(const void *a, const void *b)
{
    double x = ((const keyed *)a)->at, y = ((const keyed *)b)->at;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The keys of store by updatedAt, newest first (none: last); *n set. */
static keyed *sorted_keys(const json_t *store, size_t *n)
{
    keyed *k = malloc((json_object_size(store) + 1) * sizeof *k);
    const char *key;
    json_t *e;
    *n = 0;
    if (!k) return NULL;
    json_object_foreach((json_t *)store, key, e)
    {
        k[*n].key = key;
        k[(*n)++].at = updated_of(e, -INFINITY);
    }
    qsort(k, *n, sizeof *k, newest_first);
    return k;
}

/* The value at index k of v[0..n) ordered largest first (v reordered):
 * a selection (Hoare's partition), O(n) on average. 0 <= k < n. */
static double kth_largest(double *v, long n, long k)
{
    long lo = 0, hi = n - 1;
    while (lo < hi) {
        double p = v[lo + (hi - lo) / 2];
        long i = lo, j = hi;
        while (i <= j) {
            while (v[i] > p)
                i++;
            while (v[j] < p)
                j--;
            if (i <= j) {
                double t = v[i];
                v[i++] = v[j];
                v[j--] = t;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            break; /* v[k] == p */
    }
    return v[k];
}

/* The keys of active that sorted_keys puts at index max or later (n > max),
 * set in capped, without sorting the store: t, the time at index max, by
 * selection; newer entries are before it, older ones after, and the
 * entries at t in the store's order (the sort is stable) from index
 * (the count of newer ones) on. One pass over the store, the rest over
 * arrays and the (few) active keys. */
static cm_rc capped_active(const json_t *store, size_t max, const json_t *active, json_t *capped)
{
    cm_rc rc = CM_OK;
    size_t n = json_object_size(store), i = 0;
    double *at = malloc((n + 1) * sizeof *at), *v = malloc((n + 1) * sizeof *v);
    const char **keys = malloc((n + 1) * sizeof *keys);
    const char *key;
    json_t *e;
    if (!at || !v || !keys) {
        rc = CM_ENOMEM;
        goto out;
    }
    json_object_foreach((json_t *)store, key, e)
    {
        keys[i] = key;
        at[i] = v[i] = updated_of(e, -INFINITY);
        i++;
    }
    double t = kth_largest(v, (long)n, (long)max);
    size_t newer = 0, ties = 0;
    bool tied_active = false;
    for (i = 0; i < n; i++)
        newer += at[i] > t;
    json_object_foreach((json_t *)active, key, e)
    {
        json_t *se = json_object_get(store, key);
        if (!se) continue;
        double a = updated_of(se, -INFINITY);
        if (a == t) tied_active = true;
        if (a < t && json_object_set_new(capped, key, json_true())) {
            rc = CM_ENOMEM;
            goto out;
        }
    }
    for (i = 0; tied_active && i < n; i++) {
        if (at[i] != t) continue;
        if (newer + ties++ >= max && json_object_get(active, keys[i]) &&
            json_object_set_new(capped, keys[i], json_true())) {
            rc = CM_ENOMEM;
            goto out;
        }
    }
out:
    free(at);
    free(v);
    free(keys);
    return rc;
}

static cm_rc remove_entry(json_t *store, const char *key, maint_result *r)
{
    json_t *e = json_object_get(store, key);
    if (!e) return CM_OK;
    if (json_object_set(r->removed, key, e)) return CM_ENOMEM;
    json_object_del(store, key);
    return CM_OK;
}

cm_rc cm_session_maint_entries(json_t *store, const cm_session_maint *m, int64_t now,
                               const json_t *active, const cm_logger *lg, maint_result *r)
{
    cm_rc rc = CM_OK;
    keyed *k = NULL;
    memset(r, 0, sizeof *r);
    if (!(r->removed = json_object())) return CM_ENOMEM;
    double cutoff = (double)now - (double)m->prune_after_ms;
    size_t n = json_object_size(store);
    if (!m->enforce) {
        /* warn: would a session being written be evicted? */
        json_t *capped = json_object();
        if (!capped) return CM_ENOMEM;
        if ((int64_t)n > m->max_entries && json_object_size(active) &&
            capped_active(store, (size_t)m->max_entries, active, capped)) {
            json_decref(capped);
            return CM_ENOMEM;
        }
        const char *key;
        json_t *v;
        json_object_foreach((json_t *)active, key, v)
        {
            json_t *e = json_object_get(store, key);
            if (!e) continue;
            bool prune = updated_of(e, INFINITY) < cutoff;
            bool cap = json_object_get(capped, key) != NULL;
            if (prune || cap) {
                cm_logf(lg, CM_LOG_WARN,
                        "session maintenance would evict active session; skipping enforcement "
                        "(%s: %s%s%s; %zu entries, maxEntries %lld, pruneAfter %lld ms)",
                        key, prune ? "older than pruneAfter" : "", prune && cap ? ", " : "",
                        cap ? "beyond maxEntries" : "", n, (long long)m->max_entries,
                        (long long)m->prune_after_ms);
                r->warned = true;
            }
        }
        json_decref(capped);
        goto out;
    }
    /* enforce: prune, then cap */
    const char *key;
    json_t *e;
    void *tmp;
    json_object_foreach_safe(store, tmp, key, e)
    {
        if (updated_of(e, INFINITY) < cutoff) {
            CHECK(remove_entry(store, key, r));
            r->pruned++;
        }
    }
    n = json_object_size(store);
    if ((int64_t)n > m->max_entries) {
        if (!(k = sorted_keys(store, &n))) CHECK(CM_ENOMEM);
        /* the keys are the store's own strings: collect before removing */
        json_t *drop = json_array();
        for (size_t i = (size_t)m->max_entries; drop && i < n; i++)
            json_array_append_new(drop, json_string(k[i].key));
        size_t i;
        json_t *dk;
        json_array_foreach(drop, i, dk)
        {
            if (!rc) rc = remove_entry(store, json_string_value(dk), r);
        }
        r->capped += (int64_t)json_array_size(drop);
        json_decref(drop);
        if (rc) goto out;
    }
    if (r->pruned || r->capped)
        cm_logf(lg, CM_LOG_INFO, "session maintenance: pruned %lld stale, capped %lld entries",
                (long long)r->pruned, (long long)r->capped);
out:
    free(k);
    return rc;
}

/* ---- files ----------------------------------------------------------------- */

/* "<stamp>" after the last ".<reason>." of name, as ms since the epoch; -1
 * when name is not such an archive. */
static int64_t archive_time(const char *name, const char *reason)
{
    char marker[32];
    snprintf(marker, sizeof marker, ".%s.", reason);
    const char *at = NULL;
    for (const char *p = strstr(name, marker); p; p = strstr(p + 1, marker))
        at = p;
    if (!at) return -1;
    const char *s = at + strlen(marker);
    int Y, M, D, h, mi, sec, ms = 0, used = 0;
    size_t len = strlen(s);
    if (len != 20 && len != 24) return -1;
    for (size_t i = 0; i < len; i++) {
        static const char pat[] = "dddd-dd-ddTdd-dd-dd.dddZ";
        char c = len == 20 && i == 19 ? 'Z' : pat[i];
        if (c == 'd' ? (s[i] < '0' || s[i] > '9') : s[i] != c) return -1;
    }
    if (sscanf(s, "%4d-%2d-%2dT%2d-%2d-%2d%n", &Y, &M, &D, &h, &mi, &sec, &used) != 6) return -1;
    if (len == 24) ms = (s[20] - '0') * 100 + (s[21] - '0') * 10 + (s[22] - '0');
    struct tm tm = {0};
    tm.tm_year = Y - 1900;
    tm.tm_mon = M - 1;
    tm.tm_mday = D;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = sec;
    return (int64_t)timegm(&tm) * 1000 + ms;
}

static bool is_archive(const char *name)
{
    const char *p = strstr(name, "sessions.json.bak.");
    if (p == name) {
        for (p += 18; *p; p++)
            if (*p < '0' || *p > '9') return false;
        return name[18] != 0;
    }
    return archive_time(name, "deleted") >= 0 || archive_time(name, "reset") >= 0 ||
           archive_time(name, "bak") >= 0;
}

static bool is_transcript(const char *name)
{
    size_t n = strlen(name);
    return n > 6 && !strcmp(name + n - 6, ".jsonl") && !is_archive(name);
}

/* The session ids still used by store. */
static json_t *ids_of(const json_t *store)
{
    json_t *ids = json_object();
    const char *key;
    json_t *e;
    json_object_foreach((json_t *)store, key, e)
    {
        const char *id = json_string_value(json_object_get(e, "sessionId"));
        if (id && ids) json_object_set_new(ids, id, json_true());
    }
    return ids;
}

/* Archives the transcripts of removed entries whose session id no store
 * entry uses any more. */
static int archive_removed(const json_t *store, const char *dir, int64_t now, maint_result *r)
{
    int archived = 0;
    json_t *ids = ids_of(store);
    const char *key;
    json_t *e;
    char stamp[32];
    cm_session_archive_stamp(now, stamp);
    json_object_foreach(r->removed, key, e)
    {
        const char *id = json_string_value(json_object_get(e, "sessionId"));
        buf from = BUF_INIT, to = BUF_INIT;
        if (id && !json_object_get(ids, id) && !cm_session_transcript_in(dir, e, &from) &&
            !cm_buf_printf(&to, "%s.deleted.%s", from.data, stamp))
            archived += rename(from.data, to.data) == 0; /* ENOENT: nothing was written */
        if (id && ids) json_object_set_new(ids, id, json_true()); /* once per id */
        cm_buf_release(&from);
        cm_buf_release(&to);
    }
    json_decref(ids);
    return archived;
}

/* Deletes `.<reason>.<stamp>` archives in dir older than older_ms. */
static void delete_archives(const char *dir, const char *reason, int64_t older_ms, int64_t now,
                            maint_result *r)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        int64_t t = archive_time(de->d_name, reason);
        if (t < 0 || now - t <= older_ms) continue;
        buf p = BUF_INIT;
        struct stat st;
        if (!cm_buf_printf(&p, "%s/%s", dir, de->d_name) && !lstat(p.data, &st) &&
            S_ISREG(st.st_mode) && !unlink(p.data))
            r->archives_deleted++;
        cm_buf_release(&p);
    }
    if (d) closedir(d);
}

static int name_desc(const void *a, const void *b)
{
    return -strcmp(*(char *const *)a, *(char *const *)b);
}

/* sessions.json over max bytes: a backup, sessions.json.bak.<ms>, made as
 * a second name of the file (link), so that sessions.json stays in place
 * until the new one is renamed over it: a write that fails, or a crash
 * before it, leaves the store where readers look for it (renamed away, it
 * was missing: an empty store to every reader). The backup is dropped again
 * when the write fails, and the older ones pruned once it worked
 * (cm_session_maint_written). */
static void rotate(const char *path, int64_t max, int64_t now, maint_result *r)
{
    struct stat st;
    if (stat(path, &st) || st.st_size <= max) return;
    buf bak = BUF_INIT;
    if (cm_buf_printf(&bak, "%s.bak.%lld", path, (long long)now) || link(path, bak.data)) {
        cm_buf_release(&bak);
        return;
    }
    r->backup = cm_buf_detach(&bak);
    r->rotated = true;
}

/* Only the 3 newest backups of sessions.json at path are kept. */
static void prune_backups(const char *path, const char *dir)
{
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    char prefix[300];
    snprintf(prefix, sizeof prefix, "%s.bak.", base);
    DIR *d = opendir(dir);
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (strncmp(de->d_name, prefix, strlen(prefix))) continue;
        if (n == cap) {
            char **nn = realloc(names, (cap = cap * 2 + 8) * sizeof *nn);
            if (!nn) break;
            names = nn;
        }
        if (!(names[n] = cm_strdup(de->d_name))) break;
        n++;
    }
    if (d) closedir(d);
    qsort(names, n, sizeof *names, name_desc);
    for (size_t i = 0; i < n; i++) {
        if (i >= 3) {
            buf p = BUF_INIT;
            if (!cm_buf_printf(&p, "%s/%s", dir, names[i])) unlink(p.data);
            cm_buf_release(&p);
        }
        free(names[i]);
    }
    free(names);
}

typedef struct dfile {
    char *name;
    int64_t size;
    double mtime;
} dfile;

static int oldest_first(const void *a, const void *b)
{
    double x = ((const dfile *)a)->mtime, y = ((const dfile *)b)->mtime;
    return x < y ? -1 : x > y;
}

/* The disk budget (disk-budget.ts enforceSessionDiskBudget). */
static void budget(json_t *store, const char *path, const char *dir, const cm_session_maint *m,
                   const json_t *active, size_t store_bytes, const cm_logger *lg,
                   maint_result *r, bool *rewrite)
{
    DIR *d = opendir(dir);
    dfile *f = NULL;
    size_t n = 0, cap = 0;
    int64_t total = (int64_t)store_bytes;
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        buf p = BUF_INIT;
        struct stat st;
        if (cm_buf_printf(&p, "%s/%s", dir, de->d_name) || stat(p.data, &st) ||
            !S_ISREG(st.st_mode) || !strcmp(de->d_name, base)) {
            cm_buf_release(&p);
            continue;
        }
        cm_buf_release(&p);
        total += st.st_size;
        if (n == cap) {
            dfile *nf = realloc(f, (cap = cap * 2 + 16) * sizeof *nf);
            if (!nf) break;
            f = nf;
        }
        f[n].name = cm_strdup(de->d_name);
        f[n].size = st.st_size;
        f[n].mtime = (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec / 1e9;
        if (f[n].name) n++;
    }
    if (d) closedir(d);
    if (total <= m->max_disk_bytes) goto out;
    r->over_budget = true;
    if (!m->enforce) {
        cm_logf(lg, CM_LOG_WARN,
                "session disk budget exceeded (warn-only mode): %s holds %lld bytes, maxDiskBytes "
                "%lld",
                dir, (long long)total, (long long)m->max_disk_bytes);
        r->warned = true;
        goto out;
    }
    /* archives and transcripts no entry uses, oldest first */
    json_t *used = json_object();
    const char *key;
    json_t *e;
    json_object_foreach(store, key, e)
    {
        buf t = BUF_INIT;
        if (!cm_session_transcript_in(dir, e, &t)) {
            const char *slash = strrchr(t.data, '/');
            json_object_set_new(used, slash ? slash + 1 : t.data, json_true());
        }
        cm_buf_release(&t);
    }
    qsort(f, n, sizeof *f, oldest_first);
    for (size_t i = 0; i < n && total > m->high_water_bytes; i++) {
        if (!is_archive(f[i].name) && !(is_transcript(f[i].name) && !json_object_get(used, f[i].name)))
            continue;
        buf p = BUF_INIT;
        if (!cm_buf_printf(&p, "%s/%s", dir, f[i].name) && !unlink(p.data)) {
            total -= f[i].size;
            r->budget_files++;
        }
        cm_buf_release(&p);
    }
    json_decref(used);
    /* then the least recently updated entries, never the ones being written */
    if (total > m->high_water_bytes) {
        size_t kn;
        keyed *k = sorted_keys(store, &kn);
        json_t *ids = NULL;
        for (size_t i = kn; k && i-- > 0 && total > m->high_water_bytes;) {
            if (active && json_object_get(active, k[i].key)) continue;
            e = json_incref(json_object_get(store, k[i].key));
            char *text = json_dumps(e, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
            total -= (int64_t)(text ? strlen(text) : 0) + (int64_t)strlen(k[i].key) + 8;
            free(text);
            char *kc = cm_strdup(k[i].key);
            if (kc && !remove_entry(store, kc, r)) r->budget_entries++;
            free(kc);
            *rewrite = true;
            json_decref(ids);
            ids = ids_of(store);
            const char *id = json_string_value(json_object_get(e, "sessionId"));
            buf t = BUF_INIT;
            struct stat st;
            if (id && !json_object_get(ids, id) && !cm_session_transcript_in(dir, e, &t) &&
                !stat(t.data, &st) && !unlink(t.data)) {
                total -= st.st_size;
                r->budget_files++;
            }
            cm_buf_release(&t);
            json_decref(e);
        }
        json_decref(ids);
        free(k);
    }
    if (total > m->high_water_bytes) {
        cm_logf(lg, CM_LOG_WARN,
                "session disk budget still above high-water target after cleanup: %lld bytes, "
                "highWaterBytes %lld",
                (long long)total, (long long)m->high_water_bytes);
        r->warned = true;
    } else
        r->over_budget = false;
out:
    for (size_t i = 0; i < n; i++)
        free(f[i].name);
    free(f);
}

void cm_session_maint_files(json_t *store, const char *store_path, const cm_session_maint *m,
                            int64_t now, const json_t *active, size_t store_bytes,
                            const cm_logger *lg, maint_result *r, bool *rewrite)
{
    *rewrite = false;
    char *dir = cm_fs_dirname(store_path);
    if (!dir) return;
    if (m->enforce) {
        int archived = json_object_size(r->removed) ? archive_removed(store, dir, now, r) : 0;
        if (archived || m->reset_retention_ms >= 0)
            delete_archives(dir, "deleted", m->prune_after_ms, now, r);
        if (m->reset_retention_ms >= 0)
            delete_archives(dir, "reset", m->reset_retention_ms, now, r);
        rotate(store_path, m->rotate_bytes, now, r);
    }
    if (m->max_disk_bytes >= 0)
        budget(store, store_path, dir, m, active, store_bytes, lg, r, rewrite);
    free(dir);
}

void cm_session_maint_written(const char *store_path, maint_result *r, bool written)
{
    if (!r->backup) return;
    if (!written) {
        unlink(r->backup);
        r->rotated = false;
    } else {
        char *dir = cm_fs_dirname(store_path);
        if (dir) prune_backups(store_path, dir);
        free(dir);
    }
    free(r->backup);
    r->backup = NULL;
}
