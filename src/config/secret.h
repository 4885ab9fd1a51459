/*
 * secret.h — secret inputs of the config (remote.apiKey,
 * models.providers.*.apiKey and headers) and "${VAR}" substitution in config
 * strings, as QuantumClaw 2026.3.22 resolves them. Reads the environment and
 * secret files; the values never reach a message.
 */
#ifndef CM_SECRET_H
#define CM_SECRET_H

#include <jansson.h>

#include "../base/common.h"

/* The secrets sections of quantumclaw.json and clawmem.json (NULL: none); a
 * provider or default in the later one wins. */
typedef struct secrets {
    const json_t *sec[2];
} secrets;

/* Resolves a secret input — a string, a "${ENV_VAR}" template (also inline:
 * "Bearer ${KEY}"), or a reference {source: "env"|"file"|"exec", provider?,
 * id} — into *out (caller frees). CM_ECONFIG with why (never the secret)
 * when it cannot: an unset variable, an unconfigured provider, a file that
 * others can read, a pointer that finds nothing; exec references are not
 * supported. */
cm_rc cm_secret_resolve(const secrets *s, const json_t *v, char **out, char *why, size_t whylen);

/* "${VAR}" in `in` replaced by the environment variable ("$${VAR}" is a
 * literal "${VAR}"; VAR is [A-Z_][A-Z0-9_]*, anything else stays as is).
 * *out is the result (caller frees); CM_ECONFIG with why naming the variable
 * when it is unset or empty. */
cm_rc cm_secret_subst_env(const char *in, char **out, char *why, size_t whylen);

#endif
