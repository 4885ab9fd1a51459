/*
 * feel.c — the config of a channel's signs of life (feel.h).
 */
#include "feel.h"

#include <strings.h>
#include <time.h>

gw_typing_mode cm_gw_typing_mode(const cm_rtcfg *cfg, bool is_group, bool mentioned,
                                 int64_t *interval_ms)
{
    int64_t s = GW_TYPING_INTERVAL_MS / 1000;
    int mode = -1; /* never|instant|thinking|message: gw_typing_mode's order */
    if (cfg) {
        s = cfg->defaults.typing_interval_s != CM_RT_UNSET  ? cfg->defaults.typing_interval_s
            : cfg->session.typing_interval_s != CM_RT_UNSET ? cfg->session.typing_interval_s
                                                            : s;
        mode =
            cfg->defaults.typing_mode >= 0 ? cfg->defaults.typing_mode : cfg->session.typing_mode;
    }
    if (interval_ms) *interval_ms = s > 0 && s < 86400 ? s * 1000 : 0;
    if (mode >= 0) return (gw_typing_mode)mode;
    return !is_group || mentioned ? GW_TYPING_INSTANT : GW_TYPING_MESSAGE;
}

bool cm_gw_preview_enabled(const cm_rtcfg *cfg, const char *channel, const char *account)
{
    const cm_rt_chan *ch = cm_rtcfg_chan(cfg, channel, account);
    int st = ch->streaming;
    if (st == CM_RT_STREAM_OFF) return false;
    if (st >= 0 && st != CM_RT_STREAM_TRUE && st != CM_RT_STREAM_FALSE) return true;
    if (ch->stream_mode >= 0) return ch->stream_mode != 0; /* off|partial|block */
    return st != CM_RT_STREAM_FALSE;
}

const char *cm_gw_ack_reaction(const cm_rtcfg *cfg, const char *agent_id, const char *channel,
                               const char *account, const char *peer, bool is_group, bool mentioned)
{
    int scope = cfg && cfg->messages.ack_reaction_scope >= 0 ? cfg->messages.ack_reaction_scope
                                                             : CM_RT_ACK_GROUP_MENTIONS;
    const cm_rt_chan *ch = cm_rtcfg_chan(cfg, channel, account);
    bool due = false;
    if (scope == CM_RT_ACK_ALL) {
        due = true;
    } else if (scope == CM_RT_ACK_DIRECT) {
        due = !is_group;
    } else if (scope == CM_RT_ACK_GROUP_ALL) {
        due = is_group;
    } else if (scope == CM_RT_ACK_GROUP_MENTIONS && is_group && mentioned) {
        /* only where a mention is required (and so detected); groups.<id>
         * stays raw (a record of objects, looked up by the message's peer) */
        const json_t *groups = ch->groups;
        const json_t *rm = json_object_get(json_object_get(groups, peer ? peer : ""),
                                           "requireMention");
        if (!json_is_boolean(rm)) rm = json_object_get(json_object_get(groups, "*"), "requireMention");
        due = json_is_boolean(rm) ? json_is_true(rm) : true;
    }
    if (!due) return NULL;
    const char *e = ch->ack_reaction;
    if (!e && cfg) e = cfg->messages.ack_reaction;
    if (!e) {
        const cm_rt_agent *a = cm_rtcfg_agent(cfg, agent_id);
        e = a ? a->emoji : NULL;
    }
    if (!e) e = GW_ACK_REACTION_DEFAULT;
    while (*e == ' ')
        e++;
    return *e ? e : NULL;
}

cm_rc cm_gw_agent_model(buf *out, const cm_rtcfg *cfg, const char *agent_id)
{
    cm_buf_reset(out);
    const char *m = cm_rtcfg_model(cfg, agent_id);
    return cm_buf_adds(out, m ? m : "");
}

cm_rc cm_gw_new_session_notice(buf *out, const char *model)
{
    cm_buf_reset(out);
    if (!model || !*model) return cm_buf_adds(out, "\xe2\x9c\x85 New session started.");
    return cm_buf_printf(out, "\xe2\x9c\x85 New session started \xc2\xb7 model: %s", model);
}

cm_rc cm_gw_greeting_prompt(buf *out, int64_t now_ms)
{
    cm_buf_reset(out);
    time_t t = (time_t)(now_ms / 1000);
    struct tm tm;
    char when[64] = "";
    if (gmtime_r(&t, &tm)) strftime(when, sizeof when, "%A, %Y-%m-%d %H:%M UTC", &tm);
    return cm_buf_printf(
        out,
        "The user has just begun a fresh session with /new or /reset. Before you answer, go "
        "through your session start-up routine and read the files it calls for. Then say hello "
        "in the persona you have been given, if any, in your own voice and mood: one to three "
        "sentences, ending with a question about what they would like to do. If the model you "
        "run on is not the default_model named in your system prompt, say which one the default "
        "is. Say nothing about internal steps, files, tools or reasoning.\nCurrent time: %s",
        when);
}
