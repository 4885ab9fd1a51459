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

cm_rc cm_transcript_append(const char *path, const char *session_id, const char *cwd,
                           const char *type, const json_t *fields, int64_t now_ms, char id_out[40],
                           char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    lockfile l;
    buf tail = BUF_INIT, line = BUF_INIT;
    json_t *rec = NULL, *last = NULL;
    char *text = NULL;
    lockfile_opts lo = {SESSION_LOCK_STALE_MS, 0};
    CHECK(cm_lockfile_take(&l, path, LOCKFILE_APPEND, &lo, err, errlen));
    struct stat st;
    if (fstat(l.fd, &st) < 0) FAIL(CM_EIO, "%s: %s", path, strerror(errno));
    CHECK(last_line(l.fd, st.st_size, &tail, err, errlen));
    if (fstat(l.fd, &st) < 0) FAIL(CM_EIO, "%s: %s", path, strerror(errno));
    char now[32], id[40];
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
    /* The previous record's id is this one's parent. */
    last = tail.len ? json_loads(tail.data, 0, NULL) : NULL;
    const char *parent = json_string_value(json_object_get(last, "id"));
    const char *ltype = json_string_value(json_object_get(last, "type"));
    if (ltype && !strcmp(ltype, "session")) parent = NULL;
    record_id(id);
    rec = json_pack("{s:s,s:s,s:o,s:s}", "type", type, "id", id, "parentId",
                    parent ? json_string(parent) : json_null(), "timestamp", now);
    if (!rec) FAIL(CM_ENOMEM, "out of memory");
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)fields, k, v)
    {
        if (json_object_set(rec, k, v)) FAIL(CM_ENOMEM, "out of memory");
    }
    text = json_dumps(rec, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!text || cm_buf_adds(&line, text) || cm_buf_addc(&line, '\n'))
        FAIL(CM_ENOMEM, "out of memory");
    /* One write of the whole line(s): O_APPEND keeps it in one piece. */
    for (size_t off = 0; off < line.len;) {
        ssize_t w = write(l.fd, line.data + off, line.len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) FAIL(CM_EIO, "%s: %s", path, strerror(errno));
        off += (size_t)w;
    }
    if (fdatasync(l.fd) < 0) FAIL(CM_EIO, "%s: %s", path, strerror(errno));
    if (st.st_size == 0) fsync(l.dirfd); /* a new file's name */
    if (id_out) snprintf(id_out, 40, "%s", id);
out:
    cm_lockfile_release(&l);
    json_decref(rec);
    json_decref(last);
    free(text);
    cm_buf_release(&tail);
    cm_buf_release(&line);
    return rc;
}

cm_rc cm_transcript_read(const char *path, size_t max, transcript_record_fn fn, void *ctx,
                         char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf b = BUF_INIT;
    CHECK(cm_fs_read_file(path, max, &b, err, errlen));
    int line = 0;
    for (size_t i = 0; i < b.len;) {
        size_t e = i;
        while (e < b.len && b.data[e] != '\n')
            e++;
        line++;
        bool complete = e < b.len;
        if (complete && e > i) {
            json_t *j = json_loadb(b.data + i, e - i, 0, NULL);
            bool go = true;
            if (json_is_object(j)) go = fn(ctx, line, j);
            json_decref(j);
            if (!go) break;
        }
        i = e + 1;
    }
out:
    cm_buf_release(&b);
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
