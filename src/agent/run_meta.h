/*
 * run_meta.h — what QuantumClaw 2026.3.22 records about a run's model in
 * sessions.json and the transcript, read from the config as it reads it:
 * the thinking level pi-coding-agent writes (thinking_level_change), the
 * entry's contextTokens and the run's estimatedCostUsd. model is always
 * "provider/model"; the config may be NULL. Pure functions.
 */
#ifndef CM_AGENT_RUN_META_H
#define CM_AGENT_RUN_META_H

#include <jansson.h>

#include "../llm/llm.h"

/* The thinking level of a run (a static string): the session's
 * thinkingLevel, else agents.defaults.models["<model>"].params.thinking,
 * else agents.defaults.thinkingDefault, else "low" for a model marked
 * `reasoning: true` in models.providers.<p>.models[] and "off" otherwise;
 * "adaptive" is "medium"; then clamped as pi-coding-agent does: "off" for
 * a model not marked reasoning, "xhigh" is "high". An unknown level counts
 * as unset. */
const char *cm_agent_thinking_level(const json_t *config, const json_t *entry, const char *model);
/* The same with the session's thinkingLevel given as a string (NULL: unset). */
const char *cm_agent_thinking_level_for(const json_t *config, const char *session_level,
                                        const char *model);
/* The reasoning effort a run of model asks for (the request's
 * reasoning_effort, as pi-agent-core passes its thinking level): the
 * level above, NULL when it is "off". */
const char *cm_agent_thinking_effort(const json_t *config, const char *session_level,
                                     const char *model);

/* The entry's contextTokens after a run of model:
 * agents.defaults.contextTokens, else the model's contextWindow
 * (models.providers.<p>.models[]), else 200000. */
int64_t cm_agent_context_tokens(const json_t *config, const char *model);

/* The run's cost in USD from the model's `cost` ({input, output,
 * cacheRead, cacheWrite} per million tokens; a missing one is 0) in
 * models.providers.<p>.models[]; false when the model is not listed there
 * (the cost is unknown and the entry's estimatedCostUsd stays). */
bool cm_agent_run_cost(const json_t *config, const char *model, const llm_usage *u, double *usd);

/* The same cost in its parts, as pi-ai's calculateCost writes them in an
 * assistant message's usage.cost: input, output, cacheRead, cacheWrite
 * (rate / 1e6 × tokens each); false as above (the parts are not set). */
bool cm_agent_run_cost_parts(const json_t *config, const char *model, const llm_usage *u,
                             double part[4]);

#endif
