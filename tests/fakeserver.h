/*
 * fakeserver.h — a loopback HTTP/1.1 server for the embedding tests. It
 * answers the OpenAI-style /embeddings, Gemini's :embedContent and
 * :batchEmbedContents, and Ollama's /api/embeddings with deterministic
 * vectors (a hashed bag of words: texts sharing words are close), records
 * every request, and plays scripted faults first.
 */
#ifndef CM_FAKESERVER_H
#define CM_FAKESERVER_H

#include "test.h"

enum fake_fault {
    FAKE_OK,          /* a normal answer */
    FAKE_STATUS,      /* answer with status (and Retry-After when retry_after >= 0) */
    FAKE_HANG,        /* accept and never answer */
    FAKE_TRUNCATED,   /* promise more body than is sent, then close */
    FAKE_BAD_JSON,    /* 200 with a body that is not JSON */
    FAKE_WRONG_DIMS,  /* 200 with vectors one element short */
    FAKE_WRONG_COUNT, /* 200 with one vector too few */
    FAKE_NAN,         /* 200 with "NaN" inside a vector */
    FAKE_ZERO,        /* 200 with all-zero vectors */
};

typedef struct fake_request {
    char method[8], path[256];
    char headers[2048]; /* as received, lower-cased names */
    char *body;
} fake_request;

typedef struct fake_server fake_server;

/* Starts on 127.0.0.1 with vectors of dims; base_url receives
 * "http://127.0.0.1:PORT". */
fake_server *fake_start(int dims, char base_url[64]);
void fake_stop(fake_server *s);
/* Queues a fault for the next request (FIFO). */
void fake_push(fake_server *s, enum fake_fault f, int status, int retry_after);
/* Requests received so far, and the i-th (valid until fake_stop). */
int fake_count(fake_server *s);
const fake_request *fake_get(fake_server *s, int i);
/* The vector the server gives text (normalised), for comparisons. */
void fake_vector(const char *text, int dims, float *out);

#endif
