/*
 * batch_int.h — what the files of the batch APIs share (batch.c: the clock,
 * the HTTP calls with their retries, the result lines, the dispatch;
 * batch_files.c: OpenAI and Voyage; batch_gemini.c: Gemini). Nothing
 * outside src/embed/batch*.c includes it.
 */
#ifndef CM_EMBED_BATCH_INT_H
#define CM_EMBED_BATCH_INT_H

#include <jansson.h>

#include "batch.h"

/* Receives the body of a 2xx answer one line at a time (without its
 * newline); a nonzero return stops the transfer with that code. */
typedef cm_rc (*batch_line_fn)(void *ctx, const char *line, size_t len);

typedef struct batch_call {
    const char *what; /* for messages: "openai batch file upload" */
    const char *url;
    const char *ctype; /* Content-Type of body, or NULL */
    const char *body;  /* NULL: a GET */
    size_t body_len;
    const char *extra_header; /* one more "Name: value", or NULL */
    batch_line_fn on_line;    /* NULL: the answer is kept in resp */
    void *ctx;
    /* results */
    long status;
    buf resp; /* the answer (capped) when on_line is NULL, or an error answer's start */
} batch_call;

/* Performs c with p's headers, retrying network failures, 429 and 5xx
 * (at most 3 attempts, the pause from the batch clock) unless lines were
 * already delivered. CM_OK for a 2xx answer; CM_ENOTFOUND for a 404;
 * otherwise CM_EIO with err "<what> failed: <status> <redacted excerpt>". */
cm_rc cm_embed_batch_http(embed_provider *p, batch_call *c, char *err, size_t errlen);
void cm_embed_batch_call_release(batch_call *c);

/* The answer of c as a JSON object, or CM_EIO naming c->what. */
cm_rc cm_embed_batch_json(const batch_call *c, json_t **out, char *err, size_t errlen);

/* A string member at a path of keys (NULL-terminated), or NULL. */
const char *cm_embed_batch_jstr(json_t *o, ...);

/* Redacts s[0..n) in place as an error answer from url is (http.h). */
void cm_embed_batch_redact(const embed_provider *p, const char *url, char *s, size_t n);

/* Copies s into dst[n] ("" for NULL). */
void cm_embed_batch_copy(char *dst, size_t n, const char *s);

/* OpenAI and Voyage (batch_files.c). */
cm_rc cm_embed_batch_files_line(const embed_provider *p, const char *id, const char *text,
                                buf *jsonl);
cm_rc cm_embed_batch_files_submit(embed_provider *p, const buf *jsonl, char **id,
                                  embed_batch_status *st, uint64_t *sent, char *err, size_t errlen);
cm_rc cm_embed_batch_files_poll(embed_provider *p, const char *id, embed_batch_status *st,
                                char *err, size_t errlen);
void cm_embed_batch_files_status(json_t *j, embed_batch_status *st);
cm_rc cm_embed_batch_files_results(embed_provider *p, const embed_batch_status *st,
                                   batch_line_fn fn, void *ctx, char *err, size_t errlen);

/* Gemini (batch_gemini.c). */
cm_rc cm_embed_batch_gemini_line(const embed_provider *p, const char *id, const char *text,
                                 buf *jsonl);
cm_rc cm_embed_batch_gemini_submit(embed_provider *p, const buf *jsonl, char **id,
                                   embed_batch_status *st, uint64_t *sent, char *err,
                                   size_t errlen);
cm_rc cm_embed_batch_gemini_poll(embed_provider *p, const char *id, embed_batch_status *st,
                                 char *err, size_t errlen);
void cm_embed_batch_gemini_status(json_t *j, embed_batch_status *st);
cm_rc cm_embed_batch_gemini_results(embed_provider *p, const embed_batch_status *st,
                                    batch_line_fn fn, void *ctx, char *err, size_t errlen);

#endif
