/*
 * deliver.h — a job executed on a worker (deliver.c): the agent run, its
 * reply shaped and sent, a session reset. For runtime.c and dispatch.c;
 * not for other files.
 */
#ifndef CM_GW_DELIVER_H
#define CM_GW_DELIVER_H

#include "runtime_int.h"

/* What a chat is told of a failed turn, by its code: a short
 * static reason without paths or URLs ("the model is unavailable (rate
 * limited)"). */
const char *cm_gw_failure_reason(cm_rc rc);

/* Runs a job on a worker thread (no lock held) and marks its
 * journal ids. */
void cm_gw_rt_execute(gw_runtime *rt, gw_job *j, int worker);
/* /new and /reset — the session key's transcript archived
 * (file I/O: never under mu). */
cm_rc cm_gw_rt_reset_session(gw_runtime *rt, const char *agent_id, const char *key, char *err,
                             size_t errlen);

#endif
