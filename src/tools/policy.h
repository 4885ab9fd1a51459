/*
 * policy.h — which tools an agent is offered: QuantumClaw 2026.3.22's tool
 * catalogue (name, section, profiles) and its policy, `tools.profile`,
 * `tools.allow`, `tools.alsoAllow`, `tools.deny` and the same keys under
 * `agents.list[].tools` (the agent's profile replaces the global one; every
 * other layer must allow a tool too). Entries are tool names, `group:<section>`
 * shorthands, `group:openclaw`, or globs with `*`; matching ignores case and
 * white space around names, `bash` means exec and `apply-patch` apply_patch;
 * deny wins; an empty or absent allow list allows everything.
 */
#ifndef CM_TOOLS_POLICY_H
#define CM_TOOLS_POLICY_H

#include <stdbool.h>
#include <stddef.h>

#include "../base/common.h"
#include <jansson.h>

/* Profiles (bit masks): a catalogue entry lists those that include it. */
#define TOOL_PROFILE_MINIMAL   1u
#define TOOL_PROFILE_CODING    2u
#define TOOL_PROFILE_MESSAGING 4u

typedef struct tool_catalog_entry {
    const char *name;
    const char *section;    /* "fs", "runtime", "web", "memory", "sessions", … */
    unsigned profiles;      /* TOOL_PROFILE_* that include it */
    bool in_openclaw_group; /* part of group:openclaw */
} tool_catalog_entry;

/* The catalogue of 2026.3.22 plus clawmem's memory_write (section memory,
 * profile coding, in group:openclaw); n receives its length. */
const tool_catalog_entry *cm_tool_catalog(size_t *n);

/* One layer of the policy: allow (NULL: everything) and deny patterns,
 * lower-cased, groups expanded, aliases applied. */
typedef struct tool_layer {
    char **allow;
    size_t nallow;
    bool has_allow; /* an allow list was given (even an empty one) */
    char **deny;
    size_t ndeny;
} tool_layer;

/* The layers that decide: the profile's (NULL allow for "full" or none),
 * the global one (tools.*) and the agent's (agents.list[].tools.*). */
typedef struct tool_policy {
    tool_layer layer[3];
} tool_policy;

/* Builds the policy for agent_id from the config root (may be NULL: all
 * tools). An unknown profile name is ignored, as the reference does. */
cm_rc cm_tool_policy_init(tool_policy *p, const json_t *root, const char *agent_id);
void cm_tool_policy_release(tool_policy *p);

/* Whether the policy allows the tool called name. */
bool cm_tool_policy_allows(const tool_policy *p, const char *name);

/* Whether a glob pattern (lower case, '*' any run of characters) matches s. */
bool cm_tool_glob_match(const char *pattern, const char *s);

#endif
