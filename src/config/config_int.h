/*
 * config_int.h — what the files of src/config/ share and nothing outside
 * them uses: the reading context of one file, the helpers of reader.c, the
 * memorySearch reader of schema.c and the typo check of known_keys.c.
 * config.c (loading) stands above the other three; schema.c and
 * known_keys.c stand above reader.c.
 */
#ifndef CM_CONFIG_INT_H
#define CM_CONFIG_INT_H

#include "../base/json5.h"
#include "../base/suggest.h"
#include "config.h"
#include "secret.h"

/* Reading one config file into a cm_config: where errors and warnings go and
 * how they name the file. */
typedef struct ctx {
    const json5_doc *doc;
    const char *file;
    const cm_logger *lg;
    cm_config *cfg;
    char *err;
    size_t errlen;
    bool overlay;             /* reading clawmem.json: clawmem's own keys are at home */
    const char *overlay_path; /* named in the warnings about clawmem's keys in quantumclaw.json */
    const secrets *secrets;
} ctx;

/* ---- reader.c ----------------------------------------------------------- */

/* CM_ECONFIG with "file:line:col: path: what" in c->err, about the member key
 * of parent ("file: path: what" when its position is unknown). Unless what
 * shows the value already ("got …"), the value as written is added to it
 * (", got \"rfr\""; see cm_config_value_text). */
cm_rc cm_config_bad(ctx *c, const json_t *parent, const char *key, const char *path,
                    const char *what);

/* *out (caller frees) is the string v, the member key of parent named path,
 * with "${VAR}" substituted; an unset variable is cm_config_bad(). */
cm_rc cm_config_subst(ctx *c, const json_t *parent, const char *key, const char *path,
                      const json_t *v, char **out);

/* Logs a warning "file:line:col: what" about the member key of parent (or its
 * element index when key is NULL). */
void cm_config_warn(ctx *c, const json_t *parent, const char *key, size_t index, const char *fmt,
                    ...) __attribute__((format(printf, 5, 6)));

/* "an object", "a string", … for messages. */
const char *cm_config_type_name(const json_t *v);

/* For messages: v as written ("\"rfr\"", 1.5, true), cut after 64 bytes;
 * an object or array by its kind ("an object"), and so is any value when the
 * last part of path names a credential or a header (apiKey, token, secret,
 * password, dsn, url, headers.*), so that no secret reaches an error. Returns out
 * or a static string. */
const char *cm_config_value_text(const json_t *v, const char *path, char *out, size_t outlen);

/* Whether s is one of choices, written "a|b|c". */
bool cm_config_in_choices(const char *choices, const char *s);

/* *dst ← a copy of s (the old value freed). */
cm_rc cm_config_set_str(char **dst, const char *s);

/* Frees l's strings and empties it. */
void cm_config_strlist_release(cm_strlist *l);

/* Appends a copy of s to l unless l already holds it. */
cm_rc cm_config_strlist_add(cm_strlist *l, const char *s);

/* cm_config_header_set() of the line "name: value". */
cm_rc cm_config_header_put(cm_strlist *l, const char *name, const char *value);

/* ---- schema.c ----------------------------------------------------------- */

/* Applies every key of the memorySearch object obj to c->cfg; prefix is its
 * path in the file, rel the dotted path below memorySearch ("" at its top).
 * A bad value fails with cm_config_bad(); an unknown key warns. */
cm_rc cm_config_walk(ctx *c, const json_t *obj, const char *prefix, const char *rel);

/* ---- qmd.c -------------------------------------------------------------- */

/* QuantumClaw 2026.3.22's defaults of memory.qmd into cfg->qmd. */
void cm_config_qmd_defaults(cm_config *cfg);
/* Applies memory.qmd of one file (qmd may be NULL) over c->cfg->qmd; a bad
 * value fails with cm_config_bad() (file:line:col and the key path). */
cm_rc cm_config_read_qmd(ctx *c, const json_t *qmd);
void cm_config_qmd_release(cm_qmd_config *q);

/* ---- session_maint.c ---------------------------------------------------- */

/* Applies session.maintenance of one file (root's) over c->cfg->session_maint;
 * a bad value fails with cm_config_bad(), an unknown key warns. */
cm_rc cm_config_read_session_maint(ctx *c, const json_t *root);
/* The derived defaults once every file is read. */
void cm_config_session_maint_finish(cm_session_maint *m);

/* ---- runtime_config.c -------------------------------------------------- */

/* Checks the runtime's keys of one file (runtime_config.h) against
 * 2026.3.22's kinds, ranges and choices: a bad one fails with
 * cm_config_bad() (file:line:col and the key path). */
cm_rc cm_config_check_runtime(ctx *c, const json_t *root);

/* ---- known_keys.c ------------------------------------------------------- */

/* Warns "file:line:col: unknown key <path> (ignored)" about the member key
 * of obj, with ": did you mean X?" when near (candidates offered by the
 * caller: the keys known at that level) holds a close one. */
void cm_config_warn_unknown(ctx *c, const json_t *obj, const char *key, const char *path,
                            const suggest *near);

/* Warns about each key of root, in the sections clawmem reads, that
 * QuantumClaw 2026.3.22's schema does not know (a typo). */
void cm_config_check_all(ctx *c, const json_t *root);

#endif
