/*
 * runtime_config.h — the gateway's and agent runtime's settings (messages.*,
 * session.*, agents.defaults.* and agents.list[], gateway.*, channels.<name>
 * and their accounts) parsed once, at load and on reload, into one typed,
 * immutable, reference-counted snapshot. Keys, kinds, ranges and choices are
 * QuantumClaw 2026.3.22's zod schema (a table in runtime_config.c): a value of
 * the wrong kind or out of range fails the load with the key path and the
 * file:line:col where it was written. Unknown keys are known_keys.c's (a
 * warning). Per-message code reads fields, never JSON.
 *
 * Thread safety: a snapshot never changes once built; cm_rtcfg_ref/unref are
 * atomic, so any thread holding a reference may read it while another swaps
 * in a newer one (cm_gw_runtime_reload).
 */
#ifndef CM_RUNTIME_CONFIG_H
#define CM_RUNTIME_CONFIG_H

#include <jansson.h>
#include <stdint.h>

#include "../base/buf.h"

/* "Not set" of the int64 fields (each one's default is its reader's). */
#define CM_RT_UNSET (-1)

/* Enum fields hold the index of the value in the choices below, or -1. */
/* messages.queue.mode */
enum {
    CM_RT_Q_STEER,
    CM_RT_Q_FOLLOWUP,
    CM_RT_Q_COLLECT,
    CM_RT_Q_STEER_BACKLOG,
    CM_RT_Q_STEER_PLUS_BACKLOG,
    CM_RT_Q_QUEUE,
    CM_RT_Q_INTERRUPT
};
/* messages.queue.drop */
enum { CM_RT_DROP_OLD, CM_RT_DROP_NEW, CM_RT_DROP_SUMMARIZE };
/* messages.ackReactionScope */
enum {
    CM_RT_ACK_GROUP_MENTIONS,
    CM_RT_ACK_GROUP_ALL,
    CM_RT_ACK_DIRECT,
    CM_RT_ACK_ALL,
    CM_RT_ACK_OFF,
    CM_RT_ACK_NONE
};
/* typingMode: never|instant|thinking|message (gw_typing_mode's order);
 * replyToMode: off|first|all (gw_reply_to_mode's); humanDelay.mode:
 * off|natural|custom (gw_delay_mode's); session.dmScope: main|per-peer|
 * per-channel-peer|per-account-channel-peer (session_dm_scope's). */
/* session.scope */
enum { CM_RT_SCOPE_PER_SENDER, CM_RT_SCOPE_GLOBAL };
/* channels.*.streaming: a word or a boolean */
enum {
    CM_RT_STREAM_OFF,
    CM_RT_STREAM_PARTIAL,
    CM_RT_STREAM_BLOCK,
    CM_RT_STREAM_PROGRESS,
    CM_RT_STREAM_TRUE,
    CM_RT_STREAM_FALSE
};
/* channels.*.dmPolicy, groupPolicy */
enum { CM_RT_POLICY_PAIRING, CM_RT_POLICY_ALLOWLIST, CM_RT_POLICY_OPEN, CM_RT_POLICY_DISABLED };
enum { CM_RT_GROUP_OPEN, CM_RT_GROUP_DISABLED, CM_RT_GROUP_ALLOWLIST };

/* A record of channel name → integer (or enum index). */
typedef struct cm_rt_map {
    char **key;
    int64_t *val;
    size_t n;
} cm_rt_map;

/* Lookup in m: true and *val when key (exactly as written) is there. */
bool cm_rt_map_get(const cm_rt_map *m, const char *key, int64_t *val);

typedef struct cm_rt_messages {
    char *response_prefix, *ack_reaction; /* NULL: unset */
    int ack_reaction_scope;               /* CM_RT_ACK_*, -1: group-mentions */
    int remove_ack_after_reply;           /* -1 unset, 0, 1 */
    int queue_mode, queue_drop;           /* CM_RT_Q_*, CM_RT_DROP_*, -1 */
    int64_t queue_debounce_ms, queue_cap; /* >= 0, >= 1; CM_RT_UNSET */
    cm_rt_map queue_by_channel;           /* channel → CM_RT_Q_* */
    cm_rt_map queue_debounce_by_channel;  /* channel → ms */
    int64_t inbound_debounce_ms;          /* messages.inbound.debounceMs */
    cm_rt_map inbound_by_channel;         /* messages.inbound.byChannel */
    int64_t group_history_limit;          /* groupChat.historyLimit */
} cm_rt_messages;

typedef struct cm_rt_session {
    int scope, dm_scope, typing_mode; /* -1: unset */
    int64_t typing_interval_s, idle_minutes;
    int reset_mode; /* reset.mode: 0 daily, 1 idle, -1 */
    int64_t reset_at_hour, reset_idle_minutes;
    char *main_key;
    const json_t *identity_links; /* borrowed from the snapshot's root; NULL: unset */
} cm_rt_session;

/* agents.defaults.* the runtime reads per message. */
typedef struct cm_rt_agent_defaults {
    char *model;     /* model (a string) or model.primary; NULL: unset */
    char *workspace; /* as written */
    char *user_timezone;
    char *envelope_timezone; /* envelopeTimezone as written ("utc", "user", a zone) */
    int envelope_timestamp;  /* envelopeTimestamp: 0 on, 1 off, -1 */
    int thinking_default;    /* off|minimal|low|medium|high|xhigh|adaptive, -1 */
    int64_t timeout_s, context_tokens, typing_interval_s;
    int typing_mode;
    int human_delay_mode; /* -1: off */
    int64_t human_delay_min_ms, human_delay_max_ms;
    int block_streaming_default; /* 0 off, 1 on, -1 */
    int block_streaming_break;   /* 0 text_end, 1 message_end, -1 */
    int64_t chunk_min, chunk_max;
    int chunk_break; /* paragraph|newline|sentence, -1 */
    int64_t coalesce_min, coalesce_max, coalesce_idle_ms;
    /* compaction.* (checked at load; session/flush.c still reads them raw) */
    int compaction_mode; /* default|safeguard, -1 */
    int64_t reserve_tokens, keep_recent_tokens, reserve_tokens_floor;
    int flush_enabled;            /* memoryFlush.enabled: -1, 0, 1 */
    int64_t flush_soft_threshold; /* memoryFlush.softThresholdTokens */
    int64_t flush_force_bytes;    /* memoryFlush.forceFlushTranscriptBytes (a size) */
    char *flush_prompt, *flush_system_prompt;
} cm_rt_agent_defaults;

/* agents.list[] as the gateway uses it. */
typedef struct cm_rt_agent {
    char *id;           /* as written */
    int is_default;     /* "default": 1 true, 0 false, -1 unset */
    char *name, *emoji; /* identity.name, identity.emoji; NULL: unset */
    char *model;        /* model or model.primary; NULL: the defaults' */
} cm_rt_agent;

typedef struct cm_rt_gateway {
    int64_t port;
    int bind;               /* auto|lan|loopback|custom|tailnet, -1 */
    int auth_mode;          /* none|token|password|trusted-proxy, -1 */
    int control_ui_enabled; /* -1, 0, 1 */
    int reload_mode;            /* reload.mode: CM_RT_RELOAD_*, -1: hybrid */
    int64_t reload_debounce_ms; /* reload.debounceMs; CM_RT_UNSET: 300 */
} cm_rt_gateway;

/* gateway.reload.mode */
enum { CM_RT_RELOAD_OFF, CM_RT_RELOAD_RESTART, CM_RT_RELOAD_HOT, CM_RT_RELOAD_HYBRID };

/* channels.<channel> (account NULL) or channels.<channel>.accounts.<account>
 * with the channel level's values filled in where the account has none. */
typedef struct cm_rt_chan {
    char *channel, *account;
    int enabled, block_streaming;  /* -1, 0, 1 */
    int dm_policy, group_policy;   /* CM_RT_POLICY_*, CM_RT_GROUP_*, -1 */
    int reply_to_mode, chunk_mode; /* -1: unset */
    int streaming, stream_mode;    /* CM_RT_STREAM_*, -1 */
    int64_t text_chunk_limit, history_limit;
    char *response_prefix, *ack_reaction, *api_root;
    /* kind-checked, borrowed from the snapshot's root; NULL: unset */
    const json_t *groups, *allow_from, *group_allow_from;
} cm_rt_chan;

typedef struct cm_rtcfg {
    int refs;     /* atomic; the snapshot is freed when it drops to 0 */
    json_t *root; /* the merged config it was built from (a reference): for the
                     readers still raw (bindings, tools, models, …) */
    cm_rt_messages messages;
    cm_rt_session session;
    cm_rt_agent_defaults defaults;
    cm_rt_agent *agents;
    size_t nagents;
    cm_rt_gateway gateway;
    cm_rt_chan *chans;
    size_t nchans;
} cm_rtcfg;

/* Builds a snapshot from a merged config (root may be NULL: every default)
 * with one reference. A bad value is CM_ECONFIG with "config: path: what" in
 * err (no position: the file's own load names it; see cm_config_init). */
cm_rc cm_rtcfg_from_json(const json_t *root, cm_rtcfg **out, char *err, size_t errlen);

/* Another reference to c (NULL stays NULL). */
cm_rtcfg *cm_rtcfg_ref(cm_rtcfg *c);
/* Drops a reference; the last one frees the snapshot. NULL is a no-op. */
void cm_rtcfg_unref(cm_rtcfg *c);

/* The settings of (channel, account) (account NULL: "default"): the
 * account's, else the channel level's, else an all-unset entry. Never NULL. */
const cm_rt_chan *cm_rtcfg_chan(const cm_rtcfg *c, const char *channel, const char *account);

/* agents.list[] entry of agent_id (any case), or NULL. */
const cm_rt_agent *cm_rtcfg_agent(const cm_rtcfg *c, const char *agent_id);

/* The model of agent_id: its own, else agents.defaults.model; NULL: none. */
const char *cm_rtcfg_model(const cm_rtcfg *c, const char *agent_id);

#endif
