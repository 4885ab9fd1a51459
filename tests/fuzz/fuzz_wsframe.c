/*
 * fuzz_wsframe.c — bytes from a WebSocket client (hostile) parsed as a
 * stream of frames, masked and unmasked, with a small payload cap. Never a
 * crash or a read past the input; every frame taken lies within it, and
 * re-encoding a parsed frame parses back to the same payload.
 */
#include <string.h>

#include "../../src/net/wsframe.h"
#include "fuzz.h"

int fuzz_wsframe(const uint8_t *data, size_t size)
{
    for (int pass = 0; pass < 2; pass++) {
        uint8_t *p = malloc(size ? size : 1);
        if (!p) return 0;
        memcpy(p, data, size);
        size_t at = 0;
        for (;;) {
            ws_frame f;
            long k = cm_ws_frame_parse(p + at, size - at, pass == 0, 4096, &f);
            if (k <= 0) break;
            if ((size_t)k > size - at || f.len > (size_t)k) __builtin_trap();
            buf b = BUF_INIT;
            static const uint8_t key[4] = {9, 8, 7, 6};
            if (!cm_ws_frame_encode(&b, f.opcode, f.payload, f.len, true, key)) {
                ws_frame g;
                long k2 = cm_ws_frame_parse((uint8_t *)b.data, b.len, true, 1 << 20, &g);
                if (k2 > 0 && (g.len != f.len || memcmp(g.payload, f.payload, f.len)))
                    __builtin_trap();
            }
            cm_buf_release(&b);
            at += (size_t)k;
        }
        free(p);
    }
    return 0;
}

FUZZ_ENTRY(fuzz_wsframe)
