/*
 * gateway_int.h — what gateway.c shares with chat_client.c: the status file
 * of the gateway that runs (or ran) for a state directory.
 */
#ifndef CM_GATEWAY_INT_H
#define CM_GATEWAY_INT_H

#include <jansson.h>

#include "../config/config.h"

/* Reads the config of opt into *cfg (the caller releases it, also on
 * failure) and the gateway's status file (<stateDir>/gateway/status.json)
 * into *out, a new object (the caller decrefs it) with "running" set to
 * whether a gateway holds the journal of that state directory now. */
cm_rc cm_gw_status_read(const cm_options *opt, cm_config *cfg, json_t **out, char *err,
                        size_t errlen);

#endif
