/*
 * qmd_search.c — a QMD search's command line and its answer: the JSON array
 * `qmd search|vsearch|query --json` prints ({docid, score, file
 * "qmd://<collection>/<path>", line, title, snippet "@@ -a,b @@ ...\n..."}),
 * found even after noise on stdout, "No results found" taken as none, and
 * anything else refused with a reason (the engine then falls back).
 */
#include <ctype.h>
#include <jansson.h>
#include <strings.h>

#include "qmd.h"

void cm_backend_qmd_hits_release(qmd_hits *h)
{
    for (size_t i = 0; i < h->n; i++) {
        free(h->v[i].collection);
        free(h->v[i].file);
        free(h->v[i].docid);
        free(h->v[i].snippet);
    }
    free(h->v);
    h->v = NULL;
    h->n = 0;
}

size_t cm_backend_qmd_search_argv(const char *mode, const char *query, int limit,
                                  char *const *collections, size_t ncollections, const char **argv,
                                  size_t max, char *store)
{
    size_t n = 0;
    snprintf(store, 64, "%d", limit);
    const char *head[] = {mode, query, "--json", "-n", store};
    for (size_t i = 0; i < ARRAY_LEN(head) && n + 1 < max; i++)
        argv[n++] = head[i];
    for (size_t i = 0; i < ncollections && n + 2 < max; i++) {
        argv[n++] = "-c";
        argv[n++] = collections[i];
    }
    argv[n] = NULL;
    return n;
}

/* One line of s says "no results found" (optionally after "warn:", "[x]", ...). */
static bool no_results(const char *s)
{
    while (s && *s) {
        const char *e = strchr(s, '\n');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        char line[160];
        size_t k = 0;
        for (size_t i = 0; i < n && k + 1 < sizeof line; i++)
            line[k++] = (char)tolower((unsigned char)s[i]);
        line[k] = 0;
        char *p = line;
        while (isspace((unsigned char)*p))
            p++;
        if (*p == '[') {
            char *r = strchr(p, ']');
            if (r) p = r + 1;
        }
        for (bool more = true; more;) {
            more = false;
            while (isspace((unsigned char)*p))
                p++;
            static const char *const tags[] = {"warning", "warn", "info", "error", "qmd"};
            for (size_t t = 0; t < ARRAY_LEN(tags); t++) {
                size_t tl = strlen(tags[t]);
                if (!strncmp(p, tags[t], tl)) {
                    char *q = p + tl;
                    while (isspace((unsigned char)*q))
                        q++;
                    if (*q == ':') {
                        p = q + 1;
                        more = true;
                        break;
                    }
                }
            }
        }
        while (isspace((unsigned char)*p))
            p++;
        size_t pl = strlen(p);
        while (pl && isspace((unsigned char)p[pl - 1]))
            p[--pl] = 0;
        if (!strcmp(p, "no results found") || !strcmp(p, "no results found.")) return true;
        s = e ? e + 1 : NULL;
    }
    return false;
}

bool cm_backend_qmd_refused_flags(const char *text)
{
    static const char *const marks[] = {"unknown flag", "unknown option", "unrecognized option",
                                        "flag provided but not defined", "unexpected argument"};
    for (size_t i = 0; text && i < ARRAY_LEN(marks); i++)
        if (strcasestr(text, marks[i])) return true;
    return false;
}

/* The first balanced JSON array in s (strings respected): [*b, *e). */
static bool first_array(const char *s, const char **b, const char **e)
{
    const char *start = strchr(s, '[');
    if (!start) return false;
    int depth = 0;
    bool in_str = false, esc = false;
    for (const char *p = start; *p; p++) {
        if (in_str) {
            if (esc)
                esc = false;
            else if (*p == '\\')
                esc = true;
            else if (*p == '"')
                in_str = false;
            continue;
        }
        if (*p == '"')
            in_str = true;
        else if (*p == '[')
            depth++;
        else if (*p == ']' && --depth == 0) {
            *b = start;
            *e = p + 1;
            return true;
        }
    }
    return false;
}

/* "qmd://<collection>/<path>" (percent-escapes decoded) → collection, path. */
static cm_rc split_file(const char *file, char **col, char **path)
{
    *col = *path = NULL;
    if (strncasecmp(file, "qmd://", 6) != 0) return (*path = cm_strdup(file)) ? CM_OK : CM_ENOMEM;
    const char *c = file + 6, *slash = strchr(c, '/');
    size_t cl = slash ? (size_t)(slash - c) : strlen(c);
    const char *p = slash ? slash + 1 : "";
    while (*p == '/')
        p++;
    if (!(*col = cm_strndup(c, cl)) || !(*path = malloc(strlen(p) + 1))) return CM_ENOMEM;
    char *o = *path;
    for (; *p; p++) {
        if (*p == '%' && isxdigit((unsigned char)p[1]) && isxdigit((unsigned char)p[2])) {
            char hx[3] = {p[1], p[2], 0};
            char ch = (char)strtol(hx, NULL, 16);
            if (ch) {
                *o++ = ch;
                p += 2;
                continue;
            }
        }
        *o++ = *p;
    }
    *o = 0;
    return CM_OK;
}

/* Lines of the snippet from its "@@ -start,count @@" header (2026.3.22:
 * start..start+count-1; no header: 1..lines); the header line dropped. */
static cm_rc take_snippet(const char *s, qmd_hit *h)
{
    int start = 0, count = 0;
    const char *body = s;
    const char *at = strstr(s, "@@");
    if (at) {
        const char *p = at + 2;
        while (*p == ' ')
            p++;
        if (*p == '-' && sscanf(p + 1, "%d,%d", &start, &count) == 2 && start > 0 && count > 0) {
            if (at == s) { /* a header line of its own */
                const char *nl = strchr(s, '\n');
                body = nl ? nl + 1 : s + strlen(s);
            }
        } else {
            start = count = 0;
        }
    }
    if (!(h->snippet = cm_strdup(body))) return CM_ENOMEM;
    if (start > 0) {
        h->start_line = start;
        h->end_line = start + count - 1;
    } else {
        int lines = 1;
        for (const char *p = s; *p; p++)
            lines += *p == '\n';
        h->start_line = 1;
        h->end_line = lines;
    }
    return CM_OK;
}

static cm_rc take_array(json_t *arr, qmd_hits *hits)
{
    size_t n = json_array_size(arr);
    if (n && !(hits->v = calloc(n, sizeof *hits->v))) return CM_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(arr, i);
        if (!json_is_object(e)) continue;
        const char *file = json_string_value(json_object_get(e, "file"));
        const char *docid = json_string_value(json_object_get(e, "docid"));
        const char *col = json_string_value(json_object_get(e, "collection"));
        if (!file && !docid) continue;
        qmd_hit *h = &hits->v[hits->n++];
        json_t *sc = json_object_get(e, "score");
        h->score = json_is_number(sc) ? json_number_value(sc) : 0;
        if (docid && !(h->docid = cm_strdup(docid[0] == '#' ? docid + 1 : docid))) return CM_ENOMEM;
        if (file && split_file(file, &h->collection, &h->file)) return CM_ENOMEM;
        if (!h->collection && col && !(h->collection = cm_strdup(col))) return CM_ENOMEM;
        const char *snip = json_string_value(json_object_get(e, "snippet"));
        if (take_snippet(snip ? snip : "", h)) return CM_ENOMEM;
    }
    return CM_OK;
}

cm_rc cm_backend_qmd_parse_hits(const char *out, const char *errs, qmd_hits *hits, char *err,
                                size_t errlen)
{
    cm_rc rc = CM_OK;
    json_t *arr = NULL;
    memset(hits, 0, sizeof *hits);
    const char *s = out ? out : "";
    while (isspace((unsigned char)*s))
        s++;
    if (no_results(s) || (!*s && no_results(errs))) return CM_OK;
    if (!*s) {
        const char *e = errs ? errs : "";
        while (isspace((unsigned char)*e))
            e++;
        FAIL(CM_EINVAL, "qmd returned invalid JSON: stdout empty%s%.120s%s", *e ? " (stderr: " : "",
             e, *e ? ")" : "");
    }
    arr = json_loads(s, JSON_DECODE_ANY, NULL);
    if (!json_is_array(arr)) {
        json_decref(arr);
        arr = NULL;
        const char *b, *e;
        if (first_array(s, &b, &e)) arr = json_loadb(b, (size_t)(e - b), 0, NULL);
    }
    if (!json_is_array(arr)) FAIL(CM_EINVAL, "qmd returned invalid JSON: not an array");
    CHECK(take_array(arr, hits));
out:
    json_decref(arr);
    if (rc) cm_backend_qmd_hits_release(hits);
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    return rc;
}
