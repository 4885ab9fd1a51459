/*
 * caps.h — the size caps, in one place: how many bytes clawmem reads from a
 * file, a server or a caller, or builds from them, before it refuses with
 * CM_ETOOBIG (or, where the header says so, cuts). Each module names the cap
 * it applies after its own job; the number lives here.
 */
#ifndef CM_CAPS_H
#define CM_CAPS_H

#include <stdint.h>

/* Files read whole. */
#define CM_CAP_CONFIG_FILE     (16u << 20)         /* quantumclaw.json, clawmem.json */
#define CM_CAP_SECRET_FILE     (1u << 20)          /* a file secret provider, by default */
#define CM_CAP_SECRET_FILE_MAX (20u << 20)         /* ... and at most (maxBytes) */
#define CM_CAP_AUTH_FILE       (16u << 20)         /* auth-profiles.json */
#define CM_CAP_SESSIONS_FILE   (256u << 20)        /* sessions.json */
#define CM_CAP_PAIRING_FILE    (4u << 20)          /* a pairing or allow-from store */
#define CM_CAP_TRANSCRIPT      (512u << 20)        /* a transcript an agent turn reads */
#define CM_CAP_TRANSCRIPT_TAIL (16u << 20)         /* the longest last line looked back over */
#define CM_CAP_ZONE_FILE       (1u << 20)          /* a TZif file under /usr/share/zoneinfo */
#define CM_CAP_MEMORY_FILE     ((int64_t)64 << 20) /* a memory file: larger ones are skipped */

/* Servers. */
#define CM_CAP_LLM_ANSWER     (32u << 20) /* a whole model answer or one stream event */
#define CM_CAP_LLM_STREAMED   (16u << 20) /* a streamed answer's text + reasoning + tool arguments */
#define CM_CAP_LLM_CALLS      256         /* tool calls in one answer */
#define CM_CAP_LLM_ERROR_BODY (64u << 10) /* what is kept of a model's error answer */
#define CM_CAP_OAUTH_ANSWER   (1u << 20)  /* a token endpoint's answer */
#define CM_CAP_SSE_EVENT      (4u << 20)  /* an event stream's line or data, by default */
#define CM_CAP_DOWNLOAD_ERROR 4096        /* what is kept of a download's error page */

/* Callers and tools. */
#define CM_CAP_QUERY       4096         /* a search query (cut at a character) */
#define CM_CAP_TOOL_GET    (1u << 20)   /* memory_get's text (cut at a line end) */
#define CM_CAP_TOOL_WRITE  (64u << 10)  /* a memory_write note */
#define CM_CAP_TOOL_RESULT (256u << 10) /* what a tool result may hand the model */
#define CM_CAP_DEDUPE_KEY  (1u << 16)   /* a gateway dedupe key */

#endif
