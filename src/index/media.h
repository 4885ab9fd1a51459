/*
 * media.h — the image and audio files of multimodal memory
 * (memorySearch.multimodal, Gemini Embedding 2): which names are media,
 * their MIME type (the bytes' signature first, the extension otherwise, as
 * QuantumClaw 2026.3.22 detects it), and the one chunk a media file becomes:
 * lines 1-1, text "Image file: <path>" or "Audio file: <path>" (what keyword
 * search and snippets see), hash over path, label, MIME type and the bytes'
 * sha256. Only files under extraPaths are media; the memory roots stay
 * Markdown-only.
 */
#ifndef CM_MEDIA_H
#define CM_MEDIA_H

#include "../base/buf.h"
#include "../base/sha256.h"
#include "../config/config.h"

/* The modality of a file name by its extension (any case): CM_MEDIA_IMAGE
 * (.jpg .jpeg .png .webp .gif .heic .heif), CM_MEDIA_AUDIO (.mp3 .wav .ogg
 * .opus .m4a .aac .flac), or 0. */
unsigned cm_index_media_kind_of_name(const char *name);

/* cm_index_media_kind_of_name when cfg's multimodal memory takes that modality, else 0. */
unsigned cm_index_media_kind(const cm_config *cfg, const char *name);

/* "image" or "audio". */
const char *cm_index_media_kind_name(unsigned kind);

/* The MIME type of a file's bytes: a known signature (PNG, JPEG, GIF, WebP,
 * HEIC/HEIF, WAV, MP3, Ogg, FLAC, M4A, AAC, and PDF, ZIP to tell them apart),
 * else the extension's type; NULL when neither says. A static string. */
const char *cm_index_media_mime(const char *name, const unsigned char *data, size_t n);

/* The chunk of a media file: its label ("Image file: <rel>") into label, and
 * hash = sha256 of the JSON {"path","contentText","mimeType","dataHash"}
 * (dataHash the bytes' sha256), as 2026.3.22 hashes it. */
cm_rc cm_index_media_chunk(unsigned kind, const char *rel, const char *mime, const void *data,
                           size_t n, buf *label, char hash[SHA256_HEX_LEN + 1]);

/* Appends data[0..n) in base64 (RFC 4648, padded). */
cm_rc cm_index_media_base64(buf *out, const void *data, size_t n);

#endif
