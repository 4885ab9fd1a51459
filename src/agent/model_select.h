/*
 * model_select.h — which model a session may be switched to, as QuantumClaw
 * 2026.3.22 decides it for /model and sessions.patch (model_select.c): a
 * model reference read ("provider/model", a bare id of the default
 * provider, an alias of agents.defaults.models), the allowlist that
 * agents.defaults.models makes, the models /models lists, and the change
 * to a session entry that selects one. Pure functions of the config.
 */
#ifndef CM_AGENT_MODEL_SELECT_H
#define CM_AGENT_MODEL_SELECT_H

#include <jansson.h>

#include "../base/buf.h"

/* A model: its provider (normalized) and id. */
typedef struct model_ref {
    char provider[128];
    char model[256];
} model_ref;

/* What the rules read: the config root and the agent's model chain
 * "default,fallback,…" (the runner's, cm_llm_runner_chain); both borrowed. */
typedef struct model_rules {
    const json_t *root;
    const char *chain;
} model_rules;

typedef enum { MODEL_PICKED, MODEL_UNRECOGNIZED, MODEL_NOT_ALLOWED } model_pick_rc;

/* 2026.3.22's normalizeProviderId of p: trimmed, lower case, its aliases
 * ("z.ai" is "zai", "bedrock" "amazon-bedrock", …). */
void cm_model_provider_norm(const char *p, char out[128]);

/* The agent's default model (the chain's first); false when it has none. */
bool cm_model_default(const model_rules *r, model_ref *out);

/* 2026.3.22's modelKey: "provider/model", or the id alone when it already
 * starts with "provider/". */
void cm_model_key(const model_ref *m, char out[400]);

/* raw (blanks around it ignored) read as 2026.3.22's
 * resolveModelRefFromString does: an alias of agents.defaults.models (no
 * '/', any case) first, else "provider/model", else a bare id of the
 * default provider. *out the model; alias (may be NULL; 128 bytes) the
 * alias as configured, "" when none; a trailing "@profile" is no part
 * of the model (cm_model_split_profile). Then whether it may be selected:
 * MODEL_NOT_ALLOWED when agents.defaults.models is set and names neither
 * it nor the chain holds it; MODEL_UNRECOGNIZED when raw is no reference
 * ("", "openai/"). With fuzzy (/model, not sessions.patch), a model not
 * allowed, or no reference, becomes the allowed model the words come
 * closest to, when close enough (the reference's resolveModelDirectiveSelection;
 * alias is then its first alias). *is_default: it is the default model. */
model_pick_rc cm_model_pick(const model_rules *r, const char *raw, bool fuzzy, model_ref *out,
                            char *alias, bool *is_default);

/* 2026.3.22's splitTrailingAuthProfile: "<model>@<profile>" (the '@'
 * after the last '/'; an "@" and eight digits is a version of the model,
 * "claude-3@20240229") into the model part (model_cap bytes) and the
 * profile (profile_cap bytes, "" when none). */
void cm_model_split_profile(const char *raw, char *model, size_t model_cap, char *profile,
                            size_t profile_cap);

/* The aliases agents.defaults.models gives m, in config order, joined with
 * ", " into out ("" when none). */
cm_rc cm_model_aliases(const model_rules *r, const model_ref *m, buf *out);

/* The models /models lists (2026.3.22's buildModelsProviderData with the
 * configured catalog, models.providers.<p>.models[]): an object of
 * provider → sorted array of model ids, the providers sorted. NULL when
 * out of memory. */
json_t *cm_model_catalog(const model_rules *r);

/* The patch (null members remove, as cm_session_touch reads them) that
 * makes entry select sel, as 2026.3.22's applyModelOverrideToSessionEntry
 * changes an entry: providerOverride/modelOverride set (removed for the
 * default model), the last run's model/modelProvider and contextTokens
 * dropped when the selection changed, the auth profile override set to
 * profile (source "user") or, when profile is NULL or "", dropped, and the
 * fallback notice fields dropped. An empty object when nothing changes. */
json_t *cm_model_override_patch(const json_t *entry, const model_ref *sel, bool is_default,
                                const char *profile);

#endif
