/*
 * profiles.c — the auth-profiles.json file (auth.h): where it lives, what is
 * imported into it the first time, and the locked read-modify-write every
 * change goes through.
 *
 * Writers take two locks: flock() on the file's directory, which queues
 * clawmem's own processes without polling, then QuantumClaw's sidecar
 * `<file>.lock` (created O_EXCL, holding {"pid","createdAt"}; stale when its
 * process is gone or it is older than 30 s), which QuantumClaw's gateway
 * honours too. The new content goes to a temporary file in the same
 * directory, is fsynced and renamed over the old one.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../base/fs.h"
#include "auth.h"

#define AUTH_FILE        "auth-profiles.json"
#define AUTH_FILE_MAX    (16u << 20) /* a store is a few KiB; refuse absurd files */
#define SIDECAR_STALE_MS 30000
#define SIDECAR_TRIES    11

cm_rc auth_store_path(buf *out, const char *state_dir, const char *agent_id)
{
    return buf_printf(out, "%s/agents/%s/agent/" AUTH_FILE, state_dir,
                      agent_id && *agent_id ? agent_id : "main");
}

void auth_store_release(auth_store *s)
{
    free(s->path);
    json_decref(s->doc);
    s->path = NULL;
    s->doc = NULL;
}

static json_t *empty_doc(void)
{
    return json_pack("{s:i,s:{}}", "version", 1, "profiles");
}

/* Parses path into *out: NULL when the file does not exist. */
static cm_rc read_json(const char *path, json_t **out, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf b = BUF_INIT;
    *out = NULL;
    rc = fs_read_file(path, AUTH_FILE_MAX, &b, err, errlen);
    if (rc == CM_ENOTFOUND) {
        rc = CM_OK;
        goto out;
    }
    if (rc) goto out;
    json_error_t je;
    *out = json_loadb(b.data ? b.data : "", b.len, 0, &je);
    if (!*out) {
        /* jansson quotes the offending token ("… near 'sk-…'"): in a file of
         * secrets that could be a key, so only the reason is kept. */
        char *near = strstr(je.text, " near ");
        if (near) *near = 0;
        FAIL(CM_ECONFIG, "%s:%d:%d: not valid JSON: %s", path, je.line, je.column, je.text);
    }
    if (!json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        FAIL(CM_ECONFIG, "%s: expected a JSON object", path);
    }
out:
    buf_release(&b);
    return rc;
}

/* A store document from whatever the file holds: `profiles` must be an
 * object; `version` is added when missing. */
static cm_rc coerce_store(const char *path, json_t *doc, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    json_t *p = json_object_get(doc, "profiles");
    if (!p) {
        if (json_object_set_new(doc, "profiles", json_object())) return CM_ENOMEM;
    } else if (!json_is_object(p)) {
        FAIL(CM_ECONFIG, "%s: \"profiles\" must be an object", path);
    }
    if (!json_object_get(doc, "version")) json_object_set_new(doc, "version", json_integer(1));
out:
    return rc;
}

cm_rc auth_store_read(auth_store *s, const char *path, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    json_t *doc = NULL;
    memset(s, 0, sizeof *s);
    CHECK(read_json(path, &doc, err, errlen));
    if (!doc && !(doc = empty_doc())) FAIL(CM_ENOMEM, "out of memory");
    CHECK(coerce_store(path, doc, err, errlen));
    if (!(s->path = cm_strdup(path))) FAIL(CM_ENOMEM, "out of memory");
    s->doc = doc;
    doc = NULL;
out:
    json_decref(doc);
    return rc;
}

/* ---- locking ---- */

typedef struct auth_lock {
    int dirfd;
    char sidecar[4096];
    bool have_sidecar;
} auth_lock;

/* The wall clock as ISO 8601 (the sidecar's createdAt must be real time:
 * QuantumClaw removes a sidecar whose createdAt is over 30 s old). */
static void iso_now(char *out, size_t n)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct tm tm;
    gmtime_r(&now.tv_sec, &tm);
    size_t w = strftime(out, n, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + w, n - w, ".%03dZ", (int)(now.tv_nsec / 1000000));
}

/* Whether the sidecar at path was left by a process that is gone, or is
 * older than SIDECAR_STALE_MS (QuantumClaw's rule). */
static bool sidecar_stale(const char *path)
{
    buf b = BUF_INIT;
    char err[64];
    bool stale = false;
    if (fs_read_file(path, 4096, &b, err, sizeof err) == CM_OK && b.data) {
        json_t *j = json_loads(b.data, 0, NULL);
        json_t *pid = json_object_get(j, "pid");
        if (json_is_integer(pid) && json_integer_value(pid) > 0 &&
            kill((pid_t)json_integer_value(pid), 0) < 0 && errno == ESRCH)
            stale = true;
        json_decref(j);
    }
    buf_release(&b);
    struct stat st;
    if (!stale && lstat(path, &st) == 0) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        int64_t age = ((int64_t)now.tv_sec - st.st_mtim.tv_sec) * 1000 +
                      (now.tv_nsec - st.st_mtim.tv_nsec) / 1000000;
        stale = age > SIDECAR_STALE_MS;
    }
    return stale;
}

static void lock_release(auth_lock *l)
{
    if (l->have_sidecar) unlink(l->sidecar);
    l->have_sidecar = false;
    if (l->dirfd >= 0) close(l->dirfd); /* drops the flock */
    l->dirfd = -1;
}

static cm_rc lock_take(auth_lock *l, const char *path, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    char *dir = fs_dirname(path);
    l->dirfd = -1;
    l->have_sidecar = false;
    if (!dir) return CM_ENOMEM;
    CHECK(fs_mkdirs(dir, err, errlen));
    l->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (l->dirfd < 0) FAIL(CM_EIO, "%s: %s", dir, strerror(errno));
    while (flock(l->dirfd, LOCK_EX) < 0)
        if (errno != EINTR) FAIL(CM_EIO, "lock %s: %s", dir, strerror(errno));
    if ((size_t)snprintf(l->sidecar, sizeof l->sidecar, "%s.lock", path) >= sizeof l->sidecar)
        FAIL(CM_ETOOBIG, "auth store path too long");
    /* The sidecar appears with its content (written to a private name, then
     * linked into place), so a writer killed at any point leaves a sidecar
     * whose pid shows it stale, never an empty one that blocks for 30 s. */
    char mine[4200], when[40], body[128];
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    /* ".<file>.<pid>.lock.tmp": the pattern remove_stale_temps() cleans. */
    snprintf(mine, sizeof mine, "%s/.%s.%d.lock.tmp", dir, base, (int)getpid());
    iso_now(when, sizeof when);
    int blen = snprintf(body, sizeof body, "{\n  \"pid\": %d,\n  \"createdAt\": \"%s\"\n}",
                        (int)getpid(), when);
    unlink(mine);
    int fd = open(mine, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) FAIL(CM_EIO, "%s: %s", mine, strerror(errno));
    ssize_t w = write(fd, body, (size_t)blen);
    close(fd);
    if (w != blen) {
        unlink(mine);
        FAIL(CM_EIO, "%s: short write", mine);
    }
    unsigned delay = 100;
    for (int attempt = 0; attempt < SIDECAR_TRIES; attempt++) {
        if (link(mine, l->sidecar) == 0) {
            unlink(mine);
            l->have_sidecar = true;
            goto out;
        }
        if (errno != EEXIST) {
            int e = errno;
            unlink(mine);
            FAIL(CM_EIO, "%s: %s", l->sidecar, strerror(e));
        }
        if (sidecar_stale(l->sidecar)) {
            unlink(l->sidecar);
            continue;
        }
        /* Held by a QuantumClaw process: back off as it does (100 ms doubling,
         * at most 10 s, jittered). */
        struct timespec ts = {0, 0};
        unsigned ms = delay + (unsigned)(rand() % (int)delay);
        ts.tv_sec = ms / 1000;
        ts.tv_nsec = (long)(ms % 1000) * 1000000L;
        nanosleep(&ts, NULL);
        delay = delay * 2 > 10000 ? 10000 : delay * 2;
    }
    unlink(mine);
    FAIL(CM_EBUSY, "%s is locked by another process (%s)", path, l->sidecar);
out:
    free(dir);
    if (rc) lock_release(l);
    return rc;
}

/* Removes temporary files of base that writers killed mid-write left in the
 * directory (".<base>.<pid>.<hex>.tmp" of a process that is gone). */
static void remove_stale_temps(int dirfd, const char *base)
{
    int fd = dup(dirfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0) close(fd);
        return;
    }
    size_t bl = strlen(base);
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *n = e->d_name;
        if (n[0] != '.' || strncmp(n + 1, base, bl) != 0 || n[1 + bl] != '.') continue;
        char *end;
        long pid = strtol(n + 2 + bl, &end, 10);
        size_t nl = strlen(n);
        if (pid <= 0 || *end != '.' || nl < 4 || strcmp(n + nl - 4, ".tmp") != 0) continue;
        if (pid != (long)getpid() && kill((pid_t)pid, 0) < 0 && errno == ESRCH)
            unlinkat(dirfd, n, 0);
    }
    closedir(d);
}

/* Writes doc to path atomically: a temporary file beside it, fsync, rename,
 * fsync of the directory. Mode 0600: the file holds secrets. */
static cm_rc write_doc(int dirfd, const char *path, const json_t *doc, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    char *text = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    char tmp[300];
    int fd = -1;
    bool made = false;
    if (!text) FAIL(CM_ENOMEM, "out of memory");
    remove_stale_temps(dirfd, base);
    for (int i = 0; i < 100 && fd < 0; i++) {
        snprintf(tmp, sizeof tmp, ".%.200s.%d.%08x.tmp", base, (int)getpid(),
                 (unsigned)rand() ^ (unsigned)(uintptr_t)&tmp);
        fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST) FAIL(CM_EIO, "%s: %s", path, strerror(errno));
    }
    if (fd < 0) FAIL(CM_EIO, "%s: no temporary name", path);
    made = true;
    size_t len = strlen(text);
    for (size_t off = 0; off < len + 1;) {
        const char *p = off < len ? text + off : "\n";
        size_t n = off < len ? len - off : 1;
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) FAIL(CM_EIO, "%s: %s", path, strerror(errno));
        off += (size_t)w;
    }
    if (fsync(fd) < 0) FAIL(CM_EIO, "%s: %s", path, strerror(errno));
    close(fd);
    fd = -1;
    if (renameat(dirfd, tmp, dirfd, base) < 0) FAIL(CM_EIO, "%s: %s", path, strerror(errno));
    made = false;
    fsync(dirfd);
out:
    if (fd >= 0) close(fd);
    if (made) unlinkat(dirfd, tmp, 0);
    free(text);
    return rc;
}

cm_rc auth_store_update(auth_store *s, const char *path, int64_t now_ms, auth_update_fn fn,
                        void *ctx, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    auth_lock l;
    auth_store fresh = {0};
    bool changed = false;
    CHECK(lock_take(&l, path, err, errlen));
    rc = auth_store_read(&fresh, path, err, errlen);
    if (!rc) rc = fn(fresh.doc, ctx, now_ms, &changed, err, errlen);
    if (!rc && changed) rc = write_doc(l.dirfd, path, fresh.doc, err, errlen);
    lock_release(&l);
    if (rc) goto out;
    if (s) {
        auth_store_release(s);
        *s = fresh;
        fresh.path = NULL;
        fresh.doc = NULL;
    }
out:
    auth_store_release(&fresh);
    return rc;
}

/* ---- first-use import ---- */

/* Adds the legacy auth.json map {provider: credential} as provider:default
 * profiles (existing profiles win). */
static bool import_legacy_map(json_t *profiles, json_t *legacy)
{
    bool changed = false;
    const char *provider;
    json_t *cred;
    json_object_foreach(legacy, provider, cred)
    {
        if (!json_is_object(cred)) continue;
        const char *type = json_string_value(json_object_get(cred, "type"));
        if (!type || (strcmp(type, "api_key") && strcmp(type, "token") && strcmp(type, "oauth")))
            continue;
        char id[300];
        snprintf(id, sizeof id, "%.250s:default", provider);
        if (json_object_get(profiles, id)) continue;
        json_t *c = json_deep_copy(cred);
        if (!c) continue;
        if (!json_is_string(json_object_get(c, "provider")))
            json_object_set_new(c, "provider", json_string(provider));
        json_object_set_new(profiles, id, c);
        changed = true;
    }
    return changed;
}

/* oauth.json: {provider: {access, refresh, expires, …}} → provider:default
 * OAuth profiles (existing profiles win). */
static bool import_oauth(json_t *profiles, json_t *oauth)
{
    bool changed = false;
    const char *provider;
    json_t *cred;
    json_object_foreach(oauth, provider, cred)
    {
        if (!json_is_object(cred)) continue;
        char id[300];
        snprintf(id, sizeof id, "%.250s:default", provider);
        if (json_object_get(profiles, id)) continue;
        json_t *c = json_pack("{s:s,s:s}", "type", "oauth", "provider", provider);
        if (!c) continue;
        json_object_update(c, cred);
        json_object_set_new(c, "type", json_string("oauth"));
        json_object_set_new(profiles, id, c);
        changed = true;
    }
    return changed;
}

typedef struct import_ctx {
    const char *state_dir, *agent_id;
    char *legacy_path; /* a legacy file imported, to remove afterwards */
} import_ctx;

static cm_rc import_fn(json_t *doc, void *vctx, int64_t now_ms, bool *changed, char *err,
                       size_t errlen)
{
    (void)now_ms;
    import_ctx *ctx = vctx;
    cm_rc rc = CM_OK;
    json_t *src = NULL;
    buf p = BUF_INIT;
    json_t *profiles = json_object_get(doc, "profiles");
    if (json_object_size(profiles) > 0) goto out; /* someone made it meanwhile */
    /* Another agent inherits the main agent's profiles. */
    if (strcmp(ctx->agent_id, "main") != 0) {
        CHECK(auth_store_path(&p, ctx->state_dir, "main"));
        CHECK(read_json(p.data, &src, err, errlen));
        json_t *mp = json_object_get(src, "profiles");
        if (json_is_object(mp) && json_object_size(mp) > 0) {
            json_object_update(doc, src);
            *changed = true;
            goto out;
        }
        json_decref(src);
        src = NULL;
    }
    /* Legacy stores: <agentDir>/auth.json (a provider map) and the seeds'
     * <stateDir>/agent/auth-profiles.json (a store). */
    buf_reset(&p);
    CHECK(buf_printf(&p, "%s/agents/%s/agent/auth.json", ctx->state_dir, ctx->agent_id));
    CHECK(read_json(p.data, &src, err, errlen));
    if (src && !json_object_get(src, "profiles") && import_legacy_map(profiles, src)) {
        *changed = true;
        ctx->legacy_path = buf_detach(&p);
    }
    json_decref(src);
    src = NULL;
    buf_reset(&p);
    CHECK(buf_printf(&p, "%s/agent/" AUTH_FILE, ctx->state_dir));
    CHECK(read_json(p.data, &src, err, errlen));
    json_t *lp = json_object_get(src, "profiles");
    if (json_is_object(lp)) {
        const char *id;
        json_t *cred;
        json_object_foreach(lp, id, cred)
        {
            if (json_object_get(profiles, id) || !json_is_object(cred)) continue;
            json_object_set(profiles, id, cred);
            *changed = true;
        }
    }
    json_decref(src);
    src = NULL;
    buf_reset(&p);
    CHECK(buf_printf(&p, "%s/credentials/oauth.json", ctx->state_dir));
    CHECK(read_json(p.data, &src, err, errlen));
    if (src && import_oauth(profiles, src)) *changed = true;
out:
    json_decref(src);
    buf_release(&p);
    return rc;
}

cm_rc auth_store_load(auth_store *s, const char *state_dir, const char *agent_id, char *err,
                      size_t errlen)
{
    cm_rc rc = CM_OK;
    buf p = BUF_INIT;
    import_ctx ctx = {state_dir, agent_id && *agent_id ? agent_id : "main", NULL};
    memset(s, 0, sizeof *s);
    CHECK(auth_store_path(&p, state_dir, ctx.agent_id));
    if (access(p.data, F_OK) == 0) {
        CHECK(auth_store_read(s, p.data, err, errlen));
        goto out;
    }
    /* Nothing yet: look at what QuantumClaw would import, without writing
     * when there is nothing. */
    auth_store probe = {0};
    CHECK(auth_store_read(&probe, p.data, err, errlen));
    bool changed = false;
    rc = import_fn(probe.doc, &ctx, 0, &changed, err, errlen);
    if (rc || !changed) {
        *s = probe;
        goto out;
    }
    auth_store_release(&probe);
    free(ctx.legacy_path);
    ctx.legacy_path = NULL;
    CHECK(auth_store_update(NULL, p.data, 0, import_fn, &ctx, err, errlen));
    if (ctx.legacy_path) unlink(ctx.legacy_path); /* migrated, as QuantumClaw does */
    CHECK(auth_store_read(s, p.data, err, errlen));
out:
    free(ctx.legacy_path);
    buf_release(&p);
    return rc;
}
