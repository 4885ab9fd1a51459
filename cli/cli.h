/*
 * cli.h — what the command's files share: one-line errors on stderr and
 * output with control characters escaped (print.c), and the commands that
 * live in their own file.
 */
#ifndef CM_CLI_H
#define CM_CLI_H

#include <stdio.h>

#include "clawmem.h"
/* the functions too easy to misuse are compile errors here too */
#include "../src/base/banned.h"

/* Prints "clawmem: <message>" on stderr (escaped); returns 1. */
int die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Writes s to f with control characters and invalid UTF-8 escaped;
 * keep_lines leaves '\n' and '\t' as they are. */
void put_safe(FILE *f, const char *s, int keep_lines);

extern const char usage_sessions[], usage_models[], usage_pairing[], usage_gateway[], usage_chat[];

/* clawmem sessions … (cmd_sessions.c) */
int cmd_sessions(const cm_options *opt, int argc, char **argv);
/* clawmem models … (cmd_models.c) */
int cmd_models(const cm_options *opt, int argc, char **argv);
/* clawmem pairing … (cmd_pairing.c) */
int cmd_pairing(const cm_options *opt, int argc, char **argv);
/* clawmem gateway [run|status] (cmd_gateway.c) */
int cmd_gateway(const cm_options *opt, int argc, char **argv);
/* clawmem chat (cmd_chat.c) */
int cmd_chat(const cm_options *opt, int argc, char **argv);

#endif
