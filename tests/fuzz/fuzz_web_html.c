/*
 * fuzz_web_html.c — a fetched page (arbitrary bytes) reduced to text by
 * web_fetch's extractor, Markdown and plain. Never a crash, a hang or a
 * leak; on valid UTF-8 the text is valid UTF-8 (entities decode to code
 * points, never to surrogates); the output is never much longer than the
 * input (links add their target once).
 */
#include <stdlib.h>
#include <string.h>

#include "../../src/base/utf8.h"
#include "../../src/tools/web_fetch.h"
#include "fuzz.h"

int fuzz_web_html(const uint8_t *data, size_t size)
{
    bool valid = cm_utf8_valid_prefix((const char *)data, size) == size;
    for (int md = 0; md < 2; md++) {
        buf out = BUF_INIT, title = BUF_INIT;
        if (cm_web_fetch_html_text((const char *)data, size, md, &out, &title) == CM_OK) {
            if (valid && cm_utf8_valid_prefix(out.data, out.len) != out.len) __builtin_trap();
            if (out.len > 3 * size + 64) __builtin_trap();
        }
        cm_buf_release(&out);
        cm_buf_release(&title);
    }
    return 0;
}

FUZZ_ENTRY(fuzz_web_html)
