/*
 * tools.c — the payloads of memory_search, memory_get and memory_write; the
 * memory files' rules and their reading and writing are index/memfile.c's.
 */

#include "../base/sha256.h"
#include "../base/utf8.h"
#include "tools.h"

cm_rc cm_tools_citation(buf *out, const char *path, int start_line, int end_line)
{
    if (start_line == end_line) return cm_buf_printf(out, "%s#L%d", path, start_line);
    return cm_buf_printf(out, "%s#L%d-L%d", path, start_line, end_line);
}

static cm_rc add_head(buf *out, const tools_head *h)
{
    jw w = {out, CM_OK};
    cm_jw_raw(&w, "\"provider\":");
    cm_jw_str(&w, h->provider);
    cm_jw_raw(&w, ",\"model\":");
    cm_jw_str(&w, h->model);
    if (h->fallback) {
        cm_jw_raw(&w, ",\"fallback\":");
        cm_jw_str(&w, h->fallback);
    }
    cm_jw_printf(&w, ",\"citations\":\"%s\",\"mode\":\"%s\"}", config_citations_name(h->citations),
                 h->mode ? h->mode : cm_tools_search_mode(h->provider));
    return w.rc;
}

const char *cm_tools_search_mode(const char *provider)
{
    return !provider || !*provider || !strcmp(provider, "none") ? "fts-only" : "hybrid";
}

tools_chat cm_tools_chat_type(const char *key)
{
    if (!key) return TOOLS_CHAT_DIRECT;
    /* JavaScript's trim(): ASCII whitespace here (the tokens are ASCII). */
    size_t n = strlen(key);
    while (n && strchr(" \t\n\v\f\r", key[0]))
        key++, n--;
    while (n && strchr(" \t\n\v\f\r", key[n - 1]))
        n--;
    /* Parts between ':' (empty ones dropped): "agent", the agent id, rest. */
    size_t part = 0;
    bool channel = false, group = false;
    for (size_t i = 0; i < n;) {
        size_t l = 0;
        while (i + l < n && key[i + l] != ':')
            l++;
        if (l) {
            if (part == 0 && (l != 5 || strncasecmp(key + i, "agent", 5) != 0))
                return TOOLS_CHAT_DIRECT;
            if (part >= 2 && l == 7 && !strncasecmp(key + i, "channel", 7)) channel = true;
            if (part >= 2 && l == 5 && !strncasecmp(key + i, "group", 5)) group = true;
            part++;
        }
        i += l + 1;
    }
    if (part < 3) return TOOLS_CHAT_DIRECT;
    return channel ? TOOLS_CHAT_CHANNEL : group ? TOOLS_CHAT_GROUP : TOOLS_CHAT_DIRECT;
}

bool cm_tools_cite(cm_citations c, const char *session_key)
{
    if (c == CM_CITE_ON) return true;
    if (c == CM_CITE_OFF) return false;
    return cm_tools_chat_type(session_key) == TOOLS_CHAT_DIRECT;
}

/* 2026.3.22's chunk id (see tools.h) into hex[65]. */
static cm_rc chunk_id(const search_hit *h, const char *model, buf *tmp,
                      char hex[SHA256_HEX_LEN + 1])
{
    char th[SHA256_HEX_LEN + 1];
    cm_sha256_hex(h->text, strlen(h->text), th);
    cm_buf_reset(tmp);
    cm_rc rc = cm_buf_printf(tmp, "%s:%s:%d:%d:%s:%s", h->source, h->path, h->start_line,
                             h->end_line, th, model && *model ? model : "fts-only");
    if (!rc) cm_sha256_hex(tmp->data, tmp->len, hex);
    return rc;
}

/* A hit's citation into c, and its snippet into snip: the first
 * TOOLS_SNIPPET_CHARS characters, then "Source: <citation>" when cited. */
static cm_rc shape_hit(const search_hit *h, bool cite, buf *c, buf *snip)
{
    cm_buf_reset(c);
    cm_buf_reset(snip);
    cm_rc rc = cm_tools_citation(c, h->path, h->start_line, h->end_line);
    size_t tl = strlen(h->text);
    if (!rc) rc = cm_buf_add(snip, h->text, cm_utf8_prefix_chars(h->text, tl, TOOLS_SNIPPET_CHARS, NULL));
    if (!rc && cite) rc = cm_buf_printf(snip, "\n\nSource: %s", c->data);
    return rc;
}

cm_rc cm_tools_search_each(const search_hit *v, size_t n, bool cite, cm_search_result_fn fn,
                           void *ctx)
{
    cm_rc rc = CM_OK;
    buf c = BUF_INIT, snip = BUF_INIT;
    for (size_t i = 0; i < n && !rc; i++) {
        const search_hit *h = &v[i];
        rc = shape_hit(h, cite, &c, &snip);
        cm_search_result r = {h->path,       snip.data,   h->source, cite ? c.data : "",
                              h->start_line, h->end_line, h->score};
        if (!rc && fn(ctx, &r)) rc = CM_ECANCELED;
    }
    cm_buf_release(&c);
    cm_buf_release(&snip);
    return rc;
}

cm_rc cm_tools_search_payload(const search_hit *v, size_t n, const tools_head *head, buf *out)
{
    cm_rc rc = cm_buf_adds(out, "{\"results\":[");
    bool cite = cm_tools_cite(head->citations, head->session_key);
    buf c = BUF_INIT, snip = BUF_INIT, tmp = BUF_INIT;
    char id[SHA256_HEX_LEN + 1];
    for (size_t i = 0; i < n && !rc; i++) {
        const search_hit *h = &v[i];
        rc = shape_hit(h, cite, &c, &snip);
        if (!rc) rc = chunk_id(h, head->model, &tmp, id);
        if (!rc && i) rc = cm_buf_addc(out, ',');
        if (!rc) rc = cm_buf_printf(out, "{\"id\":\"%s\",\"path\":", id);
        if (!rc) rc = cm_utf8_add_json_str(out, h->path, strlen(h->path));
        if (!rc)
            rc = cm_buf_printf(out, ",\"startLine\":%d,\"endLine\":%d,\"score\":%.6g",
                               h->start_line, h->end_line, h->score);
        if (!rc && h->has_text) rc = cm_buf_printf(out, ",\"textScore\":%.6g", h->text_score);
        if (!rc) rc = cm_buf_adds(out, ",\"snippet\":");
        if (!rc) rc = cm_utf8_add_json_str(out, snip.data, snip.len);
        if (!rc) rc = cm_buf_adds(out, ",\"source\":");
        if (!rc) rc = cm_utf8_add_json_str(out, h->source, strlen(h->source));
        if (!rc && cite) {
            rc = cm_buf_adds(out, ",\"citation\":");
            if (!rc) rc = cm_utf8_add_json_str(out, c.data, c.len);
        }
        if (!rc) rc = cm_buf_addc(out, '}');
    }
    if (!rc) rc = cm_buf_adds(out, "],");
    if (!rc) rc = add_head(out, head);
    cm_buf_release(&c);
    cm_buf_release(&snip);
    cm_buf_release(&tmp);
    return rc;
}

cm_rc cm_tools_search_error(const char *msg, const tools_head *head, buf *out)
{
    cm_rc rc = cm_buf_adds(out, "{\"results\":[],\"disabled\":true,\"error\":");
    if (!rc) rc = cm_utf8_add_json_str(out, msg, strlen(msg));
    if (!rc) rc = cm_buf_addc(out, ',');
    if (!rc) rc = add_head(out, head);
    return rc;
}

/* ---- memory_get and memory_write ------------------------------------------- */

cm_rc cm_tools_get_payload(const memfile_text *t, buf *out)
{
    jw w = {out, CM_OK};
    cm_jw_raw(&w, "{\"path\":");
    cm_jw_str(&w, t->path);
    cm_jw_raw(&w, ",\"text\":");
    if (!w.rc) w.rc = cm_utf8_add_json_str(out, t->text.data, t->text.len);
    if (t->next_from) cm_jw_printf(&w, ",\"truncated\":true,\"nextFrom\":%ld", t->next_from);
    if (t->next_offset) cm_jw_printf(&w, ",\"nextOffset\":%zu", t->next_offset);
    cm_jw_raw(&w, "}");
    return w.rc;
}

cm_rc cm_tools_get(const cm_config *cfg, const char *path, size_t len, long from, long offset,
                   long lines, buf *out, char *err, size_t errlen)
{
    memfile_text t = {0};
    cm_rc rc = cm_index_memfile_read(cfg, path, len, from, offset, lines, &t, err, errlen);
    if (!rc) rc = cm_tools_get_payload(&t, out);
    cm_index_memfile_text_release(&t);
    return rc;
}

cm_rc cm_tools_get_beneath(const char *root, const char *inner, const char *name, long from,
                           long offset, long lines, buf *out, char *err, size_t errlen)
{
    memfile_text t = {0};
    cm_rc rc =
        cm_index_memfile_read_beneath(root, inner, name, from, offset, lines, &t, err, errlen);
    if (!rc) rc = cm_tools_get_payload(&t, out);
    cm_index_memfile_text_release(&t);
    return rc;
}

cm_rc cm_tools_write_payload(const memfile_note *n, buf *out)
{
    jw w = {out, CM_OK};
    cm_jw_raw(&w, "{\"path\":");
    cm_jw_str(&w, n->path);
    cm_jw_printf(&w, ",\"startLine\":%d,\"endLine\":%d,\"bytes\":%zu}", n->start_line, n->end_line,
                 n->bytes);
    return w.rc;
}

cm_rc cm_tools_write(const cm_config *cfg, const char *path, const char *text, int64_t now,
                     buf *out, buf *rel_out, char *err, size_t errlen)
{
    memfile_note n = {0};
    cm_rc rc = cm_index_memfile_write(cfg, path, text, now, &n, err, errlen);
    if (!rc) rc = cm_tools_write_payload(&n, out);
    if (!rc && rel_out) rc = cm_buf_adds(rel_out, n.path);
    free(n.path);
    return rc;
}
