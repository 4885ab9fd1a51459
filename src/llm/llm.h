/*
 * llm.h — chat clients: one request/response model for the agent layer,
 * whatever the wire format — OpenAI-compatible Chat Completions
 * (`openai-completions`) and Anthropic Messages (`anthropic-messages`), as
 * QuantumClaw 2026.3.22 names them in `models.providers.<id>.api`. Both
 * stream (server-sent events) or not, carry tool definitions and tool calls,
 * and report token usage with pi-coding-agent's field meanings.
 *
 * A failed call says why in an llm_error: the HTTP status, the failure class
 * (auth.h) that decides cooldowns and fallback, Retry-After, and whether
 * another try may succeed. Error text from a server is cleaned (control
 * characters dropped, the request's own key removed, length capped) before
 * it reaches a message.
 */
#ifndef CM_LLM_H
#define CM_LLM_H

#include <jansson.h>

#include "../auth/auth.h"
#include "../base/buf.h"
#include "../config/config.h"

typedef enum llm_api { LLM_API_OPENAI, LLM_API_ANTHROPIC, LLM_API_N } llm_api;

/* "openai-completions", "anthropic-messages". */
const char *cm_llm_api_name(llm_api a);
/* The api named s, or -1 (also for the wire formats clawmem lacks). */
int cm_llm_api_parse(const char *s);

typedef struct llm_tool_call {
    char *id, *name;
    char *arguments; /* a JSON object as text ("{}" when the model gave none) */
} llm_tool_call;

typedef enum llm_role { LLM_USER, LLM_ASSISTANT, LLM_TOOL } llm_role;

/* One thinking block of an answer, as pi-ai keeps it: the text and the
 * signature that lets it go back to the API. Anthropic: its signature; a
 * redacted block has the text "[Reasoning redacted]" and its opaque data as
 * the signature. OpenAI-compatible: the reasoning member it came in
 * ("reasoning_content", "reasoning" or "reasoning_text"). In an
 * llm_response the strings are owned; in an llm_message, borrowed. */
typedef struct llm_thinking {
    char *text, *signature;
    bool redacted;
} llm_thinking;

/* One message of the conversation (borrowed strings). An assistant message
 * may carry tool calls; a tool message answers the call tool_call_id. */
typedef struct llm_message {
    llm_role role;
    const char *text;
    const llm_tool_call *calls;
    size_t ncalls;
    const char *tool_call_id, *tool_name;
    bool is_error; /* a tool result that reports a failure */
    /* An assistant message's thinking blocks and the model ("provider/model"
     * or the bare id) that wrote it, with its provider and api
     * ("anthropic-messages", "openai-completions"); NULL when unknown (then
     * not compared). Each format sends them back as pi-ai's
     * transformMessages rules: see cm_llm_same_model. */
    const llm_thinking *thinking;
    size_t nthinking;
    const char *model;
    const char *provider, *api;
} llm_message;

typedef struct llm_tool_def {
    const char *name, *description;
    const char *parameters; /* JSON Schema of the arguments, as text */
} llm_tool_def;

/* Streamed text as it arrives (not called for tool-call arguments). */
typedef void (*llm_delta_fn)(void *ctx, const char *text, size_t n);

typedef struct llm_request {
    const char *model; /* the provider's own id, without "provider/" */
    const char *system;
    const llm_message *messages;
    size_t n;
    const llm_tool_def *tools;
    size_t ntools;
    /* The answer's token limit; 0: min(model_max_tokens, 32000) as pi-ai's
     * streamSimple (none for OpenAI-compatible when that is 0 too; 4096 for
     * Anthropic, which requires one). openai-completions sends it as
     * max_completion_tokens, or as max_tokens with max_tokens_field. */
    int max_tokens;
    bool stream;
    /* The model's reasoning as it streams (Anthropic thinking deltas,
     * OpenAI-compatible reasoning_content / reasoning deltas); may be NULL. */
    llm_delta_fn on_reasoning;
    void *reasoning_ctx;
    /* Polled while the request runs (with every body chunk and at least once
     * a second); true stops it: cm_llm_chat fails with CM_ECANCELED, and the
     * runner tries no other profile or model. May be NULL. */
    bool (*cancelled)(void *ctx);
    void *cancel_ctx;
    /* The thinking level asked of each model tried: effort returns the
     * OpenAI-style reasoning effort ("minimal", "low", "medium", "high") for
     * a "provider/model", or NULL for none; may be NULL. cm_llm_run sets
     * reasoning_effort per attempt from it (none where the model's
     * compat.supportsReasoningEffort is false, and on xai and zai), and
     * the openai-completions body carries it as reasoning_effort, the
     * anthropic-messages body as thinking (a level, "xhigh" included). */
    const char *(*effort)(void *ctx, const char *model);
    void *effort_ctx;
    const char *reasoning_effort;
    /* The model's maxTokens set by cm_llm_run per attempt for a model
     * listed in models.providers.<p>.models[] (its maxTokens, else
     * min(8192, contextWindow), at most contextWindow: QuantumClaw's config
     * defaults); 0 when not listed. With max_tokens 0 the anthropic-messages
     * body sends min(this, 32000) (4096 when 0), as pi-ai's streamSimple;
     * it turns reasoning_effort into thinking: adaptive with an effort on
     * Opus/Sonnet 4.6, else a token budget added to max_tokens (capped by
     * this), as pi-ai's streamSimpleAnthropic does. */
    int model_max_tokens;
    /* The provider this attempt goes to (set by cm_llm_run per attempt;
     * NULL when unknown): with model and the format's api, what
     * cm_llm_same_model compares. */
    const char *provider;
    /* Set by cm_llm_run per attempt: the model takes max_tokens rather than
     * max_completion_tokens (pi-ai's compat.maxTokensField: "max_tokens" for
     * a chutes.ai baseUrl, or as the model's compat says). */
    bool max_tokens_field;
    /* Set by cm_llm_run per attempt (pi-ai's compat.supportsUsageInStreaming
     * false and compat.supportsStore, as the runner's stream_compat_for
     * decides them): an openai-completions request leaves out
     * stream_options {include_usage: true}, and says "store": false. */
    bool no_stream_usage;
    bool store_false;
} llm_request;

/* Whether assistant message m was written by the model rq goes to through
 * api, as pi-ai's transformMessages decides it (provider, api and model id
 * equal; a field unknown on either side is not compared; m->model may be
 * "provider/model"). That model's thinking goes back as thinking; another
 * model's as plain text (blank or redacted thinking: not at all). */
bool cm_llm_same_model(const llm_message *m, const llm_request *rq, llm_api api);

/* Token counts as pi-coding-agent records them: input excludes cached input. */
typedef struct llm_usage {
    int64_t input, output, cache_read, cache_write, total;
} llm_usage;

/* One content block of an answer, in arrival order: the text (one block,
 * where the first text came), thinking[index] or calls[index]. */
typedef enum { LLM_BLOCK_TEXT, LLM_BLOCK_THINKING, LLM_BLOCK_CALL } llm_block_kind;
typedef struct llm_block {
    llm_block_kind kind;
    size_t index;
} llm_block;

typedef struct llm_response {
    buf text;
    llm_tool_call *calls;
    size_t ncalls;
    char stop_reason[16]; /* "stop", "length", "toolUse", "error" */
    llm_usage usage;
    char response_id[128];
    /* The model's reasoning text, apart from the answer: Anthropic thinking
     * blocks, or an OpenAI-compatible message's reasoning (the first of
     * reasoning_content, reasoning, reasoning_text that is not empty, per
     * delta). Empty when the model gave none. */
    buf reasoning;
    /* Thinking blocks with their signatures, in answer order: Anthropic's,
     * or an OpenAI-compatible answer's runs of reasoning (a run ends where
     * text or a tool call comes in between, as pi-ai's blocks do). */
    llm_thinking *thinking;
    size_t nthinking;
    /* The blocks in the order the answer brought them (pi-ai's content
     * order): each thinking block and tool call as it was opened, the text
     * where its first byte came. A block not listed (a whole answer's text
     * and calls) goes after them: thinking, then text, then calls. */
    llm_block *order;
    size_t norder;
} llm_response;

void cm_llm_response_release(llm_response *r);

typedef struct llm_endpoint {
    llm_api api;
    const char *base_url;      /* e.g. https://api.openai.com/v1, https://api.anthropic.com */
    const char *api_key;       /* the secret sent; may be NULL (a local server) */
    bool bearer;               /* api_key is an OAuth access or bearer token */
    const cm_strlist *headers; /* extra "Name: value" (models.providers.<id>.headers) */
    long timeout_ms;           /* the whole request; 0: 10 minutes */
    long stall_ms;             /* no byte for this long fails the request; 0: 90 s */
} llm_endpoint;

typedef struct llm_error {
    long status;           /* HTTP status; 0 when none came */
    auth_reason reason;    /* failure class; AUTH_R_NONE for a plain failure */
    long retry_after_ms;   /* -1 when the server gave none */
    bool retryable;        /* network failure, cut stream, 429, 5xx */
    bool context_overflow; /* the prompt exceeds the model's context: compact, then retry */
} llm_error;

/* Sends one request and fills out (released by the caller, also on
 * failure). A stream cut before its end, an unreadable answer or an error
 * event in the stream fail with e->retryable set. Thread-safe. */
cm_rc cm_llm_chat(const llm_endpoint *ep, const llm_request *rq, llm_delta_fn on_delta, void *ctx,
                  llm_response *out, llm_error *e, char *err, size_t errlen);

/* Reads an answer already received (an event stream, or a whole JSON
 * answer) as cm_llm_chat would; for tests and fuzzing. */
cm_rc cm_llm_parse(llm_api api, bool stream, const char *data, size_t n, llm_response *out,
                   char *err, size_t errlen);

/* ---- the wire formats (openai.c, anthropic.c), used by chat.c ---- */

/* The state of one answer being assembled from stream events. */
typedef struct llm_stream {
    llm_response *out;
    llm_delta_fn on_delta;
    void *ctx;
    llm_delta_fn on_reasoning; /* the request's */
    void *reasoning_ctx;
    buf *args;       /* per tool call, the arguments being streamed */
    int *block_call; /* Anthropic: content block index → call index (-1) */
    int *block_think; /* Anthropic: content block index → thinking index (-1) */
    size_t nblocks;
    bool done;       /* the format's end marker was seen */
    /* OpenAI-compatible: what the last delta streamed (openai.c's OA_*,
     * pi-ai's current block). */
    int oa_block;
    /* cm_llm_thinking_append's: the thinking block last appended to (its
     * index + 1; 0: none), its text length and allocation. */
    size_t think_at, think_len, think_cap;
    /* Bytes of text, reasoning and tool arguments kept so far; past
     * CM_CAP_LLM_STREAMED (or CM_CAP_LLM_CALLS calls) too_long is set, the
     * event fails and the request stops with stop_reason "length". */
    size_t streamed;
    bool too_long;
    char error[300]; /* an error event's text */
} llm_stream;

typedef struct llm_format {
    /* Appends the request URL to url and the auth headers to headers. */
    cm_rc (*endpoint)(const llm_endpoint *ep, const llm_request *rq, buf *url,
                      cm_strlist *headers);
    /* The request body. */
    json_t *(*body)(const llm_request *rq);
    /* One stream event; false when it cannot be read. */
    bool (*event)(llm_stream *st, const char *name, json_t *data);
    /* A whole (non-streamed) answer; false when it cannot be read. */
    bool (*whole)(llm_response *out, json_t *doc);
    /* The request body written directly as the text json_dumps(body(rq),
     * JSON_COMPACT) gives, byte for byte, without the tree; CM_EINVAL when
     * rq holds what only the tree path handles (a NULL or non-UTF-8
     * string): the caller then takes body. May be NULL (body only). */
    cm_rc (*body_text)(const llm_request *rq, buf *out);
} llm_format;

extern const llm_format cm_llm_openai_format, cm_llm_anthropic_format;

/* Shared by the formats: appends s to *p (a string or NULL; grown to fit,
 * so for short pieces), counted against st's cap when st is not NULL; false
 * on ENOMEM or past the cap. */
bool cm_llm_str_append(llm_stream *st, char **p, const char *s);
/* A new, zeroed thinking block at the end of out->thinking, listed in
 * out->order, or NULL (ENOMEM). */
llm_thinking *cm_llm_thinking_new(llm_response *out);
/* Appends n bytes of s to the text of thinking block ti of st's answer,
 * its length kept between calls (linear over a block's many pieces; the
 * budget is the caller's); false on ENOMEM. */
bool cm_llm_thinking_append(llm_stream *st, size_t ti, const char *s, size_t n);
/* Lists a block at the end of out->order; CM_ENOMEM. */
cm_rc cm_llm_order_add(llm_response *out, llm_block_kind kind, size_t index);
/* Shared by the formats: the call at index i (grown as needed, new calls
 * listed in out->order), with its argument buffer; NULL on ENOMEM or past
 * CM_CAP_LLM_CALLS (too_long). */
llm_tool_call *cm_llm_stream_call(llm_stream *st, size_t i);
/* Appends s to call i's streamed arguments (the call exists), within the
 * stream's budget. */
cm_rc cm_llm_stream_args(llm_stream *st, size_t i, const char *s);
/* Counts n more streamed bytes (kept apart from text, reasoning and
 * arguments, e.g. thinking signatures); CM_ETOOBIG and too_long past the
 * stream's cap. */
cm_rc cm_llm_stream_budget(llm_stream *st, size_t n);
/* Appends text to the answer (its first byte lists the text in
 * out->order) and passes it to the delta callback. */
cm_rc cm_llm_stream_text(llm_stream *st, const char *s, size_t n);
/* Appends text to the reasoning and passes it to the reasoning callback. */
cm_rc cm_llm_stream_reasoning(llm_stream *st, const char *s, size_t n);
/* A tool's JSON text (schema or arguments) as an object; an empty object
 * when it is not a JSON object (NULL only on ENOMEM). */
json_t *cm_llm_json_object(const char *text);
/* Appends cm_llm_json_object(text) as compact JSON text; the text of a
 * schema seen before comes from a small cache (the same tools are offered
 * every turn). Thread-safe. */
cm_rc cm_llm_json_object_text(const char *text, buf *out);

#endif
