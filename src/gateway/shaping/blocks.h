/*
 * blocks.h — the gateway's outbound text: splitting a reply into channel-sized
 * pieces (blockStreamingChunk), merging streamed pieces before they are sent
 * (blockStreamingCoalesce) and the two stream boundaries (blockStreamingBreak).
 * Pure text logic: no I/O, no threads, time passed in by the caller.
 *
 * Sizes are counted as QuantumClaw counts them: UTF-16 code units (a JS
 * string's length), so an emoji outside the BMP counts 2 and a CJK character
 * 1. A piece never ends inside a UTF-8 sequence nor between the two halves of
 * a surrogate pair. A fenced code block (``` or ~~~, up to 3 spaces of
 * indent) is only split when it alone exceeds the limit; then the piece ends
 * with the closing fence line and the next begins with the opening line (info
 * string included), so every piece renders.
 */
#ifndef CM_GW_BLOCKS_H
#define CM_GW_BLOCKS_H

#include "../../base/buf.h"

/* agents.defaults.blockStreamingChunk and blockStreamingCoalesce defaults. */
#define GW_CHUNK_MIN_DEFAULT        800
#define GW_CHUNK_MAX_DEFAULT        1200
#define GW_COALESCE_IDLE_MS_DEFAULT 1000
#define GW_COALESCE_IDLE_MS_MAX     5000
/* Coalesce minChars for Signal, Slack and Discord unless configured. */
#define GW_COALESCE_MIN_CHATTY 1500
/* textChunkLimit of a channel that does not define one. */
#define GW_TEXT_LIMIT_DEFAULT 4000
/* Telegram's sendMessage limit: no configured textChunkLimit goes above it. */
#define GW_TELEGRAM_HARD_LIMIT 4096

typedef enum {
    GW_BREAK_PARAGRAPH = 0, /* default */
    GW_BREAK_NEWLINE,
    GW_BREAK_SENTENCE,
} gw_break_pref;

/* Parses "paragraph" | "newline" | "sentence"; anything else is paragraph,
 * as 2026.3.22 reads the config. */
gw_break_pref cm_gw_break_pref_parse(const char *s);

/* The channel's default textChunkLimit (telegram 4000, discord 2000,
 * line 5000, slack/signal/whatsapp/imessage/… 4000; unknown → 4000). */
int cm_gw_channel_text_limit(const char *channel);

/* A configured textChunkLimit (<= 0: none) for channel, resolved to the
 * limit in force: the default when unset, capped at 4096 for Telegram. */
int cm_gw_channel_resolve_limit(const char *channel, int configured);

/* UTF-16 code units in s[0..n) (invalid bytes count 1, as U+FFFD). */
size_t cm_gw_u16len(const char *s, size_t n);

/* A list of pieces, each NUL-terminated and owned by the list. */
typedef struct gw_pieces {
    char **v;
    size_t *len;
    size_t n, cap;
} gw_pieces;

void cm_gw_pieces_init(gw_pieces *p);
void cm_gw_pieces_release(gw_pieces *p);
cm_rc cm_gw_pieces_add(gw_pieces *p, const char *s, size_t n);

/* The block chunker (EmbeddedBlockChunker): text is appended as the model
 * streams it; drain() moves complete pieces into out. Without force it emits
 * only when the buffer holds >= min units and a break (paragraph → newline →
 * sentence → whitespace, from the preference down; never inside a fence)
 * falls between min and max, or the buffer reached max (then a hard break).
 * With force everything buffered leaves, in pieces of at most max units.
 * Leading newlines of a piece and the one whitespace character a soft break
 * falls on are dropped; whitespace-only pieces are not emitted. Without
 * force, a UTF-8 sequence cut short at the end of the buffer waits for the
 * rest of it, so deltas may split characters anywhere. */
typedef struct gw_chunker {
    int min, max;
    gw_break_pref pref;
    /* chunkMode "newline": once min units are buffered, every paragraph
     * break (a blank line, outside fences) that fits max ends a piece. */
    bool flush_on_paragraph;
    buf text;
} gw_chunker;

/* min and max are clamped as 2026.3.22 does (min >= 1, max >= min). */
void cm_gw_chunker_init(gw_chunker *c, int min, int max, gw_break_pref pref);
void cm_gw_chunker_release(gw_chunker *c);
cm_rc cm_gw_chunker_append(gw_chunker *c, const char *s, size_t n);
cm_rc cm_gw_chunker_drain(gw_chunker *c, bool force, gw_pieces *out);
bool cm_gw_chunker_has_buffered(const gw_chunker *c);

/* One-shot: text split into pieces of at most max units, preferring pref
 * (the channel limit for a final reply). */
cm_rc cm_gw_chunk_text(const char *s, size_t n, int max, gw_break_pref pref, gw_pieces *out);

/* blockStreamingCoalesce: pieces from the chunker are merged, joined by the
 * joiner of the break preference ("\n\n", "\n", " "), and sent when the
 * stream has been idle idle_ms, when the merge reaches max, or at the end.
 * Idle flushes wait while less than min units are buffered (the end sends
 * them anyway). A piece that cannot join without exceeding max flushes the
 * buffer first; a piece of max units or more goes out alone. */
typedef struct gw_coalescer {
    int min, max, idle_ms;
    const char *joiner;
    buf text;
    int64_t deadline; /* when an idle flush is due; 0 = none */
} gw_coalescer;

void cm_gw_coalescer_init(gw_coalescer *q, int min, int max, int idle_ms, gw_break_pref pref);
void cm_gw_coalescer_release(gw_coalescer *q);
/* Adds a piece received at now (ms); pieces due at once go to out. */
cm_rc cm_gw_coalescer_push(gw_coalescer *q, const char *s, size_t n, int64_t now, gw_pieces *out);
/* The idle flush: sends the buffer when now >= its deadline and it holds at
 * least min units; otherwise the deadline moves idle_ms on. */
cm_rc cm_gw_coalescer_due(gw_coalescer *q, int64_t now, gw_pieces *out);
/* Sends what is buffered (end of the reply). */
cm_rc cm_gw_coalescer_end(gw_coalescer *q, gw_pieces *out);

/* blockStreamingBreak. */
typedef enum { GW_STREAM_TEXT_END = 0, GW_STREAM_MESSAGE_END } gw_stream_break;

/* Block streaming of one reply: the chunker feeding the coalescer. With
 * text_end, pieces leave as the chunker emits them and everything buffered
 * is flushed at each text_end; with message_end nothing leaves before the
 * message ends (then possibly several pieces when it is long). For a
 * channel with chunkMode "newline", set chunker.flush_on_paragraph after
 * init. */
typedef struct gw_stream {
    gw_stream_break brk;
    gw_chunker chunker;
    gw_coalescer coalescer;
} gw_stream;

/* chunk_min/chunk_max/pref as blockStreamingChunk (already clamped to the
 * channel limit by the caller), co_min/co_max/idle_ms as
 * blockStreamingCoalesce (co_max is capped at chunk_max). */
void cm_gw_stream_init(gw_stream *st, gw_stream_break brk, int chunk_min, int chunk_max,
                       gw_break_pref pref, int co_min, int co_max, int idle_ms);
void cm_gw_stream_release(gw_stream *st);
cm_rc cm_gw_stream_delta(gw_stream *st, const char *s, size_t n, int64_t now, gw_pieces *out);
cm_rc cm_gw_stream_text_end(gw_stream *st, int64_t now, gw_pieces *out);
cm_rc cm_gw_stream_due(gw_stream *st, int64_t now, gw_pieces *out);
cm_rc cm_gw_stream_message_end(gw_stream *st, int64_t now, gw_pieces *out);

/* The block streaming settings in force for a channel, resolved as
 * 2026.3.22 does: chunk max = requested (1200) capped at the channel's text
 * limit, chunk min = requested (800) capped at that max; coalesce min =
 * requested, else the channel's default (1500 for Discord, Slack, Signal,
 * Mattermost), else the chunk min; coalesce max = requested, else the text
 * limit, capped at the text limit and at the chunk max; coalesce min capped
 * at that; idle = requested, else 1000, within 0..5000 ms. Requested values
 * <= 0 (idle < 0) mean unset. */
typedef struct gw_stream_cfg {
    int chunk_min, chunk_max;
    gw_break_pref pref;
    int co_min, co_max, idle_ms;
} gw_stream_cfg;

void cm_gw_stream_cfg_resolve(gw_stream_cfg *out, const char *channel, int text_limit,
                              const gw_stream_cfg *requested);

/* The channel's own coalesce minChars default, or 0 when it has none. */
int cm_gw_coalesce_min_default(const char *channel);

/* humanDelay: the pause before a block reply after the first. */
typedef enum { GW_DELAY_OFF = 0, GW_DELAY_NATURAL, GW_DELAY_CUSTOM } gw_delay_mode;
#define GW_HUMAN_DELAY_MIN_MS 800
#define GW_HUMAN_DELAY_MAX_MS 2500

/* Milliseconds to wait: 0 when off; uniform in [min, max] from rnd (a
 * uniformly random 32-bit value the caller draws) — natural uses
 * 800..2500, custom min_ms/max_ms (<= 0: those defaults); min when max <= min. */
int cm_gw_human_delay_ms(gw_delay_mode mode, int min_ms, int max_ms, uint32_t rnd);

#endif
