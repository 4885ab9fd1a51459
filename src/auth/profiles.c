/*
 * profiles.c — the auth-profiles.json file (auth.h): where it lives, what is
 * imported into it the first time, and the locked read-modify-write every
 * change goes through.
 *
 * Writers go through base/lockfile: clawmem's processes queue on an flock,
 * QuantumClaw's honour the `<file>.lock` sidecar, and the new content
 * replaces the file atomically.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/fs.h"
#include "../base/lockfile.h"
#include "auth.h"
#include "../base/caps.h"

#define AUTH_FILE        "auth-profiles.json"
#define AUTH_FILE_MAX    CM_CAP_AUTH_FILE /* a store is a few KiB; refuse absurd files */
#define SIDECAR_STALE_MS 30000
#define SIDECAR_TRIES    11

cm_rc cm_auth_store_path(buf *out, const char *state_dir, const char *agent_id)
{
    return cm_buf_printf(out, "%s/agents/%s/agent/" AUTH_FILE, state_dir,
                         agent_id && *agent_id ? agent_id : "main");
}

void cm_auth_store_release(auth_store *s)
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
    rc = cm_fs_read_file(path, AUTH_FILE_MAX, &b, err, errlen);
    if (rc == CM_ENOTFOUND) {
        rc = CM_OK;
        goto out;
    }
    if (rc) goto out;
    json_error_t je;
    *out = json_loadb(b.data, b.len, 0, &je);
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
    cm_buf_release(&b);
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

cm_rc cm_auth_store_read(auth_store *s, const char *path, char *err, size_t errlen)
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

cm_rc cm_auth_store_update(auth_store *s, const char *path, int64_t now_ms, auth_update_fn fn,
                           void *ctx, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    lockfile l;
    auth_store fresh = {0};
    bool changed = false;
    CHECK(cm_lockfile_take(&l, path, LOCKFILE_REPLACE, NULL, err, errlen));
    rc = cm_auth_store_read(&fresh, path, err, errlen);
    if (!rc) rc = fn(fresh.doc, ctx, now_ms, &changed, err, errlen);
    if (!rc && changed) {
        /* As QuantumClaw writes it: two-space indent, a final newline. */
        char *text = json_dumps(fresh.doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        buf b = BUF_INIT;
        rc = text && !cm_buf_adds(&b, text) && !cm_buf_addc(&b, '\n') ? CM_OK : CM_ENOMEM;
        if (!rc) rc = cm_lockfile_replace(&l, b.data, b.len, err, errlen);
        if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
        cm_buf_release(&b);
        free(text);
    }
    cm_lockfile_release(&l);
    if (rc) goto out;
    if (s) {
        cm_auth_store_release(s);
        *s = fresh;
        fresh.path = NULL;
        fresh.doc = NULL;
    }
out:
    cm_auth_store_release(&fresh);
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
        CHECK(cm_auth_store_path(&p, ctx->state_dir, "main"));
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
    cm_buf_reset(&p);
    CHECK(cm_buf_printf(&p, "%s/agents/%s/agent/auth.json", ctx->state_dir, ctx->agent_id));
    CHECK(read_json(p.data, &src, err, errlen));
    if (src && !json_object_get(src, "profiles") && import_legacy_map(profiles, src)) {
        *changed = true;
        ctx->legacy_path = cm_buf_detach(&p);
    }
    json_decref(src);
    src = NULL;
    cm_buf_reset(&p);
    CHECK(cm_buf_printf(&p, "%s/agent/" AUTH_FILE, ctx->state_dir));
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
    cm_buf_reset(&p);
    CHECK(cm_buf_printf(&p, "%s/credentials/oauth.json", ctx->state_dir));
    CHECK(read_json(p.data, &src, err, errlen));
    if (src && import_oauth(profiles, src)) *changed = true;
out:
    json_decref(src);
    cm_buf_release(&p);
    return rc;
}

cm_rc cm_auth_store_init(auth_store *s, const char *state_dir, const char *agent_id, char *err,
                         size_t errlen)
{
    cm_rc rc = CM_OK;
    buf p = BUF_INIT;
    import_ctx ctx = {state_dir, agent_id && *agent_id ? agent_id : "main", NULL};
    memset(s, 0, sizeof *s);
    CHECK(cm_auth_store_path(&p, state_dir, ctx.agent_id));
    if (access(p.data, F_OK) == 0) {
        CHECK(cm_auth_store_read(s, p.data, err, errlen));
        goto out;
    }
    /* Nothing yet: look at what QuantumClaw would import, without writing
     * when there is nothing. */
    auth_store probe = {0};
    CHECK(cm_auth_store_read(&probe, p.data, err, errlen));
    bool changed = false;
    rc = import_fn(probe.doc, &ctx, 0, &changed, err, errlen);
    if (rc || !changed) {
        *s = probe;
        goto out;
    }
    cm_auth_store_release(&probe);
    free(ctx.legacy_path);
    ctx.legacy_path = NULL;
    CHECK(cm_auth_store_update(NULL, p.data, 0, import_fn, &ctx, err, errlen));
    if (ctx.legacy_path) unlink(ctx.legacy_path); /* migrated, as QuantumClaw does */
    CHECK(cm_auth_store_read(s, p.data, err, errlen));
out:
    free(ctx.legacy_path);
    cm_buf_release(&p);
    return rc;
}
