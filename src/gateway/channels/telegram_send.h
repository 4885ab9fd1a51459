/*
 * telegram_send.h — the Telegram channel's outbound side (telegram_send.c):
 * replies, previews, typing and reactions, the channel ops telegram.c
 * installs. Not for other files.
 */
#ifndef CM_GW_TELEGRAM_SEND_H
#define CM_GW_TELEGRAM_SEND_H

#include "telegram_int.h"

/* The channel ops of the outbound side. */
cm_rc cm_gw_tg_send(gw_channel *ch, const gw_outbound *o, char *err, size_t errlen);
void cm_gw_tg_typing(gw_channel *ch, const gw_outbound *o, int64_t interval_ms);
void cm_gw_tg_react(gw_channel *ch, const gw_outbound *o, const char *emoji);
cm_rc cm_gw_tg_preview(gw_channel *ch, const gw_outbound *o, const char *message_id, bool final,
                       char *id, size_t idlen, long *retry_after_ms, char *err, size_t errlen);
cm_rc cm_gw_tg_unsend(gw_channel *ch, const gw_outbound *o, const char *message_id, char *err,
                      size_t errlen);
/* Ends the typing and reaction thread (close). */
void cm_gw_tg_signals_stop(tg_chan *t);
/* The channel's clock (ms). */
int64_t cm_gw_tg_now(tg_chan *t);

#endif
