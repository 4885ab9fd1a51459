/*
 * jobs.h — below runtime.c, dispatch.c and deliver.c (jobs.c): a job's
 * journal ids, a job freed, the runtime's clock, ids marked done, the
 * channel a reply goes out through. Not for other files.
 */
#ifndef CM_GW_JOBS_H
#define CM_GW_JOBS_H

#include "runtime_int.h"

/* Journal ids a job answers (gw_ids). */
cm_rc cm_gw_ids_add(gw_ids *v, uint64_t id);
/* Appends from's ids to to and empties from. */
cm_rc cm_gw_ids_move(gw_ids *to, gw_ids *from);
void cm_gw_ids_release(gw_ids *v);

void cm_gw_job_free(gw_job *j);

int64_t cm_gw_rt_now(gw_runtime *rt);
/* Marks every id done with status and empties v. */
void cm_gw_rt_done_all(gw_runtime *rt, gw_ids *v, const char *status);
/* The channel registered for (name, account), else any of that name. */
gw_channel *cm_gw_rt_channel(gw_runtime *rt, const char *name, const char *account);

#endif
