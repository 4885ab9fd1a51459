/*
 * gw_usage.h — clawmem.models.usage (gw_usage.c).
 */
#ifndef CM_GW_CTL_USAGE_H
#define CM_GW_CTL_USAGE_H

#include "gw_ws_int.h"

/* clawmem.models.usage (the Models page's tokens per model). */
void cm_gw_ws_models_usage(gw_ws *w, gw_ws_client *cl, const char *id, json_t *params);

#endif
