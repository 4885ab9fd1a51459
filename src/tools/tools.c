/*
 * tools.c — payload building and memory_get's path allow-list. The path check
 * is lexical first (no I/O for a clearly bad path), then physical: the deepest
 * existing ancestor of the file must resolve (realpath) to exactly the lexical
 * path under the resolved root, which rules out a symbolic link on the way.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../base/fs.h"
#include "../base/sha256.h"
#include "../base/utf8.h"
#include "tools.h"

const char *tools_citations_name(cm_citations c)
{
    return c == CM_CITE_ON ? "on" : c == CM_CITE_OFF ? "off" : "auto";
}

cm_rc tools_citation(buf *out, const char *path, int start_line, int end_line)
{
    if (start_line == end_line) return buf_printf(out, "%s#L%d", path, start_line);
    return buf_printf(out, "%s#L%d-L%d", path, start_line, end_line);
}

/* Byte length of the first max code points of s. */
static size_t prefix_chars(const char *s, size_t n, size_t max)
{
    size_t i = 0, k = 0;
    while (i < n && k < max) {
        int32_t cp;
        i += utf8_decode(s + i, n - i, &cp);
        k++;
    }
    return i;
}

static cm_rc add_head(buf *out, const tools_head *h)
{
    cm_rc rc = buf_adds(out, "\"provider\":");
    if (!rc) rc = buf_add_json_str(out, h->provider, strlen(h->provider));
    if (!rc) rc = buf_adds(out, ",\"model\":");
    if (!rc) rc = buf_add_json_str(out, h->model, strlen(h->model));
    if (!rc && h->fallback) {
        rc = buf_adds(out, ",\"fallback\":");
        if (!rc) rc = buf_add_json_str(out, h->fallback, strlen(h->fallback));
    }
    if (!rc) rc = buf_printf(out, ",\"citations\":\"%s\"", tools_citations_name(h->citations));
    if (!rc) rc = buf_printf(out, ",\"mode\":\"%s\"}", tools_search_mode(h->provider));
    return rc;
}

const char *tools_search_mode(const char *provider)
{
    return !provider || !*provider || !strcmp(provider, "none") ? "fts-only" : "hybrid";
}

tools_chat tools_chat_type(const char *key)
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

bool tools_cite(cm_citations c, const char *session_key)
{
    if (c == CM_CITE_ON) return true;
    if (c == CM_CITE_OFF) return false;
    return tools_chat_type(session_key) == TOOLS_CHAT_DIRECT;
}

/* 2026.3.22's chunk id (see tools.h) into hex[65]. */
static cm_rc chunk_id(const search_hit *h, const char *model, buf *tmp,
                      char hex[SHA256_HEX_LEN + 1])
{
    char th[SHA256_HEX_LEN + 1];
    sha256_hex(h->text, strlen(h->text), th);
    buf_reset(tmp);
    cm_rc rc = buf_printf(tmp, "%s:%s:%d:%d:%s:%s", h->source, h->path, h->start_line, h->end_line,
                          th, model && *model ? model : "fts-only");
    if (!rc) sha256_hex(tmp->data, tmp->len, hex);
    return rc;
}

cm_rc tools_search_payload(const search_hit *v, size_t n, const tools_head *head, buf *out)
{
    cm_rc rc = buf_adds(out, "{\"results\":[");
    bool cite = tools_cite(head->citations, head->session_key);
    buf c = BUF_INIT, snip = BUF_INIT, tmp = BUF_INIT;
    char id[SHA256_HEX_LEN + 1];
    for (size_t i = 0; i < n && !rc; i++) {
        const search_hit *h = &v[i];
        buf_reset(&c);
        buf_reset(&snip);
        rc = tools_citation(&c, h->path, h->start_line, h->end_line);
        size_t tl = strlen(h->text);
        if (!rc) rc = buf_add(&snip, h->text, prefix_chars(h->text, tl, TOOLS_SNIPPET_CHARS));
        if (!rc && cite) rc = buf_printf(&snip, "\n\nSource: %s", c.data);
        if (!rc) rc = chunk_id(h, head->model, &tmp, id);
        if (!rc && i) rc = buf_addc(out, ',');
        if (!rc) rc = buf_printf(out, "{\"id\":\"%s\",\"path\":", id);
        if (!rc) rc = buf_add_json_str(out, h->path, strlen(h->path));
        if (!rc)
            rc = buf_printf(out, ",\"startLine\":%d,\"endLine\":%d,\"score\":%.6g", h->start_line,
                            h->end_line, h->score);
        if (!rc && h->has_text) rc = buf_printf(out, ",\"textScore\":%.6g", h->text_score);
        if (!rc) rc = buf_adds(out, ",\"snippet\":");
        if (!rc) rc = buf_add_json_str(out, snip.data, snip.len);
        if (!rc) rc = buf_adds(out, ",\"source\":");
        if (!rc) rc = buf_add_json_str(out, h->source, strlen(h->source));
        if (!rc && cite) {
            rc = buf_adds(out, ",\"citation\":");
            if (!rc) rc = buf_add_json_str(out, c.data, c.len);
        }
        if (!rc) rc = buf_addc(out, '}');
    }
    if (!rc) rc = buf_adds(out, "],");
    if (!rc) rc = add_head(out, head);
    buf_release(&c);
    buf_release(&snip);
    buf_release(&tmp);
    return rc;
}

cm_rc tools_search_error(const char *msg, const tools_head *head, buf *out)
{
    cm_rc rc = buf_adds(out, "{\"results\":[],\"disabled\":true,\"error\":");
    if (!rc) rc = buf_add_json_str(out, msg, strlen(msg));
    if (!rc) rc = buf_addc(out, ',');
    if (!rc) rc = add_head(out, head);
    return rc;
}

/* True when abs is root itself or lies under it. */
static bool under(const char *abs, const char *root)
{
    size_t n = strlen(root);
    if (n == 1 && root[0] == '/') return true;
    return strncmp(abs, root, n) == 0 && (abs[n] == 0 || abs[n] == '/');
}

/* The file must not be reached through a symbolic link: the deepest existing
 * ancestor (or the file) must resolve to itself, and the file, if it exists,
 * must be a regular file. */
static cm_rc check_physical(const char *abs, char *err, size_t errlen, const char *shown)
{
    cm_rc rc = CM_OK;
    char *p = cm_strdup(abs);
    char real[PATH_MAX];
    if (!p) return CM_ENOMEM;
    struct stat st;
    if (lstat(p, &st) == 0) {
        if (S_ISLNK(st.st_mode)) FAIL(CM_EPATH, "%s: symbolic links are not followed", shown);
        if (!S_ISREG(st.st_mode)) FAIL(CM_EPATH, "%s: not a regular file", shown);
    }
    for (;;) {
        if (realpath(p, real)) {
            if (strcmp(real, p) != 0)
                FAIL(CM_EPATH, "%s: reached through a symbolic link, which is not followed", shown);
            break;
        }
        if (errno != ENOENT && errno != ENOTDIR) FAIL(CM_EIO, "%s: %s", shown, strerror(errno));
        char *slash = strrchr(p, '/');
        if (!slash || slash == p) break;
        *slash = 0;
    }
out:
    free(p);
    return rc;
}

cm_rc tools_resolve_path(const cm_config *cfg, const char *path, size_t len, buf *abs, char *err,
                         size_t errlen)
{
    cm_rc rc = CM_OK;
    char *rel = NULL, *orig = NULL;
    buf cand = BUF_INIT, root = BUF_INIT;
    if (len == 0) FAIL(CM_EPATH, "path is empty");
    if (memchr(path, 0, len)) FAIL(CM_EPATH, "path contains a NUL byte");
    if (path[0] == '/' || path[0] == '~')
        FAIL(CM_EPATH, "%.*s: absolute paths are not allowed; use a workspace-relative path",
             (int)CM_MIN(len, 200), path);
    if (utf8_valid_prefix(path, len) != len) FAIL(CM_EPATH, "path is not valid UTF-8");
    if (len < 3 || memcmp(path + len - 3, ".md", 3) != 0)
        FAIL(CM_EPATH, "%.*s: only Markdown (.md) memory files can be read", (int)CM_MIN(len, 200),
             path);
    if (!(rel = cm_strndup(path, len)) || !(orig = cm_strndup(path, len))) CHECK(CM_ENOMEM);
    bool climbs = !fs_normalise(rel);
    if (!climbs && (strcmp(rel, "MEMORY.md") == 0 || strcmp(rel, "memory.md") == 0 ||
                    strncmp(rel, "memory/", 7) == 0)) {
        CHECK(fs_join(abs, cfg->workspace, rel));
        CHECK(check_physical(abs->data, err, errlen, orig));
        goto out;
    }
    /* Otherwise it must lie inside one of the extraPaths. */
    CHECK(fs_join(&cand, cfg->workspace, orig));
    if (!fs_normalise(cand.data)) FAIL(CM_EPATH, "%s: escapes the file system root", orig);
    cand.len = strlen(cand.data);
    for (size_t i = 0; i < cfg->extra_paths.n; i++) {
        buf_reset(&root);
        rc = config_extra_path(cfg, i, &root);
        if (rc == CM_EPATH) {
            rc = CM_OK;
            continue;
        }
        CHECK(rc);
        if (under(cand.data, root.data)) {
            CHECK(buf_add(abs, cand.data, cand.len));
            CHECK(check_physical(abs->data, err, errlen, orig));
            goto out;
        }
    }
    if (climbs) FAIL(CM_EPATH, "%s: '..' leaves the workspace", orig);
    FAIL(CM_EPATH, "%s: not a memory file (allowed: MEMORY.md, memory/**/*.md, extraPaths)", orig);
out:
    free(rel);
    free(orig);
    buf_release(&cand);
    buf_release(&root);
    return rc;
}

cm_rc tools_get(const cm_config *cfg, const char *path, size_t len, long from, long lines, buf *out,
                char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf abs = BUF_INIT, text = BUF_INIT, clean = BUF_INIT;
    CHECK(tools_resolve_path(cfg, path, len, &abs, err, errlen));
    rc = fs_read_file(abs.data, 1u << 30, &text, err, errlen);
    if (rc == CM_ENOTFOUND) rc = CM_OK; /* nothing recorded yet: empty text */
    CHECK(rc);
    if (from <= 0) from = 1;
    /* Select lines [from, from+lines). */
    const char *s = text.data ? text.data : "";
    size_t n = text.len, i = 0;
    long line = 1;
    while (line < from && i < n) {
        const char *nl = memchr(s + i, '\n', n - i);
        if (!nl) {
            i = n;
            break;
        }
        i = (size_t)(nl - s) + 1;
        line++;
    }
    if (line < from) i = n;
    size_t start = i, end = i;
    long taken = 0, next_from = 0;
    while (end < n && (lines <= 0 || taken < lines)) {
        const char *nl = memchr(s + end, '\n', n - end);
        size_t stop = nl ? (size_t)(nl - s) + 1 : n;
        if (stop - start > TOOLS_GET_MAX_BYTES) {
            if (taken == 0) { /* one line over the cap: cut it at a character boundary */
                stop = start + TOOLS_GET_MAX_BYTES;
                while (stop > start && ((unsigned char)s[stop] & 0xC0) == 0x80)
                    stop--;
            } else {
                next_from = from + taken;
                break;
            }
        }
        end = stop;
        taken++;
        if (end - start >= TOOLS_GET_MAX_BYTES && end < n) {
            next_from = from + taken;
            break;
        }
    }
    size_t tlen = end - start;
    if (tlen && s[start + tlen - 1] == '\n') tlen--; /* lines joined by '\n', no final newline */
    CHECK(utf8_repair(&clean, s + start, tlen));
    char *rel = cm_strndup(path, len);
    if (!rel) CHECK(CM_ENOMEM);
    rc = buf_adds(out, "{\"path\":");
    if (!rc) rc = buf_add_json_str(out, rel, strlen(rel));
    free(rel);
    if (!rc) rc = buf_adds(out, ",\"text\":");
    if (!rc) rc = buf_add_json_str(out, clean.data ? clean.data : "", clean.len);
    if (!rc && next_from) rc = buf_printf(out, ",\"truncated\":true,\"nextFrom\":%ld", next_from);
    if (!rc) rc = buf_addc(out, '}');
out:
    buf_release(&abs);
    buf_release(&text);
    buf_release(&clean);
    return rc;
}

static int count_lines(const char *s, size_t n)
{
    int lines = 0;
    for (size_t i = 0; i < n; i++) lines += s[i] == '\n';
    return lines;
}

cm_rc tools_write(const cm_config *cfg, const char *path, const char *text, int64_t now, buf *out,
                  char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf abs = BUF_INIT, old = BUF_INIT, tmp = BUF_INIT, rel = BUF_INIT;
    char *dir = NULL;
    int fd = -1, tfd = -1;
    size_t tl = text ? strlen(text) : 0;
    while (tl && (text[tl - 1] == '\n' || text[tl - 1] == '\r' || text[tl - 1] == ' ')) tl--;
    if (tl == 0) FAIL(CM_EINVAL, "memory_write: text is empty");
    if (tl > TOOLS_WRITE_MAX_BYTES)
        FAIL(CM_EINVAL, "memory_write: text is %zu bytes, over the %u-byte cap", tl,
             TOOLS_WRITE_MAX_BYTES);
    if (utf8_valid_prefix(text, tl) != tl) FAIL(CM_EINVAL, "memory_write: text is not valid UTF-8");
    if (path && *path) {
        CHECK(buf_adds(&rel, path));
    } else {
        time_t t = now ? (time_t)now : time(NULL);
        struct tm tm;
        localtime_r(&t, &tm);
        CHECK(buf_printf(&rel, "memory/%04d-%02d-%02d.md", tm.tm_year + 1900, tm.tm_mon + 1,
                         tm.tm_mday));
    }
    CHECK(tools_resolve_path(cfg, rel.data, rel.len, &abs, err, errlen));
    if (!(dir = fs_dirname(abs.data))) CHECK(CM_ENOMEM);
    CHECK(fs_mkdirs(dir, err, errlen));
    /* Check again now that the directories exist: none may be a symbolic link. */
    CHECK(tools_resolve_path(cfg, rel.data, rel.len, &tmp, err, errlen));
    buf_reset(&tmp);
    /* Writers serialise on the directory (its inode, unlike the file's, is
     * not replaced by the rename). */
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || flock(fd, LOCK_EX) < 0) FAIL(CM_EIO, "lock %s: %s", dir, strerror(errno));
    rc = fs_read_file(abs.data, 1u << 30, &old, err, errlen);
    if (rc == CM_ENOTFOUND) rc = CM_OK; /* a new file */
    CHECK(rc);
    /* The note becomes a paragraph of its own. */
    const char *sep = old.len == 0 ? "" : old.data[old.len - 1] == '\n' ? "\n" : "\n\n";
    int start = count_lines(old.data ? old.data : "", old.len) + (int)strlen(sep) + 1;
    CHECK(buf_printf(&tmp, "%s/.%s.clawmem-%ld.tmp", dir, strrchr(abs.data, '/') + 1,
                     (long)getpid()));
    tfd = open(tmp.data, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (tfd < 0) FAIL(CM_EIO, "%s: %s", tmp.data, strerror(errno));
    buf all = BUF_INIT;
    rc = buf_add(&all, old.data ? old.data : "", old.len);
    if (!rc) rc = buf_adds(&all, sep);
    if (!rc) rc = buf_add(&all, text, tl);
    if (!rc) rc = buf_addc(&all, '\n');
    for (size_t off = 0; !rc && off < all.len;) {
        ssize_t w = write(tfd, all.data + off, all.len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) rc = cm_seterr(err, errlen, CM_EIO, "%s: %s", tmp.data, strerror(errno));
        else off += (size_t)w;
    }
    buf_release(&all);
    CHECK(rc);
    if (fsync(tfd) < 0) FAIL(CM_EIO, "%s: %s", tmp.data, strerror(errno));
    close(tfd);
    tfd = -1;
    if (rename(tmp.data, abs.data) < 0) FAIL(CM_EIO, "rename %s: %s", tmp.data, strerror(errno));
    fsync(fd); /* the directory: the rename is durable */
    int end = start + count_lines(text, tl);
    CHECK(buf_adds(out, "{\"path\":"));
    CHECK(buf_add_json_str(out, rel.data, rel.len));
    CHECK(buf_printf(out, ",\"startLine\":%d,\"endLine\":%d,\"bytes\":%zu}", start, end, tl + 1));
out:
    if (tfd >= 0) {
        close(tfd);
        unlink(tmp.data);
    }
    if (fd >= 0) close(fd); /* releases the directory lock */
    free(dir);
    buf_release(&abs);
    buf_release(&old);
    buf_release(&tmp);
    buf_release(&rel);
    return rc;
}
