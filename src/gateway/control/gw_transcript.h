/*
 * gw_transcript.h — clawmem.sessions.transcript (gw_transcript.c).
 */
#ifndef CM_GW_CTL_TRANSCRIPT_H
#define CM_GW_CTL_TRANSCRIPT_H

#include "gw_ws_int.h"

/* clawmem.sessions.transcript (the Sessions page). */
void cm_gw_ws_sessions_transcript(gw_ws *w, gw_ws_client *cl, const char *id, json_t *params);

#endif
