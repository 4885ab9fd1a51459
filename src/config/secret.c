/*
 * secret.c — QuantumClaw 2026.3.22's secret inputs and "${VAR}" substitution
 * for the config: env and file secret references (file providers checked as
 * QuantumClaw checks them: absolute, not a link, only the owner may read),
 * JSON pointers into a JSON secrets file. Messages never contain a secret.
 */
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/buf.h"
#include "../base/fs.h"
#include "secret.h"
#include "../base/caps.h"

cm_rc cm_secret_subst_env(const char *in, char **out, char *why, size_t whylen)
{
    buf b = BUF_INIT;
    cm_rc rc = CM_OK;
    *out = NULL;
    for (const char *p = in; *p && !rc;) {
        bool esc = p[0] == '$' && p[1] == '$' && p[2] == '{';
        const char *name = p + (esc ? 3 : 2), *end = NULL;
        if (esc || (p[0] == '$' && p[1] == '{')) {
            end = strchr(name, '}');
            bool ok = end && end > name && !(*name >= '0' && *name <= '9');
            for (const char *q = name; ok && q < end; q++)
                ok = (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') || *q == '_';
            if (!ok) end = NULL;
        }
        if (!end) {
            rc = cm_buf_addc(&b, *p++);
            continue;
        }
        if (esc) {
            rc = cm_buf_add(&b, p + 1, (size_t)(end + 1 - (p + 1)));
        } else {
            char var[256];
            snprintf(var, sizeof var, "%.*s", (int)CM_MIN(end - name, 255), name);
            const char *val = getenv(var);
            if (!val || !*val)
                rc = cm_seterr(why, whylen, CM_ECONFIG,
                               "environment variable \"%s\" is missing or empty", var);
            else
                rc = cm_buf_adds(&b, val);
        }
        p = end + 1;
    }
    if (!rc && !(*out = cm_buf_detach(&b))) rc = CM_ENOMEM;
    cm_buf_release(&b);
    return rc;
}

/* secrets.<section>.<key> of the later file that has it, or NULL. */
static const json_t *secrets_get(const secrets *s, const char *section, const char *key)
{
    for (int i = 1; s && i >= 0; i--) {
        const json_t *sec = s->sec[i] ? json_object_get(s->sec[i], section) : NULL;
        const json_t *v = json_is_object(sec) ? json_object_get(sec, key) : NULL;
        if (v) return v;
    }
    return NULL;
}

static cm_rc secret_file(const json_t *pc, const char *alias, const char *id, char **out, char *why,
                         size_t whylen)
{
    cm_rc rc = CM_OK;
    buf text = BUF_INIT;
    json_t *root = NULL;
    char *path = NULL;
    const json_t *jp = json_object_get(pc, "path"), *mode = json_object_get(pc, "mode");
    const json_t *jmax = json_object_get(pc, "maxBytes");
    char *err = why; /* for FAIL */
    size_t errlen = whylen;
    if (!json_is_string(jp) || !*json_string_value(jp))
        FAIL(CM_ECONFIG, "secrets.providers.%s.path is not set", alias);
    if (!(path = cm_fs_expand_home(json_string_value(jp)))) CHECK(CM_ENOMEM);
    if (path[0] != '/') FAIL(CM_ECONFIG, "secrets.providers.%s.path must be absolute", alias);
    struct stat st;
    if (lstat(path, &st) < 0)
        FAIL(CM_ECONFIG, "secrets.providers.%s.path %s: %s", alias, path, strerror(errno));
    if (S_ISLNK(st.st_mode))
        FAIL(CM_ECONFIG, "secrets.providers.%s.path must not be a symbolic link", alias);
    if (!S_ISREG(st.st_mode))
        FAIL(CM_ECONFIG, "secrets.providers.%s.path is not a regular file", alias);
    if (st.st_mode & 077)
        FAIL(CM_ECONFIG, "secrets.providers.%s.path %s: permissions are too open (chmod 600)",
             alias, path);
    if (st.st_uid != getuid())
        FAIL(CM_ECONFIG, "secrets.providers.%s.path %s must be owned by the current user", alias,
             path);
    size_t max = CM_CAP_SECRET_FILE;
    if (json_is_integer(jmax) && json_integer_value(jmax) > 0)
        max = (size_t)CM_MIN(json_integer_value(jmax), CM_CAP_SECRET_FILE_MAX);
    char rerr[256];
    if (cm_fs_read_file(path, max, &text, rerr, sizeof rerr))
        FAIL(CM_ECONFIG, "secrets.providers.%s: %s", alias, rerr);
    if (json_is_string(mode) && strcmp(json_string_value(mode), "singleValue") == 0) {
        if (strcmp(id, "value") != 0)
            FAIL(CM_ECONFIG, "singleValue file provider \"%s\" expects the id \"value\"", alias);
        size_t n = text.len;
        if (n && text.data[n - 1] == '\n') n--;
        if (n && text.data[n - 1] == '\r') n--;
        if (!n) FAIL(CM_ECONFIG, "the file of secret provider \"%s\" is empty", alias);
        if (!(*out = cm_strndup(text.data, n))) CHECK(CM_ENOMEM);
        goto out;
    }
    json_error_t je;
    root = json_loadb(text.data, text.len, 0, &je);
    if (!json_is_object(root))
        FAIL(CM_ECONFIG, "the file of secret provider \"%s\" is not a JSON object", alias);
    /* id is a JSON pointer: "/a/b", with ~1 for '/' and ~0 for '~' */
    const json_t *cur = root;
    const char *p = id;
    if (*p != '/') FAIL(CM_ECONFIG, "file secret id \"%.100s\" is not a JSON pointer", id);
    while (*p == '/' && cur) {
        char seg[256];
        size_t n = 0;
        for (p++; *p && *p != '/'; p++) {
            char ch = *p;
            if (ch == '~' && (p[1] == '0' || p[1] == '1')) ch = *++p == '0' ? '~' : '/';
            if (n + 1 < sizeof seg) seg[n++] = ch;
        }
        seg[n] = 0;
        if (json_is_object(cur)) {
            cur = json_object_get(cur, seg);
        } else if (json_is_array(cur)) {
            char *end;
            unsigned long k = strtoul(seg, &end, 10);
            cur = n && !*end ? json_array_get(cur, k) : NULL;
        } else {
            cur = NULL;
        }
    }
    if (!cur) FAIL(CM_ECONFIG, "secret \"%.100s\" not found in provider \"%s\"'s file", id, alias);
    if (!json_is_string(cur) || !*json_string_value(cur))
        FAIL(CM_ECONFIG, "secret \"%.100s\" of provider \"%s\" is not a non-empty string", id,
             alias);
    if (!(*out = cm_strdup(json_string_value(cur)))) CHECK(CM_ENOMEM);
out:
    json_decref(root);
    cm_buf_release(&text);
    free(path);
    return rc;
}

cm_rc cm_secret_resolve(const secrets *s, const json_t *v, char **out, char *why, size_t whylen)
{
    char *err = why; /* for FAIL */
    size_t errlen = whylen;
    cm_rc rc = CM_OK;
    const char *source = NULL, *alias = NULL, *id = NULL;
    char idbuf[132];
    *out = NULL;
    if (json_is_string(v)) {
        const char *t = json_string_value(v);
        size_t n = strlen(t);
        bool tmpl = n > 3 && t[0] == '$' && t[1] == '{' && t[n - 1] == '}' && t[2] >= 'A' &&
                    t[2] <= 'Z' && n - 3 <= 128;
        for (size_t i = 2; tmpl && i < n - 1; i++)
            tmpl = (t[i] >= 'A' && t[i] <= 'Z') || (t[i] >= '0' && t[i] <= '9') || t[i] == '_';
        if (!tmpl) return cm_secret_subst_env(t, out, why, whylen); /* "Bearer ${KEY}" too */
        snprintf(idbuf, sizeof idbuf, "%.*s", (int)(n - 3), t + 2);
        source = "env";
        id = idbuf;
    } else if (json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x)
        {
            if (!json_is_string(x) ||
                (strcmp(k, "source") && strcmp(k, "provider") && strcmp(k, "id")))
                FAIL(CM_ECONFIG, "expected a string or a secret reference {source, provider, id}");
        }
        source = json_string_value(json_object_get(v, "source"));
        alias = json_string_value(json_object_get(v, "provider"));
        id = json_string_value(json_object_get(v, "id"));
        if (!source || (strcmp(source, "env") && strcmp(source, "file") && strcmp(source, "exec")))
            FAIL(CM_ECONFIG, "a secret reference's source is one of env, file, exec");
        if (!id || !*id) FAIL(CM_ECONFIG, "a secret reference needs an id");
    } else {
        FAIL(CM_ECONFIG, "expected a string or a secret reference {source, provider, id}");
    }
    const json_t *dflt = secrets_get(s, "defaults", source);
    const char *dalias = json_is_string(dflt) ? json_string_value(dflt) : "default";
    if (!alias || !*alias) alias = dalias;
    if (strcmp(source, "exec") == 0)
        FAIL(CM_ECONFIG,
             "secret references with source \"exec\" are not supported by clawmem: use an env or "
             "file reference");
    const json_t *pc = secrets_get(s, "providers", alias);
    if (!pc && !(strcmp(source, "env") == 0 && strcmp(alias, dalias) == 0))
        FAIL(CM_ECONFIG, "secret provider \"%.64s\" is not configured (secrets.providers.%.64s)",
             alias, alias);
    if (pc && (!json_is_object(pc) || !json_is_string(json_object_get(pc, "source")) ||
               strcmp(json_string_value(json_object_get(pc, "source")), source) != 0))
        FAIL(CM_ECONFIG, "secret provider \"%.64s\" is not a %s provider", alias, source);
    if (strcmp(source, "file") == 0) return secret_file(pc, alias, id, out, why, whylen);
    const json_t *allow = pc ? json_object_get(pc, "allowlist") : NULL;
    if (json_is_array(allow)) {
        bool ok = false;
        size_t i;
        json_t *e;
        json_array_foreach(allow, i, e) ok =
            ok || (json_is_string(e) && !strcmp(json_string_value(e), id));
        if (!ok)
            FAIL(CM_ECONFIG,
                 "environment variable \"%.128s\" is not in secrets.providers.%.64s.allowlist", id,
                 alias);
    }
    const char *val = getenv(id);
    if (!val || !*val) FAIL(CM_ECONFIG, "environment variable \"%.128s\" is missing or empty", id);
    if (!(*out = cm_strdup(val))) CHECK(CM_ENOMEM);
out:
    return rc;
}
