/*
 * bootstrap.h — the workspace bootstrap files an agent gets on first start,
 * as QuantumClaw 2026.3.22's ensureAgentWorkspace makes them: AGENTS.md,
 * SOUL.md, TOOLS.md, IDENTITY.md, USER.md and HEARTBEAT.md, each written
 * only when missing, and BOOTSTRAP.md (the first-run ritual) only for a
 * workspace that has never been set up. Same names and purpose; the text is
 * clawmem's own.
 *
 * The workspace is hostile ground: every file is created with O_CREAT|O_EXCL
 * relative to a descriptor of the workspace directory, so an existing name —
 * a regular file, a directory, or a symbolic link pointing anywhere — is
 * never written through or replaced. The setup state lives in
 * .quantumclaw/workspace-state.json ({version: 1, bootstrapSeededAt,
 * setupCompletedAt}, ISO-8601 UTC), as 2026.3.22 keeps it in .openclaw/.
 */
#ifndef CM_AGENT_BOOTSTRAP_H
#define CM_AGENT_BOOTSTRAP_H

#include <stdint.h>

#include <jansson.h>

#include "../base/common.h"
#include "../base/log.h"

/* The standard files, in creation and injection order. */
#define AGENT_BOOTSTRAP_FILES 6
extern const char *const cm_agent_bootstrap_names[AGENT_BOOTSTRAP_FILES];

/* The text clawmem writes into a new file called name (one of the six, or
 * "BOOTSTRAP.md"); NULL for any other name. */
const char *cm_agent_bootstrap_template(const char *name);

typedef struct agent_bootstrap_report {
    unsigned created;   /* bit i: cm_agent_bootstrap_names[i] was written now */
    bool seeded;        /* BOOTSTRAP.md was written now */
    bool brand_new;     /* none of the files, memory/, MEMORY.md or .git existed */
} agent_bootstrap_report;

/* Makes the workspace directory (and its parents) when missing, then writes
 * each missing bootstrap file, and BOOTSTRAP.md when the workspace was never
 * set up: no BOOTSTRAP.md, no recorded state, IDENTITY.md and USER.md as
 * clawmem writes them, and no memory/, MEMORY.md or .git. A BOOTSTRAP.md the
 * user deleted after it was seeded marks the setup completed and is never
 * written again. now_ms stamps the state file. Idempotent; never overwrites.
 * rep may be NULL. Errors: CM_EIO (with err) when the directory cannot be
 * made or opened or a file cannot be written; CM_ENOMEM. */
cm_rc cm_agent_bootstrap_ensure(const char *workspace, int64_t now_ms, agent_bootstrap_report *rep,
                                char *err, size_t errlen);

/* First start of an agent or the gateway: cm_agent_bootstrap_ensure on
 * workspace unless config's agents.defaults.skipBootstrap is true. A
 * failure (a read-only workspace) is a warning on log, never fatal. */
void cm_agent_bootstrap_start(const json_t *config, const char *workspace, int64_t now_ms,
                              const cm_logger *log);

#endif
