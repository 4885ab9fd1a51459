/*
 * fakeserver.h — a loopback HTTP/1.1 server for the embedding tests. It
 * answers the OpenAI-style /embeddings, Gemini's :embedContent and
 * :batchEmbedContents, and Ollama's /api/embeddings with deterministic
 * vectors (a hashed bag of words: texts sharing words are close), records
 * every request, and plays scripted faults first.
 *
 * GET serves the files registered with fake_file (the model downloads):
 * 200 with the whole file, or 206 with Content-Range for "Range: bytes=N-"
 * (416 giving the size in Content-Range when N is past the end), 404 for a
 * path not registered. "/cdn/<path>" serves the same file as "<path>" (the
 * target of FAKE_REDIRECT); a query string is ignored.
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
    FAKE_ECHO,        /* answer with status and a JSON body echoing the request line and
                         headers as received, raw CR LF (Host, Accept*, Content-*,
                         User-Agent, Expect left out: Authorization comes first) */
    /* GET (file) faults; `status` of fake_push carries K where named. */
    FAKE_CUT,          /* the answer's headers, K body bytes, then the connection closes */
    FAKE_IGNORE_RANGE, /* 200 with the whole file whatever Range asked */
    FAKE_SHORT,        /* headers as usual (206: Content-Range to the file's end) but a
                          body and Content-Length K bytes short */
    FAKE_REDIRECT,     /* 302 to "/cdn<path>?sig=fake", with X-Linked-Etag */
    FAKE_WRONG_RANGE,  /* 206 with the whole file (Content-Range from 0) whatever Range asked */
    FAKE_RAW,          /* the bytes given to fake_push_raw, as they are (any request) */
    FAKE_ENDLESS,      /* 200 text/event-stream, then fake_push_endless's chunk again and
                          again until the client goes away (or the server stops) */
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
/* Serves data (copied) at path (e.g. "/o/r/resolve/main/m.gguf") to GETs;
 * registering a path again replaces what later requests get. */
void fake_file(fake_server *s, const char *path, const void *data, size_t n);
/* The X-Linked-Etag a redirect to path announces (default: the file's
 * sha256, as Hugging Face sends for LFS files). */
void fake_file_etag(fake_server *s, const char *path, const char *etag);
/* Queues a fault for the next request (FIFO). */
void fake_push(fake_server *s, enum fake_fault f, int status, int retry_after);
/* Queues a raw answer for the next request: the bytes of raw (status line,
 * headers, body — e.g. an SSE stream) are sent as they are; then the
 * connection is closed when close is true, else kept for the next request. */
void fake_push_raw(fake_server *s, const char *raw, bool close);
/* Queues an event stream without end for the next request: chunk (e.g.
 * "data: {...}\n\n") is sent until a send fails; the bytes sent are counted
 * (fake_endless_sent). */
void fake_push_endless(fake_server *s, const char *chunk);
long long fake_endless_sent(fake_server *s);
/* A chat model's next answer, OpenAI-style streamed: text with its usage
 * (prompt_tokens, 10 completion tokens), or one tool call (arguments as
 * JSON text). */
void fake_push_chat_text(fake_server *s, const char *text, int prompt_tokens);
void fake_push_chat_call(fake_server *s, const char *id, const char *name, const char *args_json);
/* A handler asked first for every request that no queued fault answers:
 * true when it answered, with *status, *ctype (static) and *out (malloc'd,
 * *out_len bytes); false lets the built-in answers serve it. Called on the
 * connection's thread, without the server's lock. */
typedef bool (*fake_handler_fn)(void *ctx, const char *method, const char *path, const char *body,
                                size_t body_len, int *status, const char **ctype, char **out,
                                size_t *out_len);
void fake_handler(fake_server *s, fake_handler_fn fn, void *ctx);
/* TCP connections accepted since fake_start (connection reuse shows here). */
int fake_accepted(fake_server *s);
/* Requests received so far, and the i-th (valid until fake_stop). */
int fake_count(fake_server *s);
const fake_request *fake_get(fake_server *s, int i);
/* The vector the server gives text (normalised), for comparisons. */
void fake_vector(const char *text, int dims, float *out);

#endif
