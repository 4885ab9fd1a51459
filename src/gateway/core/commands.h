/*
 * commands.h — chat commands (commands.c): 2026.3.22's command registry as
 * a table (name, aliases, whether it takes arguments, whether a config flag
 * gates it), the abort words that act as /stop, a channel's "/cmd@<bot>"
 * made bare, and the table type the gateway's own command handlers are
 * listed in (gw_command: name, aliases, handler; dispatch_cmds.c holds the
 * table). Pure functions of their arguments: thread safe.
 */
#ifndef CM_GW_COMMANDS_H
#define CM_GW_COMMANDS_H

#include <jansson.h>

#include "../../base/common.h"

/* True when text is a control command that must stay a standalone turn:
 * after trimming, its first line ("/cmd: args" read as "/cmd args") is one
 * of 2026.3.22's text command names or aliases, alone or — for a command
 * taking arguments — followed by whitespace. /config, /mcp, /plugins,
 * /debug and /bash count only when commands.<name> is true in root (may be
 * NULL). "/cmd@name" is another bot's: the channel has already made our own
 * bare (cm_gw_command_unaddress). */
bool cm_gw_is_control_command(const char *text, const json_t *root);

/* True when text asks to abort the running run as /stop does: "/stop", or
 * one of 2026.3.22's abort words alone ("stop", "wait", "abort", "please
 * stop", "arrête", "стоп", "停止", …), compared trimmed, lower-cased, blanks
 * collapsed and one trailing run of punctuation dropped (2026.3.22's
 * normalizeAbortTriggerText). Unlike the control commands they are debounced
 * like any text, as 2026.3.22 does. */
bool cm_gw_is_abort_request(const char *text);

/* A channel's inbound text addressed to its bot as "/cmd@<bot>" (any case,
 * the first token after leading whitespace, followed by the end, whitespace
 * or ':'): *out gets a copy without "@<bot>", so that the gateway sees its
 * own commands bare; otherwise *out is NULL (bot NULL or "": never). */
cm_rc cm_gw_command_unaddress(const char *text, const char *bot, char **out);

/* True when text, after leading blanks, starts with the command word word
 * (any case) followed by the end, a blank or ':' ("/new", "/new hi",
 * "/new: hi"; not "/newer" nor "/new@other"); *rest then points past the
 * word, the ':' and the blanks after it. */
bool cm_gw_command_word(const char *text, const char *word, const char **rest);

/* One command the gateway answers itself. handler runs it with the caller's
 * context and what followed the command word; it returns true when the
 * message is answered, false when it goes on as an ordinary turn (the
 * handler may point the caller's text at rest first). also, when set, is
 * another form that invokes the command without its word (the abort words
 * of /stop). */
typedef bool gw_command_fn(void *ctx, const char *rest);
typedef struct gw_command {
    const char *name;           /* "/new" */
    const char *const *aliases; /* NULL-terminated, or NULL */
    gw_command_fn *handler;
    bool (*also)(const char *text);
} gw_command;

/* The first command of table[0..n) that text invokes (by name, an alias or
 * its also), with *rest as cm_gw_command_word sets it ("" for also); NULL
 * when none. */
const gw_command *cm_gw_command_find(const gw_command *table, size_t n, const char *text,
                                     const char **rest);

#endif
