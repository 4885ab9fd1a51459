/*
 * access.c — who may reach the agent: DM policies (pairing, allowlist, open,
 * disabled), group policies with groups entries, groupAllowFrom and mention
 * gating, and the DM pairing store QuantumClaw 2026.3.22 shares with us in
 * <stateDir>/credentials/: <channel>-pairing.json (pending requests) and
 * <channel>-<account>-allowFrom.json (approved senders; the default account
 * also reads the legacy <channel>-allowFrom.json). Writes go through
 * lockfile.h; reads are lock-free (files are replaced whole).
 */
#include "inbound.h"

#include <ctype.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "../base/fs.h"
#include "../base/lockfile.h"

#define STORE_MAX (4 << 20) /* a store file larger than this is refused */

/* ---- config ------------------------------------------------------------- */

/* channels.<ch>.accounts.<acct>.<key>, else channels.<ch>.<key>. */
static const json_t *S_cfg(const json_t *root, const char *ch, const char *acct, const char *key)
{
    const json_t *c = json_object_get(json_object_get(root, "channels"), ch);
    if (acct) {
        const json_t *v =
            json_object_get(json_object_get(json_object_get(c, "accounts"), acct), key);
        if (v) return v;
    }
    return json_object_get(c, key);
}

/* An allow-list entry as a trimmed string in out; false when blank. */
static bool S_entry(const json_t *v, char *out, size_t n)
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

static size_t S_count(const json_t *list)
{
    size_t i, k = 0;
    const json_t *v;
    char e[512];
    json_array_foreach(list, i, v) k += S_entry(v, e, sizeof e);
    return k;
}

static bool S_has_wildcard(const json_t *list)
{
    size_t i;
    const json_t *v;
    char e[512];
    json_array_foreach(list, i, v) if (S_entry(v, e, sizeof e) && strcmp(e, "*") == 0) return true;
    return false;
}

/* True when sender is in list: "*", the id itself, or "<channel>:<id>". */
static bool S_listed(const json_t *list, const char *channel, const char *sender, bool wildcard)
{
    size_t i, cl = strlen(channel);
    const json_t *v;
    char e[512];
    if (!sender || !*sender) return false;
    json_array_foreach(list, i, v)
    {
        if (!S_entry(v, e, sizeof e)) continue;
        if (wildcard && strcmp(e, "*") == 0) return true;
        const char *id = e;
        if (strncasecmp(e, channel, cl) == 0 && e[cl] == ':') id = e + cl + 1;
        if (strcmp(id, sender) == 0) return true;
    }
    return false;
}

static const char *S_str(const json_t *v, const char *dflt)
{
    return json_is_string(v) ? json_string_value(v) : dflt;
}

cm_rc gw_access_validate(const json_t *root, const char *channel, const char *account, char *err,
                         size_t errlen)
{
    cm_rc rc = CM_OK;
    const json_t *dm = S_cfg(root, channel, account, "dmPolicy");
    const json_t *gp = S_cfg(root, channel, account, "groupPolicy");
    const json_t *allow = S_cfg(root, channel, account, "allowFrom");
    const char *p = S_str(dm, "pairing");
    if (dm && !json_is_string(dm))
        FAIL(CM_ECONFIG, "channels.%s.dmPolicy must be a string", channel);
    if (strcmp(p, "pairing") && strcmp(p, "allowlist") && strcmp(p, "open") &&
        strcmp(p, "disabled"))
        FAIL(CM_ECONFIG,
             "channels.%s.dmPolicy \"%s\" is not one of pairing, allowlist, open, disabled",
             channel, p);
    if (allow && !json_is_array(allow))
        FAIL(CM_ECONFIG, "channels.%s.allowFrom must be a list", channel);
    if (!strcmp(p, "allowlist") && S_count(allow) == 0)
        FAIL(CM_ECONFIG, "channels.%s.dmPolicy is \"allowlist\" but allowFrom is empty", channel);
    if (!strcmp(p, "open") && !S_has_wildcard(allow))
        FAIL(CM_ECONFIG, "channels.%s.dmPolicy is \"open\" but allowFrom lacks \"*\"", channel);
    const char *g = S_str(gp, "allowlist");
    if ((gp && !json_is_string(gp)) ||
        (strcmp(g, "allowlist") && strcmp(g, "open") && strcmp(g, "disabled")))
        FAIL(CM_ECONFIG, "channels.%s.groupPolicy must be one of allowlist, open, disabled",
             channel);
out:
    return rc;
}

/* ---- store files -------------------------------------------------------- */

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
            CHECK(buf_addc(out, '_'));
            i++;
            continue;
        }
        CHECK(buf_addc(out, strchr("\\/:*?\"<>|", c) ? '_' : c));
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
    buf_reset(out);
    CHECK(buf_printf(out, "%s/credentials/", state_dir));
    if (S_safe_key(out, channel)) FAIL(CM_EINVAL, "invalid pairing channel");
    if (account) {
        CHECK(buf_addc(out, '-'));
        if (S_safe_key(out, account)) FAIL(CM_EINVAL, "invalid pairing account id");
    }
    CHECK(buf_adds(out, suffix));
out:
    return rc;
}

/* Reads a store file: NULL (no error) when missing or not valid JSON, as
 * 2026.3.22 falls back to an empty store. */
static cm_rc S_load(const char *path, json_t **doc, char *err, size_t errlen)
{
    buf b;
    buf_init(&b, 0);
    *doc = NULL;
    cm_rc rc = fs_read_file(path, STORE_MAX, &b, err, errlen);
    if (rc == CM_ENOTFOUND)
        rc = CM_OK;
    else if (!rc)
        *doc = json_loadb(b.data ? b.data : "", b.len, 0, NULL);
    buf_release(&b);
    return rc;
}

/* Replaces the locked file with doc as QuantumClaw writes it (two-space
 * indent, final newline). */
static cm_rc S_save(lockfile *l, const json_t *doc, char *err, size_t errlen)
{
    char *text = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    buf b;
    buf_init(&b, 0);
    cm_rc rc = text && !buf_adds(&b, text) && !buf_addc(&b, '\n') ? CM_OK : CM_ENOMEM;
    if (!rc)
        rc = lockfile_replace(l, b.data, b.len, err, errlen);
    else
        cm_seterr(err, errlen, rc, "out of memory");
    buf_release(&b);
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
    if (!S_entry(v, a, sizeof a)) a[0] = 0;
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
static cm_rc S_pairing_upsert(const char *state_dir, const char *channel, const char *account,
                              const char *sender, int64_t now_ms, gw_access_result *res, char *err,
                              size_t errlen)
{
    cm_rc rc = CM_OK;
    lockfile l;
    bool locked = false;
    json_t *doc = NULL, *reqs, *req = NULL;
    buf path;
    buf_init(&path, 0);
    char now[32];
    S_iso(now_ms, now);
    CHECK(S_store_path(&path, state_dir, channel, NULL, "-pairing.json", err, errlen));
    CHECK(lockfile_take(&l, path.data, LOCKFILE_REPLACE, NULL, err, errlen));
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
    if (locked) lockfile_release(&l);
    json_decref(doc);
    buf_release(&path);
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
        if (rc || !S_entry(v, e, sizeof e) || strcmp(e, "*") == 0) continue;
        if (json_array_append_new(out, json_string(e))) rc = CM_ENOMEM;
    }
    json_decref(doc);
    return rc;
}

/* readChannelAllowFromStore: the account's file; for the default account
 * also the legacy unscoped file. */
static cm_rc S_read_store(const char *state_dir, const char *channel, const char *account,
                          json_t *out, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf path;
    buf_init(&path, 0);
    CHECK(S_store_path(&path, state_dir, channel, account, "-allowFrom.json", err, errlen));
    CHECK(S_read_allow_file(path.data, out, err, errlen));
    if (strcmp(account, "default") == 0) {
        CHECK(S_store_path(&path, state_dir, channel, NULL, "-allowFrom.json", err, errlen));
        CHECK(S_read_allow_file(path.data, out, err, errlen));
    }
out:
    buf_release(&path);
    return rc;
}

/* ---- the check ---------------------------------------------------------- */

static cm_rc S_check_group(const json_t *root, const char *ch, const char *acct, const gw_msg *m,
                           gw_access_result *res)
{
    const json_t *groups = S_cfg(root, ch, acct, "groups");
    const json_t *entry = json_object_get(groups, m->peer ? m->peer : "");
    const json_t *star = json_object_get(groups, "*");
    const json_t *gp = json_object_get(entry, "groupPolicy");
    if (!gp) gp = json_object_get(star, "groupPolicy");
    if (!gp) gp = S_cfg(root, ch, acct, "groupPolicy");
    const char *policy = S_str(gp, "allowlist");
    res->verdict = GW_ACCESS_DENY;
    if (strcmp(policy, "open") && strcmp(policy, "disabled")) policy = "allowlist";
    if (!strcmp(policy, "disabled")) {
        res->reason = "groupPolicy=disabled";
        return CM_OK;
    }
    if (json_is_false(json_object_get(entry, "enabled"))) {
        res->reason = "group disabled";
        return CM_OK;
    }
    /* groups entries, when present, are the group allowlist whatever the
     * policy; with none, only an open policy lets a group in */
    if (json_object_size(groups) > 0 ? !entry && !star : !strcmp(policy, "allowlist")) {
        res->reason = "groupPolicy=allowlist (group not allowlisted)";
        return CM_OK;
    }
    if (!strcmp(policy, "allowlist")) {
        const json_t *list = json_object_get(entry, "allowFrom");
        if (!S_count(list)) list = S_cfg(root, ch, acct, "groupAllowFrom");
        if (!S_count(list)) list = S_cfg(root, ch, acct, "allowFrom");
        if (!S_count(list)) {
            res->reason = "groupPolicy=allowlist (empty allowlist)";
            return CM_OK;
        }
        if (!S_listed(list, ch, m->sender, true)) {
            res->reason = "groupPolicy=allowlist (not allowlisted)";
            return CM_OK;
        }
    }
    const json_t *rm = json_object_get(entry, "requireMention");
    if (!json_is_boolean(rm)) rm = json_object_get(star, "requireMention");
    bool require = json_is_boolean(rm) ? json_is_true(rm) : true;
    if (require && !m->mentioned) {
        res->verdict = GW_ACCESS_NO_MENTION;
        res->reason = "requireMention (not mentioned)";
        return CM_OK;
    }
    res->verdict = GW_ACCESS_ALLOW;
    res->reason = !strcmp(policy, "open") ? "groupPolicy=open" : "groupPolicy=allowlist";
    return CM_OK;
}

cm_rc gw_access_check(const json_t *root, const char *state_dir, const gw_msg *m, int64_t now_ms,
                      gw_access_result *res, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    json_t *store = NULL;
    char acct[128], ch[128];
    memset(res, 0, sizeof *res);
    res->verdict = GW_ACCESS_DENY;
    res->reason = "error";
    if (!m->channel || !*m->channel) FAIL(CM_EINVAL, "an inbound message without a channel");
    snprintf(ch, sizeof ch, "%s", m->channel);
    for (char *p = ch; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    /* normalizePairingAccountId: trimmed, lower-cased, "default" when blank */
    json_t *a = m->account ? json_string(m->account) : NULL;
    if (!a || !S_entry(a, acct, sizeof acct)) snprintf(acct, sizeof acct, "default");
    json_decref(a);
    for (char *p = acct; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    CHECK(gw_access_validate(root, ch, acct, err, errlen));
    if (m->is_group) {
        CHECK(S_check_group(root, ch, acct, m, res));
        goto out;
    }
    const char *policy = S_str(S_cfg(root, ch, acct, "dmPolicy"), "pairing");
    const json_t *allow = S_cfg(root, ch, acct, "allowFrom");
    if (!strcmp(policy, "disabled")) {
        res->reason = "dmPolicy=disabled";
        goto out;
    }
    if (!strcmp(policy, "open")) {
        res->verdict = GW_ACCESS_ALLOW;
        res->reason = "dmPolicy=open";
        goto out;
    }
    if (!m->sender || !*m->sender) {
        res->reason = "no sender id";
        goto out;
    }
    bool listed = S_listed(allow, ch, m->sender, true);
    if (!listed && strcmp(policy, "allowlist") != 0) {
        if (!(store = json_array())) FAIL(CM_ENOMEM, "out of memory");
        CHECK(S_read_store(state_dir, ch, acct, store, err, errlen));
        listed = S_listed(store, ch, m->sender, false);
    }
    if (listed) {
        res->verdict = GW_ACCESS_ALLOW;
        res->reason = !strcmp(policy, "pairing") ? "dmPolicy=pairing (allowlisted)"
                                                 : "dmPolicy=allowlist (allowlisted)";
        goto out;
    }
    if (!strcmp(policy, "allowlist")) {
        res->reason = "dmPolicy=allowlist (not allowlisted)";
        goto out;
    }
    CHECK(S_pairing_upsert(state_dir, ch, acct, m->sender, now_ms, res, err, errlen));
out:
    if (rc) {
        res->verdict = GW_ACCESS_DENY; /* an error never lets a message through */
        res->code[0] = 0;
        res->reason = "error";
    }
    json_decref(store);
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
    CHECK(lockfile_take(&l, path, LOCKFILE_REPLACE, NULL, err, errlen));
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
    if (!S_entry(json_object_get(req, "id"), id, idlen))
        FAIL(CM_ECORRUPT, "the pairing request has no sender id");
    char a[256];
    if (!S_entry(json_object_get(json_object_get(req, "meta"), "accountId"), a, sizeof a))
        snprintf(a, sizeof a, "default");
    snprintf(acct, acctlen, "%s", account ? account : a);
    if (remove) {
        json_array_remove(reqs, i);
        changed = true;
    }
    if (changed) CHECK(S_save(&l, doc, err, errlen));
out:
    if (locked) lockfile_release(&l);
    json_decref(doc);
    return rc;
}

cm_rc gw_pairing_approve(const char *state_dir, const char *channel, const char *account,
                         const char *code, int64_t now_ms, char *id, size_t idlen, char *err,
                         size_t errlen)
{
    cm_rc rc = CM_OK;
    lockfile l;
    bool locked = false;
    json_t *doc = NULL, *list;
    buf ppath, apath;
    buf_init(&ppath, 0);
    buf_init(&apath, 0);
    char c[64], sender[512], acct[256], a2[256], s2[512];
    json_t *cj = json_string(code ? code : "");
    bool ok = cj && S_entry(cj, c, sizeof c);
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
    CHECK(lockfile_take(&l, apath.data, LOCKFILE_REPLACE, NULL, err, errlen));
    locked = true;
    CHECK(S_load(apath.data, &doc, err, errlen));
    if (!(list = S_list(&doc, "allowFrom"))) FAIL(CM_ENOMEM, "out of memory");
    if (!S_listed(list, "", sender, false)) {
        if (json_array_append_new(list, json_string(sender))) FAIL(CM_ENOMEM, "out of memory");
        CHECK(S_save(&l, doc, err, errlen));
    }
    lockfile_release(&l);
    locked = false;
    rc = S_find_request(ppath.data, c, account, true, now_ms, s2, sizeof s2, a2, sizeof a2, err,
                        errlen);
    if (rc == CM_ENOTFOUND) rc = CM_OK; /* approved concurrently: done either way */
    if (rc) goto out;
    if (id) snprintf(id, idlen, "%s", sender);
out:
    if (locked) lockfile_release(&l);
    json_decref(doc);
    buf_release(&ppath);
    buf_release(&apath);
    return rc;
}
