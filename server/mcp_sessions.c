/*
 * mcp_sessions.c — the MCP sessions of mcp_sessions.h. One table of entries
 * under a mutex: without a database it is the sessions themselves; with one
 * it is a cache of the sessions the database confirmed (an entry older than
 * cache_ms is asked again), and the database is asked outside the mutex.
 */
#include <pthread.h>
#include <sys/random.h>

#include "../src/base/common.h"
#include "../src/base/sha256.h"
#include "../src/store/store_pg_shared.h"
#include "mcp_sessions.h"

#define OWNER_LARGEST (-2) /* lru(): whoever holds the most */

typedef struct entry {
    char id[33];
    char *agent;
    long owner;       /* the token's index; -1 without tokens */
    int64_t last_ms;  /* last use */
    int64_t check_ms; /* with a database: when it last confirmed the session */
} entry;

struct mcp_sessions {
    cm_pg_shared *pg;  /* NULL: in memory */
    char **owner_hash; /* sha256 of token i, hex */
    size_t nowners;
    int64_t idle_ms, cache_ms;
    int64_t (*now_ms)(void *);
    void *clock_ctx;
    pthread_mutex_t mu; /* v, n */
    entry *v;
    size_t n;
};

static int64_t wall(void *ctx)
{
    (void)ctx;
    return cm_wall_ms();
}

static int64_t mono(void *ctx)
{
    (void)ctx;
    return cm_now_ms();
}

cm_rc mcp_sessions_open(const mcp_sessions_opts *o, mcp_sessions **out, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    mcp_sessions *ss = calloc(1, sizeof *ss);
    *out = NULL;
    if (!ss) return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    pthread_mutex_init(&ss->mu, NULL);
    ss->idle_ms = o->idle_ms > 0 ? o->idle_ms : SESSION_IDLE_MS;
    ss->cache_ms = o->cache_ms >= 0 ? o->cache_ms : SESSION_CACHE_MS;
    /* shared by hosts: the wall clock; one process: the monotonic one */
    ss->now_ms = o->now_ms ? o->now_ms : o->dsn ? wall : mono;
    ss->clock_ctx = o->clock_ctx;
    ss->v = calloc(SESSION_MAX, sizeof *ss->v);
    ss->owner_hash = calloc(o->ntokens + 1, sizeof *ss->owner_hash);
    if (!ss->v || !ss->owner_hash) FAIL(CM_ENOMEM, "out of memory");
    for (size_t i = 0; i < o->ntokens; i++) {
        if (!(ss->owner_hash[i] = malloc(SHA256_HEX_LEN + 1))) FAIL(CM_ENOMEM, "out of memory");
        ss->nowners++;
        cm_sha256_hex(o->tokens[i], strlen(o->tokens[i]), ss->owner_hash[i]);
    }
    if (o->dsn) CHECK(cm_pg_shared_open(o->dsn, &ss->pg, err, errlen));
    *out = ss;
    ss = NULL;
out:
    mcp_sessions_free(ss);
    return rc;
}

void mcp_sessions_free(mcp_sessions *ss)
{
    if (!ss) return;
    cm_pg_shared_free(ss->pg);
    for (size_t i = 0; i < ss->n; i++)
        free(ss->v[i].agent);
    free(ss->v);
    for (size_t i = 0; i < ss->nowners; i++)
        free(ss->owner_hash[i]);
    free(ss->owner_hash);
    pthread_mutex_destroy(&ss->mu);
    free(ss);
}

bool mcp_sessions_shared(const mcp_sessions *ss)
{
    return ss->pg != NULL;
}

size_t mcp_sessions_count(mcp_sessions *ss)
{
    pthread_mutex_lock(&ss->mu);
    size_t n = ss->n;
    pthread_mutex_unlock(&ss->mu);
    return n;
}

/* ---- the table (under ss->mu) ------------------------------------------------ */

/* The least recently used entry among those of agent (NULL: any) held by
 * owner, or with OWNER_LARGEST by the owner holding the most of them;
 * SIZE_MAX when there is none. */
static size_t lru(const mcp_sessions *ss, const char *agent, long owner)
{
    if (owner == OWNER_LARGEST) {
        size_t *held = calloc(ss->nowners + 1, sizeof *held), best = 0;
        for (size_t i = 0; held && i < ss->n; i++)
            if (!agent || !strcmp(ss->v[i].agent, agent)) held[ss->v[i].owner + 1]++;
        for (size_t k = 0; held && k <= ss->nowners; k++)
            if (held[k] > best) {
                best = held[k];
                owner = (long)k - 1;
            }
        free(held); /* out of memory: the least recently used of all */
    }
    size_t old = SIZE_MAX;
    for (size_t i = 0; i < ss->n; i++) {
        const entry *se = &ss->v[i];
        if ((agent && strcmp(se->agent, agent) != 0) ||
            (owner != OWNER_LARGEST && se->owner != owner))
            continue;
        if (old == SIZE_MAX || se->last_ms < ss->v[old].last_ms) old = i;
    }
    return old;
}

static void remove_at(mcp_sessions *ss, size_t i)
{
    free(ss->v[i].agent);
    ss->v[i] = ss->v[--ss->n];
}

static size_t find(const mcp_sessions *ss, const char *id, const char *agent, long owner)
{
    for (size_t i = 0; i < ss->n; i++)
        if (!strcmp(ss->v[i].id, id) && !strcmp(ss->v[i].agent, agent) && ss->v[i].owner == owner)
            return i;
    return SIZE_MAX;
}

/* Adds (or refreshes) an entry at now, making room as mcp_sessions_new says. */
static bool add(mcp_sessions *ss, const char *id, const char *agent, long owner, int64_t now)
{
    size_t at = find(ss, id, agent, owner);
    if (at != SIZE_MAX) {
        ss->v[at].last_ms = ss->v[at].check_ms = now;
        return true;
    }
    for (size_t i = 0; i < ss->n;) /* the expired first */
        if (now - ss->v[i].last_ms > ss->idle_ms)
            remove_at(ss, i);
        else
            i++;
    size_t mine = 0, agents = 0;
    for (size_t i = 0; i < ss->n; i++) {
        mine += ss->v[i].owner == owner;
        agents += !strcmp(ss->v[i].agent, agent);
    }
    size_t old = SIZE_MAX;
    if (owner >= 0 && mine >= SESSION_PER_TOKEN)
        old = lru(ss, NULL, owner);
    else if (agents >= SESSION_PER_AGENT)
        old = lru(ss, agent, OWNER_LARGEST);
    else if (ss->n >= SESSION_MAX)
        old = lru(ss, NULL, OWNER_LARGEST);
    if (old != SIZE_MAX) remove_at(ss, old);
    if (ss->n >= SESSION_MAX) return false;
    entry *se = &ss->v[ss->n];
    if (!(se->agent = cm_strdup(agent))) return false;
    memcpy(se->id, id, 33);
    se->owner = owner;
    se->last_ms = se->check_ms = now;
    ss->n++;
    return true;
}

/* ---- the API ------------------------------------------------------------------- */

static void key_of(const mcp_sessions *ss, const char *id, const char *agent, long owner,
                   char hash[SHA256_HEX_LEN + 1], pg_session_key *k)
{
    cm_sha256_hex(id, strlen(id), hash);
    k->agent = agent;
    k->owner = owner >= 0 && (size_t)owner < ss->nowners ? ss->owner_hash[owner] : "";
    k->id_hash = hash;
}

cm_rc mcp_sessions_new(mcp_sessions *ss, const char *agent, long owner, char out[33], char *err,
                       size_t errlen)
{
    unsigned char rnd[16];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        return cm_seterr(err, errlen, CM_EIO, "no random bytes for a session id");
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", rnd[i]);
    int64_t now = ss->now_ms(ss->clock_ctx);
    if (ss->pg) {
        char hash[SHA256_HEX_LEN + 1];
        pg_session_key k;
        key_of(ss, out, agent, owner, hash, &k);
        cm_rc rc = cm_pg_session_put(ss->pg, &k, now, ss->idle_ms, SESSION_PER_TOKEN,
                                     SESSION_PER_AGENT, err, errlen);
        if (rc) return rc;
    }
    pthread_mutex_lock(&ss->mu);
    bool ok = add(ss, out, agent, owner, now);
    pthread_mutex_unlock(&ss->mu);
    /* with a database a full cache only costs a round trip later */
    if (!ok && !ss->pg) return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    return CM_OK;
}

static bool well_formed(const char *id)
{
    size_t n = 0;
    for (; id[n]; n++)
        if (!((id[n] >= '0' && id[n] <= '9') || (id[n] >= 'a' && id[n] <= 'f'))) return false;
    return n == 32;
}

cm_rc mcp_sessions_use(mcp_sessions *ss, const char *id, const char *agent, long owner, bool drop,
                       bool *found, char *err, size_t errlen)
{
    *found = false;
    if (!well_formed(id)) return CM_OK;
    int64_t now = ss->now_ms(ss->clock_ctx);
    bool ask = false;
    pthread_mutex_lock(&ss->mu);
    size_t i = find(ss, id, agent, owner);
    if (i != SIZE_MAX && now - ss->v[i].last_ms > ss->idle_ms) {
        remove_at(ss, i); /* expired */
        i = SIZE_MAX;
    }
    if (!ss->pg) {
        if (i != SIZE_MAX) {
            *found = true;
            ss->v[i].last_ms = now;
            if (drop) remove_at(ss, i);
        }
    } else if (i != SIZE_MAX && !drop && now - ss->v[i].check_ms < ss->cache_ms) {
        *found = true; /* confirmed a moment ago */
        ss->v[i].last_ms = now;
    } else {
        ask = true;
    }
    pthread_mutex_unlock(&ss->mu);
    if (!ask) return CM_OK;

    char hash[SHA256_HEX_LEN + 1];
    pg_session_key k;
    key_of(ss, id, agent, owner, hash, &k);
    cm_rc rc = cm_pg_session_touch(ss->pg, &k, now, ss->idle_ms, drop, found, err, errlen);
    if (rc) return rc;
    pthread_mutex_lock(&ss->mu);
    i = find(ss, id, agent, owner);
    if (!*found || drop) {
        if (i != SIZE_MAX) remove_at(ss, i);
    } else {
        add(ss, id, agent, owner, now); /* a full cache: asked again next time */
    }
    pthread_mutex_unlock(&ss->mu);
    return CM_OK;
}
