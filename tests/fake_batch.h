/*
 * fake_batch.h — the batch APIs of OpenAI, Voyage (under /v1) and Gemini
 * (under /v1beta, /upload/v1beta, /download/v1beta) on a fakeserver.h
 * server: uploaded files kept, batches that go through their states as they
 * are polled (or after a delay), output and error files with the fake
 * server's vectors, and scripted outcomes per batch. Counts every request.
 */
#ifndef CM_FAKE_BATCH_H
#define CM_FAKE_BATCH_H

#include "fakeserver.h"

/* What the next created batch does (fake_batch_script; default: completes
 * after `polls` status requests, every item embedded). */
typedef struct fake_batch_plan {
    int polls;             /* status requests answered "in progress" first (default 1) */
    long delay_ms;         /* or: complete this long after creation (real time), when > 0 */
    const char *final;     /* "completed" (default), "failed", "expired", "cancelled" */
    const char *fail_text; /* items whose text contains this fail (error file / error line) */
    const char *drop_text; /* items whose text contains this are left out of the output */
    bool hold;             /* stays in progress until fake_batch_release */
} fake_batch_plan;

typedef struct fake_batch_counts {
    int uploads, creates, polls, downloads, sync_posts, other;
    int lines_uploaded;
    uint64_t bytes_in; /* request bodies received, all requests */
    uint64_t upload_bytes;
} fake_batch_counts;

typedef struct fake_batch fake_batch;

/* Serves the batch APIs on s, vectors of dims. */
fake_batch *fake_batch_start(fake_server *s, int dims);
void fake_batch_stop(fake_batch *b);
/* Queues the plan of the next created batch (FIFO; then the default). */
void fake_batch_script(fake_batch *b, const fake_batch_plan *plan);
/* Lets held batches complete at their next poll. */
void fake_batch_release(fake_batch *b);
fake_batch_counts fake_batch_counts_get(fake_batch *b);
/* The id of the i-th created batch ("" when none), copied into out. */
void fake_batch_id(fake_batch *b, int i, char out[64]);
/* The JSONL of the i-th uploaded file (malloc'd), NULL when none. */
char *fake_batch_upload(fake_batch *b, int i);

#endif
