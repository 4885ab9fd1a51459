/*
 * test_runtime_config.c — the runtime's typed config (runtime_config.h):
 * a bad value in messages.*, session.*, agents.*, gateway.* or channels.*
 * fails the load with the key and file:line:col; the typed values and the
 * readers' defaults are 2026.3.22's; a snapshot lives as long as a reader
 * holds it, and a reload swaps it whole.
 */
#include <jansson.h>
#include <pthread.h>

#include "../src/config/config.h"
#include "../src/gateway/channels/feel.h"
#include "../src/gateway/core/debounce.h"
#include "../src/gateway/core/queue.h"
#include "../src/gateway/core/runtime.h"
#include "../src/gateway/shaping/reply.h"
#include "test.h"

static cm_rc parse(const char *text, cm_config *cfg, char *err, size_t errlen)
{
    cm_config_args a = {NULL, NULL, NULL, "/tmp/qc-state"};
    return cm_config_parse(text, strlen(text), "qc.json", &a, NULL, cfg, err, errlen);
}

TEST(rtcfg_bad_value_fails_at_load_with_line_col)
{
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"{\n  \"messages\": {\"queue\": {\"debounceMs\": \"x\"}}\n}",
         "qc.json:2:26: messages.queue.debounceMs: expected a number, got \"x\""},
        {"{messages: {inbound: {byChannel: {telegram: -5}}}}",
         "qc.json:1:35: messages.inbound.byChannel.telegram: expected an integer of at least 0, "
         "got -5"},
        {"{messages: {queue: {mode: 'later'}}}",
         "qc.json:1:21: messages.queue.mode: expected one of "
         "steer|followup|collect|steer-backlog|steer+backlog|queue|interrupt, got \"later\""},
        {"{session: {\n dmScope: 'per-room'}}",
         "qc.json:2:2: session.dmScope: expected one of "
         "main|per-peer|per-channel-peer|per-account-channel-peer, got \"per-room\""},
        {"{session: {reset: {atHour: 24}}}",
         "qc.json:1:20: session.reset.atHour: expected an integer between 0 and 23, got 24"},
        {"{agents: {defaults: {timeoutSeconds: 1.5}}}",
         "qc.json:1:22: agents.defaults.timeoutSeconds: expected an integer, got 1.5"},
        {"{agents: {defaults: {humanDelay: {mode: 'slow'}}}}",
         "qc.json:1:35: agents.defaults.humanDelay.mode: expected one of off|natural|custom, got "
         "\"slow\""},
        {"{agents: {list: [{id: 'a', identity: {name: 7}}]}}",
         "qc.json:1:39: agents.list[0].identity.name: expected a string, got 7"},
        {"{gateway: {port: 0}}",
         "qc.json:1:12: gateway.port: expected an integer of at least 1, got 0"},
        {"{gateway: {auth: {mode: 'magic'}}}",
         "qc.json:1:19: gateway.auth.mode: expected one of none|token|password|trusted-proxy, "
         "got \"magic\""},
        {"{channels: {telegram: {dmPolicy: 'everyone'}}}",
         "qc.json:1:24: channels.telegram.dmPolicy: expected one of "
         "pairing|allowlist|open|disabled, got \"everyone\""},
        {"{channels: {telegram: {accounts: {b: {textChunkLimit: 0}}}}}",
         "qc.json:1:39: channels.telegram.accounts.b.textChunkLimit: expected an integer of at "
         "least 1, got 0"},
        {"{channels: {telegram: {allowFrom: ['1', {}]}}}",
         "qc.json:1:41: channels.telegram.allowFrom[1]: expected a string or a number, got an "
         "object"},
        {"{channels: {telegram: {streaming: 'fast'}}}",
         "qc.json:1:24: channels.telegram.streaming: expected one of off|partial|block|progress, "
         "got \"fast\""},
        {"{messages: {queue: 3}}", "qc.json:1:13: messages.queue: expected an object, got 3"},
        {"{agents: {defaults: {compaction: {memoryFlush: {softThresholdTokens: -1}}}}}",
         "qc.json:1:49: agents.defaults.compaction.memoryFlush.softThresholdTokens: expected an "
         "integer of at least 0, got -1"},
        {"{agents: {defaults: {compaction: {memoryFlush: {forceFlushTranscriptBytes: '2 "
         "parsecs'}}}}}",
         "qc.json:1:49: agents.defaults.compaction.memoryFlush.forceFlushTranscriptBytes: "
         "expected a byte size like 2mb (b, kb, mb, gb, tb), got \"2 parsecs\""},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        cm_config c;
        char err[512] = "";
        cm_rc rc = parse(cases[i].text, &c, err, sizeof err);
        if (rc == CM_OK) cm_config_release(&c);
        if (rc != CM_ECONFIG || strcmp(err, cases[i].want))
            test_fail(__FILE__, __LINE__, "case %zu: rc %d\n  got:  %s\n  want: %s", i, rc, err,
                      cases[i].want);
    }
}

TEST(rtcfg_overlay_error_names_its_own_file)
{
    cm_config c;
    char err[512] = "";
    cm_config_args a = {NULL, NULL, NULL, "/tmp/qc-state"};
    config_text m = {"{}", 2, "qc.json"},
                o = {"{\n\n session: {typingMode: 'always'}}", 35, "clawmem.json"};
    o.n = strlen(o.text);
    EXPECT_INT(cm_config_parse_files(&m, &o, &a, NULL, &c, err, sizeof err), CM_ECONFIG);
    EXPECT_CONTAINS(err, "clawmem.json:3:12: session.typingMode: expected one of");
}

TEST(rtcfg_typed_values_and_account_inheritance)
{
    cm_config c;
    char err[512] = "";
    const char *text =
        "{messages: {responsePrefix: '[{model}]', ackReactionScope: 'all',\n"
        "  queue: {mode: 'steer', debounceMs: 250, cap: 5, drop: 'old',\n"
        "          byChannel: {telegram: 'interrupt'}, debounceMsByChannel: {telegram: 0}},\n"
        "  inbound: {debounceMs: 900, byChannel: {telegram: 1200}}},\n"
        " session: {dmScope: 'per-channel-peer', scope: 'global', typingMode: 'never'},\n"
        " agents: {defaults: {model: {primary: 'openai/gpt-x'}, timeoutSeconds: 60,\n"
        "          humanDelay: {mode: 'custom', minMs: 10, maxMs: 20}},\n"
        "          list: [{id: 'ops', default: true, identity: {name: 'Ops', emoji: 'E'},\n"
        "                  model: 'anthropic/claude-y'}]},\n"
        " gateway: {port: 18789, bind: 'loopback', auth: {mode: 'token'}},\n"
        " channels: {telegram: {replyToMode: 'first', textChunkLimit: 3000, dmPolicy: 'open',\n"
        "   allowFrom: ['*'], streaming: true,\n"
        "   accounts: {b: {replyToMode: 'all', streaming: 'off'}}}}}";
    EXPECT_INT(parse(text, &c, err, sizeof err), CM_OK);
    const cm_rtcfg *r = c.rt;
    EXPECT(r != NULL);
    EXPECT_STR(r->messages.response_prefix, "[{model}]");
    EXPECT_INT(r->messages.ack_reaction_scope, CM_RT_ACK_ALL);
    EXPECT_INT(r->messages.queue_mode, CM_RT_Q_STEER);
    EXPECT_INT(r->messages.queue_debounce_ms, 250);
    EXPECT_INT(r->messages.queue_cap, 5);
    EXPECT_INT(r->messages.queue_drop, CM_RT_DROP_OLD);
    int64_t v = -1;
    EXPECT(cm_rt_map_get(&r->messages.queue_by_channel, "telegram", &v));
    EXPECT_INT(v, CM_RT_Q_INTERRUPT);
    EXPECT(cm_rt_map_get(&r->messages.inbound_by_channel, "telegram", &v));
    EXPECT_INT(v, 1200);
    EXPECT_INT(r->session.dm_scope, 2);
    EXPECT_INT(r->session.scope, CM_RT_SCOPE_GLOBAL);
    EXPECT_STR(r->defaults.model, "openai/gpt-x");
    EXPECT_INT(r->defaults.timeout_s, 60);
    EXPECT_INT(r->defaults.human_delay_mode, 2);
    EXPECT_STR(cm_rtcfg_model(r, "OPS"), "anthropic/claude-y");
    EXPECT_STR(cm_rtcfg_model(r, "other"), "openai/gpt-x");
    EXPECT_INT(cm_rtcfg_agent(r, "ops")->is_default, 1);
    EXPECT_STR(cm_rtcfg_agent(r, "ops")->emoji, "E");
    EXPECT_INT(r->gateway.port, 18789);
    EXPECT_INT(r->gateway.bind, 2);
    const cm_rt_chan *tg = cm_rtcfg_chan(r, "telegram", NULL);
    EXPECT_INT(tg->reply_to_mode, 1);
    EXPECT_INT(tg->text_chunk_limit, 3000);
    EXPECT_INT(tg->streaming, CM_RT_STREAM_TRUE);
    EXPECT(json_is_array(tg->allow_from));
    const cm_rt_chan *b = cm_rtcfg_chan(r, "telegram", "b");
    EXPECT_INT(b->reply_to_mode, 2);             /* its own */
    EXPECT_INT(b->text_chunk_limit, 3000);       /* the channel level's */
    EXPECT_INT(b->dm_policy, CM_RT_POLICY_OPEN); /* the channel level's */
    EXPECT_INT(b->streaming, CM_RT_STREAM_OFF);
    EXPECT_INT(cm_rtcfg_chan(r, "slack", "x")->reply_to_mode, -1);
    cm_config_release(&c);
    /* a channel clawmem does not run keeps QuantumClaw's own shape */
    EXPECT_INT(parse("{channels: {slack: {streamMode: 'append', dmPolicy: 'open'}}}", &c, err,
                     sizeof err),
               CM_OK);
    cm_config_release(&c);
}

/* What the readers make of an empty config: 2026.3.22's defaults
 * (auto-reply/reply/queue, inbound-debounce, typing, response-prefix,
 * routing/session-key, the telegram account schema). */
TEST(rtcfg_defaults_are_2026_3_22s)
{
    cm_config c;
    char err[512] = "";
    EXPECT_INT(parse("{}", &c, err, sizeof err), CM_OK);
    const cm_rtcfg *r = c.rt;
    gw_queue_settings q;
    cm_gw_queue_settings_resolve(r, "telegram", NULL, &q);
    EXPECT_INT(q.mode, GW_QMODE_COLLECT);
    EXPECT_INT(q.debounce_ms, 1000);
    EXPECT_INT(q.cap, 20);
    EXPECT_INT(q.drop, GW_QDROP_SUMMARIZE);
    /* clawmem's deliberate 2000 (debounce.h: 2026.3.22's docs; its code says 0) */
    EXPECT_INT(cm_gw_debounce_ms(r, "telegram"), GW_DEBOUNCE_MS_DEFAULT);
    int64_t iv = 0;
    EXPECT_INT(cm_gw_typing_mode(r, false, false, &iv), GW_TYPING_INSTANT);
    EXPECT_INT(iv, 6000);
    EXPECT_INT(cm_gw_typing_mode(r, true, false, NULL), GW_TYPING_MESSAGE);
    EXPECT_INT(cm_gw_reply_to_mode_of(r, "telegram", NULL), GW_REPLYTO_OFF);
    EXPECT_INT(cm_gw_reply_text_limit(r, "telegram", NULL, 0), 4000);
    EXPECT(!cm_gw_reply_block_streaming(r, "telegram", NULL));
    EXPECT(cm_gw_preview_enabled(r, "telegram", NULL));
    buf b = BUF_INIT;
    EXPECT_INT(cm_gw_reply_prefix(&b, r, "main", "telegram", NULL, "x/y"), CM_OK);
    EXPECT_INT(b.len, 0);
    EXPECT_INT(cm_gw_route_session(&b, r, "main", "telegram", NULL, "42", NULL, false), CM_OK);
    EXPECT_STR(b.data, "agent:main:main");
    cm_buf_release(&b);
    EXPECT_INT(r->gateway.port, CM_RT_UNSET);
    cm_config_release(&c);
}

/* ---- reload: the swap under readers ----------------------------------------- */

static cm_rc no_run(void *ctx, const gw_run_req *rq, gw_run_res *out, char *err, size_t errlen)
{
    (void)ctx, (void)rq, (void)out, (void)err, (void)errlen;
    return CM_OK;
}

/* A snapshot whose queue.cap and queue.debounceMs belong together (k, 10 k). */
static cm_rtcfg *pair_cfg(int k)
{
    json_t *j = json_pack("{s:{s:{s:i,s:i}}}", "messages", "queue", "cap", k, "debounceMs", 10 * k);
    cm_rtcfg *c = NULL;
    char err[256];
    cm_rtcfg_from_json(j, &c, err, sizeof err);
    json_decref(j);
    return c;
}

typedef struct swap_world {
    gw_runtime *rt;
    int torn, reads;
} swap_world;

static void *reader(void *arg)
{
    swap_world *s = arg;
    for (int i = 0; i < 20000; i++) {
        cm_rtcfg *c = cm_gw_runtime_config(s->rt);
        int64_t cap = c->messages.queue_cap, deb = c->messages.queue_debounce_ms;
        if (deb != 10 * cap) __atomic_fetch_add(&s->torn, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&s->reads, 1, __ATOMIC_RELAXED);
        cm_rtcfg_unref(c);
    }
    return NULL;
}

/* Four readers take and drop the snapshot while 2,000 reloads swap it: each
 * reader sees one whole snapshot (never a cap of one and a debounce of
 * another), and every replaced snapshot is freed by its last reader (ASan:
 * no use after free, no leak). */
TEST(rtcfg_reload_swaps_whole_snapshots_under_readers)
{
    char *state = tmp_dir();
    cm_rtcfg *first = pair_cfg(1);
    EXPECT(first);
    gw_runtime_opts o = {NULL, state, no_run, NULL, NULL, NULL, 1, true, 0, NULL, first};
    swap_world s = {NULL, 0, 0};
    char err[256];
    cm_rc rc = cm_gw_runtime_new(&o, &s.rt, err, sizeof err);
    cm_rtcfg_unref(first);
    EXPECT_INT(rc, CM_OK);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, reader, &s);
    for (int k = 2; k < 2002; k++) {
        cm_rtcfg *c = pair_cfg(k);
        if (c) cm_gw_runtime_reload(s.rt, c);
        cm_rtcfg_unref(c);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    cm_rtcfg *last = cm_gw_runtime_config(s.rt);
    int64_t cap = last->messages.queue_cap;
    int refs = __atomic_load_n(&last->refs, __ATOMIC_RELAXED);
    cm_rtcfg_unref(last);
    cm_gw_runtime_free(s.rt);
    EXPECT_INT(s.torn, 0);
    EXPECT_INT(s.reads, 80000);
    EXPECT_INT(cap, 2001);
    EXPECT_INT(refs, 2); /* the runtime's and ours: nothing else kept it */
}
