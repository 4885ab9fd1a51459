/*
 * wsframe.c — RFC 6455 framing (wsframe.h): SHA-1 and base64 for the
 * handshake, the frame header parsed and encoded.
 */
#include "wsframe.h"

#include <string.h>

/* ---- SHA-1 (FIPS 180-4), for the handshake only ----------------------------- */

static uint32_t S_rol(uint32_t x, int k)
{
    return (x << k) | (x >> (32 - k));
}

static void S_block(uint32_t h[5], const unsigned char *b)
{
    uint32_t w[80];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)b[4 * i] << 24 | (uint32_t)b[4 * i + 1] << 16 |
               (uint32_t)b[4 * i + 2] << 8 | b[4 * i + 3];
    for (int i = 16; i < 80; i++)
        w[i] = S_rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    uint32_t a = h[0], bb = h[1], c = h[2], d = h[3], e = h[4];
    for (int i = 0; i < 80; i++) {
        uint32_t f, k;
        if (i < 20)
            f = (bb & c) | (~bb & d), k = 0x5A827999;
        else if (i < 40)
            f = bb ^ c ^ d, k = 0x6ED9EBA1;
        else if (i < 60)
            f = (bb & c) | (bb & d) | (c & d), k = 0x8F1BBCDC;
        else
            f = bb ^ c ^ d, k = 0xCA62C1D6;
        uint32_t t = S_rol(a, 5) + f + e + k + w[i];
        e = d, d = c, c = S_rol(bb, 30), bb = a, a = t;
    }
    h[0] += a, h[1] += bb, h[2] += c, h[3] += d, h[4] += e;
}

void cm_ws_sha1(const void *data, size_t n, unsigned char md[20])
{
    uint32_t h[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
    const unsigned char *p = data;
    size_t left = n;
    for (; left >= 64; p += 64, left -= 64)
        S_block(h, p);
    unsigned char last[128] = {0};
    memcpy(last, p, left);
    last[left] = 0x80;
    size_t tail = left < 56 ? 64 : 128;
    uint64_t bits = (uint64_t)n * 8;
    for (int i = 0; i < 8; i++)
        last[tail - 1 - i] = (unsigned char)(bits >> (8 * i));
    S_block(h, last);
    if (tail == 128) S_block(h, last + 64);
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 4; j++)
            md[4 * i + j] = (unsigned char)(h[i] >> (24 - 8 * j));
}

void cm_ws_accept_key(const char *key, char out[29])
{
    static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    unsigned char in[128 + sizeof guid], md[21] = {0};
    size_t k = strnlen(key, 128);
    memcpy(in, key, k);
    memcpy(in + k, guid, sizeof guid - 1);
    cm_ws_sha1(in, k + sizeof guid - 1, md);
    size_t o = 0;
    for (int i = 0; i < 21; i += 3) {
        uint32_t v = (uint32_t)md[i] << 16 | (uint32_t)md[i + 1] << 8 | md[i + 2];
        out[o++] = b64[(v >> 18) & 63];
        out[o++] = b64[(v >> 12) & 63];
        out[o++] = i + 1 < 20 ? b64[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < 20 ? b64[v & 63] : '=';
    }
    out[28] = 0;
}

/* ---- frames ---------------------------------------------------------------- */

long cm_ws_frame_parse(uint8_t *p, size_t n, bool need_mask, size_t max_payload, ws_frame *f)
{
    if (n < 2) return 0;
    memset(f, 0, sizeof *f);
    f->fin = p[0] & 0x80;
    f->opcode = p[0] & 0x0F;
    if (p[0] & 0x70) return -WS_CLOSE_PROTOCOL; /* no extension was negotiated */
    bool control = f->opcode & 0x8;
    if (f->opcode > WS_OP_BINARY && !(f->opcode >= WS_OP_CLOSE && f->opcode <= WS_OP_PONG))
        return -WS_CLOSE_PROTOCOL;
    bool masked = p[1] & 0x80;
    if (masked != need_mask) return -WS_CLOSE_PROTOCOL;
    uint64_t len = p[1] & 0x7F;
    size_t at = 2;
    if (control && (!f->fin || len > 125)) return -WS_CLOSE_PROTOCOL;
    if (len == 126) {
        if (n < 4) return 0;
        len = (uint64_t)p[2] << 8 | p[3];
        at = 4;
    } else if (len == 127) {
        if (n < 10) return 0;
        len = 0;
        for (int i = 0; i < 8; i++)
            len = len << 8 | p[2 + i];
        if (len >> 63) return -WS_CLOSE_PROTOCOL;
        at = 10;
    }
    if (len > max_payload) return -WS_CLOSE_TOO_BIG;
    const uint8_t *key = p + at;
    if (masked) at += 4;
    if (n < at || n - at < len) return 0;
    f->payload = p + at;
    f->len = (size_t)len;
    if (masked)
        for (size_t i = 0; i < f->len; i++)
            f->payload[i] ^= key[i & 3];
    return (long)(at + len);
}

cm_rc cm_ws_frame_encode(buf *out, int opcode, const void *p, size_t n, bool mask,
                         const uint8_t mask_key[4])
{
    cm_rc rc = CM_OK;
    uint8_t h[14];
    size_t hl = 2;
    h[0] = (uint8_t)(0x80 | (opcode & 0x0F));
    uint8_t m = mask ? 0x80 : 0;
    if (n < 126) {
        h[1] = (uint8_t)(m | n);
    } else if (n <= 0xFFFF) {
        h[1] = m | 126;
        h[2] = (uint8_t)(n >> 8), h[3] = (uint8_t)n;
        hl = 4;
    } else {
        h[1] = m | 127;
        for (int i = 0; i < 8; i++)
            h[2 + i] = (uint8_t)((uint64_t)n >> (56 - 8 * i));
        hl = 10;
    }
    if (mask) {
        memcpy(h + hl, mask_key, 4);
        hl += 4;
    }
    CHECK(cm_buf_grow(out, hl + n));
    CHECK(cm_buf_add(out, h, hl));
    size_t at = out->len;
    CHECK(cm_buf_add(out, p, n));
    if (mask)
        for (size_t i = 0; i < n; i++)
            out->data[at + i] ^= (char)mask_key[i & 3];
out:
    return rc;
}
