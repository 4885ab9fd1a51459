/*
 * memfile.c — the memory files' access rules: which paths are memory files,
 * and reading and writing them. A path is checked once, lexically (as
 * QuantumClaw 2026.3.22 resolves it), which names a trusted root (the
 * workspace or an extraPaths root) and the path beneath it; from then on only
 * descriptors are used (base/path.h): the directory holding the file is opened
 * component by component without following a symbolic link, and the file is
 * read, locked, written and renamed relative to it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../base/fs.h"
#include "../base/path.h"
#include "../base/replace.h"
#include "../base/utf8.h"
#include "discover.h"
#include "media.h"
#include "memfile.h"

/* ---- where a memory path leads ------------------------------------------ */

void cm_index_memfile_loc_release(memfile_loc *loc)
{
    if (loc->root >= 0) close(loc->root);
    free(loc->inner);
    free(loc->rel);
    memset(loc, 0, sizeof *loc);
    loc->root = -1;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* Rewrites a path.c message "name: why" as "shown: why". */
static void reword(char *err, size_t errlen, const char *shown)
{
    if (!err || !errlen) return;
    const char *why = strstr(err, ": ");
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%.200s: %s", shown, why ? why + 2 : err);
    snprintf(err, errlen, "%s", tmp);
}

/* Opens the root of loc (when it exists): the workspace, or an extraPaths
 * root outside it. create: make it first (memory_write). */
static cm_rc open_root(const char *dir, bool nofollow, bool create, memfile_loc *loc, char *err,
                       size_t errlen)
{
    if (create) {
        cm_rc rc = cm_fs_mkdirs(dir, err, errlen);
        if (rc) return rc;
    }
    cm_rc rc = cm_path_open_root(dir, nofollow, &loc->root, err, errlen);
    if (rc == CM_ENOTFOUND) rc = CM_OK; /* nothing there yet: loc->root stays -1 */
    return rc;
}

static bool ws_memory_path(const char *rel)
{
    return !strcmp(rel, "MEMORY.md") || !strcmp(rel, "memory.md") || !strncmp(rel, "memory/", 7);
}

/* cm_index_memfile_locate; media_ok: a multimodal memory file (image, audio) may be named too. */
static cm_rc locate(const cm_config *cfg, const char *path, size_t len, bool create, bool media_ok,
                    memfile_loc *loc, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf abs = BUF_INIT, root = BUF_INIT, rel = BUF_INIT;
    char *shown = NULL, *ws = NULL;
    memset(loc, 0, sizeof *loc);
    loc->root = -1;
    while (len && is_space(path[0]))
        path++, len--;
    while (len && is_space(path[len - 1]))
        len--;
    if (len == 0) FAIL(CM_EPATH, "path is empty");
    if (memchr(path, 0, len)) FAIL(CM_EPATH, "path contains a NUL byte");
    if (cm_utf8_valid_prefix(path, len) != len) FAIL(CM_EPATH, "path is not valid UTF-8");
    if (!(shown = cm_strndup(path, CM_MIN(len, 200)))) CHECK(CM_ENOMEM);
    if (len < 3 || memcmp(path + len - 3, ".md", 3) != 0) {
        char *full = cm_strndup(path, len);
        unsigned kind = full ? cm_index_media_kind_of_name(full) : 0;
        bool on = full && cm_index_media_kind(cfg, full);
        free(full);
        if (!kind) FAIL(CM_EPATH, "%s: only Markdown (.md) memory files can be read", shown);
        if (!media_ok || !on)
            FAIL(CM_EPATH,
                 "%s: %s file, not Markdown: only .md memory files can be read or written (image "
                 "and audio files are found by memory_search with multimodal memory, but their "
                 "bytes are never returned)",
                 shown, kind == CM_MEDIA_AUDIO ? "an audio" : "an image");
    }
    /* Lexically, as QuantumClaw 2026.3.22 does: resolved against the
     * workspace, then named relative to it. */
    if (!(ws = cm_strdup(cfg->workspace))) CHECK(CM_ENOMEM);
    cm_fs_normalise(ws);
    if (path[0] != '/') CHECK(cm_fs_join(&abs, ws, ""));
    CHECK(cm_buf_add(&abs, path, len));
    cm_fs_normalise(abs.data); /* ".." above "/" stays at "/", as path.resolve does */
    abs.len = strlen(abs.data);
    if (strcmp(abs.data, ws) != 0) CHECK(cm_discover_relpath(&rel, ws, abs.data));
    if (rel.len && strncmp(rel.data, "../", 3) != 0 && ws_memory_path(rel.data)) {
        loc->in_workspace = true;
        if (!(loc->inner = cm_strdup(rel.data))) CHECK(CM_ENOMEM);
        CHECK(open_root(cfg->workspace, false, create, loc, err, errlen));
        goto done;
    }
    /* Otherwise it must be an extraPaths file or lie inside an extraPaths directory. */
    for (size_t i = 0; i < cfg->extra_paths.n; i++) {
        cm_buf_reset(&root);
        rc = cm_config_extra_path(cfg, i, &root);
        if (rc == CM_EPATH) {
            rc = CM_OK;
            continue;
        }
        CHECK(rc);
        bool same = strcmp(abs.data, root.data) == 0;
        bool below = !same && strncmp(abs.data, root.data, root.len) == 0 &&
                     (abs.data[root.len] == '/' || root.len == 1);
        if (!same && !below) continue;
        if (rel.len && strncmp(rel.data, "../", 3) != 0) {
            /* inside the workspace: walked from it, no link on the way */
            if (!(loc->inner = cm_strdup(rel.data))) CHECK(CM_ENOMEM);
            CHECK(open_root(cfg->workspace, false, create, loc, err, errlen));
        } else if (below) { /* a directory outside the workspace */
            const char *in = abs.data + root.len + (root.len > 1);
            if (!(loc->inner = cm_strdup(in))) CHECK(CM_ENOMEM);
            CHECK(open_root(root.data, true, create, loc, err, errlen));
        } else { /* the extraPaths entry is this very file */
            char *dir = cm_fs_dirname(root.data);
            if (!dir || !(loc->inner = cm_strdup(strrchr(root.data, '/') + 1))) {
                free(dir);
                CHECK(CM_ENOMEM);
            }
            rc = open_root(dir, false, create, loc, err, errlen);
            free(dir);
            CHECK(rc);
        }
        goto done;
    }
    if (path[0] == '/')
        FAIL(CM_EPATH,
             "%s: absolute path outside the memory files (allowed: MEMORY.md, memory/**/*.md, "
             "extraPaths)",
             shown);
    if (!rel.len || !strncmp(rel.data, "../", 3))
        FAIL(CM_EPATH, "%s: '..' leaves the workspace", shown);
    FAIL(CM_EPATH, "%s: not a memory file (allowed: MEMORY.md, memory/**/*.md, extraPaths)", shown);
done:
    loc->rel = cm_buf_detach(&rel);
    if (!loc->rel && !(loc->rel = cm_strdup(""))) CHECK(CM_ENOMEM);
out:
    if (rc) cm_index_memfile_loc_release(loc);
    free(shown);
    free(ws);
    cm_buf_release(&abs);
    cm_buf_release(&root);
    cm_buf_release(&rel);
    return rc;
}

cm_rc cm_index_memfile_locate(const cm_config *cfg, const char *path, size_t len, bool create,
                              memfile_loc *loc, char *err, size_t errlen)
{
    return locate(cfg, path, len, create, false, loc, err, errlen);
}

static cm_rc open_file(const cm_config *cfg, const char *path, bool media_ok, int *fd,
                       struct stat *st, buf *rel, char *err, size_t errlen)
{
    memfile_loc loc;
    *fd = -1;
    cm_rc rc = locate(cfg, path, strlen(path), false, media_ok, &loc, err, errlen);
    if (rc) return rc;
    if (loc.root < 0) rc = cm_seterr(err, errlen, CM_ENOTFOUND, "%s: no such file", loc.rel);
    if (!rc) {
        rc = cm_path_open_beneath(loc.root, loc.inner, O_RDONLY, fd, st, err, errlen);
        if (rc) reword(err, errlen, loc.rel);
    }
    if (!rc && rel) rc = cm_buf_adds(rel, loc.rel);
    if (rc && *fd >= 0) {
        close(*fd);
        *fd = -1;
    }
    cm_index_memfile_loc_release(&loc);
    return rc;
}

cm_rc cm_index_memfile_open(const cm_config *cfg, const char *path, int *fd, struct stat *st,
                            buf *rel, char *err, size_t errlen)
{
    return open_file(cfg, path, false, fd, st, rel, err, errlen);
}

cm_rc cm_index_memfile_open_media(const cm_config *cfg, const char *path, int *fd, struct stat *st,
                                  char *err, size_t errlen)
{
    return open_file(cfg, path, true, fd, st, NULL, err, errlen);
}

/* ---- memory_get ---------------------------------------------------------- */

void cm_index_memfile_text_release(memfile_text *t)
{
    free(t->path);
    cm_buf_release(&t->text);
    memset(t, 0, sizeof *t);
}

/* The position just after the next '\n' at or after i, or n. */
static size_t next_line(const char *s, size_t n, size_t i)
{
    const char *nl = i < n ? memchr(s + i, '\n', n - i) : NULL;
    return nl ? (size_t)(nl - s) + 1 : n;
}

/* The text of the file loc names (lines as cm_index_memfile_read). */
static cm_rc get_loc(const memfile_loc *l, long from, long offset, long lines, memfile_text *out,
                     char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    const memfile_loc loc = *l;
    buf text = BUF_INIT;
    int fd = -1;
    if (loc.root >= 0) {
        rc = cm_path_open_beneath(loc.root, loc.inner, O_RDONLY, &fd, NULL, err, errlen);
        if (rc == CM_ENOTFOUND) rc = CM_OK; /* nothing recorded yet: empty text */
        if (rc) reword(err, errlen, loc.rel);
        CHECK(rc);
        if (fd >= 0) {
            rc = cm_path_read_fd(fd, loc.rel, 1u << 30, &text, err, errlen);
            CHECK(rc);
        }
    }
    if (from <= 0) from = 1;
    if (offset < 0) offset = 0;
    /* Line k starts after the (k-1)th '\n'; the text after a final newline
     * is a last, empty line (as split("\n") makes it). */
    const char *s = text.data;
    size_t n = text.len, start = 0;
    long line = 1;
    while (line < from && start < n) {
        size_t nx = next_line(s, n, start);
        if (nx == n && (n == 0 || s[n - 1] != '\n')) break; /* no more lines */
        start = nx;
        line++;
    }
    if (line < from) start = n; /* past the end: empty text */
    /* The offset within line `from` (clamped to the line, moved off a
     * character's continuation bytes). */
    size_t eol = next_line(s, n, start);
    if (eol > start && s[eol - 1] == '\n') eol--;
    size_t lstart = start;
    start += (size_t)CM_MIN((uint64_t)offset, (uint64_t)(eol - start));
    while (start < eol && ((unsigned char)s[start] & 0xC0) == 0x80)
        start++;
    /* The end: just before the '\n' that ends line from+lines-1, or the end. */
    size_t end = n;
    if (lines > 0) {
        size_t i = start;
        for (long k = 0; k < lines; k++) {
            const char *nl = i < n ? memchr(s + i, '\n', n - i) : NULL;
            if (!nl) {
                i = n;
                break;
            }
            i = (size_t)(nl - s) + (k + 1 < lines);
        }
        end = i;
    }
    long next_from = 0;
    size_t next_offset = 0;
    if (end - start > MEMFILE_READ_MAX_BYTES) {
        size_t cap = start + MEMFILE_READ_MAX_BYTES;
        const char *nl = NULL;
        for (size_t i = cap; i > start; i--)
            if (s[i - 1] == '\n') {
                nl = s + i - 1;
                break;
            }
        if (nl) { /* cut after a whole line */
            size_t cut = (size_t)(nl - s) + 1;
            long k = 0;
            for (size_t i = start; i < cut; i = next_line(s, n, i))
                k++;
            next_from = from + k;
            end = cut;
        } else { /* one line longer than the cap: cut it at a character boundary */
            end = cap;
            while (end > start + 1 && ((unsigned char)s[end] & 0xC0) == 0x80)
                end--;
            next_from = from;
            next_offset = end - lstart;
        }
    }
    CHECK(cm_utf8_repair(&out->text, s + start, end - start));
    if (!(out->path = cm_strdup(loc.rel))) CHECK(CM_ENOMEM);
    out->next_from = next_from;
    out->next_offset = next_offset;
out:
    if (fd >= 0) close(fd);
    cm_buf_release(&text);
    if (rc) cm_index_memfile_text_release(out);
    return rc;
}

cm_rc cm_index_memfile_read(const cm_config *cfg, const char *path, size_t len, long from,
                            long offset, long lines, memfile_text *out, char *err, size_t errlen)
{
    memfile_loc loc;
    memset(out, 0, sizeof *out);
    cm_rc rc = cm_index_memfile_locate(cfg, path, len, false, &loc, err, errlen);
    if (rc) return rc;
    rc = get_loc(&loc, from, offset, lines, out, err, errlen);
    cm_index_memfile_loc_release(&loc);
    return rc;
}

cm_rc cm_index_memfile_read_beneath(const char *root, const char *inner, const char *name,
                                    long from, long offset, long lines, memfile_text *out,
                                    char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    memfile_loc loc = {-1, NULL, NULL, false};
    memset(out, 0, sizeof *out);
    size_t n = strlen(inner);
    if (!n) FAIL(CM_EPATH, "%.200s: no file named", name);
    if (cm_utf8_valid_prefix(inner, n) != n) FAIL(CM_EPATH, "path is not valid UTF-8");
    if (n < 3 || strcmp(inner + n - 3, ".md") != 0)
        FAIL(CM_EPATH, "%.200s: only Markdown (.md) memory files can be read", name);
    if (inner[0] == '/') FAIL(CM_EPATH, "%.200s: escapes its collection's root", name);
    for (const char *p = inner; *p;) { /* no ".." part: nothing above the root */
        size_t k = strcspn(p, "/");
        if (k == 2 && p[0] == '.' && p[1] == '.')
            FAIL(CM_EPATH, "%.200s: '..' leaves its collection's root", name);
        p += k + (p[k] == '/');
    }
    if (!(loc.inner = cm_strdup(inner)) || !(loc.rel = cm_strdup(name))) CHECK(CM_ENOMEM);
    CHECK(open_root(root, true, false, &loc, err, errlen));
    CHECK(get_loc(&loc, from, offset, lines, out, err, errlen));
out:
    cm_index_memfile_loc_release(&loc);
    return rc;
}

/* ---- memory_write -------------------------------------------------------- */

static int count_lines(const char *s, size_t n)
{
    int lines = 0;
    for (size_t i = 0; i < n; i++)
        lines += s[i] == '\n';
    return lines;
}

cm_rc cm_index_memfile_write(const cm_config *cfg, const char *path, const char *text, int64_t now,
                             memfile_note *out, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    memfile_loc loc;
    buf old = BUF_INIT, rel = BUF_INIT, all = BUF_INIT;
    char tmp[64] = "";
    int dir = -1, ofd = -1, tfd = -1;
    memset(out, 0, sizeof *out);
    memset(&loc, 0, sizeof loc);
    loc.root = -1;
    size_t tl = text ? strlen(text) : 0;
    while (tl && (text[tl - 1] == '\n' || text[tl - 1] == '\r' || text[tl - 1] == ' '))
        tl--;
    if (tl == 0) FAIL(CM_EINVAL, "memory_write: text is empty");
    if (tl > MEMFILE_WRITE_MAX_BYTES)
        FAIL(CM_EINVAL, "memory_write: text is %zu bytes, over the %u-byte cap", tl,
             MEMFILE_WRITE_MAX_BYTES);
    if (cm_utf8_valid_prefix(text, tl) != tl)
        FAIL(CM_EINVAL, "memory_write: text is not valid UTF-8");
    if (path && *path) {
        CHECK(cm_buf_adds(&rel, path));
    } else {
        time_t t = now ? (time_t)now : time(NULL);
        struct tm tm;
        localtime_r(&t, &tm);
        CHECK(cm_buf_printf(&rel, "memory/%04d-%02d-%02d.md", tm.tm_year + 1900, tm.tm_mon + 1,
                            tm.tm_mday));
    }
    CHECK(cm_index_memfile_locate(cfg, rel.data, rel.len, true, &loc, err, errlen));
    if (loc.root < 0) FAIL(CM_EIO, "%s: cannot create its directory", loc.rel);
    /* MEMORY.md and memory.md name the one long-term file: the note goes to
     * the one that is indexed (MEMORY.md when it exists, else memory.md when
     * it exists), never to a file that would not be found. */
    if (loc.in_workspace && (!strcmp(loc.inner, "MEMORY.md") || !strcmp(loc.inner, "memory.md"))) {
        struct stat st;
        const char *pick =
            fstatat(loc.root, "MEMORY.md", &st, AT_SYMLINK_NOFOLLOW) == 0   ? "MEMORY.md"
            : fstatat(loc.root, "memory.md", &st, AT_SYMLINK_NOFOLLOW) == 0 ? "memory.md"
                                                                            : loc.inner;
        if (strcmp(pick, loc.inner) != 0) {
            char *a = cm_strdup(pick), *b = cm_strdup(pick);
            if (!a || !b) {
                free(a);
                free(b);
                CHECK(CM_ENOMEM);
            }
            free(loc.inner);
            free(loc.rel);
            loc.inner = a;
            loc.rel = b;
        }
    }
    const char *leaf;
    rc = cm_path_open_dir(loc.root, loc.inner, PATH_MKDIRS, &dir, &leaf, err, errlen);
    if (rc) reword(err, errlen, loc.rel);
    CHECK(rc);
    /* Writers serialise on the directory (its inode, unlike the file's, is
     * not replaced by the rename). */
    if (flock(dir, LOCK_EX) < 0) FAIL(CM_EIO, "lock %s: %s", loc.rel, strerror(errno));
    cm_replace_sweep(dir);
    struct stat ost;
    rc = cm_path_open_file(dir, leaf, O_RDONLY, 0, &ofd, &ost, err, errlen);
    if (rc == CM_ENOTFOUND) rc = CM_OK; /* a new file */
    if (!rc && ofd >= 0) rc = cm_path_read_fd(ofd, leaf, 1u << 30, &old, err, errlen);
    if (rc) reword(err, errlen, loc.rel);
    CHECK(rc);
    /* The note becomes a paragraph of its own. */
    const char *sep = old.len == 0 ? "" : old.data[old.len - 1] == '\n' ? "\n" : "\n\n";
    int start = count_lines(old.data, old.len) + (int)strlen(sep) + 1;
    CHECK(cm_replace_temp(dir, tmp, &tfd, err, errlen));
    if (ofd >= 0) fchmod(tfd, ost.st_mode & 07777); /* keep the note's permissions */
    CHECK(cm_buf_add(&all, old.data, old.len));
    CHECK(cm_buf_adds(&all, sep));
    CHECK(cm_buf_add(&all, text, tl));
    CHECK(cm_buf_addc(&all, '\n'));
    for (size_t off = 0; off < all.len;) {
        ssize_t w = write(tfd, all.data + off, all.len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) FAIL(CM_EIO, "%s: %s", loc.rel, strerror(errno));
        off += (size_t)w;
    }
    if (fsync(tfd) < 0) FAIL(CM_EIO, "%s: %s", loc.rel, strerror(errno));
    close(tfd);
    tfd = -1;
    if (renameat(dir, tmp, dir, leaf) < 0) FAIL(CM_EIO, "rename %s: %s", loc.rel, strerror(errno));
    tmp[0] = 0;
    fsync(dir); /* the rename is durable */
    int end = start + count_lines(text, tl);
    out->path = loc.rel; /* moved */
    loc.rel = NULL;
    out->start_line = start;
    out->end_line = end;
    out->bytes = tl + 1;
out:
    if (tfd >= 0) close(tfd);
    if (tmp[0] && dir >= 0) unlinkat(dir, tmp, 0);
    if (ofd >= 0) close(ofd);
    if (dir >= 0) close(dir); /* releases the directory lock */
    cm_index_memfile_loc_release(&loc);
    cm_buf_release(&old);
    cm_buf_release(&rel);
    cm_buf_release(&all);
    return rc;
}
