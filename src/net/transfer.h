/*
 * transfer.h — the one HTTP transfer engine. Every request of clawmem — model
 * calls (streamed or not), embeddings, Telegram, web_fetch, downloads — is an
 * http_fetch (http.h) run here, with:
 *   - one connection pool: a process-wide pool of libcurl multi handles, each
 *     keeping its connection cache between calls (a call takes the handle
 *     used last, so sequential calls to one host reuse one connection), and a
 *     share of DNS answers and TLS sessions between them;
 *   - one option set (timeouts, http/https only, redirects of GETs, the user
 *     agent, the allow_ip check before every request);
 *   - one header parser (http_headers.h) and one retry policy (http_retry.h).
 * Callers differ only in what they do with the bytes (on_data).
 *
 * libcurl's own connection sharing across threads (CURL_LOCK_DATA_CONNECT) is
 * documented as unsupported between concurrent threads, hence the pool of
 * handles, each used by one thread at a time.
 */
#ifndef CM_TRANSFER_H
#define CM_TRANSFER_H

#include "http.h"

/* Runs fs[0..n), at most concurrency at a time (≥ 1), each retried as its
 * f->retry says, over one connection cache taken from the pool. Every fetch
 * gets its results, f->attempts and, when it failed, f->error; returns CM_OK
 * when every fetch got an answer (whatever its status), else the code of the
 * first that did not (CM_ECANCELED, CM_EINVAL for a refused address, CM_EIO,
 * CM_ENOMEM) with err naming it. Thread-safe. */
cm_rc cm_http_fetch_all(http_fetch *const *fs, size_t n, int concurrency, char *err, size_t errlen);

/* Loads libcurl (once per process); CM_EIO with err saying how to install it
 * when it cannot be. */
cm_rc cm_http_engine_ready(char *err, size_t errlen);

/* Drops every idle connection of the pool (tests, and before fork). */
void cm_http_pool_drain(void);

#endif
