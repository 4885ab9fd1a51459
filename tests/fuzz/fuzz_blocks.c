/*
 * fuzz_blocks.c — a model's reply (arbitrary bytes) cut for a chat channel:
 * the first two bytes pick the limit (16..4111 units) and the break
 * preference. Never a crash or a leak; no piece over the limit, none empty;
 * on valid UTF-8 every piece is valid UTF-8.
 */
#include "../../src/base/utf8.h"
#include "../../src/gateway/shaping/blocks.h"
#include "fuzz.h"

int fuzz_blocks(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    int max = 16 + (int)(((unsigned)data[0] << 4 | data[1]) % 4096);
    gw_break_pref pref = (gw_break_pref)(data[1] % 3);
    const char *s = (const char *)data + 2;
    size_t n = size - 2;
    bool valid = cm_utf8_valid_prefix(s, n) == n;
    gw_pieces out;
    cm_gw_pieces_init(&out);
    if (cm_gw_chunk_text(s, n, max, pref, &out) == CM_OK)
        for (size_t i = 0; i < out.n; i++) {
            if (!out.len[i] || cm_gw_u16len(out.v[i], out.len[i]) > (size_t)max) __builtin_trap();
            if (valid && cm_utf8_valid_prefix(out.v[i], out.len[i]) != out.len[i]) __builtin_trap();
        }
    cm_gw_pieces_release(&out);
    return 0;
}

FUZZ_ENTRY(fuzz_blocks)
