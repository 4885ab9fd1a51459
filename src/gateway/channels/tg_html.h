/*
 * tg_html.h — a reply's Markdown as Telegram HTML (tg_html.c). A pure
 * function of its input: thread safe.
 */
#ifndef CM_GW_TG_HTML_H
#define CM_GW_TG_HTML_H

#include "../../base/buf.h"
#include "../../base/common.h"

/* md, a reply's Markdown, as Telegram HTML (parse_mode "HTML") in out
 * (reset first). Fails only as out fails to grow (memory, its cap). */
cm_rc cm_gw_telegram_html(const char *md, buf *out);

#endif
