/*
 * test_gateway_run_reload.c — the running gateway (gw_run_world.c) reloading
 * its config: a new snapshot swapped between turns, a hot key from the file
 * applied to the next message, a broken file keeping the old snapshot, and
 * the watcher on its thread surviving the directory made again.
 */
#include <unistd.h>

#include "../src/gateway/core/reload.h"
#include "gw_fixture.h"
#include "gw_run_world.h"

/* A reload between two turns: the run that started before it keeps the
 * snapshot it began with (its prefix), the next turn reads the new one, and
 * the old snapshot is dropped by the runtime once that run ends. */
TEST(gateway_run_reload_swaps_config_between_turns)
{
    world w;
    if (!world_start(&w, "{\"messages\":{\"responsePrefix\":\"[old]\"}}")) return;
    fake_push_chat_text(w.fs, "first answer", 50);
    fake_push_chat_text(w.fs, "second answer", 50);
    pthread_mutex_lock(&w.gate.mu);
    w.gate.closed = true;
    pthread_mutex_unlock(&w.gate.mu);
    EXPECT_INT(post_text(&w, "ivy", "i1", "one"), 202);
    cm_gw_runtime_tick(w.rt);
    EXPECT(wait_gate(&w, &w.gate.started, 1)); /* the run is under way, holding [old] */
    cm_rtcfg *held = cm_gw_runtime_config(w.rt);
    json_t *nj = json_deep_copy(w.cfg);
    json_object_set_new(json_object_get(nj, "messages"), "responsePrefix", json_string("[new]"));
    cm_rtcfg *fresh = rtc(nj);
    json_decref(nj);
    EXPECT(fresh);
    cm_gw_runtime_reload(w.rt, fresh);
    cm_rtcfg *now = cm_gw_runtime_config(w.rt);
    bool swapped = now == fresh && held != fresh;
    cm_rtcfg_unref(now);
    cm_rtcfg_unref(fresh); /* the runtime keeps its own reference */
    EXPECT(swapped);
    EXPECT_STR(held->messages.response_prefix, "[old]");
    gate_open(&w);
    EXPECT(settle(&w));
    EXPECT_INT(post_text(&w, "ivy", "i2", "two"), 202);
    EXPECT(settle(&w));
    json_t *r = t_replies(w.addr, "ivy");
    const char *t0 = json_string_value(json_object_get(json_array_get(r, 0), "text"));
    const char *t1 = json_string_value(json_object_get(json_array_get(r, 1), "text"));
    EXPECT(t0 && t1);
    EXPECT_STR(t0, "[old] first answer");
    EXPECT_STR(t1, "[new] second answer");
    json_decref(r);
    /* nothing in the runtime holds the old snapshot any more: this unref frees it */
    EXPECT_INT(__atomic_load_n(&held->refs, __ATOMIC_RELAXED), 1);
    cm_rtcfg_unref(held);
    world_stop(&w);
}

/* The reloader's log, kept for the tests. */
typedef struct logbuf {
    pthread_mutex_t mu;
    buf text;
} logbuf;

static void t_log(void *ctx, cm_log_level level, const char *msg)
{
    logbuf *l = ctx;
    pthread_mutex_lock(&l->mu);
    cm_buf_printf(&l->text, "%d %s\n", (int)level, msg);
    pthread_mutex_unlock(&l->mu);
}

/* Writes the world's config file again, with extra merged over it (or
 * text as it is when raw). */
static void t_rewrite(world *w, const char *extra, const char *raw)
{
    char *text = NULL;
    if (!raw) {
        json_t *nj = json_deep_copy(w->cfg);
        json_t *x = json_loads(extra, 0, NULL);
        json_object_update_recursive(nj, x);
        text = json_dumps(nj, JSON_INDENT(1));
        json_decref(x);
        json_decref(nj);
    }
    /* as an editor saves: a whole new file renamed over the old one */
    write_file(w->dir, "state/quantumclaw.json.new", raw ? raw : text);
    char *from = cm_strdup(path_in(w->state, "quantumclaw.json.new"));
    EXPECT_INT(rename(from, path_in(w->state, "quantumclaw.json")), 0);
    free(from);
    free(text);
}

static char *t_reply_text(world *w, const char *peer, size_t i)
{
    json_t *r = t_replies(w->addr, peer);
    const char *t = json_string_value(json_object_get(json_array_get(r, i), "text"));
    char *s = cm_strdup(t ? t : "(none)");
    json_decref(r);
    return s;
}

/* SIGHUP's path without the thread: the file rewritten, reloaded, and the
 * next message reads the new messages.responsePrefix; a gateway.* change in
 * the same write is reported as needing a restart. */
TEST(gateway_run_reload_file_applies_hot_key_to_next_message)
{
    world w;
    if (!world_start(&w, "{\"messages\":{\"responsePrefix\":\"[old]\"}}")) return;
    logbuf lb = {PTHREAD_MUTEX_INITIALIZER, BUF_INIT};
    cm_logger lg = {t_log, &lb};
    gw_reloader_opts ro = {w.rt, {NULL, w.ws, NULL, w.state}, true, {NULL, NULL}, &lg};
    gw_reloader *r = NULL;
    char err[1024];
    EXPECT_INT(cm_gw_reloader_new(&ro, &r, err, sizeof err), CM_OK);
    fake_push_chat_text(w.fs, "first answer", 50);
    fake_push_chat_text(w.fs, "second answer", 50);
    EXPECT_INT(post_text(&w, "ivy", "i1", "one"), 202);
    EXPECT(settle(&w));
    t_rewrite(&w, "{\"messages\":{\"responsePrefix\":\"[new]\"},\"gateway\":{\"port\":18999}}",
              NULL);
    EXPECT_INT(cm_gw_reloader_apply(r, err, sizeof err), CM_OK);
    EXPECT_INT(post_text(&w, "ivy", "i2", "two"), 202);
    EXPECT(settle(&w));
    char *t0 = t_reply_text(&w, "ivy", 0), *t1 = t_reply_text(&w, "ivy", 1);
    EXPECT_STR(t0, "[old] first answer");
    EXPECT_STR(t1, "[new] second answer");
    free(t0);
    free(t1);
    EXPECT_CONTAINS(lb.text.data, "config hot reload applied (messages.responsePrefix)");
    EXPECT_CONTAINS(lb.text.data, "requires gateway restart for: gateway.port");
    cm_gw_reloader_free(r);
    cm_buf_release(&lb.text);
    world_stop(&w);
}

/* A file broken on reload: the error names file:line:column, nothing
 * changes (the runtime keeps the very snapshot it had), and the next
 * message still reads the old value. */
TEST(gateway_run_reload_broken_file_keeps_old_snapshot)
{
    world w;
    if (!world_start(&w, "{\"messages\":{\"responsePrefix\":\"[old]\"}}")) return;
    logbuf lb = {PTHREAD_MUTEX_INITIALIZER, BUF_INIT};
    cm_logger lg = {t_log, &lb};
    gw_reloader_opts ro = {w.rt, {NULL, w.ws, NULL, w.state}, true, {NULL, NULL}, &lg};
    gw_reloader *r = NULL;
    char err[1024];
    EXPECT_INT(cm_gw_reloader_new(&ro, &r, err, sizeof err), CM_OK);
    cm_rtcfg *before = cm_gw_runtime_config(w.rt);
    t_rewrite(&w, NULL, "{\n  \"messages\": {\"responsePrefix\": \"[new]\",,}\n}\n");
    EXPECT_INT(cm_gw_reloader_apply(r, err, sizeof err), CM_ECONFIG);
    EXPECT_CONTAINS(err, "quantumclaw.json:2:");
    EXPECT_CONTAINS(lb.text.data, "config reload skipped (invalid config): ");
    EXPECT_CONTAINS(lb.text.data, "quantumclaw.json:2:");
    /* a value of the wrong kind is refused the same way */
    t_rewrite(&w, NULL, "{\"messages\": {\"responsePrefix\": \"[new]\", \"queue\": {\"cap\": -3}}}");
    EXPECT_INT(cm_gw_reloader_apply(r, err, sizeof err), CM_ECONFIG);
    EXPECT_CONTAINS(err, "messages.queue.cap");
    /* a file gone (an editor between delete and write) is not a reload to defaults */
    unlink(path_in(w.state, "quantumclaw.json"));
    EXPECT_INT(cm_gw_reloader_apply(r, err, sizeof err), CM_ENOTFOUND);
    cm_rtcfg *after = cm_gw_runtime_config(w.rt);
    EXPECT(after == before);
    cm_rtcfg_unref(after);
    cm_rtcfg_unref(before);
    /* a good file again for the agent opened by the next message (its own
     * load), not reloaded: the runtime still reads the old snapshot */
    t_rewrite(&w, "{\"messages\":{\"responsePrefix\":\"[not reloaded]\"}}", NULL);
    fake_push_chat_text(w.fs, "an answer", 50);
    EXPECT_INT(post_text(&w, "ivy", "i1", "one"), 202);
    EXPECT(settle(&w));
    char *t0 = t_reply_text(&w, "ivy", 0);
    EXPECT_STR(t0, "[old] an answer");
    free(t0);
    cm_gw_reloader_free(r);
    cm_buf_release(&lb.text);
    world_stop(&w);
}

/* The reloader's thread: a write to the watched file is applied after the
 * debounce (gateway.reload.debounceMs, here 0), and with mode "off" a
 * request (SIGHUP's) still reloads. */
TEST(gateway_run_reload_watch_and_request_on_the_thread)
{
    world w;
    if (!world_start(&w, "{\"messages\":{\"responsePrefix\":\"[old]\"},"
                         "\"gateway\":{\"reload\":{\"debounceMs\":0}}}"))
        return;
    const char *file = cm_strdup(path_in(w.state, "quantumclaw.json"));
    gw_reloader_opts ro = {w.rt, {NULL, w.ws, NULL, w.state}, true, {file, NULL}, NULL};
    gw_reloader *r = NULL;
    char err[1024];
    EXPECT_INT(cm_gw_reloader_new(&ro, &r, err, sizeof err), CM_OK);
    EXPECT_INT(cm_gw_reloader_start(r, err, sizeof err), CM_OK);
    t_rewrite(&w, "{\"messages\":{\"responsePrefix\":\"[watched]\"}}", NULL);
    EXPECT(cm_gw_reloader_wait(r, 1, 10000));
    cm_rtcfg *c = cm_gw_runtime_config(w.rt);
    EXPECT_STR(c->messages.response_prefix, "[watched]");
    cm_rtcfg_unref(c);
    /* mode off: the watch ignores writes; a request reloads */
    t_rewrite(&w, "{\"messages\":{\"responsePrefix\":\"[off]\"},\"gateway\":{\"reload\":{\"mode\":\"off\"}}}",
              NULL);
    EXPECT(cm_gw_reloader_wait(r, 2, 10000));
    uint64_t n = cm_gw_reloader_count(r);
    t_rewrite(&w, "{\"messages\":{\"responsePrefix\":\"[ignored]\"},\"gateway\":{\"reload\":{\"mode\":\"off\"}}}",
              NULL);
    cm_gw_reloader_request(r); /* after the write: the request reads it */
    EXPECT(cm_gw_reloader_wait(r, n + 1, 10000));
    c = cm_gw_runtime_config(w.rt);
    EXPECT_STR(c->messages.response_prefix, "[ignored]");
    cm_rtcfg_unref(c);
    cm_gw_reloader_free(r);
    free((char *)file);
    world_stop(&w);
}

/* Until the runtime's snapshot has messages.responsePrefix want (at most
 * about 10 s, woken by each reload). */
static bool t_wait_prefix(world *w, gw_reloader *r, const char *want)
{
    for (int i = 0; i < 50; i++) {
        uint64_t n = cm_gw_reloader_count(r);
        cm_rtcfg *c = cm_gw_runtime_config(w->rt);
        bool ok = c->messages.response_prefix && !strcmp(c->messages.response_prefix, want);
        cm_rtcfg_unref(c);
        if (ok) return true;
        cm_gw_reloader_wait(r, n + 1, 200);
    }
    return false;
}

/* The watch survives its directory: removed and made again, or moved away
 * and another moved in (as a sync tool or `config set` into a fresh
 * directory does), the file in the new directory is reloaded. */
TEST(gateway_run_reload_watch_survives_the_directory_made_again)
{
    world w;
    if (!world_start(&w, "{\"messages\":{\"responsePrefix\":\"[old]\"},"
                         "\"gateway\":{\"reload\":{\"debounceMs\":0}}}"))
        return;
    char *conf = cm_strdup(path_in(w.dir, "conf"));
    char *file = cm_strdup(path_in(w.dir, "conf/quantumclaw.json"));
    char *moved = cm_strdup(path_in(w.dir, "conf.old"));
    char *fresh = cm_strdup(path_in(w.dir, "conf.new"));
#define body "{\"messages\":{\"responsePrefix\":\"%s\"},\"gateway\":{\"reload\":{\"debounceMs\":0}}}"
    char text[256];
    snprintf(text, sizeof text, body, "[one]");
    write_file(w.dir, "conf/quantumclaw.json", text);
    gw_reloader_opts ro = {w.rt, {NULL, w.ws, file, w.state}, true, {file, NULL}, NULL};
    gw_reloader *r = NULL;
    char err[1024];
    EXPECT_INT(cm_gw_reloader_new(&ro, &r, err, sizeof err), CM_OK);
    EXPECT_INT(cm_gw_reloader_start(r, err, sizeof err), CM_OK);
    cm_gw_reloader_request(r);
    EXPECT(t_wait_prefix(&w, r, "[one]"));
    /* removed and made again */
    EXPECT_INT(unlink(file), 0);
    EXPECT_INT(rmdir(conf), 0);
    snprintf(text, sizeof text, body, "[two]");
    write_file(w.dir, "conf/quantumclaw.json", text);
    EXPECT(t_wait_prefix(&w, r, "[two]"));
    /* moved away, another moved in */
    EXPECT_INT(rename(conf, moved), 0);
    snprintf(text, sizeof text, body, "[three]");
    write_file(w.dir, "conf.new/quantumclaw.json", text);
    EXPECT_INT(rename(fresh, conf), 0);
    EXPECT(t_wait_prefix(&w, r, "[three]"));
    /* and the new directory's file is watched as before */
    snprintf(text, sizeof text, body, "[four]");
    write_file(w.dir, "conf/quantumclaw.json", text);
    EXPECT(t_wait_prefix(&w, r, "[four]"));
    cm_gw_reloader_free(r);
    free(conf);
    free(file);
    free(moved);
    free(fresh);
    world_stop(&w);
#undef body
}
