/*
 * feel.c — the config of a channel's signs of life (feel.h).
 */
#include "feel.h"

#include <strings.h>
#include <time.h>

static const json_t *S_path(const json_t *root, const char *a, const char *b)
{
    return json_object_get(json_object_get(root, a), b);
}

/* channels.<ch>.accounts.<acc>.<key>, else channels.<ch>.<key>. */
static const json_t *S_chan(const json_t *root, const char *ch, const char *acc, const char *key)
{
    const json_t *c = S_path(root, "channels", ch ? ch : "");
    const json_t *v =
        json_object_get(json_object_get(json_object_get(c, "accounts"), acc ? acc : "default"), key);
    return v ? v : json_object_get(c, key);
}

gw_typing_mode cm_gw_typing_mode(const json_t *root, bool is_group, bool mentioned,
                                 int64_t *interval_ms)
{
    const json_t *ad = S_path(root, "agents", "defaults");
    const json_t *sess = json_object_get(root, "session");
    const json_t *iv = json_object_get(ad, "typingIntervalSeconds");
    if (!json_is_number(iv)) iv = json_object_get(sess, "typingIntervalSeconds");
    double s = json_is_number(iv) ? json_number_value(iv) : GW_TYPING_INTERVAL_MS / 1000.0;
    if (interval_ms) *interval_ms = s > 0 && s < 86400 ? (int64_t)(s * 1000) : 0;
    const json_t *m = json_object_get(ad, "typingMode");
    if (!json_is_string(m)) m = json_object_get(sess, "typingMode");
    const char *v = json_string_value(m);
    if (v && !strcasecmp(v, "never")) return GW_TYPING_NEVER;
    if (v && !strcasecmp(v, "instant")) return GW_TYPING_INSTANT;
    if (v && !strcasecmp(v, "thinking")) return GW_TYPING_THINKING;
    if (v && !strcasecmp(v, "message")) return GW_TYPING_MESSAGE;
    return !is_group || mentioned ? GW_TYPING_INSTANT : GW_TYPING_MESSAGE;
}

/* parseStreamingMode: "off" / "partial" / "block" / "progress" (any case,
 * trimmed); 0 unknown, 1 off, 2 on. */
static int S_stream_word(const json_t *v)
{
    const char *s = json_string_value(v);
    if (!s) return 0;
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    if (n == 3 && !strncasecmp(s, "off", 3)) return 1;
    if ((n == 7 && !strncasecmp(s, "partial", 7)) || (n == 5 && !strncasecmp(s, "block", 5)) ||
        (n == 8 && !strncasecmp(s, "progress", 8)))
        return 2;
    return 0;
}

bool cm_gw_preview_enabled(const json_t *root, const char *channel, const char *account)
{
    const json_t *st = S_chan(root, channel, account, "streaming");
    int w = S_stream_word(st);
    if (!w) w = S_stream_word(S_chan(root, channel, account, "streamMode"));
    if (!w && json_is_boolean(st)) w = json_is_true(st) ? 2 : 1;
    return w != 1;
}

static const json_t *S_agent_entry(const json_t *root, const char *agent_id)
{
    size_t i;
    const json_t *e;
    json_array_foreach(S_path(root, "agents", "list"), i, e)
    {
        const char *id = json_string_value(json_object_get(e, "id"));
        if (id && agent_id && !strcasecmp(id, agent_id)) return e;
    }
    return NULL;
}

const char *cm_gw_ack_reaction(const json_t *root, const char *agent_id, const char *channel,
                               const char *account, const char *peer, bool is_group,
                               bool mentioned)
{
    const char *scope = json_string_value(S_path(root, "messages", "ackReactionScope"));
    if (!scope) scope = "group-mentions";
    bool due = false;
    if (!strcmp(scope, "all")) {
        due = true;
    } else if (!strcmp(scope, "direct")) {
        due = !is_group;
    } else if (!strcmp(scope, "group-all")) {
        due = is_group;
    } else if (!strcmp(scope, "group-mentions") && is_group && mentioned) {
        /* only where a mention is required (and so detected) */
        const json_t *groups = S_chan(root, channel, account, "groups");
        const json_t *rm = json_object_get(json_object_get(groups, peer ? peer : ""),
                                           "requireMention");
        if (!json_is_boolean(rm)) rm = json_object_get(json_object_get(groups, "*"), "requireMention");
        due = json_is_boolean(rm) ? json_is_true(rm) : true;
    }
    if (!due) return NULL;
    const json_t *v = S_chan(root, channel, account, "ackReaction");
    if (!json_is_string(v)) v = S_path(root, "messages", "ackReaction");
    if (!json_is_string(v))
        v = json_object_get(json_object_get(S_agent_entry(root, agent_id), "identity"), "emoji");
    const char *e = json_is_string(v) ? json_string_value(v) : GW_ACK_REACTION_DEFAULT;
    while (*e == ' ')
        e++;
    return *e ? e : NULL;
}

static const char *S_model_of(const json_t *m)
{
    if (json_is_string(m)) return json_string_value(m);
    return json_string_value(json_object_get(m, "primary"));
}

cm_rc cm_gw_agent_model(buf *out, const json_t *root, const char *agent_id)
{
    cm_buf_reset(out);
    const char *m = S_model_of(json_object_get(S_agent_entry(root, agent_id), "model"));
    if (!m) m = S_model_of(json_object_get(S_path(root, "agents", "defaults"), "model"));
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
