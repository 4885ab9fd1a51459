/*
 * transcript.c — session transcripts (transcript.h).
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../base/fs.h"
#include "../base/lockfile.h"
#include "transcript.h"
#include "../base/caps.h"

#define SESSION_LOCK_STALE_MS (30LL * 60 * 1000)     /* QuantumClaw's session write lock */
#define TAIL_MAX              CM_CAP_TRANSCRIPT_TAIL /* the longest last line we look back over */

bool cm_transcript_id_valid(const char *id)
{
    if (!id || !isalnum((unsigned char)id[0])) return false;
    size_t n = 0;
    for (const char *p = id; *p; p++, n++)
        if (!isalnum((unsigned char)*p) && *p != '.' && *p != '_' && *p != '-') return false;
    return n <= 128;
}

cm_rc cm_transcript_path(buf *out, const char *dir, const char *session_id, const char *topic_id)
{
    cm_rc rc = cm_buf_printf(out, "%s/%s", dir, session_id);
    if (!rc && topic_id && *topic_id) {
        rc = cm_buf_adds(out, "-topic-");
        /* encodeURIComponent: unreserved A-Z a-z 0-9 - _ . ! ~ * ' ( ) stay */
        for (const unsigned char *p = (const unsigned char *)topic_id; !rc && *p; p++)
            rc = (isalnum(*p) || strchr("-_.!~*'()", *p)) ? cm_buf_addc(out, (char)*p)
                                                          : cm_buf_printf(out, "%%%02X", *p);
    }
    if (!rc) rc = cm_buf_adds(out, ".jsonl");
    return rc;
}

void cm_transcript_uuid(char out[37])
{
    unsigned char b[16];
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) /* never in practice; still unique enough */
        for (size_t i = 0; i < sizeof b; i++)
            b[i] = (unsigned char)(rand() ^ (int)(cm_now_ms() >> (i % 8)));
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
}

void cm_transcript_iso(int64_t ms, char out[32])
{
    time_t secs = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    size_t w = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + w, 32 - w, ".%03dZ", (int)(ms % 1000));
}

/* The last complete line of the file open at fd (its size is size), into
 * out; cuts a torn last line (no final newline) off the file. */
static cm_rc last_line(int fd, off_t size, buf *out, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    if (size == 0) return CM_OK;
    char c;
    if (pread(fd, &c, 1, size - 1) != 1)
        return cm_seterr(err, errlen, CM_EIO, "read: %s", strerror(errno));
    off_t end = size; /* one past the last complete line's newline */
    off_t pos = size;
    char chunk[4096];
    bool found_end = c == '\n';
    /* Walk back to the end of the last complete line, then to its start. */
    off_t start = 0;
    bool have_start = false;
    /* the end is looked for however far back it is (a torn line of any
     * length); the start within TAIL_MAX of it */
    while (pos > 0 && !have_start && (!found_end || end - pos <= (off_t)TAIL_MAX)) {
        size_t n = (size_t)CM_MIN((off_t)sizeof chunk, pos);
        pos -= (off_t)n;
        if (pread(fd, chunk, n, pos) != (ssize_t)n)
            return cm_seterr(err, errlen, CM_EIO, "read: %s", strerror(errno));
        for (size_t i = n; i-- > 0;) {
            if (chunk[i] != '\n') continue;
            off_t at = pos + (off_t)i;
            if (!found_end) {
                found_end = true;
                end = at + 1;
            } else if (at + 1 < end) {
                start = at + 1;
                have_start = true;
                break;
            }
        }
    }
    if (!found_end) end = 0; /* the whole file is one torn line (pos reached 0) */
    if (end < size && ftruncate(fd, end) < 0)
        return cm_seterr(err, errlen, CM_EIO, "cut a torn line: %s", strerror(errno));
    if (end == 0 || end - start - 1 > (off_t)TAIL_MAX) return CM_OK;
    size_t len = (size_t)(end - start - 1);
    CHECK(cm_buf_grow(out, len + 1));
    if (pread(fd, out->data + out->len, len, start) != (ssize_t)len)
        FAIL(CM_EIO, "read: %s", strerror(errno));
    out->len += len;
    out->data[out->len] = 0;
out:
    return rc;
}

/* An 8-hex-digit record id (pi-coding-agent's: the head of a UUID). */
static void record_id(char out[40])
{
    char u[37];
    cm_transcript_uuid(u);
    snprintf(out, 40, "%.8s", u);
}

/* The line of one record (its members after type, id, parentId and
 * timestamp) appended to line. */
static cm_rc format_record(buf *line, const char *type, const char *id, const char *parent,
                           const char *now, const json_t *fields)
{
    cm_rc rc = CM_OK;
    json_t *rec = json_pack("{s:s,s:s,s:o,s:s}", "type", type, "id", id, "parentId",
                            parent ? json_string(parent) : json_null(), "timestamp", now);
    char *text = NULL;
    if (!rec) return CM_ENOMEM;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)fields, k, v)
    {
        if (json_object_set(rec, k, v)) {
            rc = CM_ENOMEM;
            goto out;
        }
    }
    text = json_dumps(rec, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!text || cm_buf_adds(line, text) || cm_buf_addc(line, '\n')) rc = CM_ENOMEM;
out:
    free(text);
    json_decref(rec);
    return rc;
}

cm_rc cm_transcript_append_all(const char *path, const char *session_id, const char *cwd,
                               const transcript_entry *e, size_t n, int64_t now_ms,
                               char id_out[40], char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    lockfile l;
    buf tail = BUF_INIT, line = BUF_INIT;
    json_t *last = NULL;
    lockfile_opts lo = {SESSION_LOCK_STALE_MS, 0};
    if (n == 0) return CM_OK;
    CHECK(cm_lockfile_take(&l, path, LOCKFILE_APPEND, &lo, err, errlen));
    struct stat st;
    if (fstat(l.fd, &st) < 0) FAIL(CM_EIO, "%s: %s", path, strerror(errno));
    CHECK(last_line(l.fd, st.st_size, &tail, err, errlen));
    if (fstat(l.fd, &st) < 0) FAIL(CM_EIO, "%s: %s", path, strerror(errno));
    char now[32], id[40] = "", prev[40] = "";
    cm_transcript_iso(now_ms, now);
    if (st.st_size == 0) {
        json_t *h =
            json_pack("{s:s,s:i,s:s,s:s,s:s}", "type", "session", "version", TRANSCRIPT_VERSION,
                      "id", session_id, "timestamp", now, "cwd", cwd ? cwd : "");
        char *ht = h ? json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        json_decref(h);
        if (!ht || cm_buf_adds(&line, ht) || cm_buf_addc(&line, '\n')) {
            free(ht);
            FAIL(CM_ENOMEM, "out of memory");
        }
        free(ht);
    }
    /* The previous record's id is the first one's parent; each next one's
     * parent is the one before it. */
    last = tail.len ? json_loads(tail.data, 0, NULL) : NULL;
    const char *parent = json_string_value(json_object_get(last, "id"));
    const char *ltype = json_string_value(json_object_get(last, "type"));
    if (ltype && !strcmp(ltype, "session")) parent = NULL;
    for (size_t i = 0; i < n; i++) {
        record_id(id);
        if (format_record(&line, e[i].type, id, i ? prev : parent, now, e[i].fields))
            FAIL(CM_ENOMEM, "out of memory");
        snprintf(prev, sizeof prev, "%s", id);
    }
    /* One write of all the lines: O_APPEND keeps them in one piece. A
     * failed one is cut back, so that no torn line is left for the next
     * writer (QuantumClaw's too) to glue its own line to. */
    int werr = 0;
    for (size_t off = 0; off < line.len && !werr;) {
        ssize_t w = write(l.fd, line.data + off, line.len - off);
        if (w < 0 && errno != EINTR) werr = errno;
        if (w == 0) werr = EIO; /* nothing written, no error: never spin on it */
        if (w > 0) off += (size_t)w;
    }
    if (!werr && fdatasync(l.fd) < 0) werr = errno;
    if (werr) {
        if (ftruncate(l.fd, st.st_size) < 0)
            FAIL(CM_EIO, "%s: %s (and a torn line is left: %s)", path, strerror(werr),
                 strerror(errno));
        FAIL(CM_EIO, "%s: %s", path, strerror(werr));
    }
    if (st.st_size == 0) fsync(l.dirfd); /* a new file's name */
    if (id_out) snprintf(id_out, 40, "%s", id);
out:
    cm_lockfile_release(&l);
    json_decref(last);
    cm_buf_release(&tail);
    cm_buf_release(&line);
    return rc;
}

cm_rc cm_transcript_append(const char *path, const char *session_id, const char *cwd,
                           const char *type, const json_t *fields, int64_t now_ms, char id_out[40],
                           char *err, size_t errlen)
{
    transcript_entry e = {type, fields};
    return cm_transcript_append_all(path, session_id, cwd, &e, 1, now_ms, id_out, err, errlen);
}

/* Opens path for reading (no symbolic link), its size in *size. */
static cm_rc open_read(const char *path, int *fd, int64_t *size, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    struct stat st;
    *fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
    if (*fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR) FAIL(CM_ENOTFOUND, "%s: no such file", path);
        FAIL(CM_EIO, "%s: %s", path, strerror(errno));
    }
    if (fstat(*fd, &st) < 0 || !S_ISREG(st.st_mode)) FAIL(CM_EIO, "%s: not a regular file", path);
    *size = st.st_size;
out:
    if (rc && *fd >= 0) close(*fd);
    if (rc) *fd = -1;
    return rc;
}

#define READ_BLOCK (1 << 20)

cm_rc cm_transcript_read_from(const char *path, int64_t from, size_t max,
                              transcript_record_fn fn, void *ctx, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    int fd = -1;
    int64_t size;
    buf b = BUF_INIT;
    CHECK(open_read(path, &fd, &size, err, errlen));
    if (from < 0 || from > size) from = size;
    if ((uint64_t)(size - from) > max)
        FAIL(CM_ETOOBIG, "%s: %lld bytes to read, over the %zu-byte cap", path,
             (long long)(size - from), max);
    int line = 0;
    int64_t off = from, done = 0;
    bool go = true, skipping = false;
    while (go) {
        /* a block, or what the file had left at open (and a byte to see
         * its end) when that is less: a short file takes no 1 MiB buffer */
        int64_t left = size - off + 1;
        size_t want = left > 0 && left < READ_BLOCK ? (size_t)left : READ_BLOCK;
        if (want < 4096) want = 4096;
        if (cm_buf_grow(&b, want)) FAIL(CM_ENOMEM, "%s: out of memory", path);
        ssize_t r = pread(fd, b.data + b.len, want, off);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) FAIL(CM_EIO, "%s: %s", path, strerror(errno));
        off += r;
        b.len += (size_t)r;
        done += r;
        /* every complete line in b; the rest waits for the next block */
        size_t i = 0;
        for (char *nl; go && (nl = memchr(b.data + i, '\n', b.len - i));) {
            size_t e = (size_t)(nl - b.data);
            line++;
            if (skipping) {
                skipping = false;
            } else if (e > i) {
                json_t *j = json_loadb(b.data + i, e - i, 0, NULL);
                if (json_is_object(j)) go = fn(ctx, line, j);
                json_decref(j);
            }
            i = e + 1;
        }
        memmove(b.data, b.data + i, b.len - i);
        b.len -= i;
        /* a line past the cap is not a record anyone wrote: skipped to its end */
        if (b.len > CM_CAP_TRANSCRIPT_TAIL) {
            b.len = 0;
            skipping = true;
        }
        if (r == 0 || (uint64_t)done > max) break; /* a torn last line is skipped */
    }
out:
    if (fd >= 0) close(fd);
    cm_buf_release(&b);
    return rc;
}

cm_rc cm_transcript_read(const char *path, size_t max, transcript_record_fn fn, void *ctx,
                         char *err, size_t errlen)
{
    return cm_transcript_read_from(path, 0, max, fn, ctx, err, errlen);
}

/* Complete lines of fd before `end`, last first: fn(ctx, offset, line, len)
 * until it returns false. A line longer than max ends the scan. */
typedef bool (*back_fn)(void *ctx, int64_t offset, const char *line, size_t len);
static cm_rc scan_back(int fd, int64_t end, size_t max, back_fn fn, void *ctx, char *err,
                       size_t errlen)
{
    cm_rc rc = CM_OK;
    buf b = BUF_INIT;    /* the bytes [pos, pos + b.len) */
    int64_t pos = end;
    bool first = true;   /* the part after the file's last newline is torn: skipped */
    for (bool go = true; go && pos > 0;) {
        size_t n = (size_t)CM_MIN((int64_t)READ_BLOCK, pos);
        if (b.len + n > max) break;
        if (cm_buf_grow(&b, n)) FAIL(CM_ENOMEM, "out of memory");
        memmove(b.data + n, b.data, b.len);
        pos -= (int64_t)n;
        for (size_t got = 0; got < n;) {
            ssize_t r = pread(fd, b.data + got, n - got, pos + (int64_t)got);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) FAIL(CM_EIO, "read: %s", r < 0 ? strerror(errno) : "the file shrank");
            got += (size_t)r;
        }
        b.len += n;
        /* lines that end in b and start after a newline in b (or at 0) */
        size_t e = b.len;
        if (first) {
            char *nl = memrchr(b.data, '\n', b.len);
            if (!nl && pos > 0) continue;
            e = nl ? (size_t)(nl - b.data) : 0;
            first = false;
        }
        while (go) {
            char *nl = e ? memrchr(b.data, '\n', e) : NULL;
            size_t s0 = nl ? (size_t)(nl - b.data) + 1 : 0;
            if (!nl && pos > 0) break; /* starts in an earlier block */
            if (e > s0) go = fn(ctx, pos + (int64_t)s0, b.data + s0, e - s0);
            if (!nl) {
                pos = 0;
                break;
            }
            e = s0 - 1;
        }
        b.len = e; /* what is left: the start of a line, or nothing */
    }
out:
    cm_buf_release(&b);
    return rc;
}

/* The scan for the last compaction, then its first kept record. */
typedef struct ctx_scan {
    int64_t comp_at, kept_at;
    char kept[64]; /* firstKeptEntryId; "" when none */
} ctx_scan;

static bool top_type_is(const char *line, size_t len, const char *type, json_t **out)
{
    json_t *j = json_loadb(line, len, 0, NULL);
    const char *t = json_string_value(json_object_get(j, "type"));
    bool yes = json_is_object(j) && t && !strcmp(t, type);
    if (yes && out)
        *out = j;
    else
        json_decref(j);
    return yes;
}

static bool find_compaction(void *vctx, int64_t off, const char *line, size_t len)
{
    ctx_scan *c = vctx;
    json_t *j = NULL;
    if (!memmem(line, len, "\"compaction\"", 12) || !top_type_is(line, len, "compaction", &j))
        return true;
    c->comp_at = off;
    const char *k = json_string_value(json_object_get(j, "firstKeptEntryId"));
    snprintf(c->kept, sizeof c->kept, "%s", k && strlen(k) < sizeof c->kept ? k : "");
    json_decref(j);
    return false;
}

static bool find_kept(void *vctx, int64_t off, const char *line, size_t len)
{
    ctx_scan *c = vctx;
    char q[80];
    int n = snprintf(q, sizeof q, "\"%s\"", c->kept);
    if (!memmem(line, len, q, (size_t)n)) return true;
    json_t *j = json_loadb(line, len, 0, NULL);
    bool hit = json_is_object(j) &&
               !strcmp(json_string_value(json_object_get(j, "id")) ?: "", c->kept);
    json_decref(j);
    if (hit) c->kept_at = off;
    return !hit;
}

cm_rc cm_transcript_context_offset(const char *path, int64_t *offset, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    int fd = -1;
    int64_t size;
    ctx_scan c = {-1, -1, ""};
    *offset = 0;
    CHECK(open_read(path, &fd, &size, err, errlen));
    CHECK(scan_back(fd, size, CM_CAP_TRANSCRIPT, find_compaction, &c, err, errlen));
    if (c.comp_at < 0) goto out;
    *offset = c.comp_at;
    if (c.kept[0]) CHECK(scan_back(fd, c.comp_at, CM_CAP_TRANSCRIPT, find_kept, &c, err, errlen));
    if (c.kept_at >= 0) *offset = c.kept_at;
out:
    if (fd >= 0) close(fd);
    return rc;
}

static json_t *text_content(const char *text)
{
    return json_pack("[{s:s,s:s}]", "type", "text", "text", text ? text : "");
}

json_t *cm_transcript_user_message(const char *text, int64_t now_ms)
{
    return json_pack("{s:s,s:o,s:I}", "role", "user", "content", text_content(text), "timestamp",
                     (json_int_t)now_ms);
}

json_t *cm_transcript_assistant_message(const char *text, const char *api, const char *provider,
                                        const char *model, const char *stop_reason, int64_t now_ms)
{
    json_t *usage = json_pack("{s:i,s:i,s:i,s:i,s:i,s:{s:i,s:i,s:i,s:i,s:i}}", "input", 0, "output",
                              0, "cacheRead", 0, "cacheWrite", 0, "totalTokens", 0, "cost", "input",
                              0, "output", 0, "cacheRead", 0, "cacheWrite", 0, "total", 0);
    return json_pack("{s:s,s:o,s:s,s:s,s:s,s:o,s:s,s:I}", "role", "assistant", "content",
                     text_content(text), "api", api ? api : "", "provider",
                     provider ? provider : "", "model", model ? model : "", "usage", usage,
                     "stopReason", stop_reason ? stop_reason : "stop", "timestamp",
                     (json_int_t)now_ms);
}

json_t *cm_transcript_tool_result(const char *call_id, const char *tool_name, const char *text,
                                  bool is_error, int64_t now_ms)
{
    return json_pack("{s:s,s:s,s:s,s:o,s:b,s:I}", "role", "toolResult", "toolCallId",
                     call_id ? call_id : "", "toolName", tool_name ? tool_name : "", "content",
                     text_content(text), "isError", is_error, "timestamp", (json_int_t)now_ms);
}

/* ---- the run's model (cm_transcript_note_model) ---- */

#define HEAD_RECORDS 32

typedef struct model_seen {
    bool message, model_change, thinking;
    const char *level; /* the last thinking_level_change's level (borrowed), or NULL */
    json_t *snapshot; /* the last model-snapshot's data (borrowed from its record) */
    json_t *keep;     /* the head records kept alive for snapshot */
    int n;
} model_seen;

static void see(model_seen *s, const json_t *rec)
{
    const char *t = json_string_value(json_object_get(rec, "type"));
    if (!t) return;
    if (!strcmp(t, "message")) s->message = true;
    if (!strcmp(t, "model_change")) s->model_change = true;
    if (!strcmp(t, "thinking_level_change")) {
        s->thinking = true;
        s->level = json_string_value(json_object_get(rec, "thinkingLevel"));
    }
    const char *ct = json_string_value(json_object_get(rec, "customType"));
    json_t *data = json_object_get(rec, "data");
    if (!strcmp(t, "custom") && ct && !strcmp(ct, "model-snapshot") && json_is_object(data))
        s->snapshot = data;
}

static bool see_head(void *ctx, int line, json_t *rec)
{
    (void)line;
    model_seen *s = ctx;
    if (json_array_append(s->keep, rec)) return false;
    see(s, rec);
    return ++s->n < HEAD_RECORDS;
}

static bool keep_all(void *ctx, int line, json_t *rec)
{
    (void)line;
    return json_array_append((json_t *)ctx, rec) == 0;
}

static bool same_str(const json_t *v, const char *s)
{
    return !strcmp(json_string_value(v) ? json_string_value(v) : "", s ? s : "");
}

#define MODEL_RECORDS 3 /* model_change, thinking_level_change, model-snapshot */

/* The model records due before a turn's messages (cm_transcript_note_model)
 * into e[0..*n), their fields into f (owned by the caller). */
static cm_rc model_entries(const char *path, const transcript_model *m, const json_t *recent,
                           bool recent_whole, int64_t now_ms, transcript_entry *e, json_t **f,
                           size_t *n, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    model_seen s = {.keep = json_array()};
    json_t *tail = NULL;
    if (!s.keep) return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    if (!recent || !recent_whole) { /* else recent holds the head already */
        rc = cm_transcript_read_from(path, 0, SIZE_MAX, see_head, &s, err, errlen);
        bool fresh = rc == CM_ENOTFOUND;
        if (fresh) rc = CM_OK;
        if (rc) goto out;
        if (!fresh && !recent) {
            int64_t from = 0;
            if (!(tail = json_array())) FAIL(CM_ENOMEM, "out of memory");
            CHECK(cm_transcript_context_offset(path, &from, err, errlen));
            CHECK(cm_transcript_read_from(path, from, SIZE_MAX, keep_all, tail, err, errlen));
            recent = tail;
        }
    }
    size_t i;
    json_t *rec;
    json_array_foreach((json_t *)recent, i, rec)
        see(&s, rec);
    bool start = !s.message && !s.model_change;
    if (start) {
        if (!(f[*n] = json_pack("{s:s,s:s}", "provider", m->provider ? m->provider : "",
                                "modelId", m->model_id ? m->model_id : "")))
            FAIL(CM_ENOMEM, "out of memory");
        e[*n] = (transcript_entry){"model_change", f[*n]};
        ++*n;
    }
    if (start || !s.thinking ||
        strcmp(s.level ? s.level : "", m->thinking_level ? m->thinking_level : "off")) {
        if (!(f[*n] = json_pack("{s:s}", "thinkingLevel",
                                m->thinking_level ? m->thinking_level : "off")))
            FAIL(CM_ENOMEM, "out of memory");
        e[*n] = (transcript_entry){"thinking_level_change", f[*n]};
        ++*n;
    }
    if (!s.snapshot || !same_str(json_object_get(s.snapshot, "provider"), m->provider) ||
        !same_str(json_object_get(s.snapshot, "modelApi"), m->api) ||
        !same_str(json_object_get(s.snapshot, "modelId"), m->model_id)) {
        if (!(f[*n] = json_pack("{s:s,s:{s:I,s:s,s:s,s:s}}", "customType", "model-snapshot",
                                "data", "timestamp", (json_int_t)now_ms, "provider",
                                m->provider ? m->provider : "", "modelApi", m->api ? m->api : "",
                                "modelId", m->model_id ? m->model_id : "")))
            FAIL(CM_ENOMEM, "out of memory");
        e[*n] = (transcript_entry){"custom", f[*n]};
        ++*n;
    }
out:
    json_decref(tail);
    json_decref(s.keep);
    return rc;
}

cm_rc cm_transcript_note_turn(const char *path, const char *session_id, const char *cwd,
                              const transcript_model *m, const json_t *recent, bool recent_whole,
                              const json_t *msgs, int64_t now_ms, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    json_t *f[MODEL_RECORDS] = {NULL, NULL, NULL}, *wrapped = json_array();
    size_t n = 0, nmsgs = json_array_size(msgs);
    transcript_entry *e = calloc(MODEL_RECORDS + nmsgs, sizeof *e);
    if (!e || !wrapped) FAIL(CM_ENOMEM, "out of memory");
    if (m) CHECK(model_entries(path, m, recent, recent_whole, now_ms, e, f, &n, err, errlen));
    for (size_t k = 0; k < nmsgs; k++) {
        json_t *w = json_pack("{s:O}", "message", json_array_get(msgs, k));
        if (!w || json_array_append_new(wrapped, w)) FAIL(CM_ENOMEM, "out of memory");
        e[n++] = (transcript_entry){"message", w};
    }
    rc = cm_transcript_append_all(path, session_id, cwd, e, n, now_ms, NULL, err, errlen);
out:
    for (size_t k = 0; k < MODEL_RECORDS; k++)
        json_decref(f[k]);
    free(e);
    json_decref(wrapped);
    return rc;
}

cm_rc cm_transcript_note_model(const char *path, const char *session_id, const char *cwd,
                               const transcript_model *m, const json_t *recent, int64_t now_ms,
                               char *err, size_t errlen)
{
    return cm_transcript_note_turn(path, session_id, cwd, m, recent, false, NULL, now_ms, err,
                                   errlen);
}
