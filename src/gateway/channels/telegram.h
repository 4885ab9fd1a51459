/*
 * telegram.h — the Telegram Bot API channel (telegram.c with
 * telegram_send.c): opened from channels.telegram, its status, logger and
 * clock. The channel ops it implements are channel.h's.
 */
#ifndef CM_GW_TELEGRAM_H
#define CM_GW_TELEGRAM_H

#include <jansson.h>

#include "channel.h"

/* The Telegram Bot API channel of channels.telegram (and its
 * accounts.<account> overrides): long-polling getUpdates at apiRoot
 * (default https://api.telegram.org; the older apiBaseUrl is still read)
 * with botToken, sendMessage replies.
 * state_dir keeps the update offset. Implemented in telegram.c. */
cm_rc cm_gw_telegram_open(const json_t *root, const char *account, const char *state_dir,
                          gw_channel **out, char *err, size_t errlen);

/* The last failure of a Telegram channel's polling (getMe, getUpdates, the
 * offset file, a refused update), "" when none; the token never appears.
 * For status output. */
void cm_gw_telegram_last_error(gw_channel *ch, char *out, size_t n);

/* Where a Telegram channel logs what it skips (an update it cannot read or
 * that the gateway refuses for good); copied. Call before start. */
struct cm_logger;
void cm_gw_telegram_set_logger(gw_channel *ch, const struct cm_logger *lg);

/* The clock (ms, monotonic) a Telegram channel paces its typing refreshes
 * with; NULL: the real one. Tests inject theirs: the typing thread reads it
 * at least every 50 ms then. Call before start. */
void cm_gw_telegram_set_clock(gw_channel *ch, int64_t (*clock)(void *ctx), void *ctx);

/* The bot's username from getMe (without "@"), "" until start() or the
 * polling thread got it: for cm_gw_debounce_open's "/cmd@<bot>" commands. */
void cm_gw_telegram_bot_username(gw_channel *ch, char *out, size_t n);

#endif
