/*
 * control_ui.h — the Control UI's pages and assets (control_ui.c).
 */
#ifndef CM_GW_CTL_UI_H
#define CM_GW_CTL_UI_H

#include <stdbool.h>

#include "../../net/httpd.h"

/* answers a Control UI request under base (true), or false
 * when path is not one of its pages. */
bool cm_gw_ui_serve(const char *base, const httpd_req *rq, httpd_conn *c);

#endif
