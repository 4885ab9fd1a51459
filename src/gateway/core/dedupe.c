/*
 * dedupe.c — the inbound dedupe cache: a redelivered message (same channel,
 * account, session scope, peer, thread and message id) seen within the TTL is
 * a duplicate and never starts a second run. Keys are length-prefixed parts
 * (the older '|'-joined form is still made, to match keys read back from an
 * older journal). A chained hash table for O(1) lookups plus a list in
 * last-seen order, so expiry and the size cap pop from its head (2026.3.22's
 * Map with touch-on-read, prune on insert).
 */
#include "dedupe.h"
#include "../../base/caps.h"

#include <ctype.h>

typedef struct dd_entry {
    struct dd_entry *chain;       /* next in the hash bucket */
    struct dd_entry *prev, *next; /* last-seen order: head oldest */
    uint64_t hash;
    int64_t seen_ms;
    char key[]; /* NUL-terminated */
} dd_entry;

struct gw_dedupe {
    int64_t ttl_ms;
    size_t max, count, nbuckets; /* nbuckets: a power of two */
    dd_entry **buckets;
    dd_entry *head, *tail;
};

static uint64_t dd_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

cm_rc cm_gw_dedupe_open(int64_t ttl_ms, size_t max, gw_dedupe **out)
{
    cm_rc rc = CM_OK;
    gw_dedupe *d = NULL;
    *out = NULL;
    if (max == 0 || ttl_ms < 0 || max > (SIZE_MAX >> 4)) return CM_EINVAL;
    d = calloc(1, sizeof *d);
    if (!d) return CM_ENOMEM;
    d->ttl_ms = ttl_ms;
    d->max = max;
    d->nbuckets = 16;
    while (d->nbuckets < max * 2)
        d->nbuckets <<= 1;
    d->buckets = calloc(d->nbuckets, sizeof *d->buckets);
    if (!d->buckets) {
        rc = CM_ENOMEM;
        goto out;
    }
    *out = d;
    d = NULL;
out:
    cm_gw_dedupe_close(d);
    return rc;
}

void cm_gw_dedupe_close(gw_dedupe *d)
{
    if (!d) return;
    dd_entry *e = d->head;
    while (e) {
        dd_entry *n = e->next;
        free(e);
        e = n;
    }
    free(d->buckets);
    free(d);
}

size_t cm_gw_dedupe_size(const gw_dedupe *d)
{
    return d ? d->count : 0;
}

static void S_list_unlink(gw_dedupe *d, dd_entry *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        d->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        d->tail = e->prev;
    e->prev = e->next = NULL;
}

static void S_list_append(gw_dedupe *d, dd_entry *e)
{
    e->prev = d->tail;
    e->next = NULL;
    if (d->tail)
        d->tail->next = e;
    else
        d->head = e;
    d->tail = e;
}

static void S_remove(gw_dedupe *d, dd_entry *e)
{
    dd_entry **pp = &d->buckets[e->hash & (d->nbuckets - 1)];
    while (*pp && *pp != e)
        pp = &(*pp)->chain;
    if (*pp) *pp = e->chain;
    S_list_unlink(d, e);
    d->count--;
    free(e);
}

static bool S_expired(const gw_dedupe *d, const dd_entry *e, int64_t now_ms)
{
    return d->ttl_ms > 0 && now_ms - e->seen_ms >= d->ttl_ms;
}

static dd_entry *S_find(const gw_dedupe *d, const char *key, uint64_t h)
{
    dd_entry *e = d->buckets[h & (d->nbuckets - 1)];
    while (e && !(e->hash == h && strcmp(e->key, key) == 0))
        e = e->chain;
    return e;
}

bool cm_gw_dedupe_peek(const gw_dedupe *d, const char *key, int64_t now_ms)
{
    if (!d || !key || !*key) return false;
    const dd_entry *e = S_find(d, key, dd_hash(key));
    return e && !S_expired(d, e, now_ms);
}

bool cm_gw_dedupe_check(gw_dedupe *d, const char *key, int64_t now_ms)
{
    if (!d || !key || !*key) return false;
    uint64_t h = dd_hash(key);
    dd_entry *e = S_find(d, key, h);
    if (e && !S_expired(d, e, now_ms)) {
        /* seen again: refresh and move to the newest end */
        e->seen_ms = now_ms;
        S_list_unlink(d, e);
        S_list_append(d, e);
        return true;
    }
    if (e) S_remove(d, e);
    /* prune: the list is in last-seen order, so expired keys are at its head */
    while (d->head && S_expired(d, d->head, now_ms))
        S_remove(d, d->head);
    size_t n = strlen(key);
    e = malloc(sizeof *e + n + 1);
    if (!e) return false;
    memcpy(e->key, key, n + 1);
    e->hash = h;
    e->seen_ms = now_ms;
    e->chain = d->buckets[h & (d->nbuckets - 1)];
    d->buckets[h & (d->nbuckets - 1)] = e;
    S_list_append(d, e);
    d->count++;
    while (d->count > d->max)
        S_remove(d, d->head);
    return false;
}

/* s[0..n) trimmed of ASCII whitespace. */
static void S_trim(const char **s, size_t *n)
{
    while (*n && isspace((unsigned char)**s))
        (*s)++, (*n)--;
    while (*n && isspace((unsigned char)(*s)[*n - 1]))
        (*n)--;
}

/* Appends s trimmed, lower-cased when lower: legacy, '|' before it when
 * something precedes and nothing for an empty part; else as
 * <length>:<bytes>, '|' before every part but the first. */
static cm_rc S_add_part(buf *b, const char *s, size_t n, bool lower, bool legacy, bool first)
{
    cm_rc rc = CM_OK;
    S_trim(&s, &n);
    if (legacy) {
        if (!n) return CM_OK;
        if (b->len > strlen(GW_DEDUPE_LEGACY_PREFIX)) CHECK(cm_buf_addc(b, '|'));
    } else {
        CHECK(cm_buf_printf(b, "%s%zu:", first ? "" : "|", n));
    }
    for (size_t i = 0; i < n; i++)
        CHECK(cm_buf_addc(b, lower ? (char)tolower((unsigned char)s[i]) : s[i]));
out:
    return rc;
}

static bool S_blank(const char *s)
{
    if (!s) return true;
    for (; *s; s++)
        if (!isspace((unsigned char)*s)) return false;
    return true;
}

static bool S_key(const gw_msg *m, buf *out, bool legacy)
{
    cm_rc rc = CM_OK;
    cm_buf_reset(out);
    if (S_blank(m->channel) || S_blank(m->message_id) || S_blank(m->peer)) return false;
    if (legacy) CHECK(cm_buf_adds(out, GW_DEDUPE_LEGACY_PREFIX));
    CHECK(S_add_part(out, m->channel, strlen(m->channel), true, legacy, true));
    CHECK(S_add_part(out, m->account ? m->account : "", m->account ? strlen(m->account) : 0, false,
                     legacy, false));
    /* "agent:<id>:<rest>" scopes to the agent, so one message routed to two
     * sessions of the same agent is still one message */
    const char *s = m->session ? m->session : "";
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    if (strncmp(s, "agent:", 6) == 0) {
        const char *colon = strchr(s + 6, ':');
        if (colon && colon > s + 6 && colon[1]) n = (size_t)(colon - s);
    }
    CHECK(S_add_part(out, s, n, false, legacy, false));
    CHECK(S_add_part(out, m->peer, strlen(m->peer), false, legacy, false));
    CHECK(S_add_part(out, m->thread ? m->thread : "", m->thread ? strlen(m->thread) : 0, false,
                     legacy, false));
    CHECK(S_add_part(out, m->message_id, strlen(m->message_id), false, legacy, false));
out:
    if (rc) cm_buf_reset(out);
    return rc == CM_OK && out->len > 0;
}

bool cm_gw_dedupe_key(const gw_msg *m, buf *out)
{
    return S_key(m, out, false);
}

bool cm_gw_dedupe_key_legacy(const gw_msg *m, buf *out)
{
    return S_key(m, out, true);
}

bool cm_gw_dedupe_check_msg(gw_dedupe *d, const gw_msg *m, int64_t now_ms)
{
    buf key;
    cm_buf_init(&key, CM_CAP_DEDUPE_KEY);
    bool dup = cm_gw_dedupe_key(m, &key) && cm_gw_dedupe_check(d, key.data, now_ms);
    cm_buf_release(&key);
    return dup;
}
