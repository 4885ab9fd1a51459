/*
 * web_fetch.h — the agent's `web_fetch` tool as QuantumClaw 2026.3.22 defines
 * it: an HTTP(S) GET of {url, extractMode?, maxChars?}, the page's readable
 * text as Markdown or plain text, wrapped in the external-content markers,
 * in the reference's JSON result; `tools.web.fetch.*` (enabled, maxChars,
 * maxCharsCap, maxResponseBytes, timeoutSeconds, cacheTtlMinutes,
 * maxRedirects, userAgent) with its defaults. Private, loopback, link-local
 * and internal addresses are refused for every connection, redirects
 * included (checked on the address actually connected to, so a DNS answer
 * that changes between checks cannot slip through). Readability and the
 * Firecrawl fallback are not implemented: HTML is reduced by clawmem's own
 * extractor ("extractor": "raw-html").
 */
#ifndef CM_WEB_FETCH_H
#define CM_WEB_FETCH_H

#include <jansson.h>

#include "../base/buf.h"
#include "clawmem.h"

/* tools.web.fetch, parsed once. */
typedef struct web_fetch_cfg {
    bool enabled;
    long max_chars, max_chars_cap, max_response_bytes, timeout_s, cache_ttl_ms, max_redirects;
    char user_agent[256];
} web_fetch_cfg;

/* Reads tools.web.fetch of root (may be NULL) with the reference's defaults
 * and clamps. */
void cm_web_fetch_cfg_init(web_fetch_cfg *c, const json_t *root);

/* Runs web_fetch for args; the JSON result into out, or an error message. */
cm_rc cm_tool_web_fetch(const web_fetch_cfg *c, const json_t *args, int64_t now_ms, buf *out,
                        char *err, size_t errlen);

/* Whether web_fetch may connect to the numeric address ip: not loopback,
 * private, link-local, unique-local, CGNAT, multicast, unspecified or
 * reserved (IPv4-mapped IPv6 as its IPv4). */
bool cm_web_fetch_ip_allowed(const char *ip);

/* HTML to readable text: Markdown (headings, lists, links, code) or plain
 * text; *title (may be NULL) receives the <title>. */
cm_rc cm_web_fetch_html_text(const char *html, size_t n, bool markdown, buf *out, buf *title);

/* Test hook: nonzero lets web_fetch reach loopback addresses (the tests'
 * stand-in servers). */
void cm_web_fetch_allow_loopback(int on);

/* web_fetch as the model is told of it. */
const cm_tool_def *cm_tool_web_fetch_def(void);

#endif
