/*
 * gw_fixture.h — small fixtures the gateway tests share: the typed runtime
 * config of a JSON root, and JSON parsed from a test's literal.
 */
#ifndef CM_TEST_GW_FIXTURE_H
#define CM_TEST_GW_FIXTURE_H

#include <jansson.h>

#include "../src/config/runtime_config.h"

/* The typed snapshot of root (NULL when root is rejected); the caller drops it
 * with cm_rtcfg_unref. */
cm_rtcfg *rtc(const json_t *root);

/* text parsed (new reference); bad JSON fails the running test and gives NULL. */
json_t *S_json(const char *text);

#endif
