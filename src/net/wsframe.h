/*
 * wsframe.h — RFC 6455 WebSocket framing, as pure functions over bytes: the
 * handshake's Sec-WebSocket-Accept value, one frame parsed from a buffer
 * (incremental: "need more" until the whole frame is there) and one frame
 * encoded. No sockets and no allocation except into the caller's buf; the
 * gateway's connection loop (gateway/control/gw_ws.c) drives it. Thread safe.
 */
#ifndef CM_WSFRAME_H
#define CM_WSFRAME_H

#include "../base/buf.h"
#include "../base/common.h"

enum {
    WS_OP_CONT = 0x0,
    WS_OP_TEXT = 0x1,
    WS_OP_BINARY = 0x2,
    WS_OP_CLOSE = 0x8,
    WS_OP_PING = 0x9,
    WS_OP_PONG = 0xA
};

/* Close codes (RFC 6455 7.4.1). */
enum {
    WS_CLOSE_NORMAL = 1000,
    WS_CLOSE_GOING_AWAY = 1001,
    WS_CLOSE_PROTOCOL = 1002,
    WS_CLOSE_BAD_DATA = 1007,
    WS_CLOSE_POLICY = 1008,
    WS_CLOSE_TOO_BIG = 1009
};

typedef struct ws_frame {
    bool fin;
    int opcode;
    uint8_t *payload; /* into the parsed buffer, unmasked in place */
    size_t len;
} ws_frame;

/* The Sec-WebSocket-Accept value for a client's Sec-WebSocket-Key: base64 of
 * SHA-1(key + the RFC's GUID), 28 characters and a NUL. */
void cm_ws_accept_key(const char *key, char out[29]);

/* The SHA-1 digest of data[0..n) (for the accept key; exposed for its test). */
void cm_ws_sha1(const void *data, size_t n, unsigned char md[20]);

/* Parses the frame at p[0..n). Returns the bytes it took (> 0) and fills f,
 * 0 when more bytes are needed, or -close_code for a violation: reserved
 * bits set, an unknown opcode, a control frame fragmented or over 125 bytes,
 * a 64-bit length with its top bit set, masking other than need_mask asks
 * (servers receive masked frames, clients unmasked ones), or a payload over
 * max_payload (-WS_CLOSE_TOO_BIG). The payload is unmasked in place. */
long cm_ws_frame_parse(uint8_t *p, size_t n, bool need_mask, size_t max_payload, ws_frame *f);

/* Appends one final frame of opcode with payload p[0..n) to out; masked with
 * mask_key when mask is true (clients), plain otherwise (servers). */
cm_rc cm_ws_frame_encode(buf *out, int opcode, const void *p, size_t n, bool mask,
                         const uint8_t mask_key[4]);

#endif
