/*
 * media.c — media.h: extension tables, a small signature sniffer and the
 * chunk of a media file. MIME names follow 2026.3.22's tables (audio/mpeg
 * for .mp3, audio/mp4 for .m4a); a sniffed Ogg is audio/ogg, FLAC audio/flac.
 */
#include <strings.h>

#include "../base/utf8.h"
#include "media.h"

typedef struct ext_type {
    const char *ext, *mime;
    unsigned kind;
} ext_type;

static const ext_type exts[] = {
    {".jpg", "image/jpeg", CM_MEDIA_IMAGE},  {".jpeg", "image/jpeg", CM_MEDIA_IMAGE},
    {".png", "image/png", CM_MEDIA_IMAGE},   {".webp", "image/webp", CM_MEDIA_IMAGE},
    {".gif", "image/gif", CM_MEDIA_IMAGE},   {".heic", "image/heic", CM_MEDIA_IMAGE},
    {".heif", "image/heif", CM_MEDIA_IMAGE}, {".mp3", "audio/mpeg", CM_MEDIA_AUDIO},
    {".wav", "audio/wav", CM_MEDIA_AUDIO},   {".ogg", "audio/ogg", CM_MEDIA_AUDIO},
    {".opus", "audio/opus", CM_MEDIA_AUDIO}, {".m4a", "audio/mp4", CM_MEDIA_AUDIO},
    {".aac", "audio/aac", CM_MEDIA_AUDIO},   {".flac", "audio/flac", CM_MEDIA_AUDIO},
};

static const ext_type *ext_of(const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < ARRAY_LEN(exts); i++) {
        size_t el = strlen(exts[i].ext);
        if (n > el && strcasecmp(name + n - el, exts[i].ext) == 0) return &exts[i];
    }
    return NULL;
}

unsigned cm_index_media_kind_of_name(const char *name)
{
    const ext_type *e = ext_of(name);
    return e ? e->kind : 0;
}

unsigned cm_index_media_kind(const cm_config *cfg, const char *name)
{
    if (!cfg->multimodal) return 0;
    return cm_index_media_kind_of_name(name) & cfg->multimodal;
}

const char *cm_index_media_kind_name(unsigned kind)
{
    return kind == CM_MEDIA_AUDIO ? "audio" : "image";
}

static bool at(const unsigned char *d, size_t n, size_t off, const char *sig)
{
    size_t l = strlen(sig);
    return n >= off + l && memcmp(d + off, sig, l) == 0;
}

/* The type a signature names, or NULL. */
static const char *sniff(const unsigned char *d, size_t n)
{
    if (at(d, n, 0, "\x89PNG\r\n\x1a\n")) return "image/png";
    if (n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF) return "image/jpeg";
    if (at(d, n, 0, "GIF87a") || at(d, n, 0, "GIF89a")) return "image/gif";
    if (at(d, n, 0, "RIFF") && at(d, n, 8, "WEBP")) return "image/webp";
    if (at(d, n, 0, "RIFF") && at(d, n, 8, "WAVE")) return "audio/wav";
    if (at(d, n, 4, "ftyp")) {
        if (at(d, n, 8, "heic") || at(d, n, 8, "heix") || at(d, n, 8, "hevc")) return "image/heic";
        if (at(d, n, 8, "mif1") || at(d, n, 8, "msf1") || at(d, n, 8, "heif")) return "image/heif";
        if (at(d, n, 8, "M4A ") || at(d, n, 8, "M4B ")) return "audio/mp4";
        return NULL; /* another ISO media file: the extension decides */
    }
    if (at(d, n, 0, "ID3")) return "audio/mpeg";
    if (at(d, n, 0, "OggS")) return "audio/ogg";
    if (at(d, n, 0, "fLaC")) return "audio/flac";
    if (at(d, n, 0, "%PDF-")) return "application/pdf";
    if (at(d, n, 0, "PK\x03\x04")) return "application/zip";
    if (n >= 2 && d[0] == 0xFF && (d[1] & 0xF6) == 0xF0) return "audio/aac"; /* ADTS */
    if (n >= 2 && d[0] == 0xFF && (d[1] & 0xE0) == 0xE0 && (d[1] & 0x06) != 0)
        return "audio/mpeg"; /* an MPEG audio frame */
    return NULL;
}

const char *cm_index_media_mime(const char *name, const unsigned char *data, size_t n)
{
    const char *s = sniff(data, n);
    const ext_type *e = ext_of(name);
    /* a generic container (ZIP) gives way to the extension, as in 2026.3.22 */
    if (s && (strcmp(s, "application/zip") != 0 || !e)) return s;
    return e ? e->mime : s;
}

cm_rc cm_index_media_chunk(unsigned kind, const char *rel, const char *mime, const void *data,
                           size_t n, buf *label, char hash[SHA256_HEX_LEN + 1])
{
    char data_hash[SHA256_HEX_LEN + 1];
    cm_sha256_hex(data, n, data_hash);
    buf j = BUF_INIT;
    cm_rc rc = cm_buf_printf(label, "%s file: %s", kind == CM_MEDIA_AUDIO ? "Audio" : "Image", rel);
    if (!rc) rc = cm_buf_adds(&j, "{\"path\":");
    if (!rc) rc = cm_utf8_add_json_str(&j, rel, strlen(rel));
    if (!rc) rc = cm_buf_adds(&j, ",\"contentText\":");
    if (!rc) rc = cm_utf8_add_json_str(&j, label->data, label->len);
    if (!rc) rc = cm_buf_adds(&j, ",\"mimeType\":");
    if (!rc) rc = cm_utf8_add_json_str(&j, mime, strlen(mime));
    if (!rc) rc = cm_buf_printf(&j, ",\"dataHash\":\"%s\"}", data_hash);
    if (!rc) cm_sha256_hex(j.data, j.len, hash);
    cm_buf_release(&j);
    return rc;
}

cm_rc cm_index_media_base64(buf *out, const void *data, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *d = data;
    if (cm_buf_grow(out, (n + 2) / 3 * 4 + 1)) return CM_ENOMEM;
    char *o = out->data + out->len;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)d[i] << 16 | (uint32_t)d[i + 1] << 8 | d[i + 2];
        *o++ = tab[v >> 18];
        *o++ = tab[(v >> 12) & 63];
        *o++ = tab[(v >> 6) & 63];
        *o++ = tab[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)d[i] << 16 | (i + 1 < n ? (uint32_t)d[i + 1] << 8 : 0);
        *o++ = tab[v >> 18];
        *o++ = tab[(v >> 12) & 63];
        *o++ = i + 1 < n ? tab[(v >> 6) & 63] : '=';
        *o++ = '=';
    }
    out->len = (size_t)(o - out->data);
    out->data[out->len] = 0;
    return CM_OK;
}
