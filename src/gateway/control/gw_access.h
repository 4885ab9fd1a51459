/*
 * gw_access.h — the Access page's methods (gw_access.c).
 */
#ifndef CM_GW_CTL_ACCESS_H
#define CM_GW_CTL_ACCESS_H

#include "gw_ws_int.h"

/* clawmem.pairing.list / .approve / .deny (the Access page). */
void cm_gw_ws_pairing_list(gw_ws *w, gw_ws_client *cl, const char *id, json_t *params);
void cm_gw_ws_pairing_approve(gw_ws *w, gw_ws_client *cl, const char *id, json_t *params);
void cm_gw_ws_pairing_deny(gw_ws *w, gw_ws_client *cl, const char *id, json_t *params);

#endif
