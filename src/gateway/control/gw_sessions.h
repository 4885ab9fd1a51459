/*
 * gw_sessions.h — sessions.patch, sessions.reset and the per-session
 * settings of sessions.list rows (gw_sessions.c).
 */
#ifndef CM_GW_CTL_SESSIONS_H
#define CM_GW_CTL_SESSIONS_H

#include "gw_ws_int.h"

/* sessions.patch and sessions.reset (operator.admin). */
void cm_gw_ws_sessions_patch(gw_ws *w, gw_ws_client *cl, const char *id, json_t *params);
void cm_gw_ws_sessions_reset(gw_ws *w, gw_ws_client *cl, const char *id, json_t *params);
/* Copies each row's per-session settings (label, model, the overrides) from
 * the default agent's store into the sessions.list rows. */
void cm_gw_ws_sessions_overrides(gw_ws *w, json_t *rows);

#endif
