/*
 * model_cmds.h — the chat commands /model and /models on one session, as
 * QuantumClaw 2026.3.22 answers them in text (model_cmds.c; the rules are
 * model_select.h's):
 *   /model                 the session's model and how to switch;
 *   /model status          the models by provider, with endpoint and auth;
 *   /model list, /models   the providers; /models <provider> [page|all]
 *                          their models, 20 a page;
 *   /model <ref or alias>[@profile]  sets the session's providerOverride
 *                          and modelOverride ("Model set to …") and pins
 *                          the auth profile named (or unpins); the default
 *                          model clears them ("Model reset to default …");
 *                          a model outside agents.defaults.models (unless
 *                          one allowed is close), a profile not found or of
 *                          another provider, or a number, is refused and
 *                          nothing changes.
 * The caller has checked that the sender may use commands.
 */
#ifndef CM_AGENT_MODEL_CMDS_H
#define CM_AGENT_MODEL_CMDS_H

#include "session_turn.h"

/* Runs text when it is /model or /models (after blanks; "/cmd args" or
 * "/cmd: args"): *handled true and *reply (malloc'd) the answer. Anything
 * else: *handled false, nothing done. Errors are the store's. */
cm_rc cm_agent_model_command(agent_ctx *a, const char *key, const char *text, bool *handled,
                             char **reply, char *err, size_t errlen);

/* The model override of entry e a run takes ("provider/model" into out,
 * "" when none), as 2026.3.22 takes it: with agents.defaults.models set, an
 * override the list no longer allows is none, and *reset (when reset is
 * not NULL; NULL when nothing is to change) the entry's change back to the
 * default model, for the caller to write. */
cm_rc cm_agent_model_override(agent_ctx *a, const json_t *e, char out[320], json_t **reset);

#endif
