/*
 * share.c — one engine for concurrent callers (cm_engine_open_shared): a
 * pool of views, each an engine with its own index connection and embedding
 * client that borrows the shared engine's config, leased for one call; and
 * the loaded vectors as one read-only snapshot the views share, counted by
 * references and replaced copy-on-write when the index changed. The pool's
 * mutex guards its lists, the snapshot pointer and the counts only: opening
 * a view, reading the index and copying vectors happen outside it.
 */
#include <pthread.h>

#include "engine_int.h"

typedef struct vec_snap {
    vec_index vx; /* read-only once published */
    int64_t seq;  /* the vector log position it reflects (-1: no log) */
    size_t refs;  /* the pool's and each view's; under the pool's mutex */
} vec_snap;

typedef struct engine_pool {
    pthread_mutex_t mu;
    cm_engine **all, **idle; /* views made; those not leased (both cap long) */
    size_t n_all, n_idle, cap;
    vec_snap *snap; /* the latest published, or NULL */
    size_t snapshots;
} engine_pool;

cm_rc cm_engine_pool_init(cm_engine *e)
{
    engine_pool *p = calloc(1, sizeof *p);
    if (!p || pthread_mutex_init(&p->mu, NULL)) {
        free(p);
        return CM_ENOMEM;
    }
    e->pool = p;
    return CM_OK;
}

static void snap_free(vec_snap *s)
{
    if (!s) return;
    cm_vec_index_release(&s->vx);
    free(s);
}

/* Drops one reference; frees the snapshot (outside the lock) at the last. */
static void snap_unref(engine_pool *p, vec_snap *s)
{
    if (!s) return;
    pthread_mutex_lock(&p->mu);
    bool last = --s->refs == 0;
    pthread_mutex_unlock(&p->mu);
    if (last) snap_free(s);
}

static void view_close(cm_engine *v)
{
    if (!v) return;
    if (v->be) v->be->close(v);
    cm_static_model_close(&v->qm);
    cm_derive_close(&v->dt);
    free(v); /* v->cfg is the owner's */
}

void cm_engine_pool_free(cm_engine *e)
{
    engine_pool *p = e->pool;
    if (!p) return;
    for (size_t i = 0; i < p->n_all; i++)
        view_close(p->all[i]); /* drops their snapshot references */
    snap_unref(p, p->snap);
    free(p->all);
    free(p->idle);
    pthread_mutex_destroy(&p->mu);
    free(p);
    e->pool = NULL;
}

/* A new view of o: its settings borrowed, its backend opened (the embedding
 * provider chosen; no index opened until a call needs it). */
static cm_rc view_open(cm_engine *o, cm_engine **out, char *err, size_t errlen)
{
    cm_engine *v = calloc(1, sizeof *v);
    *out = NULL;
    if (!v) return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    v->cfg = o->cfg;
    v->lg = o->lg;
    v->busy_ms = o->busy_ms;
    v->allow_write = o->allow_write;
    v->be = o->be;
    v->owner = o;
    cm_rc rc = v->be->open(v, err, errlen);
    if (rc) {
        view_close(v);
        return rc;
    }
    *out = v;
    return CM_OK;
}

cm_rc cm_engine_lease(cm_engine *e, cm_engine **out, char *err, size_t errlen)
{
    engine_pool *p = e->pool;
    *out = e;
    if (!p) return CM_OK;
    cm_engine *v = NULL;
    pthread_mutex_lock(&p->mu);
    if (p->n_idle) v = p->idle[--p->n_idle];
    pthread_mutex_unlock(&p->mu);
    if (v) {
        *out = v;
        return CM_OK;
    }
    cm_rc rc = view_open(e, &v, err, errlen);
    if (rc) return rc;
    pthread_mutex_lock(&p->mu);
    if (p->n_all == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 8;
        cm_engine **a = realloc(p->all, cap * sizeof *a);
        if (a) p->all = a;
        cm_engine **d = a ? realloc(p->idle, cap * sizeof *d) : NULL;
        if (d) p->idle = d;
        if (!a || !d) {
            pthread_mutex_unlock(&p->mu);
            view_close(v);
            return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
        }
        p->cap = cap;
    }
    p->all[p->n_all++] = v;
    pthread_mutex_unlock(&p->mu);
    *out = v;
    return CM_OK;
}

void cm_engine_unlease(cm_engine *e, cm_engine *v)
{
    engine_pool *p = e->pool;
    if (!p || v == e) return;
    pthread_mutex_lock(&p->mu);
    p->idle[p->n_idle++] = v; /* idle has room for every view made */
    pthread_mutex_unlock(&p->mu);
}

void cm_engine_drop_vectors(cm_engine *e)
{
    if (e->snap) {
        snap_unref(e->owner->pool, e->snap);
        e->snap = NULL;
        memset(&e->vx, 0, sizeof e->vx); /* borrowed */
    } else if (e->vx_loaded) {
        cm_vec_index_release(&e->vx);
    }
    e->vx_loaded = false;
}

/* e reads s from now on (s carries the reference e takes over). */
static void adopt(cm_engine *e, vec_snap *s)
{
    cm_engine_drop_vectors(e);
    e->snap = s;
    e->vx = s->vx; /* a shallow copy: the arrays stay the snapshot's */
    e->vx_loaded = true;
    e->vx_seq = s->seq;
}

cm_rc cm_engine_share_vectors(cm_engine *e, int dims, char *err, size_t errlen)
{
    engine_pool *p = e->owner->pool;
    cm_rc rc = CM_OK;
    int64_t head = cm_store_vector_log_head(&e->st);
    pthread_mutex_lock(&p->mu);
    vec_snap *cur = p->snap, *old = NULL;
    if (cur) cur->refs++;
    pthread_mutex_unlock(&p->mu);
    bool same = cur && (int)cur->vx.dims == dims;
    if (same && head >= 0 && cur->seq == head) { /* current: share it */
        adopt(e, cur);
        return CM_OK;
    }
    vec_snap *n = calloc(1, sizeof *n);
    if (!n) CHECK(CM_ENOMEM);
    n->refs = 1; /* e's */
    bool reload = true;
    if (same && head >= 0 && cur->seq >= 0 && cur->seq < head) { /* copy, then apply the log */
        CHECK(cm_vec_index_copy(&n->vx, &cur->vx));
        n->seq = cur->seq;
        rc = cm_store_vectors_update(&e->st, dims, &n->vx, &n->seq, &reload, err, errlen);
        if (rc == CM_ENOMEM) goto out;
        if (rc || reload) {
            cm_vec_index_release(&n->vx);
            reload = true;
            rc = CM_OK;
        } else {
            e->vx_updates++;
        }
    }
    if (reload) {
        CHECK(cm_store_vectors_load(&e->st, dims, &n->vx, &n->seq, err, errlen));
        e->vx_loads++;
    }
    /* the freshest this view knows of: the pool's from now on */
    pthread_mutex_lock(&p->mu);
    old = p->snap;
    p->snap = n;
    n->refs++;
    p->snapshots++;
    pthread_mutex_unlock(&p->mu);
    snap_unref(p, old);
    adopt(e, n);
    n = NULL;
out:
    snap_unref(p, cur);
    if (n) snap_free(n);
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    return rc;
}

size_t cm_engine_pool_views(cm_engine *e)
{
    engine_pool *p = e->pool;
    if (!p) return 0;
    pthread_mutex_lock(&p->mu);
    size_t n = p->n_all;
    pthread_mutex_unlock(&p->mu);
    return n;
}

size_t cm_engine_pool_snapshots(cm_engine *e)
{
    engine_pool *p = e->pool;
    if (!p) return 0;
    pthread_mutex_lock(&p->mu);
    size_t n = p->snapshots;
    pthread_mutex_unlock(&p->mu);
    return n;
}

size_t cm_engine_pool_memory(cm_engine *e, size_t (*conn_bytes)(const cm_engine *v))
{
    engine_pool *p = e->pool;
    if (!p) return 0;
    pthread_mutex_lock(&p->mu);
    size_t n = p->snap ? cm_vec_index_bytes(&p->snap->vx) : 0;
    for (size_t i = 0; i < p->n_all; i++)
        n += conn_bytes(p->all[i]);
    pthread_mutex_unlock(&p->mu);
    return n;
}
