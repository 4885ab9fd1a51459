/*
 * fuzz.h — the fuzz targets. Each is a plain function over bytes; built with
 * -DFUZZ_MAIN (make fuzz) a target file also defines libFuzzer's entry point,
 * and without it the test runner replays the seed corpora through them.
 */
#ifndef CM_FUZZ_H
#define CM_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int fuzz_config(const uint8_t *data, size_t size);
int fuzz_chunk(const uint8_t *data, size_t size);
int fuzz_query(const uint8_t *data, size_t size);
int fuzz_embed(const uint8_t *data, size_t size);
int fuzz_llm(const uint8_t *data, size_t size);
int fuzz_path(const uint8_t *data, size_t size);
int fuzz_session(const uint8_t *data, size_t size);
int fuzz_blocks(const uint8_t *data, size_t size);
int fuzz_tg_html(const uint8_t *data, size_t size);
int fuzz_tg_update(const uint8_t *data, size_t size);
int fuzz_httpd(const uint8_t *data, size_t size);
/* Stops the server fuzz_httpd started (its threads must not outlive a
 * corpus replay: later tests fork). */
void fuzz_httpd_stop(void);
int fuzz_batch(const uint8_t *data, size_t size);
int fuzz_web_html(const uint8_t *data, size_t size);
int fuzz_wsframe(const uint8_t *data, size_t size);
int fuzz_wsreq(const uint8_t *data, size_t size);
/* Frees fuzz_wsreq's gateway and removes its temporary state dir. */
void fuzz_wsreq_stop(void);
int fuzz_exec_argv(const uint8_t *data, size_t size);

#ifdef FUZZ_MAIN
#define FUZZ_ENTRY(fn)                                                                             \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);                                  \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)                                   \
    {                                                                                              \
        return fn(data, size);                                                                     \
    }
#else
#define FUZZ_ENTRY(fn)
#endif

#endif
