/*
 * jobs.c — the pieces of the running gateway that runtime.c, dispatch.c and
 * deliver.c share, below all three: its clock, a job and its journal ids,
 * and the channel a reply goes out through.
 */
#include "jobs.h"

int64_t cm_gw_rt_now(gw_runtime *rt)
{
    return rt->o.clock ? rt->o.clock(rt->o.clock_ctx) : cm_wall_ms();
}

/* ---- small containers ---------------------------------------------------- */

cm_rc cm_gw_ids_add(gw_ids *v, uint64_t id)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 4;
        uint64_t *p = realloc(v->v, cap * sizeof *p);
        if (!p) return CM_ENOMEM;
        v->v = p;
        v->cap = cap;
    }
    v->v[v->n++] = id;
    return CM_OK;
}

void cm_gw_ids_release(gw_ids *v)
{
    free(v->v);
    memset(v, 0, sizeof *v);
}

cm_rc cm_gw_ids_move(gw_ids *to, gw_ids *from)
{
    for (size_t i = 0; i < from->n; i++)
        if (cm_gw_ids_add(to, from->v[i])) return CM_ENOMEM;
    from->n = 0;
    return CM_OK;
}

/* Marks every id done with status and empties v. */
void cm_gw_rt_done_all(gw_runtime *rt, gw_ids *v, const char *status)
{
    for (size_t i = 0; i < v->n; i++)
        cm_gw_journal_done(rt->journal, v->v[i], status);
    v->n = 0;
}

void cm_gw_job_free(gw_job *j)
{
    if (!j) return;
    free(j->agent_id);
    free(j->key);
    free(j->prompt);
    free(j->channel);
    free(j->account);
    free(j->peer);
    free(j->thread);
    free(j->reply_to);
    free(j->text);
    free(j->label);
    free(j->subject);
    free(j->status_queue);
    cm_gw_ids_release(&j->ids);
    for (size_t i = 0; i < j->nsteer; i++)
        free(j->steer[i]);
    free(j->steer);
    cm_gw_ids_release(&j->steer_ids);
    free(j);
}

gw_channel *cm_gw_rt_channel(gw_runtime *rt, const char *name, const char *account)
{
    gw_channel *any = NULL;
    for (size_t i = 0; i < rt->nch; i++) {
        if (strcmp(rt->ch[i].name, name ? name : "")) continue;
        if (!strcmp(rt->ch[i].account, account && *account ? account : "default"))
            return rt->ch[i].ch;
        if (!any) any = rt->ch[i].ch;
    }
    return any;
}
