/*
 * reply.h — the runtime's pure decisions about a reply and a route
 * (reply.c), read from the config as QuantumClaw 2026.3.22 reads it: the
 * silent token, the responsePrefix cascade, replyToMode, the channel's text
 * limit and block streaming settings, bindings → agent and the session
 * key. Functions of their arguments (the typed snapshot, runtime_config.h;
 * NULL: every default): thread safe.
 */
#ifndef CM_GW_REPLY_H
#define CM_GW_REPLY_H

#include <jansson.h>

#include "../../base/buf.h"
#include "../../config/runtime_config.h"
#include "blocks.h"

/* True when text is the silent token NO_REPLY (surrounding blanks ignored). */
bool cm_gw_reply_is_silent(const char *text);

/* The responsePrefix in force for (agent, channel, account), most specific
 * first: channels.<ch>.accounts.<acc>.responsePrefix, channels.<ch>.
 * responsePrefix, messages.responsePrefix; "" disables and stops the
 * cascade, "auto" is "[{identity.name}]". Template variables ({model},
 * {modelFull}, {provider}, {thinkingLevel}/{think}, {identity.name}/
 * {identityName}, any case) are filled from model ("provider/model", may be
 * NULL or "") and the agent's identity.name; unknown ones stay as written.
 * Appends nothing when no prefix applies. */
cm_rc cm_gw_reply_prefix(buf *out, const cm_rtcfg *cfg, const char *agent_id, const char *channel,
                         const char *account, const char *model);

typedef enum { GW_REPLYTO_OFF = 0, GW_REPLYTO_FIRST, GW_REPLYTO_ALL } gw_reply_to_mode;

/* channels.<ch>.accounts.<acc>.replyToMode, else channels.<ch>.replyToMode,
 * else off. */
gw_reply_to_mode cm_gw_reply_to_mode_of(const cm_rtcfg *cfg, const char *channel,
                                        const char *account);

/* The text limit for a channel: channels.<ch>.accounts.<acc>.textChunkLimit,
 * else channels.<ch>.textChunkLimit, resolved by cm_gw_channel_resolve_limit,
 * and never above the channel implementation's own limit (0: none). */
int cm_gw_reply_text_limit(const cm_rtcfg *cfg, const char *channel, const char *account,
                           size_t channel_limit);

/* Block streaming for (channel, account): the channel's (or account's)
 * blockStreaming boolean, else agents.defaults.blockStreamingDefault "on". */
bool cm_gw_reply_block_streaming(const cm_rtcfg *cfg, const char *channel, const char *account);

/* agents.defaults.blockStreaming{Break,Chunk,Coalesce} resolved for the
 * channel and its text limit. */
void cm_gw_reply_stream_cfg(const cm_rtcfg *c, const char *channel, int text_limit,
                            gw_stream_break *brk, gw_stream_cfg *cfg);

/* The agent a message goes to: the most specific of bindings[] whose match
 * fits (peer {kind,id} > accountId > channel), else agents.list's default
 * entry, else its first, else "main". Writes a normalised id into out. */
cm_rc cm_gw_route_agent(buf *out, const cm_rtcfg *cfg, const char *channel, const char *account,
                        const char *peer, bool is_group);

/* The session key of a message for agent_id (session.dmScope and
 * session.identityLinks honoured). */
cm_rc cm_gw_route_session(buf *out, const cm_rtcfg *cfg, const char *agent_id, const char *channel,
                          const char *account, const char *peer, const char *thread, bool is_group);

#endif
