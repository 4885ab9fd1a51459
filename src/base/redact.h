/*
 * redact.h — what a message may show of bytes a remote server sent, or of a
 * URL we were given. Every error built from a response body (embedding
 * endpoints, model downloads, later the chat clients) goes through
 * cm_redact_text: the request's own secrets (API keys, tokens, header values)
 * are replaced by "[redacted]" wherever they appear, so do credential-looking
 * patterns (Bearer/Basic tokens, sk-…, key=…, the values of Authorization,
 * x-goog-api-key and other credential headers), control characters and line
 * breaks become single spaces and invalid UTF-8 becomes U+FFFD: an endpoint
 * that echoes our request cannot make us print its key, nor forge a line.
 */
#ifndef CM_REDACT_H
#define CM_REDACT_H

#include "buf.h"

#define REDACTED "[redacted]"

/* The secrets of one request (owned copies) and which patterns apply. */
typedef struct redact {
    char **secrets;
    size_t n, cap;
    unsigned patterns; /* REDACT_* bits; cm_redact_init sets REDACT_ALL */
} redact;

enum {
    REDACT_BEARER = 1 << 0,  /* "Bearer <token>", "Basic <token>" */
    REDACT_SK = 1 << 1,      /* sk-…, sk_…, hf_…, AIza…, gsk_…, xai-… key shapes */
    REDACT_PARAMS = 1 << 2,  /* key=, api_key=, token=, access_token=, password=, secret=, sig= */
    REDACT_HEADERS = 1 << 3, /* Authorization, x-goog-api-key, x-api-key, api-key, cookie, … */
    REDACT_BOT = 1 << 4,     /* Telegram bot tokens: "/bot<id>:<secret>" (also cut short, even
                                to "/bot<id>" at the end), "<id>:<30+ token characters>" */
    REDACT_ALL = 0xff
};

void cm_redact_init(redact *r);
void cm_redact_release(redact *r);

/* Adds a secret to hide wherever it appears (exact bytes). Values under 4
 * bytes are ignored (they would blank ordinary words). NULL is a no-op. */
cm_rc cm_redact_add(redact *r, const char *secret);

/* Adds the secrets of a header line "Name: value": the value, and for
 * "Bearer x"/"Basic x" also x. Content-Type, Accept, User-Agent and Expect
 * carry none and are skipped. */
cm_rc cm_redact_add_header(redact *r, const char *line);

/* Adds the secrets a URL carries: its userinfo (user and password) and the
 * values of its query parameters. */
cm_rc cm_redact_add_url(redact *r, const char *url);

/* Adds the secrets a PostgreSQL connection string (libpq's keyword form or
 * a postgres:// URI) carries: the whole string, which libpq quotes back in
 * some of its parse errors; a URI's userinfo and query values; the keyword
 * form's password and sslpassword values and its words without "=" (libpq
 * names such a word in its error: a password with an unquoted space). */
cm_rc cm_redact_add_conninfo(redact *r, const char *dsn);

/* Appends s[0..n) as one line of at most max_chars characters (0: no cap;
 * "…" marks a cut) with the secrets and patterns of r (NULL: patterns only)
 * replaced by REDACTED, runs of whitespace and control characters as one
 * space, invalid UTF-8 as U+FFFD, leading and trailing space dropped. */
cm_rc cm_redact_text(const redact *r, const char *s, size_t n, size_t max_chars, buf *out);

/* Appends url for a message: without userinfo and without its query string
 * and fragment (either may carry a key), the key shapes of REDACT_SK and
 * REDACT_BOT masked (before the cut: a cut token is never half shown), at
 * most max_chars characters (0: no cap), control characters escaped. */
cm_rc cm_redact_url(const char *url, size_t max_chars, buf *out);

/* cm_redact_url into a fixed buffer (always NUL-terminated). */
void cm_redact_url_to(const char *url, char *out, size_t size);

#endif
