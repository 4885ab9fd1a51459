/*
 * gateway_api.c — the public gateway calls (include/clawmem/gateway.h): the config
 * gives the state dir; the pairing store is pairing.c's.
 */
#include <ctype.h>

#include "../config/config.h"
#include "core/pairing.h"

static void log_to(void *ctx, cm_log_level level, const char *msg)
{
    const cm_options *o = ctx;
    if (o->log) o->log(o->log_ctx, level, msg);
}

/* The state dir of opt's config, and the channel id lower-cased (as
 * QuantumClaw names its store files). */
static cm_rc S_prepare(const cm_options *opt, const char *channel, cm_config *cfg, char *ch,
                       size_t chlen, char *err, size_t errlen)
{
    size_t n = channel ? strlen(channel) : 0;
    if (!n || n >= chlen) return cm_seterr(err, errlen, CM_EINVAL, "a channel id is required");
    for (size_t i = 0; i <= n; i++)
        ch[i] = (char)tolower((unsigned char)channel[i]);
    cm_config_args a = {opt->agent_id, opt->workspace, opt->config_path, opt->state_dir};
    cm_logger lg = {log_to, (void *)opt};
    return cm_config_init(&a, &lg, cfg, err, errlen);
}

cm_rc cm_pairing_list(const cm_options *opt, const char *channel, char **json, char *err,
                      size_t errlen)
{
    cm_config cfg = {0};
    char ch[128];
    *json = NULL;
    cm_rc rc = S_prepare(opt, channel, &cfg, ch, sizeof ch, err, errlen);
    json_t *reqs = rc ? NULL : json_array(), *o = NULL;
    if (!rc && !reqs) rc = cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    if (!rc) rc = cm_gw_pairing_list(cfg.state_dir, ch, cm_wall_ms(), reqs, err, errlen);
    if (!rc && (!(o = json_pack("{s:s, s:O}", "channel", ch, "requests", reqs)) ||
                !(*json = json_dumps(o, JSON_COMPACT))))
        rc = cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    json_decref(o);
    json_decref(reqs);
    cm_config_release(&cfg);
    return rc;
}

cm_rc cm_pairing_approve(const cm_options *opt, const char *channel, const char *code, char **json,
                         char *err, size_t errlen)
{
    cm_config cfg = {0};
    char ch[128], id[512];
    *json = NULL;
    cm_rc rc = S_prepare(opt, channel, &cfg, ch, sizeof ch, err, errlen);
    if (!rc)
        rc = cm_gw_pairing_approve(cfg.state_dir, ch, NULL, code, cm_wall_ms(), id, sizeof id, err,
                                   errlen);
    json_t *o = NULL;
    if (!rc && (!(o = json_pack("{s:s, s:s}", "channel", ch, "approved", id)) ||
                !(*json = json_dumps(o, JSON_COMPACT))))
        rc = cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    json_decref(o);
    cm_config_release(&cfg);
    return rc;
}
