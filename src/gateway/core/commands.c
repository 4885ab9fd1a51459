/*
 * commands.c — which inbound texts are commands (commands.h): 2026.3.22's
 * command registry as a table (a standalone turn, never debounced), the
 * abort words that act as /stop, a channel's "/cmd@<bot>" made bare, and the
 * lookup in a table of handlers. What each command the gateway answers
 * itself does is dispatch.c's table.
 */
#include "commands.h"

#include "../../base/buf.h"
#include "../../base/utf8.h"

#include <ctype.h>
#include <strings.h>

/* 2026.3.22 commands-registry.data's text commands: the name, its text
 * aliases (registerAlias and textAliases), whether it takes arguments and
 * whether it counts only when commands.<gate> is true. */
typedef struct reg_command {
    const char *name;
    const char *aliases[3];
    bool args;
    const char *gate;
} reg_command;

static const reg_command S_registry[] = {
    {"/help", {NULL}, false, NULL},
    {"/commands", {NULL}, false, NULL},
    {"/skill", {NULL}, true, NULL},
    {"/status", {NULL}, false, NULL},
    {"/allowlist", {NULL}, true, NULL},
    {"/approve", {NULL}, true, NULL},
    {"/context", {NULL}, true, NULL},
    {"/btw", {NULL}, true, NULL},
    {"/export-session", {"/export", NULL}, true, NULL},
    {"/tts", {NULL}, true, NULL},
    {"/whoami", {"/id", NULL}, false, NULL},
    {"/session", {NULL}, true, NULL},
    {"/subagents", {NULL}, true, NULL},
    {"/acp", {NULL}, true, NULL},
    {"/focus", {NULL}, true, NULL},
    {"/unfocus", {NULL}, false, NULL},
    {"/agents", {NULL}, false, NULL},
    {"/kill", {NULL}, true, NULL},
    {"/steer", {"/tell", NULL}, true, NULL},
    {"/config", {NULL}, true, "config"},
    {"/mcp", {NULL}, true, "mcp"},
    {"/plugins", {"/plugin", NULL}, true, "plugins"},
    {"/debug", {NULL}, true, "debug"},
    {"/usage", {NULL}, true, NULL},
    {"/stop", {NULL}, false, NULL},
    {"/restart", {NULL}, false, NULL},
    {"/activation", {NULL}, true, NULL},
    {"/send", {NULL}, true, NULL},
    {"/reset", {NULL}, true, NULL},
    {"/new", {NULL}, true, NULL},
    {"/compact", {NULL}, true, NULL},
    {"/think", {"/thinking", "/t", NULL}, true, NULL},
    {"/verbose", {"/v", NULL}, true, NULL},
    {"/fast", {NULL}, true, NULL},
    {"/reasoning", {"/reason", NULL}, true, NULL},
    {"/elevated", {"/elev", NULL}, true, NULL},
    {"/exec", {NULL}, true, NULL},
    {"/model", {NULL}, true, NULL},
    {"/models", {NULL}, true, NULL},
    {"/queue", {NULL}, true, NULL},
    {"/bash", {NULL}, true, "bash"},
};

/* True when the command word s[0..n) is c's name or one of its aliases. */
static bool S_reg_match(const reg_command *c, const char *s, size_t n)
{
    if (strlen(c->name) == n && !strncasecmp(c->name, s, n)) return true;
    for (size_t i = 0; i < ARRAY_LEN(c->aliases) && c->aliases[i]; i++)
        if (strlen(c->aliases[i]) == n && !strncasecmp(c->aliases[i], s, n)) return true;
    return false;
}

static bool S_flag_on(const json_t *root, const char *name)
{
    const json_t *c = root ? json_object_get(root, "commands") : NULL;
    return json_is_true(json_object_get(c, name));
}

/* 2026.3.22 abort-primitives ABORT_TRIGGERS ("openclaw" read as our name). */
static const char *const S_abort_words[] = {"stop",
                                            "esc",
                                            "abort",
                                            "wait",
                                            "exit",
                                            "interrupt",
                                            "detente",
                                            "deten",
                                            "detén",
                                            "arrete",
                                            "arrête",
                                            "停止",
                                            "やめて",
                                            "止めて",
                                            "रुको",
                                            "توقف",
                                            "стоп",
                                            "остановись",
                                            "останови",
                                            "остановить",
                                            "прекрати",
                                            "halt",
                                            "anhalten",
                                            "aufhören",
                                            "hoer auf",
                                            "stopp",
                                            "pare",
                                            "stop quantumclaw",
                                            "quantumclaw stop",
                                            "stop openclaw",
                                            "openclaw stop",
                                            "stop action",
                                            "stop current action",
                                            "stop run",
                                            "stop current run",
                                            "stop agent",
                                            "stop the agent",
                                            "stop don't do anything",
                                            "stop dont do anything",
                                            "stop do not do anything",
                                            "stop doing anything",
                                            "do not do that",
                                            "please stop",
                                            "stop please",
                                            "/stop"};

/* Lower case for the scripts of the abort words: ASCII, Latin-1, Cyrillic. */
static int32_t S_fold(int32_t cp)
{
    if ((cp >= 'A' && cp <= 'Z') || (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7)) return cp + 32;
    if (cp >= 0x410 && cp <= 0x42F) return cp + 32;
    if (cp >= 0x400 && cp <= 0x40F) return cp + 80;
    return cp;
}

/* Trailing punctuation an abort word may carry ("stop!", "停止。"). */
static bool S_trailing_punct(int32_t cp)
{
    static const int32_t p[] = {'.', '!',    '?',  0x2026, ',',    0xFF0C, 0x3002, ';', 0xFF1B,
                                ':', 0xFF1A, '\'', '"',    0x2019, 0x201D, ')',    ']', '}'};
    for (size_t i = 0; i < ARRAY_LEN(p); i++)
        if (cp == p[i]) return true;
    return false;
}

/* JavaScript's \\s: what 2026.3.22's trim() and /\\s+/ take for a blank. */
static bool S_js_space(int32_t cp)
{
    return (cp >= 9 && cp <= 13) || cp == ' ' || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
           cp == 0x205F || cp == 0x3000 || cp == 0xFEFF;
}

/* The start of the last UTF-8 character of b[0..len). */
static size_t S_last_char(const char *b, size_t len)
{
    size_t at = len;
    while (at > 0 && ((unsigned char)b[at - 1] & 0xC0) == 0x80)
        at--;
    return at > 0 ? at - 1 : 0;
}

bool cm_gw_is_abort_request(const char *text)
{
    if (!text) return false;
    size_t n = strlen(text);
    if (n > 1024) return false; /* bounded work: no abort phrase is near that long */
    /* 2026.3.22's normalizeAbortTriggerText: trimmed, lower-cased, ’ and `
     * as ', blanks collapsed to one space, one trailing run of punctuation
     * dropped, trimmed again */
    buf b = BUF_INIT;
    bool space = false, ok = true;
    for (size_t i = 0; i < n && ok;) {
        int32_t cp;
        size_t k = cm_utf8_decode(text + i, n - i, &cp);
        i += k ? k : 1;
        if (cp == 0x2019 || cp == '`') cp = '\'';
        if (S_js_space(cp)) {
            space = b.len > 0;
            continue;
        }
        if (space && (ok = cm_buf_addc(&b, ' ') == CM_OK)) space = false;
        if (ok) ok = cm_utf8_put(&b, S_fold(cp)) == CM_OK;
    }
    while (ok && b.len) { /* the trailing punctuation run */
        size_t at = S_last_char(b.data, b.len);
        int32_t cp;
        cm_utf8_decode(b.data + at, b.len - at, &cp);
        if (!S_trailing_punct(cp)) break;
        b.data[b.len = at] = 0;
    }
    while (ok && b.len && b.data[b.len - 1] == ' ')
        b.data[--b.len] = 0;
    bool hit = false;
    for (size_t i = 0; ok && !hit && i < ARRAY_LEN(S_abort_words); i++)
        hit = b.len == strlen(S_abort_words[i]) && !memcmp(b.data, S_abort_words[i], b.len);
    cm_buf_release(&b);
    return hit;
}

cm_rc cm_gw_command_unaddress(const char *text, const char *bot, char **out)
{
    *out = NULL;
    size_t blen = bot ? strlen(bot) : 0;
    if (!text || !blen) return CM_OK;
    const char *s = text;
    while (isspace((unsigned char)*s))
        s++;
    if (*s != '/') return CM_OK;
    const char *at = s + 1;
    while (*at && !isspace((unsigned char)*at) && *at != ':' && *at != '@')
        at++;
    if (*at != '@' || at == s + 1 || strncasecmp(at + 1, bot, blen) != 0) return CM_OK;
    const char *after = at + 1 + blen;
    if (*after && !isspace((unsigned char)*after) && *after != ':') return CM_OK;
    size_t head = (size_t)(at - text), tail = strlen(after);
    char *c = malloc(head + tail + 1);
    if (!c) return CM_ENOMEM;
    memcpy(c, text, head);
    memcpy(c + head, after, tail + 1);
    *out = c;
    return CM_OK;
}

bool cm_gw_is_control_command(const char *text, const json_t *root)
{
    if (!text) return false;
    const char *s = text, *e;
    while (isspace((unsigned char)*s))
        s++;
    if (*s != '/') return false;
    e = strchr(s, '\n');
    if (!e) e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        e--;
    /* the command token: up to whitespace, ':' or '@' */
    const char *t = s + 1;
    while (t < e && !isspace((unsigned char)*t) && *t != ':' && *t != '@')
        t++;
    size_t toklen = (size_t)(t - s);
    const char *rest = t;
    if (rest < e && *rest == '@') return false; /* another bot's */
    bool has_args = false;
    const char *r = rest;
    while (r < e && isspace((unsigned char)*r))
        r++;
    if (r < e && *r == ':') { /* "/cmd: args" */
        r++;
        while (r < e && isspace((unsigned char)*r))
            r++;
        has_args = r < e;
    } else if (r < e) {
        if (r == rest) return false; /* something glued to the token */
        has_args = true;
    }
    for (size_t i = 0; i < ARRAY_LEN(S_registry); i++) {
        const reg_command *c = &S_registry[i];
        if (!S_reg_match(c, s, toklen)) continue;
        if (has_args && !c->args) return false;
        return !c->gate || S_flag_on(root, c->gate);
    }
    return false;
}

bool cm_gw_command_word(const char *text, const char *word, const char **rest)
{
    while (text && isspace((unsigned char)*text))
        text++;
    size_t n = strlen(word);
    if (!text || strncasecmp(text, word, n)) return false;
    const char *p = text + n; /* "/cmd@other": another bot's */
    if (*p && !isspace((unsigned char)*p) && *p != ':') return false;
    if (*p == ':') p++;
    while (isspace((unsigned char)*p))
        p++;
    *rest = p;
    return true;
}

const gw_command *cm_gw_command_find(const gw_command *table, size_t n, const char *text,
                                     const char **rest)
{
    for (size_t i = 0; i < n; i++) {
        const gw_command *c = &table[i];
        if (cm_gw_command_word(text, c->name, rest)) return c;
        for (const char *const *a = c->aliases; a && *a; a++)
            if (cm_gw_command_word(text, *a, rest)) return c;
        if (c->also && c->also(text)) {
            *rest = "";
            return c;
        }
    }
    return NULL;
}
