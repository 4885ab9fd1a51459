/*
 * test_compat.c — the shared config file stays QuantumClaw's: the example
 * configs parse in clawmem without a warning (always), and every example
 * quantumclaw.json in the repository passes the reference's own
 * `openclaw config validate` (openclaw@2026.3.22 in build/peers, which
 * scripts/install-reference.sh installs; about 2 s a config, so only with
 * CLAWMEM_COMPAT=1, as `make compat` runs it). And one Telegram DM turn
 * of clawmem's compared with the one recorded from the reference
 * (tests/compat/fixtures/reference-dm.json) on the fields that must match.
 */
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../src/base/fs.h"
#include "../src/config/config.h"
#include "clawmem/gateway.h"
#include "fake_telegram.h"
#include "fakeserver.h"
#include "test.h"

#define REF_PKG  "build/peers/openclaw-2026.3.22/node_modules/openclaw"
#define REF_NODE "build/peers/node/bin/node"

static char compat_warnings[4096];

static void compat_collect(void *ctx, cm_log_level lv, const char *msg)
{
    (void)ctx;
    (void)lv;
    size_t n = strlen(compat_warnings);
    snprintf(compat_warnings + n, sizeof compat_warnings - n, "%s\n", msg);
}

TEST(compat_examples_parse_without_warnings)
{
    buf main = BUF_INIT, over = BUF_INIT;
    char err[512];
    EXPECT_INT(cm_fs_read_file("examples/quantumclaw.json5", 1 << 20, &main, err, sizeof err),
               CM_OK);
    EXPECT_INT(cm_fs_read_file("examples/clawmem.json5", 1 << 20, &over, err, sizeof err), CM_OK);
    if (test_failed()) goto out;
    cm_logger lg = {compat_collect, NULL};
    cm_config_args a = {NULL, NULL, NULL, "/tmp/qc-state"};
    config_text m = {main.data, main.len, "quantumclaw.json5"};
    config_text o = {over.data, over.len, "clawmem.json5"};
    cm_config c;
    static const char *const vars[] = {"OPENAI_API_KEY", "TELEGRAM_BOT_TOKEN",
                                       "TELEGRAM_WORK_BOT_TOKEN", "QUANTUMCLAW_GATEWAY_TOKEN"};
    for (size_t i = 0; i < ARRAY_LEN(vars); i++)
        setenv(vars[i], "compat-test-value", 1);
    compat_warnings[0] = 0;
    unsetenv("CLAWMEM_CONFIG_PATH");
    EXPECT_INT(cm_config_parse_files(&m, &o, &a, &lg, &c, err, sizeof err), CM_OK);
    for (size_t i = 0; i < ARRAY_LEN(vars); i++)
        unsetenv(vars[i]);
    EXPECT_STR(compat_warnings, "");
    /* both files' keys arrive: the overlay's HTTP channel, the shared apiRoot */
    const json_t *ch = json_object_get(c.root, "channels");
    EXPECT(json_is_true(json_object_get(json_object_get(ch, "http"), "enabled")));
    EXPECT_STR(json_string_value(json_object_get(json_object_get(ch, "telegram"), "apiRoot")),
               "https://api.telegram.org");
    cm_config_release(&c);
out:
    cm_buf_release(&main);
    cm_buf_release(&over);
}

TEST(compat_example_configs_pass_the_reference)
{
    const char *on = getenv("CLAWMEM_COMPAT");
    if (!on || strcmp(on, "1"))
        SKIP("compat", "set CLAWMEM_COMPAT=1 (make compat) to run openclaw config validate");
    if (access(REF_PKG "/openclaw.mjs", R_OK) || access(REF_NODE, X_OK))
        SKIP("compat", "no reference in build/peers (scripts/install-reference.sh installs it)");
    FILE *p = popen(REF_NODE " tests/compat/validate-configs.mjs " REF_PKG " . 2>&1", "r");
    EXPECT(p != NULL);
    if (!p) return;
    buf out = BUF_INIT;
    char line[1024];
    while (fgets(line, sizeof line, p))
        cm_buf_adds(&out, line);
    int st = pclose(p);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        test_fail(__FILE__, __LINE__, "openclaw config validate rejected a config:\n%s",
                  out.data ? out.data : "");
    EXPECT_CONTAINS(out.data ? out.data : "", "ok   examples/quantumclaw.json5");
    cm_buf_release(&out);
}

/* ---- one DM turn against the reference's recorded one ----------------------------- */

/* tests/compat/fixtures/reference-dm.json is what openclaw@2026.3.22 sent
 * for one Telegram DM turn (tests/compat/run.mjs --record, `make compat
 * COMPAT_RECORD=1`): the chat request body, the Bot API calls, the session
 * files. clawmem runs the same turn against the in-process stand-ins; the
 * fields that must match are compared, each mismatch named in the failure. */
#define REF_FIXTURE "tests/compat/fixtures/reference-dm.json"

/* Tools clawmem offers that the reference does not, on purpose. */
static const char *const clawmem_only_tools[] = {"memory_write"};

/* The tools array of a chat request body as {name: function object}. */
static json_t *tools_by_name(const json_t *body)
{
    json_t *o = json_object();
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(body, "tools"), i, t)
    {
        json_t *fn = json_object_get(t, "function");
        const char *name = json_string_value(json_object_get(fn, "name"));
        if (name) json_object_set(o, name, fn);
    }
    return o;
}

/* The keys of obj as a sorted, comma-separated list into b. */
static void keys_of(const json_t *obj, buf *b)
{
    const char *names[256];
    size_t n = 0;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)obj, k, v)
    {
        if (n < ARRAY_LEN(names)) names[n++] = k;
    }
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            const char *t = names[j];
            names[j] = names[j - 1];
            names[j - 1] = t;
        }
    for (size_t i = 0; i < n; i++)
        cm_buf_printf(b, "%s%s", i ? "," : "", names[i]);
}

/* Differences known and tracked (issue 28 item 2: the reference's
 * file-tool aliases file_path/old_string/new_string, which make none of
 * read/edit/write's names required). A line here is not a failure; a new
 * difference is. Remove a line when clawmem catches up. */
static const char *const known_tool_gaps[] = {
    "tool read: the reference's parameter file_path is not accepted",
    "tool read: clawmem requires path, the reference does not",
    "tool edit: the reference's parameter file_path is not accepted",
    "tool edit: the reference's parameter new_string is not accepted",
    "tool edit: the reference's parameter old_string is not accepted",
    "tool edit: clawmem requires newText, the reference does not",
    "tool edit: clawmem requires oldText, the reference does not",
    "tool edit: clawmem requires path, the reference does not",
    "tool write: the reference's parameter file_path is not accepted",
    "tool write: clawmem requires path, the reference does not",
    /* message implements the send action alone (docs/tools.md): the
     * parameters of the reference's other actions (media, polls, reactions,
     * threads, members, …) are not offered. A trailing '*' matches a prefix. */
    "tool message: the reference's parameter *",
};

static void tool_diff(buf *diff, const char *line)
{
    for (size_t i = 0; i < ARRAY_LEN(known_tool_gaps); i++) {
        const char *g = known_tool_gaps[i];
        size_t n = strlen(g);
        if (!strcmp(line, g) || (n && g[n - 1] == '*' && !strncmp(line, g, n - 1))) return;
    }
    cm_buf_printf(diff, "  %s\n", line);
}

/* Appends to diff where clawmem's tools break a call made to the
 * reference's schema: a name the reference does not offer (clawmem's own
 * left aside), a parameter of the reference's that clawmem does not
 * accept, or one clawmem requires that the reference does not. (clawmem's
 * extra optional parameters are fine.) */
static void diff_tools(const json_t *ref_body, const json_t *cm_body, buf *diff)
{
    json_t *ref = tools_by_name(ref_body), *cm = tools_by_name(cm_body);
    const char *name;
    json_t *fn;
    char line[512];
    json_object_foreach(cm, name, fn)
    {
        bool own = false;
        for (size_t i = 0; i < ARRAY_LEN(clawmem_only_tools); i++)
            own |= !strcmp(name, clawmem_only_tools[i]);
        json_t *rf = json_object_get(ref, name);
        if (!rf) {
            if (!own) cm_buf_printf(diff, "  tool %s: offered by clawmem, not by the reference\n", name);
            continue;
        }
        json_t *rp = json_object_get(json_object_get(rf, "parameters"), "properties");
        json_t *cp = json_object_get(json_object_get(fn, "parameters"), "properties");
        json_t *rr = json_object_get(json_object_get(rf, "parameters"), "required");
        const char *k;
        json_t *x;
        json_object_foreach(rp, k, x)
        {
            if (json_object_get(cp, k)) continue;
            snprintf(line, sizeof line, "tool %s: the reference's parameter %s is not accepted",
                     name, k);
            tool_diff(diff, line);
        }
        size_t i;
        json_array_foreach(json_object_get(json_object_get(fn, "parameters"), "required"), i, x)
        {
            bool also = false;
            size_t j;
            json_t *y;
            json_array_foreach(rr, j, y)
            {
                also |= json_equal(x, y);
            }
            if (also) continue;
            snprintf(line, sizeof line, "tool %s: clawmem requires %s, the reference does not",
                     name, json_string_value(x) ? json_string_value(x) : "?");
            tool_diff(diff, line);
        }
    }
    json_decref(ref);
    json_decref(cm);
}

/* text without white space (the HTML markup and words must agree; where a
 * line break falls may differ). */
static void squeeze(const char *text, buf *b)
{
    for (const char *p = text ? text : ""; *p; p++)
        if (*p != ' ' && *p != '\n' && *p != '\t') cm_buf_addc(b, *p);
    if (!b->data) cm_buf_adds(b, "");
}

/* The text the reference's user saw last: its final sendMessage or edit. */
static const char *ref_final_text(const json_t *fx, const char **parse_mode)
{
    const char *text = NULL;
    size_t i;
    json_t *r;
    *parse_mode = NULL;
    json_array_foreach(json_object_get(fx, "telegram"), i, r)
    {
        const char *m = json_string_value(json_object_get(r, "method"));
        if (!m || (strcmp(m, "sendMessage") && strcmp(m, "editMessageText"))) continue;
        json_t *b = json_object_get(r, "body");
        text = json_string_value(json_object_get(b, "text"));
        *parse_mode = json_string_value(json_object_get(b, "parse_mode"));
    }
    return text;
}

/* The session directory's file names, each "<id>.jsonl" for a transcript,
 * sorted, comma-separated; from the fixture's session_files or a listing. */
static void layout_of(const json_t *files, buf *b)
{
    json_t *o = json_object();
    size_t i;
    json_t *f;
    json_array_foreach(files, i, f)
    {
        const char *p = json_string_value(f);
        if (!p || !strstr(p, "/sessions/")) continue;
        const char *base = strrchr(p, '/');
        char name[512];
        size_t dn = base ? (size_t)(base - p) : 0;
        const char *fname = base ? base + 1 : p;
        size_t n = strlen(fname);
        if (n > 6 && !strcmp(fname + n - 6, ".jsonl"))
            snprintf(name, sizeof name, "%.*s/<id>.jsonl", (int)dn, p);
        else
            snprintf(name, sizeof name, "%s", p);
        json_object_set_new(o, name, json_true());
    }
    keys_of(o, b);
    json_decref(o);
}

typedef struct cm_turn {
    json_t *request;  /* the chat request body */
    json_t *sent;     /* sendMessage parameters */
    json_t *files;    /* agents/main/sessions/… paths */
    json_t *sessions; /* sessions.json */
    json_t *types;    /* the transcript's line types, in order */
} cm_turn;

/* Runs the fixture's DM turn through clawmem's gateway. */
static bool run_cm_turn(const json_t *fx, cm_turn *t)
{
    bool ok = false;
    memset(t, 0, sizeof *t);
    tgfake f;
    tgfake_init(&f);
    char tg_url[64], model_url[64], err[512];
    fake_server *tg = fake_start(4, tg_url), *model = fake_start(8, model_url);
    fake_handler(tg, tgfake_handler, &f);
    fake_push_chat_text(model, json_string_value(json_object_get(fx, "answer_text")), 100);
    char *dir = tmp_dir();
    char cfg[2048];
    snprintf(cfg, sizeof cfg,
             "{\"agents\":{\"defaults\":{\"workspace\":\"%s/ws\",\"userTimezone\":\"UTC\","
             "\"model\":{\"primary\":\"openai/compat-model\"},"
             "\"memorySearch\":{\"provider\":\"openai\",\"model\":\"text-embedding-3-small\","
             "\"remote\":{\"baseUrl\":\"%s/v1\",\"apiKey\":\"sk-compat-embed-0001\"}}}},"
             "\"models\":{\"providers\":{\"openai\":{\"baseUrl\":\"%s/v1\",\"apiKey\":"
             "\"sk-compat-0001\",\"api\":\"openai-completions\",\"models\":[{\"id\":"
             "\"compat-model\",\"name\":\"Compat\"}]}}},"
             "\"messages\":{\"inbound\":{\"debounceMs\":0}},"
             "\"channels\":{\"telegram\":{\"botToken\":\"%s\",\"apiRoot\":\"%s\","
             "\"dmPolicy\":\"pairing\",\"allowFrom\":[\"111\"],\"timeoutSeconds\":5}}}",
             dir, model_url, model_url, TGFAKE_TOKEN, tg_url);
    write_file(dir, "state/quantumclaw.json", cfg);
    char state[4096];
    snprintf(state, sizeof state, "%s", path_in(dir, "state"));
    json_t *u = json_pack("{s:i,s:{s:i,s:i,s:{s:i,s:b,s:s,s:s},s:{s:i,s:s,s:s},s:s}}", "update_id",
                          1, "message", "message_id", 1, "date", 1796126000, "from", "id", 111,
                          "is_bot", 0, "first_name", "Alice", "username", "alice", "chat", "id",
                          111, "type", "private", "first_name", "Alice", "text",
                          json_string_value(json_object_get(fx, "inbound_text")));
    char *ut = json_dumps(u, JSON_COMPACT);
    json_decref(u);
    tgfake_add_update(&f, ut);
    free(ut);
    cm_options o = {NULL, NULL, NULL, state, NULL, NULL, 0};
    cm_gateway_opts go = {NULL, 1};
    cm_gateway *g = NULL;
    if (cm_gateway_start(&o, &go, &g, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "clawmem gateway: %s", err);
        goto out;
    }
    for (int i = 0; i < 1500; i++) { /* at most 15 s */
        pthread_mutex_lock(&f.mu);
        size_t n = json_array_size(f.sent);
        pthread_mutex_unlock(&f.mu);
        if (n) break;
        usleep(10000);
    }
    cm_gateway_drain(g, 5000);
    cm_gateway_free(g);
    pthread_mutex_lock(&f.mu);
    t->sent = json_deep_copy(f.sent);
    pthread_mutex_unlock(&f.mu);
    for (int i = 0; i < fake_count(model); i++) {
        const fake_request *q = fake_get(model, i);
        if (strstr(q->path, "/chat/completions") && !t->request)
            t->request = json_loads(q->body ? q->body : "", 0, NULL);
    }
    t->files = json_array();
    const char *sdir = path_in(state, "agents/main/sessions");
    DIR *d = opendir(sdir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || strstr(e->d_name, ".lock")) continue;
        char rel[600];
        snprintf(rel, sizeof rel, "agents/main/sessions/%s", e->d_name);
        json_array_append_new(t->files, json_string(rel));
        size_t n = strlen(e->d_name);
        if (n > 6 && !strcmp(e->d_name + n - 6, ".jsonl")) {
            t->types = json_array();
            FILE *fp = fopen(path_in(sdir, e->d_name), "r");
            char line[65536];
            while (fp && fgets(line, sizeof line, fp)) {
                json_t *l = json_loads(line, 0, NULL);
                json_array_append(t->types, json_object_get(l, "type"));
                json_decref(l);
            }
            if (fp) fclose(fp);
        }
    }
    if (d) closedir(d);
    t->sessions = json_load_file(path_in(sdir, "sessions.json"), 0, NULL);
    ok = t->request && json_array_size(t->sent);
out:
    atomic_store(&f.stop, 1);
    fake_stop(tg);
    fake_stop(model);
    tgfake_release(&f);
    return ok;
}

static void cm_turn_release(cm_turn *t)
{
    json_decref(t->request);
    json_decref(t->sent);
    json_decref(t->files);
    json_decref(t->sessions);
    json_decref(t->types);
}

/* sessions.json fields the reference writes too, though not on a first
 * turn: compactionCount once a session was compacted (dist/). */
static const char *const later_fields[] = {"compactionCount"};

/* Every element of a (strings) is in b; the ones that are not go to diff. */
static void subset(const char *what, const json_t *a, const json_t *b, buf *diff)
{
    size_t i, j;
    json_t *x, *y;
    json_array_foreach(a, i, x)
    {
        bool found = false;
        json_array_foreach(b, j, y)
        {
            found |= json_equal(x, y);
        }
        for (size_t k = 0; k < ARRAY_LEN(later_fields); k++)
            found |= json_is_string(x) && !strcmp(json_string_value(x), later_fields[k]);
        if (!found)
            cm_buf_printf(diff, "  %s: clawmem writes %s, the reference does not\n", what,
                          json_string_value(x) ? json_string_value(x) : "?");
    }
}

/* Fields the reference writes that clawmem does not: it has no skills and
 * reports its system prompt elsewhere (docs/runtime.md). */
static const char *const absent_fields[] = {"skillsSnapshot", "systemPromptReport"};

/* Every element of want (strings) is in have but absent_fields; the ones
 * that are not go to diff. */
static void covers(const char *what, const json_t *have, const json_t *want, buf *diff)
{
    size_t i, j;
    json_t *x, *y;
    json_array_foreach(want, i, x)
    {
        bool found = false;
        json_array_foreach(have, j, y)
        {
            found |= json_equal(x, y);
        }
        for (size_t k = 0; k < ARRAY_LEN(absent_fields); k++)
            found |= json_is_string(x) && !strcmp(json_string_value(x), absent_fields[k]);
        if (!found)
            cm_buf_printf(diff, "  %s: the reference writes %s, clawmem does not\n", what,
                          json_string_value(x) ? json_string_value(x) : "?");
    }
}

TEST(compat_dm_turn_matches_the_reference_fixture)
{
    json_error_t je;
    json_t *fx = json_load_file(REF_FIXTURE, 0, &je);
    if (!fx) {
        test_fail(__FILE__, __LINE__, "%s: %s (make compat COMPAT_RECORD=1 writes it)", REF_FIXTURE,
                  je.text);
        return;
    }
    cm_turn t;
    buf diff = BUF_INIT;
    if (!run_cm_turn(fx, &t)) {
        test_fail(__FILE__, __LINE__, "clawmem's DM turn did not reach the model and Telegram");
        goto out;
    }
    const json_t *rq = json_object_get(fx, "model_request");
    /* the chat request: model, streaming, the system message first, the
     * inbound text in the last user message; the tools */
    static const char *const same_keys[] = {"model", "stream"};
    for (size_t i = 0; i < ARRAY_LEN(same_keys); i++)
        if (!json_equal(json_object_get(rq, same_keys[i]), json_object_get(t.request, same_keys[i]))) {
            char *a = json_dumps(json_object_get(rq, same_keys[i]), JSON_ENCODE_ANY);
            char *b = json_dumps(json_object_get(t.request, same_keys[i]), JSON_ENCODE_ANY);
            cm_buf_printf(&diff, "  request %s: reference %s, clawmem %s\n", same_keys[i],
                          a ? a : "(none)", b ? b : "(none)");
            free(a);
            free(b);
        }
    /* the body's members (store, stream_options, the token limit: the
     * reference's compat choices for an OpenAI-compatible loopback server)
     * and store's value */
    buf rk = BUF_INIT, ck = BUF_INIT;
    keys_of(rq, &rk);
    keys_of(t.request, &ck);
    if (strcmp(rk.data ? rk.data : "", ck.data ? ck.data : ""))
        cm_buf_printf(&diff, "  request keys: reference %s, clawmem %s\n", rk.data ? rk.data : "",
                      ck.data ? ck.data : "");
    cm_buf_release(&rk);
    cm_buf_release(&ck);
    if (json_is_false(json_object_get(rq, "store")) != json_is_false(json_object_get(t.request, "store")))
        cm_buf_printf(&diff, "  request store: the reference's false, clawmem's not\n");
    const json_t *rm = json_object_get(rq, "messages"), *cmm = json_object_get(t.request, "messages");
    const char *r0 = json_string_value(json_object_get(json_array_get(rm, 0), "role"));
    const char *c0 = json_string_value(json_object_get(json_array_get(cmm, 0), "role"));
    if (!r0 || !c0 || strcmp(r0, c0))
        cm_buf_printf(&diff, "  first message role: reference %s, clawmem %s\n", r0 ? r0 : "-",
                      c0 ? c0 : "-");
    json_t *last = json_array_get(cmm, json_array_size(cmm) - 1);
    char *lt = json_dumps(json_object_get(last, "content"), JSON_ENCODE_ANY);
    if (!lt || !strstr(lt, json_string_value(json_object_get(fx, "inbound_text"))))
        cm_buf_printf(&diff, "  the last message does not carry the inbound text: %.200s\n",
                      lt ? lt : "");
    free(lt);
    diff_tools(rq, t.request, &diff);
    /* Telegram: the reply's chat, parse mode and markup */
    const char *pm = NULL, *ref_text = ref_final_text(fx, &pm);
    json_t *s0 = json_array_get(t.sent, json_array_size(t.sent) - 1);
    const char *cpm = json_string_value(json_object_get(s0, "parse_mode"));
    if (!pm || !cpm || strcmp(pm, cpm))
        cm_buf_printf(&diff, "  sendMessage parse_mode: reference %s, clawmem %s\n",
                      pm ? pm : "(none)", cpm ? cpm : "(none)");
    json_t *chat = json_object_get(s0, "chat_id");
    if (!(json_is_integer(chat) && json_integer_value(chat) == 111) &&
        !(json_is_string(chat) && !strcmp(json_string_value(chat), "111")))
        cm_buf_printf(&diff, "  sendMessage chat_id is not the sender's chat 111\n");
    buf a = BUF_INIT, b = BUF_INIT;
    squeeze(ref_text, &a);
    squeeze(json_string_value(json_object_get(s0, "text")), &b);
    if (strcmp(a.data, b.data))
        cm_buf_printf(&diff, "  reply markup: reference %s\n                clawmem   %s\n",
                      ref_text ? ref_text : "(none)",
                      json_string_value(json_object_get(s0, "text")) ?: "(none)");
    cm_buf_release(&a);
    cm_buf_release(&b);
    /* files: the same layout and session key; fields and line types clawmem
     * writes are ones the reference writes */
    layout_of(json_object_get(fx, "session_files"), &a);
    layout_of(t.files, &b);
    if (strcmp(a.data ? a.data : "", b.data ? b.data : ""))
        cm_buf_printf(&diff, "  session files: reference {%s}, clawmem {%s}\n",
                      a.data ? a.data : "", b.data ? b.data : "");
    cm_buf_release(&a);
    cm_buf_release(&b);
    json_t *keys = json_array(), *fields = json_array();
    const char *k;
    json_t *v;
    json_object_foreach(t.sessions, k, v)
    {
        json_array_append_new(keys, json_string(k));
        const char *f;
        json_t *x;
        json_object_foreach(v, f, x)
        {
            json_array_append_new(fields, json_string(f));
        }
    }
    if (!json_equal(keys, json_object_get(fx, "session_keys"))) {
        char *x = json_dumps(json_object_get(fx, "session_keys"), JSON_COMPACT);
        char *y = json_dumps(keys, JSON_COMPACT);
        cm_buf_printf(&diff, "  sessions.json keys: reference %s, clawmem %s\n", x, y);
        free(x);
        free(y);
    }
    subset("sessions.json entry field", fields, json_object_get(fx, "session_entry_fields"), &diff);
    subset("transcript line type", t.types, json_object_get(fx, "transcript_line_types"), &diff);
    covers("sessions.json entry field", fields, json_object_get(fx, "session_entry_fields"), &diff);
    if (!json_equal(t.types, json_object_get(fx, "transcript_line_types"))) {
        char *x = json_dumps(json_object_get(fx, "transcript_line_types"), JSON_COMPACT);
        char *y = json_dumps(t.types, JSON_COMPACT);
        cm_buf_printf(&diff, "  transcript line types: reference %s, clawmem %s\n", x, y);
        free(x);
        free(y);
    }
    if (!json_equal(json_array_get(t.types, 0),
                    json_array_get(json_object_get(fx, "transcript_line_types"), 0)))
        cm_buf_printf(&diff, "  the transcript's first line type differs\n");
    json_decref(keys);
    json_decref(fields);
    if (diff.len)
        test_fail(__FILE__, __LINE__,
                  "clawmem's DM turn differs from the reference's (%s):\n%s", REF_FIXTURE,
                  diff.data);
    cm_turn_release(&t);
out:
    cm_buf_release(&diff);
    json_decref(fx);
}
