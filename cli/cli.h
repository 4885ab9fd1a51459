/*
 * cli.h — what the command's files share: one-line errors on stderr and
 * output with control characters escaped (print.c), and the commands that
 * live in their own file.
 */
#ifndef CM_CLI_H
#define CM_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "clawmem.h"
/* the functions too easy to misuse are compile errors here too */
#include "../src/base/banned.h"

/* Prints "clawmem: error: <message>" on stderr (escaped); returns 1, the
 * exit status of a command that could not do its job. */
int die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prints "clawmem: warning: <message>" on stderr (escaped): something went
 * wrong but the command carries on (and may still exit 0). */
void warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The options every command takes (before or after it), "a|b|c". */
#define GLOBAL_OPTIONS "--agent|--workspace|--config|--state-dir|--help"

/* Whether a is one of list ("a|b|c"). */
bool option_in(const char *list, const char *a);

/* die() about an unknown option arg of command cmd ("" before any command),
 * with "did you mean X?" when arg is a typo of one of known ("a|b|c") or of
 * the global options; returns 1. */
int unknown_option(const char *cmd, const char *arg, const char *known);

/* Writes s to f with control characters and invalid UTF-8 escaped;
 * keep_lines leaves '\n' and '\t' as they are. */
void put_safe(FILE *f, const char *s, int keep_lines);

extern const char usage_sessions[], usage_models[], usage_pairing[], usage_gateway[], usage_chat[],
    usage_agents[];

/* clawmem sessions … (cmd_sessions.c) */
int cmd_sessions(const cm_options *opt, int argc, char **argv);
/* clawmem models … (cmd_models.c) */
int cmd_models(const cm_options *opt, int argc, char **argv);
/* clawmem pairing … (cmd_pairing.c) */
int cmd_pairing(const cm_options *opt, int argc, char **argv);
/* clawmem gateway [run|status] (cmd_gateway.c) */
int cmd_gateway(const cm_options *opt, int argc, char **argv);
/* clawmem agents list|delete (cmd_agents.c) */
int cmd_agents(const cm_options *opt, int argc, char **argv);
/* clawmem chat (cmd_chat.c) */
int cmd_chat(const cm_options *opt, int argc, char **argv);

#endif
