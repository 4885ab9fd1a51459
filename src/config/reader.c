/*
 * reader.c — what the config's readers share: errors and warnings that name
 * the file:line:col where a value was written, "${VAR}" substitution in
 * strings, and the small setters of strings, string lists and header lines.
 */
#include <stdarg.h>
#include <strings.h>

#include "../base/buf.h"
#include "config_int.h"

/* Whether the last part of path names a credential (apiKey, accessToken,
 * clientSecret, password, dsn, a URL that may carry one) or path is inside
 * headers: its value never goes into a message. */
static bool secret_path(const char *path)
{
    static const char *const words[] = {"key", "token", "secret", "password", "dsn", "url"};
    const char *last = strrchr(path, '.');
    last = last ? last + 1 : path;
    size_t n = strlen(last);
    for (size_t i = 0; i < ARRAY_LEN(words); i++) {
        size_t w = strlen(words[i]);
        if (n >= w && !strcasecmp(last + n - w, words[i])) return true;
    }
    return strstr(path, "headers") != NULL;
}

const char *cm_config_value_text(const json_t *v, const char *path, char *out, size_t outlen)
{
    if (!v) return "nothing";
    if (json_is_object(v) || json_is_array(v) || (path && secret_path(path)))
        return cm_config_type_name(v);
    char *d = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    if (!d) return cm_config_type_name(v);
    size_t n = strlen(d), cap = 64;
    if (n <= cap || outlen < cap + 5) {
        snprintf(out, outlen, "%s", d);
    } else { /* cut at a character boundary, the quote kept */
        size_t cut = cap;
        while (cut > 1 && ((unsigned char)d[cut] & 0xC0) == 0x80)
            cut--;
        snprintf(out, outlen, "%.*s...%s", (int)cut, d, json_is_string(v) ? "\"" : "");
    }
    free(d);
    return out;
}

cm_rc cm_config_bad(ctx *c, const json_t *parent, const char *key, const char *path,
                    const char *what)
{
    int line = 0, col = 0;
    char full[1200], val[80];
    const json_t *v = key && json_is_object(parent) ? json_object_get(parent, key) : NULL;
    /* the value as written, unless the message shows it already */
    if (v && !strstr(what, "got ") && !secret_path(path)) {
        bool expected = strncmp(what, "expected", 8) == 0;
        snprintf(full, sizeof full, "%s%s%s%s", what, expected ? ", got " : " (got ",
                 cm_config_value_text(v, path, val, sizeof val), expected ? "" : ")");
        what = full;
    }
    if (cm_json5_where(c->doc, parent, key, 0, &line, &col))
        return cm_seterr(c->err, c->errlen, CM_ECONFIG, "%s:%d:%d: %s: %s", c->file, line, col,
                         path, what);
    return cm_seterr(c->err, c->errlen, CM_ECONFIG, "%s: %s: %s", c->file, path, what);
}

/* The string v (member key of parent, path) with "${VAR}" substituted. */
cm_rc cm_config_subst(ctx *c, const json_t *parent, const char *key, const char *path,
                      const json_t *v, char **out)
{
    char why[512];
    cm_rc rc = cm_secret_subst_env(json_string_value(v), out, why, sizeof why);
    return rc == CM_ECONFIG ? cm_config_bad(c, parent, key, path, why) : rc;
}

/* A warning "file:line:col: what" about the member key of parent (or its
 * element index when key is NULL). */
void cm_config_warn(ctx *c, const json_t *parent, const char *key, size_t index, const char *fmt,
                    ...)
{
    char what[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    int line = 0, col = 0;
    if (cm_json5_where(c->doc, parent, key, index, &line, &col))
        cm_logf(c->lg, CM_LOG_WARN, "%s:%d:%d: %s", c->file, line, col, what);
    else
        cm_logf(c->lg, CM_LOG_WARN, "%s: %s", c->file, what);
}

const char *cm_config_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "a value";
}

bool cm_config_in_choices(const char *choices, const char *s)
{
    size_t n = strlen(s);
    for (const char *p = choices; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && memcmp(p, s, n) == 0) return true;
        if (!bar) break;
        p = bar + 1;
    }
    return false;
}

cm_rc cm_config_set_str(char **dst, const char *s)
{
    char *v = cm_strdup(s);
    if (!v) return CM_ENOMEM;
    free(*dst);
    *dst = v;
    return CM_OK;
}

void cm_config_strlist_release(cm_strlist *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

cm_rc cm_config_strlist_add(cm_strlist *l, const char *s)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i], s) == 0) return CM_OK;
    char **nv = realloc(l->v, (l->n + 1) * sizeof *nv);
    if (!nv) return CM_ENOMEM;
    l->v = nv;
    if (!(l->v[l->n] = cm_strdup(s))) return CM_ENOMEM;
    l->n++;
    return CM_OK;
}

cm_rc cm_config_header_set(cm_strlist *l, const char *line)
{
    size_t nl = strcspn(line, ":");
    char *copy = cm_strdup(line);
    if (!copy) return CM_ENOMEM;
    for (size_t i = 0; i < l->n; i++)
        if (strncasecmp(l->v[i], line, nl) == 0 && l->v[i][nl] == ':') {
            free(l->v[i]);
            l->v[i] = copy;
            return CM_OK;
        }
    char **nv = realloc(l->v, (l->n + 1) * sizeof *nv);
    if (!nv) {
        free(copy);
        return CM_ENOMEM;
    }
    l->v = nv;
    l->v[l->n++] = copy;
    return CM_OK;
}

cm_rc cm_config_header_put(cm_strlist *l, const char *name, const char *value)
{
    buf b = BUF_INIT;
    cm_rc rc = cm_buf_printf(&b, "%s: %s", name, value);
    if (!rc) rc = cm_config_header_set(l, b.data);
    cm_buf_release(&b);
    return rc;
}
