/*
 * feel.h — the signs of life a chat channel shows while a turn runs, as
 * QuantumClaw 2026.3.22 configures them: the typing indicator (typingMode,
 * typingIntervalSeconds), the streamed preview (channels.<ch>.streaming),
 * the ack reaction on an inbound message (messages.ackReaction,
 * ackReactionScope) and the /new notice and greeting. Pure functions over
 * the config; the runtime (deliver.c, dispatch.c) acts on them through the
 * channel's optional ops (channel.h). The config is the typed snapshot
 * (runtime_config.h; NULL: every default).
 */
#ifndef CM_GW_FEEL_H
#define CM_GW_FEEL_H

#include <jansson.h>

#include "../../base/buf.h"
#include "../../base/common.h"
#include "../../config/runtime_config.h"

/* 2026.3.22 createTypingController: refresh every 6 s, give up after 2 min. */
#define GW_TYPING_INTERVAL_MS 6000
#define GW_TYPING_TTL_MS      (2 * 60 * 1000)
/* 2026.3.22 extensions/telegram draft-stream.ts and bot-message-dispatch.ts. */
#define GW_PREVIEW_THROTTLE_MS  1000
#define GW_PREVIEW_MIN_CHARS    30
#define GW_PREVIEW_MAX_CHARS    4096
#define GW_ACK_REACTION_DEFAULT "\xf0\x9f\x91\x80" /* 👀 */

typedef enum gw_typing_mode {
    GW_TYPING_NEVER,
    GW_TYPING_INSTANT,  /* as the run starts */
    GW_TYPING_THINKING, /* at the first reasoning (or, failing that, text) delta */
    GW_TYPING_MESSAGE   /* at the first text delta that cannot be NO_REPLY */
} gw_typing_mode;

/* agents.defaults.typingMode, else session.typingMode; unset: instant for a
 * direct chat or a group that mentioned the bot, message otherwise
 * (2026.3.22 resolveTypingMode). *interval_ms from agents.defaults.
 * typingIntervalSeconds, else session.typingIntervalSeconds, else 6 s. */
gw_typing_mode cm_gw_typing_mode(const cm_rtcfg *cfg, bool is_group, bool mentioned,
                                 int64_t *interval_ms);

/* The preview stream mode of channels.<ch>.streaming (off | partial | block
 * | progress; progress is partial; a boolean is partial / off), else the
 * legacy streamMode, else "partial" — the account's own key first. False
 * when the mode is off. Whether a preview is actually shown also needs the
 * channel's preview ops and no block streaming (deliver.c). */
bool cm_gw_preview_enabled(const cm_rtcfg *cfg, const char *channel, const char *account);

/* The ack reaction for an inbound message: channels.<ch>.accounts.<acc>.
 * ackReaction, channels.<ch>.ackReaction, messages.ackReaction, the agent's
 * identity.emoji, else 👀 ("" disables). Returns NULL when no reaction is
 * due under messages.ackReactionScope (default group-mentions: a group whose
 * requireMention is in force and that mentioned the bot; all, direct,
 * group-all, off/none). The string is borrowed from cfg (or static). */
const char *cm_gw_ack_reaction(const cm_rtcfg *cfg, const char *agent_id, const char *channel,
                               const char *account, const char *peer, bool is_group,
                               bool mentioned);

/* The agent's configured model as "provider/model" (agents.list[].model,
 * else agents.defaults.model, a string or its primary) into out (reset);
 * "" when none is configured. */
cm_rc cm_gw_agent_model(buf *out, const cm_rtcfg *cfg, const char *agent_id);

/* /new's answer: "✅ New session started · model: <model>" (2026.3.22
 * buildResetSessionNoticeText), into out (reset). */
cm_rc cm_gw_new_session_notice(buf *out, const char *model);

/* The greeting turn's prompt after a bare /new or /reset (our wording of
 * 2026.3.22's session-reset prompt), with the current time (now_ms, UTC)
 * so that the agent knows which daily notes to read; into out (reset). */
cm_rc cm_gw_greeting_prompt(buf *out, int64_t now_ms);

#endif
