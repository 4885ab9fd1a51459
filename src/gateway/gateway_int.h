/*
 * gateway_int.h — gateway.c's internal calls: the status file of the
 * gateway that runs (or ran) for a state directory (for chat_client.c), and
 * the agents the runtime runs (gw_run_fn for core/runtime.h; tests drive a
 * runtime with them).
 */
#ifndef CM_GATEWAY_INT_H
#define CM_GATEWAY_INT_H

#include <jansson.h>

#include "../config/config.h"
#include "core/runtime.h"

/* Reads the config of opt into *cfg (the caller releases it, also on
 * failure) and the gateway's status file (<stateDir>/gateway/status.json)
 * into *out, a new object (the caller decrefs it) with "running" set to
 * whether a gateway holds the journal of that state directory now. */
cm_rc cm_gw_status_read(const cm_options *opt, cm_config *cfg, json_t **out, char *err,
                        size_t errlen);

/* The agents a gateway runs: one cm_agent per agent id, shared by every
 * worker (cm_agent_open_shared: one engine, per-call index connections, one
 * vector snapshot), opened on first use with opt's paths (copied); a worker
 * asking for an agent another is opening waits for that open. cm_gw_agents_run
 * is a gw_run_fn over it (ctx = the gw_agents): the turn in the session, its
 * reply. */
typedef struct gw_agents gw_agents;
cm_rc cm_gw_agents_new(const cm_options *opt, gw_agents **out);
void cm_gw_agents_free(gw_agents *g);
/* Agents opened so far (each opened its memory engine). */
size_t cm_gw_agents_opened(gw_agents *g);
cm_rc cm_gw_agents_run(void *ctx, const gw_run_req *rq, gw_run_res *out, char *err, size_t errlen);
/* The shared memory engine of agent_id (ctx = the gw_agents), the agent
 * opened on first use as for a run; borrowed until cm_gw_agents_free. */
cm_rc cm_gw_agents_engine(void *ctx, const char *agent_id, cm_engine **out, char *err,
                          size_t errlen);

#endif
