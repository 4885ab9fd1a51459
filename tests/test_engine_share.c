/*
 * test_engine_share.c — one engine for concurrent callers
 * (cm_engine_open_shared) and the gateway's one agent per id: threads
 * searching and writing through one shared engine, a note written on one
 * thread found by a search on another, the vectors one shared snapshot,
 * and the engines a gateway with 8 workers and 2 agents opens.
 */
#include <jansson.h>
#include <pthread.h>

#include "../src/embed/static_model.h"
#include "../src/engine/engine_int.h"
#include "../src/gateway/core/runtime.h"
#include "../src/gateway/gateway_int.h"
#include "fakeserver.h"
#include "test.h"

#define THREADS 8
#define ROUNDS  6

typedef struct share_world {
    fake_server *fs;
    char base[64];
    char *dir, *ws, *state;
} share_world;

/* A workspace with a note, embeddings from the fake server (openai; or
 * none: the server's queued answers are then the model's), a model (the same
 * server) and two agents. */
static void share_start(share_world *w, bool embed)
{
    memset(w, 0, sizeof *w);
    w->fs = fake_start(16, w->base);
    w->dir = tmp_dir();
    w->ws = cm_strdup(path_in(w->dir, "ws"));
    w->state = cm_strdup(path_in(w->dir, "state"));
    write_file(w->dir, "ws/MEMORY.md", "# Facts\n\n- The dog is called Biscuit.\n");
    write_file(w->dir, "ws-ops/MEMORY.md", "# Ops\n\n- The pager rotates on Mondays.\n");
    char cfg[2048];
    snprintf(cfg, sizeof cfg,
             "{\"agents\":{\"defaults\":{\"model\":\"openai/gpt-t\",\"memorySearch\":{"
             "\"provider\":\"%s\",\"remote\":{\"baseUrl\":\"%s/v1/\",\"apiKey\":\"sk-e\"}}},"
             "\"list\":[{\"id\":\"main\"},{\"id\":\"ops\",\"workspace\":\"%s\"}]},"
             "\"models\":{\"providers\":{\"openai\":{\"baseUrl\":\"%s/v1\","
             "\"apiKey\":\"sk-test-share-0001\",\"models\":[]}}}}",
             embed ? "openai" : "none", w->base, path_in(w->dir, "ws-ops"), w->base);
    write_file(w->dir, "state/quantumclaw.json", cfg);
}

static void share_stop(share_world *w)
{
    fake_stop(w->fs);
    free(w->ws);
    free(w->state);
}

typedef struct worker_arg {
    cm_engine *e;
    int i;
    pthread_barrier_t *bar;
    int written, found_own, found_other;
} worker_arg;

static bool search_finds(cm_engine *e, const char *word)
{
    char err[512], *js = NULL;
    cm_search_opts so = {20, 0, 0};
    if (cm_memory_search(e, word, &so, &js, err, sizeof err)) return false;
    bool found = strstr(js, word) != NULL;
    cm_free(js);
    return found;
}

/* Writes its notes and finds each at once (its own write, read back through
 * another view maybe), syncing now and then so that vectors change under the
 * other threads' searches; then, after all wrote, finds a neighbour's note. */
static void *worker(void *p)
{
    worker_arg *a = p;
    char path[64], text[160], word[32], err[512];
    snprintf(path, sizeof path, "memory/w%d.md", a->i);
    for (int j = 0; j < ROUNDS; j++) {
        snprintf(word, sizeof word, "kiwi%dx%d", a->i, j);
        snprintf(text, sizeof text, "Worker %d note %d: the code word is %s.", a->i, j, word);
        char *js = NULL;
        if (cm_memory_write(a->e, path, text, 0, &js, err, sizeof err) == CM_OK) a->written++;
        cm_free(js);
        a->found_own += search_finds(a->e, word);
        if (j % 2 == 1) cm_engine_sync(a->e, CM_SYNC_NOWAIT, NULL, NULL, NULL, err, sizeof err);
        a->found_own += search_finds(a->e, "Biscuit") ? 0 : -100; /* vectors + keywords */
    }
    pthread_barrier_wait(a->bar);
    snprintf(word, sizeof word, "kiwi%dx%d", (a->i + 1) % THREADS, ROUNDS - 1);
    a->found_other = search_finds(a->e, word);
    return NULL;
}

TEST(engine_share_threads_search_and_write_one_engine)
{
    share_world w;
    share_start(&w, true);
    cm_options o = {NULL, w.ws, NULL, w.state, NULL, NULL, 1};
    char err[512];
    cm_engine *e = NULL;
    size_t opened0 = cm_engine_opened_count();
    EXPECT_INT(cm_engine_open_shared(&o, &e, err, sizeof err), CM_OK);
    if (!e) goto out;
    EXPECT_INT(cm_engine_sync(e, 0, NULL, NULL, NULL, err, sizeof err), CM_OK);
    EXPECT(search_finds(e, "Biscuit"));
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, THREADS);
    pthread_t th[THREADS];
    worker_arg args[THREADS];
    for (int i = 0; i < THREADS; i++) {
        args[i] = (worker_arg){e, i, &bar, 0, 0, 0};
        pthread_create(&th[i], NULL, worker, &args[i]);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    for (int i = 0; i < THREADS; i++) {
        EXPECT_INT(args[i].written, ROUNDS);
        EXPECT_INT(args[i].found_own, ROUNDS);
        EXPECT_INT(args[i].found_other, 1); /* written on another thread */
    }
    /* one engine; views only as many as calls ran at once */
    EXPECT_INT((long long)(cm_engine_opened_count() - opened0), 1);
    size_t views = cm_engine_pool_views(e);
    EXPECT(views >= 1 && views <= THREADS);
    /* the snapshot is shared: loads and copy-on-write updates follow the
     * index's changes (syncs), not the number of views times searches */
    EXPECT(cm_engine_pool_snapshots(e) >= 1);
    EXPECT(cm_engine_pool_snapshots(e) < (size_t)(THREADS * ROUNDS * 2));
out:
    cm_engine_close(e);
    share_stop(&w);
}

/* A view that searched holds the snapshot another view published: one copy
 * of the vectors, whichever view loaded them. */
TEST(engine_share_views_read_one_vector_snapshot)
{
    share_world w;
    share_start(&w, true);
    cm_options o = {NULL, w.ws, NULL, w.state, NULL, NULL, 1};
    char err[512];
    cm_engine *e = NULL;
    EXPECT_INT(cm_engine_open_shared(&o, &e, err, sizeof err), CM_OK);
    if (!e) goto out;
    EXPECT_INT(cm_engine_sync(e, 0, NULL, NULL, NULL, err, sizeof err), CM_OK);
    /* two views leased at once, each searching */
    cm_engine *v1 = NULL, *v2 = NULL;
    EXPECT_INT(cm_engine_lease(e, &v1, err, sizeof err), CM_OK);
    EXPECT_INT(cm_engine_lease(e, &v2, err, sizeof err), CM_OK);
    EXPECT(v1 && v2 && v1 != v2 && v1 != e);
    engine_result r1, r2;
    EXPECT_INT(v1->be->search(v1, "Biscuit", NULL, NULL, &r1, err, sizeof err), CM_OK);
    EXPECT_INT(v2->be->search(v2, "Biscuit", NULL, NULL, &r2, err, sizeof err), CM_OK);
    cm_engine_result_release(&r1);
    cm_engine_result_release(&r2);
    EXPECT(v1->vx_loaded && v2->vx_loaded);
    EXPECT(v1->snap && v1->snap == v2->snap);
    EXPECT(v1->vx.m == v2->vx.m); /* the same rows, not a copy */
    EXPECT_INT(cm_engine_pool_snapshots(e), 1);
    cm_engine_unlease(e, v1);
    cm_engine_unlease(e, v2);
    EXPECT_INT(cm_engine_pool_views(e), 2);
    /* a note synced with vectors: the next search copies and updates */
    char *js = NULL;
    EXPECT_INT(cm_memory_write(e, "memory/n.md", "The cat is called Pixel.", 0, &js, err,
                               sizeof err),
               CM_OK);
    cm_free(js);
    EXPECT_INT(cm_engine_sync(e, 0, NULL, NULL, NULL, err, sizeof err), CM_OK);
    EXPECT(search_finds(e, "Pixel"));
    EXPECT_INT(cm_engine_pool_snapshots(e), 2);
out:
    cm_engine_close(e);
    share_stop(&w);
}

/* ---- the gateway: one engine per agent, whatever the workers ------------ */

typedef struct run_arg {
    gw_agents *ag;
    int worker;
    pthread_barrier_t *bar;
    cm_rc rc;
    char err[512];
} run_arg;

static void *run_one(void *p)
{
    run_arg *a = p;
    char key[64];
    const char *id = a->worker % 2 ? "ops" : "main";
    snprintf(key, sizeof key, "agent:%s:w%d", id, a->worker);
    gw_run_req rq = {.agent_id = id, .session_key = key, .prompt = "hello", .worker = a->worker};
    gw_run_res res;
    pthread_barrier_wait(a->bar); /* every worker asks for its agent at once */
    a->rc = cm_gw_agents_run(a->ag, &rq, &res, a->err, sizeof a->err);
    if (!a->rc) free(res.text);
    return NULL;
}

TEST(engine_share_gateway_8_workers_2_agents_open_2_engines)
{
    share_world w;
    share_start(&w, false);
    for (int i = 0; i < THREADS; i++)
        fake_push_chat_text(w.fs, "hi there", 10);
    cm_options o = {NULL, w.ws, NULL, w.state, NULL, NULL, 1};
    gw_agents *ag = NULL;
    EXPECT_INT(cm_gw_agents_new(&o, &ag), CM_OK);
    if (!ag) goto out;
    size_t opened0 = cm_engine_opened_count();
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, THREADS);
    pthread_t th[THREADS];
    run_arg args[THREADS];
    for (int i = 0; i < THREADS; i++) {
        args[i] = (run_arg){ag, i, &bar, CM_OK, ""};
        pthread_create(&th[i], NULL, run_one, &args[i]);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    for (int i = 0; i < THREADS; i++)
        if (args[i].rc) test_fail(__FILE__, __LINE__, "worker %d: %s", i, args[i].err);
    EXPECT_INT((long long)(cm_engine_opened_count() - opened0), 2);
    EXPECT_INT(cm_gw_agents_opened(ag), 2);
    cm_gw_agents_free(ag);
out:
    share_stop(&w);
}

/* ---- the static model: one mapping a process -------------------------- */

TEST(engine_share_static_model_mapped_once)
{
    static const char *const words[] = {"cat", "dog", "fish"};
    static const float vecs[] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0};
    char *d = tmp_dir(), path[4096], err[512];
    snprintf(path, sizeof path, "%s/m.bin", d);
    EXPECT_INT(cm_static_model_write(path, words, vecs, 3, 4, err, sizeof err), CM_OK);
    static_model a, b, c;
    EXPECT_INT(cm_static_model_open(&a, path, err, sizeof err), CM_OK);
    EXPECT_INT(cm_static_model_map(&b, path, err, sizeof err), CM_OK);
    EXPECT(a.map && a.map == b.map); /* views and engines share the pages */
    cm_static_model_close(&a);
    EXPECT(cm_static_model_lookup(&b, "dog", 3) >= 0); /* still mapped for b */
    /* a new file at the path (another inode): its own mapping */
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.new", path);
    EXPECT_INT(cm_static_model_write(tmp, words, vecs, 3, 4, err, sizeof err), CM_OK);
    EXPECT_INT(rename(tmp, path), 0);
    EXPECT_INT(cm_static_model_map(&c, path, err, sizeof err), CM_OK);
    EXPECT(c.map && c.map != b.map);
    cm_static_model_close(&b);
    cm_static_model_close(&c);
}
