/*
 * gw_methods.h — the gateway protocol's method table (gw_methods.c), which
 * gw_ws.c looks methods up in.
 */
#ifndef CM_GW_CTL_METHODS_H
#define CM_GW_CTL_METHODS_H

#include "gw_ws_int.h"

/* The method table, NULL-name terminated. */
extern const gw_ws_method cm_gw_ws_methods[];

#endif
