/*
 * pairing.c — the DM pairing store QuantumClaw 2026.3.22 shares with us in
 * <stateDir>/credentials/: <channel>-pairing.json (pending requests,
 * {"version":1,"requests":[{id,code,createdAt,lastSeenAt,meta:{accountId}}]})
 * and <channel>-<account>-allowFrom.json (approved senders,
 * {"version":1,"allowFrom":[…]}; the default account also reads the legacy
 * <channel>-allowFrom.json). Writes go through lockfile.h (atomic replace
 * under QuantumClaw's sidecar lock); reads are lock-free (files are
 * replaced whole).
 */
#include "pairing.h"

#include <ctype.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "../../base/fs.h"
#include "../../base/lockfile.h"
#include "../../base/caps.h"

/* An allow-list entry as a trimmed string in out; false when blank. */
bool cm_gw_allow_entry(const json_t *v, char *out, size_t n)
{
    if (json_is_integer(v)) {
        snprintf(out, n, "%lld", (long long)json_integer_value(v));
        return true;
    }
    if (!json_is_string(v)) return false;
    const char *s = json_string_value(v);
    while (isspace((unsigned char)*s))
        s++;
    size_t len = strlen(s);
    while (len && isspace((unsigned char)s[len - 1]))
        len--;
    if (!len || len >= n) return false;
    memcpy(out, s, len);
    out[len] = 0;
    return true;
}

#define STORE_MAX CM_CAP_PAIRING_FILE /* a store file larger than this is refused */

static const char *S_str(const json_t *v, const char *dflt)
{
    return json_is_string(v) ? json_string_value(v) : dflt;
}

/* True when list holds id exactly. */
static bool S_has(const json_t *list, const char *id)
{
    size_t i;
    const json_t *v;
    char e[512];
    json_array_foreach(list, i,
                       v) if (cm_gw_allow_entry(v, e, sizeof e) && strcmp(e, id) == 0) return true;
    return false;
}

/* 2026.3.22's safe file-name key: trimmed, lower-cased, \ / : * ? " < > |
 * replaced by '_', ".." by '_'. */
static cm_rc S_safe_key(buf *out, const char *s)
{
    cm_rc rc = CM_OK;
    size_t n;
    while (isspace((unsigned char)*s))
        s++;
    n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    size_t start = out->len;
    for (size_t i = 0; i < n; i++) {
        char c = (char)tolower((unsigned char)s[i]);
        if (c == '.' && i + 1 < n && s[i + 1] == '.') {
            CHECK(cm_buf_addc(out, '_'));
            i++;
            continue;
        }
        CHECK(cm_buf_addc(out, strchr("\\/:*?\"<>|", c) ? '_' : c));
    }
    if (out->len == start || (out->len == start + 1 && out->data[start] == '_')) rc = CM_EINVAL;
out:
    return rc;
}

/* <state_dir>/credentials/<channel>[-<account>]-<suffix> */
static cm_rc S_store_path(buf *out, const char *state_dir, const char *channel, const char *account,
                          const char *suffix, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    cm_buf_reset(out);
    CHECK(cm_buf_printf(out, "%s/credentials/", state_dir));
    if (S_safe_key(out, channel)) FAIL(CM_EINVAL, "invalid pairing channel");
    if (account) {
        CHECK(cm_buf_addc(out, '-'));
        if (S_safe_key(out, account)) FAIL(CM_EINVAL, "invalid pairing account id");
    }
    CHECK(cm_buf_adds(out, suffix));
out:
    return rc;
}

/* Reads a store file: NULL (no error) when missing or not valid JSON, as
 * 2026.3.22 falls back to an empty store. */
static cm_rc S_load(const char *path, json_t **doc, char *err, size_t errlen)
{
    buf b;
    cm_buf_init(&b, 0);
    *doc = NULL;
    cm_rc rc = cm_fs_read_file(path, STORE_MAX, &b, err, errlen);
    if (rc == CM_ENOTFOUND)
        rc = CM_OK;
    else if (!rc)
        *doc = json_loadb(b.data, b.len, 0, NULL);
    cm_buf_release(&b);
    return rc;
}

/* Replaces the locked file with doc as QuantumClaw writes it (two-space
 * indent, final newline). */
static cm_rc S_save(lockfile *l, const json_t *doc, char *err, size_t errlen)
{
    char *text = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    buf b;
    cm_buf_init(&b, 0);
    cm_rc rc = text && !cm_buf_adds(&b, text) && !cm_buf_addc(&b, '\n') ? CM_OK : CM_ENOMEM;
    if (!rc)
        rc = cm_lockfile_replace(l, b.data, b.len, err, errlen);
    else
        cm_seterr(err, errlen, rc, "out of memory");
    cm_buf_release(&b);
    free(text);
    return rc;
}

/* The list under key of doc ({"version":1,key:[…]}), made so when absent. */
static json_t *S_list(json_t **doc, const char *key)
{
    if (!json_is_object(*doc)) {
        json_decref(*doc);
        *doc = json_pack("{s:i,s:[]}", "version", 1, key);
        if (!*doc) return NULL;
    }
    json_t *list = json_object_get(*doc, key);
    if (!json_is_array(list)) {
        list = json_array();
        if (!list || json_object_set_new(*doc, key, list)) return NULL;
    }
    return list;
}

static void S_iso(int64_t ms, char out[32])
{
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&s, &tm);
    size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, 32 - n, ".%03dZ", (int)(ms % 1000));
}

/* ISO 8601 UTC ("2026-11-30T12:00:00.000Z"); false when unreadable. */
static bool S_parse_iso(const char *s, int64_t *ms)
{
    struct tm tm = {0};
    int n = 0, frac = 0, digits = 0;
    if (!s || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                     &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6)
        return false;
    s += n;
    if (*s == '.')
        for (s++; isdigit((unsigned char)*s); s++)
            if (digits++ < 3) frac = frac * 10 + (*s - '0');
    while (digits > 0 && digits < 3)
        frac *= 10, digits++;
    if (*s && strcmp(s, "Z") != 0 && strcmp(s, "+00:00") != 0) return false;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    time_t t = timegm(&tm);
    if (t == (time_t)-1) return false;
    *ms = (int64_t)t * 1000 + frac;
    return true;
}

static int64_t S_req_time(const json_t *req, const char *key, int64_t dflt)
{
    int64_t t;
    return S_parse_iso(S_str(json_object_get(req, key), NULL), &t) ? t : dflt;
}

/* The request's account as 2026.3.22 compares it: meta.accountId, trimmed,
 * lower-cased. */
static bool S_req_account_is(const json_t *req, const char *account)
{
    char a[256];
    const json_t *v = json_object_get(json_object_get(req, "meta"), "accountId");
    if (!cm_gw_allow_entry(v, a, sizeof a)) a[0] = 0;
    return strcasecmp(a, account) == 0;
}

/* Drops requests older than the TTL (or without a readable createdAt);
 * true when any was dropped. */
static bool S_prune_expired(json_t *reqs, int64_t now_ms)
{
    bool removed = false;
    for (size_t i = json_array_size(reqs); i-- > 0;) {
        int64_t created = S_req_time(json_array_get(reqs, i), "createdAt", INT64_MIN);
        if (created == INT64_MIN || now_ms - created > GW_PAIRING_TTL_MS) {
            json_array_remove(reqs, i);
            removed = true;
        }
    }
    return removed;
}

/* Keeps the max most recently seen requests; true when any was dropped. */
static bool S_prune_excess(json_t *reqs, size_t max)
{
    bool removed = false;
    while (json_array_size(reqs) > max) {
        size_t oldest = 0;
        int64_t t0 = INT64_MAX;
        for (size_t i = 0; i < json_array_size(reqs); i++) {
            const json_t *r = json_array_get(reqs, i);
            int64_t t = S_req_time(r, "lastSeenAt", S_req_time(r, "createdAt", 0));
            if (t < t0) t0 = t, oldest = i;
        }
        json_array_remove(reqs, oldest);
        removed = true;
    }
    return removed;
}

static bool S_code_taken(const json_t *reqs, const char *code)
{
    size_t i;
    const json_t *r;
    json_array_foreach(reqs, i, r)
    {
        const char *c = S_str(json_object_get(r, "code"), "");
        if (strcasecmp(c, code) == 0) return true;
    }
    return false;
}

static cm_rc S_new_code(const json_t *reqs, char code[GW_PAIRING_CODE_LEN + 1], char *err,
                        size_t errlen)
{
    unsigned char rnd[GW_PAIRING_CODE_LEN];
    for (int attempt = 0; attempt < 500; attempt++) {
        if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
            return cm_seterr(err, errlen, CM_EIO, "no random bytes for a pairing code");
        for (size_t i = 0; i < sizeof rnd; i++)
            code[i] = GW_PAIRING_ALPHABET[rnd[i] & 31];
        code[GW_PAIRING_CODE_LEN] = 0;
        if (!S_code_taken(reqs, code)) return CM_OK;
    }
    return cm_seterr(err, errlen, CM_EIO, "failed to generate a unique pairing code");
}

/* upsertChannelPairingRequest: under the pairing file's lock, refresh the
 * sender's pending request or create one when fewer than the cap are pending. */
cm_rc cm_gw_pairing_request(const char *state_dir, const char *channel, const char *account,
                            const char *sender, int64_t now_ms, gw_access_result *res, char *err,
                            size_t errlen)
{
    cm_rc rc = CM_OK;
    lockfile l;
    bool locked = false;
    json_t *doc = NULL, *reqs, *req = NULL;
    buf path;
    cm_buf_init(&path, 0);
    char now[32];
    S_iso(now_ms, now);
    CHECK(S_store_path(&path, state_dir, channel, NULL, "-pairing.json", err, errlen));
    CHECK(cm_lockfile_take(&l, path.data, LOCKFILE_REPLACE, NULL, err, errlen));
    locked = true;
    CHECK(S_load(path.data, &doc, err, errlen));
    if (!(reqs = S_list(&doc, "requests"))) FAIL(CM_ENOMEM, "out of memory");
    bool changed = S_prune_expired(reqs, now_ms);
    size_t i;
    json_array_foreach(reqs, i, req)
    {
        if (strcmp(S_str(json_object_get(req, "id"), ""), sender) == 0 &&
            S_req_account_is(req, account))
            break;
    }
    if (i < json_array_size(reqs)) {
        const char *code = S_str(json_object_get(req, "code"), "");
        if (*code)
            snprintf(res->code, sizeof res->code, "%s", code);
        else
            CHECK(S_new_code(reqs, res->code, err, errlen));
        if (json_object_set_new(req, "code", json_string(res->code)) ||
            json_object_set_new(req, "lastSeenAt", json_string(now)))
            FAIL(CM_ENOMEM, "out of memory");
        S_prune_excess(reqs, GW_PAIRING_MAX_PENDING);
        CHECK(S_save(&l, doc, err, errlen));
        res->verdict = GW_ACCESS_PAIRING_PENDING;
        res->code[0] = 0; /* the code was sent when the request was made */
        res->reason = "dmPolicy=pairing (request pending)";
        goto out;
    }
    changed |= S_prune_excess(reqs, GW_PAIRING_MAX_PENDING);
    if (json_array_size(reqs) >= GW_PAIRING_MAX_PENDING) {
        if (changed) CHECK(S_save(&l, doc, err, errlen));
        res->verdict = GW_ACCESS_PAIRING_PENDING;
        res->reason = "dmPolicy=pairing (too many pending requests)";
        goto out;
    }
    CHECK(S_new_code(reqs, res->code, err, errlen));
    req = json_pack("{s:s,s:s,s:s,s:s,s:{s:s}}", "id", sender, "code", res->code, "createdAt", now,
                    "lastSeenAt", now, "meta", "accountId", account);
    if (!req || json_array_append_new(reqs, req)) FAIL(CM_ENOMEM, "out of memory");
    CHECK(S_save(&l, doc, err, errlen));
    res->verdict = GW_ACCESS_PAIRING_ISSUED;
    res->reason = "dmPolicy=pairing (code issued)";
out:
    if (locked) cm_lockfile_release(&l);
    json_decref(doc);
    cm_buf_release(&path);
    if (rc) res->code[0] = 0;
    return rc;
}

/* Appends the entries of one allow-from store file to out (an array). */
static cm_rc S_read_allow_file(const char *path, json_t *out, char *err, size_t errlen)
{
    json_t *doc = NULL;
    cm_rc rc = S_load(path, &doc, err, errlen);
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(doc, "allowFrom"), i, v)
    {
        char e[512];
        if (rc || !cm_gw_allow_entry(v, e, sizeof e) || strcmp(e, "*") == 0) continue;
        if (json_array_append_new(out, json_string(e))) rc = CM_ENOMEM;
    }
    json_decref(doc);
    return rc;
}

/* readChannelAllowFromStore: the account's file; for the default account
 * also the legacy unscoped file. */
cm_rc cm_gw_allowfrom_read(const char *state_dir, const char *channel, const char *account,
                           json_t *out, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf path;
    cm_buf_init(&path, 0);
    CHECK(S_store_path(&path, state_dir, channel, account, "-allowFrom.json", err, errlen));
    CHECK(S_read_allow_file(path.data, out, err, errlen));
    if (strcmp(account, "default") == 0) {
        CHECK(S_store_path(&path, state_dir, channel, NULL, "-allowFrom.json", err, errlen));
        CHECK(S_read_allow_file(path.data, out, err, errlen));
    }
out:
    cm_buf_release(&path);
    return rc;
}

/* ---- approval ----------------------------------------------------------- */

/* Under the pairing lock: finds the request with code (removing it when
 * remove), and copies its id and account. */
static cm_rc S_find_request(const char *path, const char *code, const char *account, bool remove,
                            int64_t now_ms, char *id, size_t idlen, char *acct, size_t acctlen,
                            char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    lockfile l;
    bool locked = false;
    json_t *doc = NULL, *reqs, *req = NULL;
    CHECK(cm_lockfile_take(&l, path, LOCKFILE_REPLACE, NULL, err, errlen));
    locked = true;
    CHECK(S_load(path, &doc, err, errlen));
    if (!(reqs = S_list(&doc, "requests"))) FAIL(CM_ENOMEM, "out of memory");
    bool changed = S_prune_expired(reqs, now_ms);
    size_t i;
    json_array_foreach(reqs, i, req)
    {
        if (strcasecmp(S_str(json_object_get(req, "code"), ""), code) == 0 &&
            (!account || S_req_account_is(req, account)))
            break;
    }
    if (i == json_array_size(reqs)) {
        if (changed) CHECK(S_save(&l, doc, err, errlen));
        FAIL(CM_ENOTFOUND, "no pending pairing request with that code");
    }
    if (!cm_gw_allow_entry(json_object_get(req, "id"), id, idlen))
        FAIL(CM_ECORRUPT, "the pairing request has no sender id");
    char a[256];
    if (!cm_gw_allow_entry(json_object_get(json_object_get(req, "meta"), "accountId"), a, sizeof a))
        snprintf(a, sizeof a, "default");
    snprintf(acct, acctlen, "%s", account ? account : a);
    if (remove) {
        json_array_remove(reqs, i);
        changed = true;
    }
    if (changed) CHECK(S_save(&l, doc, err, errlen));
out:
    if (locked) cm_lockfile_release(&l);
    json_decref(doc);
    return rc;
}

cm_rc cm_gw_pairing_approve(const char *state_dir, const char *channel, const char *account,
                            const char *code, int64_t now_ms, char *id, size_t idlen, char *err,
                            size_t errlen)
{
    cm_rc rc = CM_OK;
    lockfile l;
    bool locked = false;
    json_t *doc = NULL, *list;
    buf ppath, apath;
    cm_buf_init(&ppath, 0);
    cm_buf_init(&apath, 0);
    char c[64], sender[512], acct[256], a2[256], s2[512];
    json_t *cj = json_string(code ? code : "");
    bool ok = cj && cm_gw_allow_entry(cj, c, sizeof c);
    json_decref(cj);
    if (!ok) FAIL(CM_EINVAL, "an empty pairing code");
    if (id && idlen) id[0] = 0;
    CHECK(S_store_path(&ppath, state_dir, channel, NULL, "-pairing.json", err, errlen));
    /* the sender is added to the allow-from store before its request is
     * removed, so a crash in between leaves it approved, never lost; the two
     * files share the directory lock, so they are taken one after the other */
    CHECK(S_find_request(ppath.data, c, account, false, now_ms, sender, sizeof sender, acct,
                         sizeof acct, err, errlen));
    CHECK(S_store_path(&apath, state_dir, channel, acct, "-allowFrom.json", err, errlen));
    CHECK(cm_lockfile_take(&l, apath.data, LOCKFILE_REPLACE, NULL, err, errlen));
    locked = true;
    CHECK(S_load(apath.data, &doc, err, errlen));
    if (!(list = S_list(&doc, "allowFrom"))) FAIL(CM_ENOMEM, "out of memory");
    if (!S_has(list, sender)) {
        if (json_array_append_new(list, json_string(sender))) FAIL(CM_ENOMEM, "out of memory");
        CHECK(S_save(&l, doc, err, errlen));
    }
    cm_lockfile_release(&l);
    locked = false;
    rc = S_find_request(ppath.data, c, account, true, now_ms, s2, sizeof s2, a2, sizeof a2, err,
                        errlen);
    if (rc == CM_ENOTFOUND) rc = CM_OK; /* approved concurrently: done either way */
    if (rc) goto out;
    if (id) snprintf(id, idlen, "%s", sender);
out:
    if (locked) cm_lockfile_release(&l);
    json_decref(doc);
    cm_buf_release(&ppath);
    cm_buf_release(&apath);
    return rc;
}

cm_rc cm_gw_pairing_deny(const char *state_dir, const char *channel, const char *account,
                         const char *code, int64_t now_ms, char *id, size_t idlen, char *err,
                         size_t errlen)
{
    cm_rc rc = CM_OK;
    buf ppath;
    cm_buf_init(&ppath, 0);
    char c[64], sender[512], acct[256];
    json_t *cj = json_string(code ? code : "");
    bool ok = cj && cm_gw_allow_entry(cj, c, sizeof c);
    json_decref(cj);
    if (!ok) FAIL(CM_EINVAL, "an empty pairing code");
    if (id && idlen) id[0] = 0;
    CHECK(S_store_path(&ppath, state_dir, channel, NULL, "-pairing.json", err, errlen));
    CHECK(S_find_request(ppath.data, c, account, true, now_ms, sender, sizeof sender, acct,
                         sizeof acct, err, errlen));
    if (id) snprintf(id, idlen, "%s", sender);
out:
    cm_buf_release(&ppath);
    return rc;
}

cm_rc cm_gw_pairing_list(const char *state_dir, const char *channel, int64_t now_ms, json_t *out,
                         char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    json_t *doc = NULL, *req;
    buf path;
    cm_buf_init(&path, 0);
    CHECK(S_store_path(&path, state_dir, channel, NULL, "-pairing.json", err, errlen));
    CHECK(S_load(path.data, &doc, err, errlen));
    size_t i;
    json_array_foreach(json_object_get(doc, "requests"), i, req)
    {
        char id[512], code[64], acct[256];
        int64_t created = S_req_time(req, "createdAt", INT64_MIN);
        if (created == INT64_MIN || now_ms - created > GW_PAIRING_TTL_MS) continue; /* expired */
        if (!cm_gw_allow_entry(json_object_get(req, "id"), id, sizeof id) ||
            !cm_gw_allow_entry(json_object_get(req, "code"), code, sizeof code))
            continue;
        if (!cm_gw_allow_entry(json_object_get(json_object_get(req, "meta"), "accountId"), acct,
                               sizeof acct))
            snprintf(acct, sizeof acct, "default");
        json_t *o = json_pack("{s:s, s:s, s:s, s:O?, s:O?}", "code", code, "id", id, "accountId",
                              acct, "createdAt", json_object_get(req, "createdAt"), "lastSeenAt",
                              json_object_get(req, "lastSeenAt"));
        if (!o || json_array_append_new(out, o)) FAIL(CM_ENOMEM, "out of memory");
    }
out:
    json_decref(doc);
    cm_buf_release(&path);
    return rc;
}
