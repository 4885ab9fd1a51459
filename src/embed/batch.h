/*
 * batch.h — the providers' asynchronous batch APIs for document embeddings
 * (memorySearch.remote.batch): OpenAI and Voyage (a JSONL file uploaded to
 * /files with purpose "batch", a batch on /v1/embeddings, its output and
 * error files), Gemini (a JSONL file uploaded through the upload endpoint and
 * models/<model>:asyncBatchEmbedContent, its responses file). A batch is
 * built line by line (cm_embed_batch_line), submitted (cm_embed_batch_submit),
 * polled (cm_embed_batch_poll) and read (cm_embed_batch_results, streamed line by
 * line so a large output file never sits in memory). Results are keyed by
 * the custom id each line was given. No state lives here: the engine keeps
 * the ids of pending batches in the index (store/batches.c) and resumes them.
 */
#ifndef CM_EMBED_BATCH_H
#define CM_EMBED_BATCH_H

#include "embed.h"

/* Limits of one batch (OpenAI's, which 2026.3.22 applies to all three: at
 * most 50,000 requests; an input file of at most 200 MB, kept under with a
 * margin for the multipart envelope). */
#define EMBED_BATCH_MAX_REQUESTS 50000
#define EMBED_BATCH_FILE_BYTES   ((size_t)190 << 20)
/* Consecutive failed batches after which a sync embeds the rest
 * synchronously (2026.3.22's BATCH_FAILURE_LIMIT). */
#define EMBED_BATCH_FAILURE_LIMIT 2

/* The clock of the polling loop: tests inject one so that nothing sleeps. */
typedef struct embed_batch_clock {
    int64_t (*now_ms)(void *ctx);
    void (*sleep_ms)(void *ctx, long ms);
    void *ctx;
} embed_batch_clock;

/* Installs c for the whole process (NULL: the real clock and nanosleep).
 * Not thread-safe: call before any sync runs. */
void cm_embed_batch_set_clock(const embed_batch_clock *c);
int64_t cm_embed_batch_now(void);
void cm_embed_batch_sleep(long ms);

/* Overrides the limits of one batch (tests: a split without 50,000
 * inputs); 0 restores a limit. Not thread-safe, as the clock. */
void cm_embed_batch_set_limits(size_t max_requests, size_t max_bytes);
size_t cm_embed_batch_max_requests(void);
size_t cm_embed_batch_max_bytes(void);

/* Whether provider p has a batch API (openai, gemini, voyage). */
bool cm_embed_batch_supported(const embed_provider *p);

/* Appends to jsonl the request line for one document text with custom id
 * `id` (a chunk hash), newline-terminated. */
cm_rc cm_embed_batch_line(const embed_provider *p, const char *id, const char *text, buf *jsonl);

typedef enum embed_batch_phase {
    EMBED_BATCH_RUNNING,   /* validating, in progress, finalizing, pending… */
    EMBED_BATCH_COMPLETED, /* output ready */
    EMBED_BATCH_FAILED,    /* failed, expired, cancelled */
} embed_batch_phase;

typedef struct embed_batch_status {
    embed_batch_phase phase;
    char state[32];       /* the provider's word for it, lower case ("in_progress", "expired"…) */
    char output[256];     /* output file id (completed), "" when none */
    char error_file[256]; /* OpenAI/Voyage error file id, "" when none */
    char why[256];        /* FAILED: the provider's message, redacted */
} embed_batch_status;

/* Uploads jsonl (n lines from cm_embed_batch_line) and creates the batch;
 * *id receives its id (malloc'd) and st its first status. *bytes_sent (may
 * be NULL) is increased by the bytes uploaded. CM_EIO on an HTTP failure
 * (429 and 5xx retried a few times), err naming the step and the status. */
cm_rc cm_embed_batch_submit(embed_provider *p, const buf *jsonl, size_t n, char **id,
                            embed_batch_status *st, uint64_t *bytes_sent, char *err, size_t errlen);

/* One status request for batch id. */
cm_rc cm_embed_batch_poll(embed_provider *p, const char *id, embed_batch_status *st, char *err,
                          size_t errlen);

/* Called once per result line: the custom id and either the vector (dims
 * floats, valid during the call) or why that item failed. A nonzero return
 * stops the reading with that code. */
typedef cm_rc (*embed_batch_item_fn)(void *ctx, const char *id, const float *v, int dims,
                                     const char *why);

/* Reads a completed batch's output file (and, for OpenAI/Voyage, its error
 * file), calling fn for each line; learns p->dims from the first vector. A
 * malformed line is reported through fn as a failed item when its id can be
 * read, else skipped (the item then counts as missing). */
cm_rc cm_embed_batch_results(embed_provider *p, const embed_batch_status *st,
                             embed_batch_item_fn fn, void *ctx, char *err, size_t errlen);

/* Parses one output line (exposed for tests and the fuzzer): calls fn as
 * cm_embed_batch_results does. */
cm_rc cm_embed_batch_parse_line(embed_provider *p, const char *line, size_t len,
                                embed_batch_item_fn fn, void *ctx);

#endif
