/*
 * fuzz_chunk.c — the chunker on arbitrary text (repaired to UTF-8 first, as
 * sync does): chunks must be valid UTF-8, in line order, within the file,
 * and within the budget (tokens×4 weighted characters, at least 32).
 */
#include "../../src/base/utf8.h"
#include "../../src/index/chunk.h"
#include "fuzz.h"

int fuzz_chunk(const uint8_t *data, size_t size)
{
    buf b = BUF_INIT;
    chunk_list l = {0};
    int tokens = size ? 1 + data[0] % 64 : 8;
    if (cm_utf8_repair(&b, (const char *)data, size) == CM_OK &&
        cm_chunk_text(b.data, b.len, tokens, tokens / 4, &l) == CM_OK) {
        int lines = 1;
        for (size_t i = 0; i < b.len; i++)
            lines += b.data[i] == '\n';
        for (size_t i = 0; i < l.n; i++) {
            const chunk *c = &l.v[i];
            if (c->start_line < 1 || c->end_line < c->start_line || c->end_line > lines ||
                cm_utf8_valid_prefix(c->text, c->len) != c->len ||
                cm_chunk_weight(c->text, c->len) > (size_t)(tokens * 4 < 32 ? 32 : tokens * 4) ||
                (i && c->start_line < l.v[i - 1].start_line))
                __builtin_trap();
        }
    }
    cm_chunk_list_release(&l);
    cm_buf_release(&b);
    return 0;
}

FUZZ_ENTRY(fuzz_chunk)
