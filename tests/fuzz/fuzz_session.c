/*
 * fuzz_session.c — what session memory search reads of a transcript, on
 * arbitrary bytes (a transcript is written by whoever can reach the agent):
 * never a crash or a leak; the extracted text is one line per message, each
 * mapped to a line of the input in order; redaction of the text never grows
 * a token it masks and never crashes on what the extraction did not see.
 */
#include <string.h>

#include "../../src/session/extract.h"
#include "fuzz.h"

int fuzz_session(const uint8_t *data, size_t size)
{
    session_doc d;
    if (cm_session_extract((const char *)data, size, &d) != CM_OK) return 0;
    size_t newlines = 0, input_lines = 1;
    for (size_t i = 0; i < d.text.len; i++)
        newlines += d.text.data[i] == '\n';
    for (size_t i = 0; i < size; i++)
        input_lines += data[i] == '\n';
    if (d.n ? newlines != d.n - 1 : d.text.len != 0) __builtin_trap();
    for (size_t i = 0; i < d.n; i++) {
        if (d.line_map[i] < 1 || (size_t)d.line_map[i] > input_lines) __builtin_trap();
        if (i && d.line_map[i] <= d.line_map[i - 1]) __builtin_trap();
    }
    /* the raw bytes through the redaction too (it runs on any text) */
    buf r = BUF_INIT;
    buf raw = BUF_INIT;
    if (!cm_buf_add(&raw, (const char *)data, size) && !cm_session_redact(raw.data, size, &r))
        if (r.data && size && r.len > size + size / 2 + 16)
            __builtin_trap(); /* masks only shrink */
    cm_buf_release(&r);
    cm_buf_release(&raw);
    cm_session_doc_release(&d);
    return 0;
}

FUZZ_ENTRY(fuzz_session)
