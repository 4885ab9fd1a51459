/*
 * gw_memory.h — the Memory methods (gw_memory.c): clawmem's memory.search,
 * memory.get, clawmem.memory.status and clawmem.memory.plot.
 */
#ifndef CM_GW_CTL_MEMORY_H
#define CM_GW_CTL_MEMORY_H

#include "gw_ws_int.h"

/* clawmem's memory.search and memory.get (not QuantumClaw's). */
void cm_gw_ws_memory_search(gw_ws *w, gw_ws_client *cl, const char *id, json_t *params);
void cm_gw_ws_memory_get(gw_ws *w, gw_ws_client *cl, const char *id, json_t *params);
/* clawmem.memory.status (the Memory page's index status). */
void cm_gw_ws_memory_status(gw_ws *w, gw_ws_client *cl, const char *id, json_t *params);
/* clawmem.memory.plot (the Memory page's plot). */
void cm_gw_ws_memory_plot(gw_ws *w, gw_ws_client *cl, const char *id, json_t *params);

#endif
