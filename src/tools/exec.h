/*
 * exec.h — the agent's `exec` and `process` tools with QuantumClaw
 * 2026.3.22's names, parameters and result texts, fenced harder than the
 * reference (docs/tools.md "exec and process"):
 *
 * - Off unless `tools.exec` (or `agents.list[].tools.exec`, key by key) says
 *   `host: "gateway"` and `security: "allowlist"` or `"full"`. The
 *   reference's default host is `sandbox` with security `deny`, and with
 *   sandboxing off it fails closed; clawmem runs no sandbox, so the default
 *   is off. `ask: "always"` needs an approval clawmem cannot ask for: off.
 * - `full` runs `command` through `/bin/sh -c` (as the reference does);
 *   `allowlist` never starts a shell: the command is split into words
 *   (cm_exec_split_argv), the program must be a `tools.exec.safeBins` name
 *   (default cut uniq head tail tr wc) found in /bin, /usr/bin or
 *   `safeBinTrustedDirs`, and no word may be a path.
 * - Never offered to a sender the access policy does not trust (the caller
 *   decides; agent_tools.trusted).
 * - Every command is a posix_spawn'd child in its own process group, cwd the
 *   workspace (or a workdir inside it), stdin a pipe, stdout and stderr one
 *   pipe; an environment built from scratch (PATH, HOME, LANG, LC_*, TERM,
 *   TZ, USER, LOGNAME, TMPDIR and QUANTUMCLAW_SHELL=exec, plus the call's
 *   `env` minus PATH, LD_*, DYLD_* and secret-looking names): no API key or
 *   token of the gateway's environment reaches it. On timeout, and when the
 *   command itself exits, its whole process group is killed (SIGKILL).
 * - Output: at most EXEC_MAX_OUTPUT bytes, its head and its tail kept with
 *   a marker naming what was left out between them.
 * - Background jobs (`background`, or a foreground run still going after
 *   `yieldMs`) live in a process-wide table, scoped by agent and session,
 *   managed by `process` (list, poll, log, write, submit, kill, clear,
 *   remove). Thread safe.
 */
#ifndef CM_TOOLS_EXEC_H
#define CM_TOOLS_EXEC_H

#include <jansson.h>
#include <stdbool.h>

#include "../base/buf.h"
#include "clawmem.h"

#define EXEC_MAX_OUTPUT      200000 /* bytes of output a job keeps (head + tail) */
#define EXEC_PENDING_MAX     30000  /* bytes of unpolled output kept (the newest) */
#define EXEC_DEFAULT_TIMEOUT 1800   /* seconds (tools.exec.timeoutSec) */
#define EXEC_DEFAULT_YIELD   10000  /* ms (tools.exec.backgroundMs) */
#define EXEC_MAX_YIELD       120000 /* ms: yieldMs is clamped to 10 .. this */
#define EXEC_MAX_COMMAND     (64 * 1024)
#define EXEC_MAX_ARGS        256
#define EXEC_MAX_JOBS        32 /* jobs kept at once, finished ones included */

typedef enum exec_security { EXEC_SEC_DENY, EXEC_SEC_ALLOWLIST, EXEC_SEC_FULL } exec_security;

typedef struct exec_cfg {
    bool enabled; /* host gateway, security allowlist|full, ask not always */
    exec_security security;
    char **safe_bins; /* allowlist: program names */
    size_t nsafe;
    char **trusted_dirs; /* where safe bins are looked up: /bin, /usr/bin, then these */
    size_t ntrusted;
    int64_t timeout_ms; /* default timeout of a command */
    int64_t yield_ms;   /* default yield window */
} exec_cfg;

/* tools.exec of root, overridden key by key by agents.list[<agent_id>].tools.exec.
 * Unknown or missing values fall back to the safe default (off). */
cm_rc cm_exec_cfg_init(exec_cfg *c, const json_t *root, const char *agent_id);
void cm_exec_cfg_release(exec_cfg *c);

/* Splits an allowlist-mode command into words (malloc'd vector of malloc'd
 * strings, NULL-terminated; *argc words): blanks separate words, '…' is
 * literal, "…" literal but for \" and \\, a backslash outside quotes
 * escapes the next byte. Any byte a shell would treat specially outside
 * quotes (| & ; < > ( ) $ ` * ? [ ] { } ~ ! # newline), $ or ` inside
 * double quotes, a NUL byte, an unclosed quote, no word, more than
 * EXEC_MAX_ARGS words or more than EXEC_MAX_COMMAND bytes: CM_EINVAL with
 * err saying why. */
cm_rc cm_exec_split_argv(const char *s, size_t len, char ***argv, size_t *argc, char *err,
                         size_t errlen);
void cm_exec_argv_free(char **argv);

/* Who runs: the job scope (agent and session) and the workspace. */
typedef struct exec_env {
    const exec_cfg *cfg;
    const char *workspace; /* absolute */
    const char *agent_id, *session_key;
    bool allow_background; /* `process` is offered too */
} exec_env;

/* exec {command, workdir?, env?, yieldMs?, background?, timeout?, …}: the
 * result text into out (CM_OK), or CM_EINVAL/CM_EIO… with err as the
 * result text of a failed call (*failed also true for a command that timed
 * out, was killed or was not found: the text then carries its output). */
cm_rc cm_tool_exec(const exec_env *env, const json_t *args, buf *out, bool *failed, char *err,
                   size_t errlen);

/* process {action, sessionId?, data?, eof?, offset?, limit?, timeout?}. */
cm_rc cm_tool_process(const exec_env *env, const json_t *args, buf *out, bool *failed, char *err,
                      size_t errlen);

/* The tools as the model is told of them: exec, then process. */
const cm_tool_def *cm_tool_exec_defs(size_t *n);

/* Kills every job and waits for their reader threads (tests; shutdown). */
void cm_exec_jobs_shutdown(void);

#endif
