/*
 * multimodal.h — embedding image and audio files (multimodal memory) with
 * Gemini Embedding 2: each file in a batchEmbedContents request of its own
 * whose content has two parts, the file's label as text and its bytes as
 * inline data with their MIME type, as QuantumClaw 2026.3.22 sends them.
 * Queries stay text (cm_embed_query).
 */
#ifndef CM_MULTIMODAL_H
#define CM_MULTIMODAL_H

#include "embed.h"

typedef struct embed_media_doc {
    const char *label; /* the text part: "Image file: <path>" */
    const char *mime;  /* "image/png", "audio/mpeg", ... */
    const void *data;  /* the file's bytes */
    size_t len;
    /* results */
    float *vec;     /* p->dims floats (free()), NULL when this one failed */
    bool too_large; /* refused as too large (413 or such a message): retrying will not help */
    char err[320];  /* why it failed */
} embed_media_doc;

/* Embeds docs[0..n), p->concurrency requests in flight, and fills each
 * one's results. CM_OK even when some failed (each says); CM_EINVAL when p
 * is not gemini; CM_EIO when no HTTP client can be made; CM_ENOMEM. */
cm_rc cm_embed_media(embed_provider *p, embed_media_doc *docs, size_t n, char *err, size_t errlen);

/* The request body for one document (exposed for the tests). */
cm_rc cm_embed_media_body(const embed_provider *p, const embed_media_doc *d, buf *out);

#endif
