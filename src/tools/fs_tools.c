/*
 * fs_tools.c — read, write and edit in the workspace (fs_tools.h). Reads
 * stream the file (memory bounded by the output limits, whatever its size);
 * writes go through a temporary file and a rename beneath the workspace.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/fs.h"
#include "../base/path.h"
#include "../base/replace.h"
#include "../base/utf8.h"
#include "fs_tools.h"

/* ---- paths ---------------------------------------------------------------- */

cm_rc cm_tool_fs_resolve(const char *workspace, const char *path, buf *rel, char *err,
                         size_t errlen)
{
    cm_rc rc = CM_OK;
    buf p = BUF_INIT;
    const char *home = getenv("HOME");
    if (!path) FAIL(CM_EPATH, "path (a string) is required");
    if (path[0] == '@') path++;
    size_t n = strlen(path);
    if (!n) FAIL(CM_EPATH, "path is empty");
    if (cm_utf8_valid_prefix(path, n) != n) FAIL(CM_EPATH, "path is not valid UTF-8");
    if ((path[0] == '~' && (path[1] == '/' || !path[1])) && home && home[0] == '/') {
        CHECK(cm_buf_adds(&p, home));
        CHECK(cm_buf_adds(&p, path + 1));
    } else if (path[0] == '/') {
        CHECK(cm_buf_adds(&p, path));
    } else {
        CHECK(cm_buf_adds(&p, workspace));
        CHECK(cm_buf_addc(&p, '/'));
        CHECK(cm_buf_adds(&p, path));
    }
    if (!cm_fs_normalise(p.data)) FAIL(CM_EPATH, "%.200s: outside the workspace", path);
    p.len = strlen(p.data);
    char ws[4096];
    snprintf(ws, sizeof ws, "%s", workspace);
    cm_fs_normalise(ws);
    size_t wl = strlen(ws);
    if (wl == 1) wl = 0; /* the workspace "/" */
    if (strncmp(p.data, ws, wl) != 0 || p.data[wl] != '/' || !p.data[wl + 1])
        FAIL(CM_EPATH, "%.200s: outside the workspace (file tools reach only the workspace)",
             path);
    cm_buf_reset(rel);
    CHECK(cm_buf_adds(rel, p.data + wl + 1));
out:
    cm_buf_release(&p);
    return rc;
}

/* Opens the directory that holds rel beneath the workspace (created with mkdirs). */
static cm_rc open_parent(const char *workspace, const char *rel, bool mkdirs, int *dir,
                         const char **leaf, char *err, size_t errlen)
{
    int root = -1;
    cm_rc rc = cm_path_open_root(workspace, false, &root, err, errlen);
    if (rc == CM_ENOTFOUND && mkdirs) {
        rc = cm_fs_mkdirs(workspace, err, errlen);
        if (!rc) rc = cm_path_open_root(workspace, false, &root, err, errlen);
    }
    if (rc) return cm_seterr(err, errlen, rc, "the workspace cannot be opened");
    rc = cm_path_open_dir(root, rel, mkdirs ? PATH_MKDIRS : 0, dir, leaf, err, errlen);
    close(root);
    return rc;
}

static cm_rc open_file(const char *workspace, const char *rel, const char *shown, int *fd,
                       struct stat *st, char *err, size_t errlen)
{
    int dir = -1;
    const char *leaf;
    cm_rc rc = open_parent(workspace, rel, false, &dir, &leaf, err, errlen);
    if (!rc) rc = cm_path_open_file(dir, leaf, O_RDONLY, 0, fd, st, err, errlen);
    if (dir >= 0) close(dir);
    if (rc == CM_ENOTFOUND) return cm_seterr(err, errlen, rc, "File not found: %s", shown);
    if (rc == CM_EPATH)
        return cm_seterr(err, errlen, rc, "%s: not a regular file, or reached through a "
                                          "symbolic link (refused)", shown);
    if (rc) return cm_seterr(err, errlen, rc, "%s: cannot be opened", shown);
    return CM_OK;
}

static void format_size(char *out, size_t n, size_t bytes)
{
    if (bytes < 1024)
        snprintf(out, n, "%zuB", bytes);
    else if (bytes < 1024 * 1024)
        snprintf(out, n, "%.1fKB", (double)bytes / 1024);
    else
        snprintf(out, n, "%.1fMB", (double)bytes / (1024 * 1024));
}

static bool get_count(const json_t *args, const char *key, long *v, char *err, size_t errlen)
{
    const json_t *x = json_object_get(args, key);
    *v = 0;
    if (!x || json_is_null(x)) return true;
    if (!json_is_number(x) || json_number_value(x) < 1 || json_number_value(x) > 1e9) {
        cm_seterr(err, errlen, CM_EINVAL, "%s must be a number from 1", key);
        return false;
    }
    *v = (long)json_number_value(x);
    return true;
}

/* ---- read ----------------------------------------------------------------- */

/* One streamed read: lines are numbered from 1, each ended by '\n' or by the
 * end of the file (so the text after a final '\n' is a last, empty line, as
 * the reference's split("\n") has it). The selection is lines [start,
 * start+limit) (limit 0: to the end); of it, whole lines are kept from the
 * front while they fit FS_READ_MAX_LINES and FS_READ_MAX_BYTES (the
 * reference's truncateHead). */
typedef struct reader {
    long start, limit, line;
    long sel_lines;      /* selected lines ended so far */
    size_t sel_bytes;    /* their bytes, joined by '\n' */
    size_t first_bytes;  /* the first selected line's bytes */
    size_t cur;          /* bytes of the current line so far */
    buf kept;            /* kept text */
    long kept_lines;
    bool keeping;        /* still keeping lines */
    bool by_bytes;       /* keeping stopped at the byte limit */
} reader;

static bool selected(const reader *r)
{
    return r->line >= r->start && (!r->limit || r->line < r->start + r->limit);
}

static cm_rc feed(reader *r, const char *s, size_t n)
{
    if (!selected(r)) return CM_OK;
    bool first_piece = r->cur == 0;
    r->cur += n;
    if (!r->keeping) return CM_OK;
    size_t sep = first_piece && r->kept_lines > 0;
    if (r->kept.len + sep + n > FS_READ_MAX_BYTES) {
        /* the line does not fit: drop what was kept of it, keep no more */
        size_t drop = (r->cur - n) + (r->kept_lines > 0 && !first_piece);
        r->kept.len -= CM_MIN(drop, r->kept.len);
        r->kept.data[r->kept.len] = 0;
        r->keeping = false;
        r->by_bytes = true;
        return CM_OK;
    }
    cm_rc rc = sep ? cm_buf_addc(&r->kept, '\n') : CM_OK;
    return rc ? rc : cm_buf_add(&r->kept, s, n);
}

static cm_rc end_line(reader *r)
{
    if (selected(r)) {
        if (r->keeping && r->cur == 0 && r->kept_lines > 0) { /* an empty line's separator */
            if (r->kept.len + 1 > FS_READ_MAX_BYTES) {
                r->keeping = false;
                r->by_bytes = true;
            } else {
                cm_rc rc = cm_buf_addc(&r->kept, '\n');
                if (rc) return rc;
            }
        }
        if (r->sel_lines == 0) r->first_bytes = r->cur;
        r->sel_bytes += r->cur + (r->sel_lines > 0);
        r->sel_lines++;
        if (r->keeping && ++r->kept_lines >= FS_READ_MAX_LINES) r->keeping = false;
    }
    r->line++;
    r->cur = 0;
    return CM_OK;
}

cm_rc cm_tool_read(const char *workspace, const json_t *args, buf *out, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf rel = BUF_INIT, text = BUF_INIT;
    reader r = {0};
    int fd = -1;
    long offset, limit;
    struct stat st;
    r.kept = (buf)BUF_INIT;
    const char *path = json_string_value(json_object_get(args, "path"));
    CHECK(cm_tool_fs_resolve(workspace, path, &rel, err, errlen));
    if (!get_count(args, "offset", &offset, err, errlen) ||
        !get_count(args, "limit", &limit, err, errlen))
        CHECK(CM_EINVAL); /* err says which */
    CHECK(open_file(workspace, rel.data, path, &fd, &st, err, errlen));
    r.start = offset ? offset : 1;
    r.limit = limit;
    r.line = 1;
    r.keeping = true;
    char chunk[65536];
    for (;;) {
        ssize_t got = read(fd, chunk, sizeof chunk);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) FAIL(CM_EIO, "%s: read failed", path);
        if (got == 0) break;
        for (size_t i = 0; i < (size_t)got;) {
            const char *nl = memchr(chunk + i, '\n', (size_t)got - i);
            size_t k = nl ? (size_t)(nl - chunk) - i : (size_t)got - i;
            CHECK(feed(&r, chunk + i, k));
            i += k;
            if (nl) {
                CHECK(end_line(&r));
                i++;
            }
        }
    }
    CHECK(end_line(&r)); /* the last line */
    long total = r.line - 1;
    if (r.start > total)
        FAIL(CM_EINVAL, "Offset %ld is beyond end of file (%ld lines total)", offset, total);
    CHECK(cm_utf8_repair(&text, r.kept.data, r.kept.len));
    char size[32], lim[32];
    format_size(lim, sizeof lim, FS_READ_MAX_BYTES);
    bool truncated = r.sel_lines > FS_READ_MAX_LINES || r.sel_bytes > FS_READ_MAX_BYTES;
    if (truncated && r.first_bytes > FS_READ_MAX_BYTES) {
        format_size(size, sizeof size, r.first_bytes);
        CHECK(cm_buf_printf(out,
                            "[Line %ld is %s, exceeds %s limit. Use bash: sed -n '%ldp' %s | head "
                            "-c %d]",
                            r.start, size, lim, r.start, path, FS_READ_MAX_BYTES));
    } else if (truncated) {
        long end = r.start + r.kept_lines - 1;
        CHECK(cm_buf_add(out, text.data, text.len));
        if (r.by_bytes)
            CHECK(cm_buf_printf(out,
                                "\n\n[Showing lines %ld-%ld of %ld (%s limit). Use offset=%ld to "
                                "continue.]",
                                r.start, end, total, lim, end + 1));
        else
            CHECK(cm_buf_printf(out,
                                "\n\n[Showing lines %ld-%ld of %ld. Use offset=%ld to continue.]",
                                r.start, end, total, end + 1));
    } else if (r.limit && r.start - 1 + r.sel_lines < total) {
        long next = r.start + r.sel_lines;
        CHECK(cm_buf_add(out, text.data, text.len));
        CHECK(cm_buf_printf(out, "\n\n[%ld more lines in file. Use offset=%ld to continue.]",
                            total - (next - 1), next));
    } else {
        CHECK(cm_buf_add(out, text.data, text.len));
    }
out:
    if (fd >= 0) close(fd);
    cm_buf_release(&rel);
    cm_buf_release(&text);
    cm_buf_release(&r.kept);
    return rc;
}

/* ---- write and edit ------------------------------------------------------- */

static cm_rc replace(const char *workspace, const char *rel, const char *shown, const char *data,
                     size_t len, char *err, size_t errlen)
{
    int dir = -1;
    const char *leaf;
    cm_rc rc = open_parent(workspace, rel, true, &dir, &leaf, err, errlen);
    if (rc == CM_EPATH)
        return cm_seterr(err, errlen, rc,
                         "%s: a directory on the way is a symbolic link or a file (refused)",
                         shown);
    if (rc) return cm_seterr(err, errlen, rc, "%s: its directory cannot be created", shown);
    rc = cm_replace_file(dir, leaf, data, len, 0644, shown, err, errlen);
    close(dir);
    if (rc == CM_EPATH)
        return cm_seterr(err, errlen, rc, "%s: not a regular file, or a symbolic link (refused)",
                         shown);
    return rc;
}

cm_rc cm_tool_write(const char *workspace, const json_t *args, buf *out, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf rel = BUF_INIT;
    const char *path = json_string_value(json_object_get(args, "path"));
    const json_t *c = json_object_get(args, "content");
    CHECK(cm_tool_fs_resolve(workspace, path, &rel, err, errlen));
    if (!json_is_string(c)) FAIL(CM_EINVAL, "content (a string) is required");
    size_t len = json_string_length(c);
    if (len > FS_WRITE_MAX_BYTES)
        FAIL(CM_ETOOBIG, "content is %zu bytes, over the %u-byte cap", len, FS_WRITE_MAX_BYTES);
    CHECK(replace(workspace, rel.data, path, json_string_value(c), len, err, errlen));
    /* the reference counts UTF-16 code units; clawmem counts bytes and says so */
    CHECK(cm_buf_printf(out, "Successfully wrote %zu bytes to %s", len, path));
out:
    cm_buf_release(&rel);
    return rc;
}

/* s with "\r\n" and lone "\r" as "\n", into out. */
static cm_rc to_lf(buf *out, const char *s, size_t n)
{
    cm_rc rc = CM_OK;
    for (size_t i = 0; i < n && !rc; i++) {
        if (s[i] == '\r') {
            rc = cm_buf_addc(out, '\n');
            if (i + 1 < n && s[i + 1] == '\n') i++;
        } else {
            rc = cm_buf_addc(out, s[i]);
        }
    }
    return rc;
}

/* The reference's fuzzy form: trailing white space of each line dropped,
 * typographic quotes, dashes and spaces as their ASCII forms. */
static cm_rc fuzzy(buf *out, const char *s, size_t n)
{
    cm_rc rc = CM_OK;
    size_t line_start = out->len;
    for (size_t i = 0; i < n && !rc;) {
        int32_t cp;
        size_t k = cm_utf8_decode(s + i, n - i, &cp);
        if (!k) k = 1, cp = (unsigned char)s[i];
        if (cp == '\n') {
            while (out->len > line_start &&
                   (out->data[out->len - 1] == ' ' || out->data[out->len - 1] == '\t'))
                out->data[--out->len] = 0;
            rc = cm_buf_addc(out, '\n');
            line_start = out->len;
        } else if (cp >= 0x2018 && cp <= 0x201B) {
            rc = cm_buf_addc(out, '\'');
        } else if (cp >= 0x201C && cp <= 0x201F) {
            rc = cm_buf_addc(out, '"');
        } else if ((cp >= 0x2010 && cp <= 0x2015) || cp == 0x2212) {
            rc = cm_buf_addc(out, '-');
        } else if (cp == 0xA0 || (cp >= 0x2002 && cp <= 0x200A) || cp == 0x202F || cp == 0x205F ||
                   cp == 0x3000) {
            rc = cm_buf_addc(out, ' ');
        } else {
            rc = cm_buf_add(out, s + i, k);
        }
        i += k;
    }
    while (!rc && out->len > line_start &&
           (out->data[out->len - 1] == ' ' || out->data[out->len - 1] == '\t'))
        out->data[--out->len] = 0;
    return rc;
}

static size_t count_of(const char *hay, size_t hn, const char *needle, size_t nn)
{
    size_t c = 0;
    for (const char *p = hay; nn && (p = memmem(p, hn - (size_t)(p - hay), needle, nn));
         p += nn)
        c++;
    return c;
}

cm_rc cm_tool_edit(const char *workspace, const json_t *args, buf *out, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf rel = BUF_INIT, raw = BUF_INIT, content = BUF_INIT, oldt = BUF_INIT, newt = BUF_INIT,
        fc = BUF_INIT, fo = BUF_INIT, res = BUF_INIT, fin = BUF_INIT;
    int fd = -1;
    struct stat st;
    const char *path = json_string_value(json_object_get(args, "path"));
    const json_t *o = json_object_get(args, "oldText"), *nw = json_object_get(args, "newText");
    CHECK(cm_tool_fs_resolve(workspace, path, &rel, err, errlen));
    if (!json_is_string(o) || !json_is_string(nw))
        FAIL(CM_EINVAL, "oldText and newText (strings) are required");
    if (!json_string_length(o)) FAIL(CM_EINVAL, "oldText is empty");
    CHECK(open_file(workspace, rel.data, path, &fd, &st, err, errlen));
    CHECK(cm_path_read_fd(fd, path, FS_WRITE_MAX_BYTES, &raw, err, errlen));
    const char *body = raw.data;
    size_t blen = raw.len;
    bool bom = blen >= 3 && !memcmp(body, "\xEF\xBB\xBF", 3);
    if (bom) body += 3, blen -= 3;
    const char *lf = memchr(body, '\n', blen), *crlf = memmem(body, blen, "\r\n", 2);
    bool use_crlf = lf && crlf && crlf < lf;
    CHECK(to_lf(&content, body, blen));
    CHECK(to_lf(&oldt, json_string_value(o), json_string_length(o)));
    CHECK(to_lf(&newt, json_string_value(nw), json_string_length(nw)));
    const buf *base = &content;
    const char *at = memmem(content.data, content.len, oldt.data, oldt.len);
    size_t match_len = oldt.len;
    CHECK(fuzzy(&fc, content.data, content.len));
    CHECK(fuzzy(&fo, oldt.data, oldt.len));
    if (!at) { /* the reference's fuzzy match, replaced in the normalised text */
        at = fo.len ? memmem(fc.data, fc.len, fo.data, fo.len) : NULL;
        base = &fc;
        match_len = fo.len;
    }
    if (!at)
        FAIL(CM_EINVAL,
             "Could not find the exact text in %s. The old text must match exactly including all "
             "whitespace and newlines.",
             path);
    size_t occ = count_of(fc.data, fc.len, fo.data, fo.len);
    if (occ > 1)
        FAIL(CM_EINVAL,
             "Found %zu occurrences of the text in %s. The text must be unique. Please provide "
             "more context to make it unique.",
             occ, path);
    size_t pos = (size_t)(at - base->data);
    CHECK(cm_buf_add(&res, base->data, pos));
    CHECK(cm_buf_add(&res, newt.data, newt.len));
    CHECK(cm_buf_add(&res, base->data + pos + match_len, base->len - pos - match_len));
    if (res.len == base->len && !memcmp(res.data, base->data, res.len))
        FAIL(CM_EINVAL,
             "No changes made to %s. The replacement produced identical content. This might "
             "indicate an issue with special characters or the text not existing as expected.",
             path);
    if (bom) CHECK(cm_buf_add(&fin, "\xEF\xBB\xBF", 3));
    for (size_t i = 0; i < res.len; i++) {
        if (res.data[i] == '\n' && use_crlf) CHECK(cm_buf_addc(&fin, '\r'));
        CHECK(cm_buf_addc(&fin, res.data[i]));
    }
    if (fin.len > FS_WRITE_MAX_BYTES)
        FAIL(CM_ETOOBIG, "%s would be %zu bytes, over the %u-byte cap", path, fin.len,
             FS_WRITE_MAX_BYTES);
    close(fd);
    fd = -1;
    CHECK(replace(workspace, rel.data, path, fin.data, fin.len, err, errlen));
    CHECK(cm_buf_printf(out, "Successfully replaced text in %s.", path));
out:
    if (fd >= 0) close(fd);
    cm_buf_release(&rel);
    cm_buf_release(&raw);
    cm_buf_release(&content);
    cm_buf_release(&oldt);
    cm_buf_release(&newt);
    cm_buf_release(&fc);
    cm_buf_release(&fo);
    cm_buf_release(&res);
    cm_buf_release(&fin);
    return rc;
}

/* ---- how the model is told about them --------------------------------------- */

static const cm_tool_def fs_defs[] = {
    {"read", "read",
     "Read the contents of a file. Supports text files. For text files, output is truncated to "
     "2000 lines or 50KB (whichever is hit first). Use offset/limit for large files. When you "
     "need the full file, continue with offset until complete.",
     "{\"type\":\"object\",\"properties\":{"
     "\"path\":{\"type\":\"string\",\"description\":\"Path to the file to read (relative or "
     "absolute)\"},"
     "\"offset\":{\"type\":\"number\",\"description\":\"Line number to start reading from "
     "(1-indexed)\"},"
     "\"limit\":{\"type\":\"number\",\"description\":\"Maximum number of lines to read\"}},"
     "\"required\":[\"path\"]}",
     NULL, 1},
    {"edit", "edit",
     "Edit a file by replacing exact text. The oldText must match exactly (including "
     "whitespace). Use this for precise, surgical edits.",
     "{\"type\":\"object\",\"properties\":{"
     "\"path\":{\"type\":\"string\",\"description\":\"Path to the file to edit (relative or "
     "absolute)\"},"
     "\"oldText\":{\"type\":\"string\",\"description\":\"Exact text to find and replace (must "
     "match exactly)\"},"
     "\"newText\":{\"type\":\"string\",\"description\":\"New text to replace the old text "
     "with\"}},"
     "\"required\":[\"path\",\"oldText\",\"newText\"]}",
     NULL, 0},
    {"write", "write",
     "Write content to a file. Creates the file if it doesn't exist, overwrites if it does. "
     "Automatically creates parent directories.",
     "{\"type\":\"object\",\"properties\":{"
     "\"path\":{\"type\":\"string\",\"description\":\"Path to the file to write (relative or "
     "absolute)\"},"
     "\"content\":{\"type\":\"string\",\"description\":\"Content to write to the file\"}},"
     "\"required\":[\"path\",\"content\"]}",
     NULL, 0},
};

const cm_tool_def *cm_tool_fs_defs(size_t *n)
{
    *n = sizeof fs_defs / sizeof fs_defs[0];
    return fs_defs;
}
