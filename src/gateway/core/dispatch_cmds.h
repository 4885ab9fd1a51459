/*
 * dispatch_cmds.h — the commands the gateway answers itself
 * (dispatch_cmds.c): the table dispatch.c tries a turn's text against and
 * what its handlers work on. For dispatch.c only; all under rt->mu.
 */
#ifndef CM_GW_DISPATCH_CMDS_H
#define CM_GW_DISPATCH_CMDS_H

#include "commands.h"
#include "dispatch.h"

/* What a command handler works on (under mu): the turn, its journal ids
 * (taken when the command answers), what was decided before the lock, the
 * session with its agent and key, and the turn's text, which a handler may
 * move past its command word; rc is a failure that fails the ids. */
typedef struct cmd_call {
    gw_runtime *rt;
    const gw_turn *t;
    gw_ids *ids;
    gw_pre *pre;
    gw_sess *s;
    const char *agent, *key;
    const char *text;
    cm_rc rc;
    bool authorized; /* the sender may use commands (gw_access_result.commands) */
} cmd_call;

/* The commands, in the order they are tried (a handler's ctx is a
 * cmd_call); every other text (2026.3.22's other commands included) is a
 * turn. */
extern const gw_command cm_gw_rt_commands[];
extern const size_t cm_gw_rt_ncommands;

#endif
