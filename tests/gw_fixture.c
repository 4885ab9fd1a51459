/*
 * gw_fixture.c — see gw_fixture.h.
 */
#include "gw_fixture.h"
#include "test.h"

cm_rtcfg *rtc(const json_t *root)
{
    cm_rtcfg *c = NULL;
    char err[256];
    return cm_rtcfg_from_json(root, &c, err, sizeof err) ? NULL : c;
}

json_t *S_json(const char *text)
{
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    if (!j) test_fail(__FILE__, __LINE__, "bad test JSON: %s", je.text);
    return j;
}
