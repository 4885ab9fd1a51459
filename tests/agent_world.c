/*
 * agent_world.c — see agent_world.h.
 */
#include "../src/base/fs.h"
#include "../src/session/sessions.h"
#include "agent_world.h"

int64_t clock_now = T0;

static int64_t fake_clock(void *ctx)
{
    (void)ctx;
    return clock_now;
}

bool agent_world_start(world *w, const char *models_json)
{
    memset(w, 0, sizeof *w);
    clock_now = T0;
    w->fs = fake_start(8, w->base);
    w->dir = tmp_dir();
    w->ws = cm_strdup(path_in(w->dir, "ws"));
    w->state = cm_strdup(path_in(w->dir, "state"));
    write_file(w->dir, "ws/MEMORY.md", "# Facts\n\n- The dog is called Biscuit.\n");
    char cfg[4096];
    snprintf(cfg, sizeof cfg,
             "{\"agents\":{\"defaults\":{\"model\":\"openai/gpt-t\"}},"
             "\"models\":{\"providers\":{\"openai\":{\"baseUrl\":\"%s/"
             "v1\",\"apiKey\":\"sk-test-agent-0001\","
             "\"models\":%s}}}}",
             w->base, models_json ? models_json : "[]");
    w->cfg = json_loads(cfg, 0, NULL);
    cm_options o = {NULL, w->ws, NULL, w->state, NULL, NULL, 1};
    char err[512];
    write_file(w->dir, "state/quantumclaw.json", "{}");
    if (cm_engine_open(&o, &w->eng, err, sizeof err) ||
        cm_engine_sync(w->eng, 0, NULL, NULL, NULL, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "engine: %s", err);
        return false;
    }
    llm_runner_opts ro = {w->cfg, w->state, "main", fake_clock, NULL};
    if (cm_llm_runner_open(&ro, &w->runner, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "runner: %s", err);
        return false;
    }
    snprintf(w->store, sizeof w->store, "%s/agents/main/sessions/sessions.json", w->state);
    w->a = (agent_ctx){w->cfg, w->state,  "main", w->store,   w->ws,
                       w->eng, w->runner, true,   fake_clock, NULL, NULL, NULL, NULL};
    return true;
}

void agent_world_stop(world *w)
{
    cm_llm_runner_close(w->runner);
    cm_engine_close(w->eng);
    json_decref(w->cfg);
    fake_stop(w->fs);
    free(w->ws);
    free(w->state);
}

void say(world *w, const char *text, int prompt_tokens)
{
    fake_push_chat_text(w->fs, text, prompt_tokens);
}

json_t *request_body(world *w, int i)
{
    const fake_request *q = fake_get(w->fs, i);
    return q ? json_loads(q->body, 0, NULL) : NULL;
}

json_t *entry_of(world *w, const char *key)
{
    session_store s;
    char err[256];
    if (cm_session_store_read(&s, w->store, err, sizeof err)) return NULL;
    json_t *e = json_incref(cm_session_store_get(&s, key));
    cm_session_store_release(&s);
    return e;
}

char *transcript_of(world *w, const char *key)
{
    json_t *e = entry_of(w, key);
    const char *f = json_string_value(json_object_get(e, "sessionFile"));
    buf b = BUF_INIT;
    char err[256];
    if (f) cm_fs_read_file(f, 1 << 24, &b, err, sizeof err);
    json_decref(e);
    if (!b.data) cm_buf_adds(&b, "");
    return cm_buf_detach(&b);
}
