/*
 * flush.h — when the automatic memory flush is due (seed 001 "Automatic
 * memory flush"), with QuantumClaw 2026.3.22's rules:
 *   - settings from agents.defaults.compaction (memoryFlush.enabled true,
 *     softThresholdTokens 4000, forceFlushTranscriptBytes 2 MiB — a number
 *     or "2mb" — reserveTokensFloor 20000, the two prompts);
 *   - the threshold contextWindow − reserveTokensFloor − softThresholdTokens;
 *   - the token count: the larger of the fresh persisted totalTokens and the
 *     last non-zero usage in the transcript (input + cache), plus that turn's
 *     output, plus an estimate of what no usage has counted yet: the new
 *     prompt and the user messages and tool outputs written after that
 *     usage (clawmem counts these even when no usage is known, where
 *     QuantumClaw adds the prompt only to a known count);
 *   - or a transcript of forceFlushTranscriptBytes or more;
 *   - once per compaction cycle (memoryFlushCompactionCount), and not again
 *     for the same context (memoryFlushContextHash over the transcript's
 *     tail and the new prompt);
 *   - never when the workspace is not writable or for a heartbeat.
 * The decision is pure given its inputs; the caller runs the flush turn.
 */
#ifndef CM_FLUSH_H
#define CM_FLUSH_H

#include <jansson.h>

#include "../base/buf.h"

typedef struct flush_settings {
    bool enabled;
    int64_t soft_threshold, reserve_floor, force_bytes;
    /* compaction (pi-coding-agent's settings as QuantumClaw sets them):
     * reserve_tokens = max(compaction.reserveTokens, default 16384,
     * reserveTokensFloor) — compact after a turn whose context passed
     * contextWindow − reserve_tokens; keep_recent = keepRecentTokens
     * (default 20000), the recent tokens a compaction keeps unsummarised. */
    int64_t reserve_tokens, keep_recent;
    char *prompt, *system_prompt; /* with the safety hints and NO_REPLY */
} flush_settings;

/* From the config root (borrowed; may be NULL). */
cm_rc cm_flush_settings_init(flush_settings *s, const json_t *config, char *err, size_t errlen);
void cm_flush_settings_release(flush_settings *s);

/* The flush prompt for a run at now_ms: "YYYY-MM-DD" replaced by the date in
 * timezone tz (an IANA name, NULL: UTC), and a "Current time:" line. */
cm_rc cm_flush_prompt_for(const char *prompt, int64_t now_ms, const char *tz, buf *out);
/* "memory/<date>.md" for now_ms in tz. */
cm_rc cm_flush_target_path(int64_t now_ms, const char *tz, buf *out);

/* Whether text is a flush prompt as cm_flush_prompt_for makes them: every
 * one carries the first safety hint with its date filled in. (A user could
 * type it too; only for showing the flush turns, never for a decision.) */
bool cm_flush_is_prompt(const char *text);

/* QuantumClaw's memoryFlushContextHash: sha256 of "<count>:" and the last
 * three user/assistant messages as "[i:role]content" joined by NUL
 * (content JSON-encoded unless it is a string), 16 hex digits. messages:
 * an array of {role, content}. */
void cm_flush_context_hash(const json_t *messages, char out[17]);

/* The last max {role, content} messages in the transcript's final 64 KiB
 * (a new array). */
json_t *cm_flush_transcript_tail(const char *path, size_t max);

typedef struct flush_input {
    const json_t *entry;      /* the session's sessions.json entry (NULL: no flush) */
    const char *transcript;   /* its transcript path, or NULL */
    const char *prompt;       /* the user's new prompt, or NULL */
    int64_t context_window;   /* the model's; 0: 200000 */
    bool writable, heartbeat; /* workspace access "rw"; a heartbeat run */
} flush_input;

typedef struct flush_decision {
    bool due;
    const char *why;           /* a short reason, either way */
    int64_t tokens, threshold; /* the count used and the trigger */
    int64_t transcript_bytes;  /* -1 when not read */
    char context_hash[17];     /* of the tail + prompt, "" when none */
} flush_decision;

void cm_flush_decide(const flush_settings *s, const flush_input *in, flush_decision *out);

/* Whether a reply is the silent token NO_REPLY (whitespace around it and
 * case ignored), so nothing is delivered. */
bool cm_flush_is_silent(const char *reply);

#endif
