/*
 * helpers.c — temporary workspaces, file writing and running the clawmem
 * binary with captured output, for the tests.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <time.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include <jansson.h>

#include "../src/base/fs.h"
#include "../src/store/store.h"
#include "test.h"

extern char **environ;

static char **dirs; /* every directory tmp_dir made, removed at exit */
static size_t ndirs, capdirs;

char *tmp_dir(void)
{
    const char *base = getenv("TMPDIR");
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/clawmem-test-XXXXXX", base && *base ? base : "/tmp");
    char *d = mkdtemp(tmpl);
    if (!d) {
        perror("mkdtemp");
        abort();
    }
    char *copy = cm_strdup(d);
    if (ndirs == capdirs) {
        size_t cap = capdirs ? capdirs * 2 : 256;
        char **nd = realloc(dirs, cap * sizeof *nd);
        if (!nd) {
            perror("tmp_dir");
            abort();
        }
        dirs = nd;
        capdirs = cap;
    }
    dirs[ndirs++] = copy;
    return copy;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    chmod(p, 0700);
    return remove(p);
}

void tmp_cleanup(void);
void tmp_cleanup(void)
{
    for (size_t i = 0; i < ndirs; i++) {
        /* Restore permissions first so unreadable test files can be removed. */
        nftw(dirs[i], rm_one, 32, FTW_DEPTH | FTW_PHYS);
        free(dirs[i]);
    }
    free(dirs);
    dirs = NULL;
    ndirs = capdirs = 0;
}

const char *path_in(const char *dir, const char *rel)
{
    static char bufs[8][4096];
    static int k;
    char *b = bufs[k++ & 7];
    snprintf(b, 4096, "%s/%s", dir, rel);
    return b;
}

void write_bytes(const char *dir, const char *rel, const void *data, size_t n)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    char *d = cm_fs_dirname(p);
    cm_fs_mkdirs(d, NULL, 0);
    free(d);
    FILE *f = fopen(p, "wb");
    if (!f) {
        perror(p);
        abort();
    }
    fwrite(data, 1, n, f);
    fclose(f);
}

void write_file(const char *dir, const char *rel, const char *text)
{
    write_bytes(dir, rel, text, strlen(text));
}

int run_unprivileged(const char *tree, int (*fn)(void *), void *arg)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (geteuid() == 0) {
            char cmd[2048];
            snprintf(cmd, sizeof cmd, "chown -R 65534:65534 '%s'", tree);
            if (system(cmd) != 0 || setgid(65534) != 0 || setuid(65534) != 0) _exit(90);
        }
        _exit(fn(arg));
    }
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 100;
}

void set_mtime(const char *path, long t)
{
    struct timeval tv[2] = {{t, 0}, {t, 0}};
    utimes(path, tv);
}

static void drain(int fd, buf *b)
{
    char tmp[65536];
    ssize_t r = read(fd, tmp, sizeof tmp);
    if (r > 0) cm_buf_add(b, tmp, (size_t)r);
}

run_result run_clawmem(const char *const *env, const char *const *args)
{
    const char *bin = getenv("CLAWMEM_BIN");
    const char *argv[64];
    size_t argc = 0;
    argv[argc++] = bin ? bin : "build/clawmem";
    for (size_t i = 0; args[i] && argc < 63; i++)
        argv[argc++] = args[i];
    argv[argc] = NULL;
    return run_cmd(env, argv);
}

run_result run_cmd(const char *const *env, const char *const *cmd)
{
    run_result res = {-1, NULL, NULL};
    const char *bin = cmd[0];
    char *argv[64];
    size_t argc = 0;
    for (size_t i = 0; cmd[i] && argc < 63; i++)
        argv[argc++] = (char *)cmd[i];
    argv[argc] = NULL;
    char *envp[256];
    size_t ne = 0;
    for (char **e = environ; *e && ne < 200; e++)
        envp[ne++] = *e;
    for (size_t i = 0; env && env[i] && ne < 255; i++)
        envp[ne++] = (char *)env[i];
    envp[ne] = NULL;
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) abort();
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err[1], 2);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    pid_t pid;
    if (posix_spawnp(&pid, bin, &fa, NULL, argv, envp) != 0) {
        perror("posix_spawn");
        abort();
    }
    posix_spawn_file_actions_destroy(&fa);
    close(out[1]);
    close(err[1]);
    buf bo = BUF_INIT, be = BUF_INIT;
    struct pollfd p[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
    int open_fds = 2;
    while (open_fds > 0) {
        if (poll(p, 2, -1) < 0 && errno != EINTR) break;
        for (int i = 0; i < 2; i++) {
            if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP))) continue;
            size_t before = i ? be.len : bo.len;
            drain(p[i].fd, i ? &be : &bo);
            if ((i ? be.len : bo.len) == before) {
                close(p[i].fd);
                p[i].fd = -1;
                open_fds--;
            }
        }
    }
    int st;
    waitpid(pid, &st, 0);
    res.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    res.out = cm_buf_detach(&bo);
    res.err = cm_buf_detach(&be);
    return res;
}

void run_result_release(run_result *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

/* The processes proc_start started and proc_stop has not stopped: a test
 * that fails returns at its first failed EXPECT, before its proc_stop. */
static int live[64];
static size_t nlive;

void proc_reap_leftovers(const char *test)
{
    for (size_t i = 0; i < nlive; i++) {
        int st;
        if (waitpid(live[i], &st, WNOHANG) != 0) continue; /* gone, or reaped by the test */
        fprintf(stderr, "  %s left pid %d running: killed\n", test, live[i]);
        kill(live[i], SIGKILL);
        waitpid(live[i], &st, 0);
    }
    /* (its pipes stay open: the test may have closed and reused their numbers) */
    nlive = 0;
}

static void forget(int pid)
{
    for (size_t i = 0; i < nlive; i++)
        if (live[i] == pid) {
            live[i] = live[--nlive];
            return;
        }
}

void proc_start(proc *p, const char *const *env, const char *const *args)
{
    const char *bin = getenv("CLAWMEM_BIN");
    if (!bin) bin = "build/clawmem";
    char *argv[64];
    size_t argc = 0;
    argv[argc++] = (char *)bin;
    for (size_t i = 0; args[i] && argc < 63; i++)
        argv[argc++] = (char *)args[i];
    argv[argc] = NULL;
    char *envp[256];
    size_t ne = 0;
    for (char **e = environ; *e && ne < 200; e++)
        envp[ne++] = *e;
    for (size_t i = 0; env && env[i] && ne < 255; i++)
        envp[ne++] = (char *)env[i];
    envp[ne] = NULL;
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC)) abort();
    char *d = tmp_dir();
    snprintf(p->errpath, sizeof p->errpath, "%s/stderr", d);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, p->errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    pid_t pid;
    if (posix_spawnp(&pid, bin, &fa, NULL, argv, envp) != 0) abort();
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    p->pid = pid;
    p->in = in[1];
    p->out = out[0];
    cm_buf_init(&p->pending, 0);
    if (nlive < ARRAY_LEN(live)) live[nlive++] = pid;
}

void proc_send(proc *p, const char *s)
{
    size_t n = strlen(s), off = 0;
    while (off < n) {
        ssize_t w = write(p->in, s + off, n - off);
        if (w <= 0) return;
        off += (size_t)w;
    }
    if (write(p->in, "\n", 1) != 1) return;
}

char *proc_line(proc *p, int timeout_ms)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        char *nl = p->pending.len ? memchr(p->pending.data, '\n', p->pending.len) : NULL;
        if (nl) {
            size_t n = (size_t)(nl - p->pending.data);
            char *line = cm_strndup(p->pending.data, n);
            memmove(p->pending.data, nl + 1, p->pending.len - n - 1);
            p->pending.len -= n + 1;
            p->pending.data[p->pending.len] = 0;
            return line;
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
        long left =
            timeout_ms - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
        if (left <= 0) return NULL;
        struct pollfd pf = {p->out, POLLIN, 0};
        if (poll(&pf, 1, (int)left) <= 0) continue;
        char tmp[65536];
        ssize_t r = read(p->out, tmp, sizeof tmp);
        if (r <= 0) return NULL;
        cm_buf_add(&p->pending, tmp, (size_t)r);
    }
}

int proc_stop(proc *p, int sig, int timeout_ms)
{
    forget(p->pid);
    if (sig)
        kill(p->pid, sig);
    else
        close(p->in), p->in = -1;
    int st = 0, waited = 0;
    while (waitpid(p->pid, &st, WNOHANG) == 0) {
        if (waited >= timeout_ms) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &st, 0);
            st = -1;
            break;
        }
        usleep(10000);
        waited += 10;
    }
    if (p->in >= 0) close(p->in);
    close(p->out);
    cm_buf_release(&p->pending);
    if (st == -1) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

char *proc_stderr(const proc *p)
{
    buf b = BUF_INIT;
    char err[256];
    cm_fs_read_file(p->errpath, 1 << 24, &b, err, sizeof err);
    return cm_buf_detach(&b);
}

int count_fds(int pid)
{
    char path[64];
    snprintf(path, sizeof path, pid ? "/proc/%d/fd" : "/proc/self/fd", pid);
    DIR *d = opendir(path);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (de->d_name[0] != '.') n++;
    if (d) closedir(d);
    return n - (pid ? 0 : 1); /* not counting opendir's own descriptor */
}

bool db_integrity_ok(const char *path)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    bool ok = false;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &q, NULL) == SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW)
        ok = strcmp((const char *)sqlite3_column_text(q, 0), "ok") == 0;
    sqlite3_finalize(q);
    sqlite3_close(db);
    return ok;
}

/* QuantumClaw 2026.3.22's memory index (dist/pi-embedded-*.js,
 * ensureMemoryIndexSchema with full-text search and the embedding cache on,
 * in its default rollback-journal mode), as its statements create it. */
static const char qc_schema[] =
    "CREATE TABLE IF NOT EXISTS meta (\n  key TEXT PRIMARY KEY,\n  value TEXT NOT NULL\n);"
    "CREATE TABLE IF NOT EXISTS files (\n  path TEXT PRIMARY KEY,\n  source TEXT NOT NULL "
    "DEFAULT 'memory',\n  hash TEXT NOT NULL,\n  mtime INTEGER NOT NULL,\n  size INTEGER NOT "
    "NULL\n);"
    "CREATE TABLE IF NOT EXISTS chunks (\n  id TEXT PRIMARY KEY,\n  path TEXT NOT NULL,\n  "
    "source TEXT NOT NULL DEFAULT 'memory',\n  start_line INTEGER NOT NULL,\n  end_line "
    "INTEGER NOT NULL,\n  hash TEXT NOT NULL,\n  model TEXT NOT NULL,\n  text TEXT NOT "
    "NULL,\n  embedding TEXT NOT NULL,\n  updated_at INTEGER NOT NULL\n);"
    "CREATE TABLE IF NOT EXISTS embedding_cache (\n  provider TEXT NOT NULL,\n  model TEXT NOT "
    "NULL,\n  provider_key TEXT NOT NULL,\n  hash TEXT NOT NULL,\n  embedding TEXT NOT "
    "NULL,\n  dims INTEGER,\n  updated_at INTEGER NOT NULL,\n  PRIMARY KEY (provider, model, "
    "provider_key, hash)\n);"
    "CREATE INDEX IF NOT EXISTS idx_embedding_cache_updated_at ON embedding_cache(updated_at);"
    "CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(\n  text,\n  id UNINDEXED,\n  "
    "path UNINDEXED,\n  source UNINDEXED,\n  model UNINDEXED,\n  start_line UNINDEXED,\n  "
    "end_line UNINDEXED\n);"
    "CREATE INDEX IF NOT EXISTS idx_chunks_path ON chunks(path);"
    "CREATE INDEX IF NOT EXISTS idx_chunks_source ON chunks(source);";

void qc_index_sync(const char *path, const char *rel, const char *text)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    static const char *const sql[] = {
        "INSERT OR REPLACE INTO files (path, source, hash, mtime, size) VALUES (?1, 'memory', "
        "'h-' || ?1, 1700000000000, length(?2))",
        "INSERT OR REPLACE INTO chunks (id, path, source, start_line, end_line, hash, model, "
        "text, embedding, updated_at) VALUES ('c-' || ?1, ?1, 'memory', 1, 1, 'h-' || ?1, "
        "'fts-only', ?2, '[]', 1700000000000)",
        "INSERT INTO chunks_fts (text, id, path, source, model, start_line, end_line) VALUES "
        "(?2, 'c-' || ?1, ?1, 'memory', 'fts-only', 1, 1)",
        "INSERT INTO meta (key, value) VALUES ('memory_index_meta_v1', "
        "'{\"model\":\"fts-only\",\"provider\":\"none\",\"sources\":[\"memory\"],"
        "\"scopeHash\":\"x\",\"chunkTokens\":400,\"chunkOverlap\":80}') "
        "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
    };
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) == SQLITE_OK &&
        sqlite3_exec(db, "PRAGMA busy_timeout = 5000", NULL, NULL, NULL) == SQLITE_OK &&
        sqlite3_exec(db, qc_schema, NULL, NULL, NULL) == SQLITE_OK) {
        for (size_t i = 0; i < ARRAY_LEN(sql); i++) {
            if (sqlite3_prepare_v2(db, sql[i], -1, &q, NULL) != SQLITE_OK) break;
            sqlite3_bind_text(q, 1, rel, -1, SQLITE_STATIC);
            sqlite3_bind_text(q, 2, text, -1, SQLITE_STATIC);
            sqlite3_step(q);
            sqlite3_finalize(q);
            q = NULL;
        }
    }
    sqlite3_close(db);
}

const char *pg_dsn;

void pg_overlay(const char *state, const char *agent)
{
    buf b = BUF_INIT;
    cm_buf_printf(&b,
                  "{agents: {defaults: {memorySearch: {store: {driver: 'postgres', dsn: '%s'}}}}}",
                  pg_dsn);
    write_file(state, "clawmem.json", b.data);
    cm_buf_release(&b);
    store s;
    char err[256];
    if (cm_store_open_pg(&s, pg_dsn, agent, "porter", STORE_CREATE, 5000, err, sizeof err) ==
        CM_OK) {
        cm_store_drop_agent(&s, err, sizeof err);
        cm_store_close(&s);
    }
}

bool pg_integrity_ok(const char *agent)
{
    store s;
    char err[256];
    bool ok = false;
    if (cm_store_open_pg(&s, pg_dsn, agent, "porter", 0, 5000, err, sizeof err) != CM_OK)
        return false;
    if (cm_store_check(&s, &ok, err, sizeof err) != CM_OK) ok = false;
    cm_store_close(&s);
    return ok;
}

json_t *sync_search(const char *ws, const char *state, const char *cfg, const char *query)
{
    cm_options o = {NULL, ws, cfg, state, NULL, NULL, 0};
    cm_engine *eng = NULL;
    char err[512], *js = NULL;
    json_t *p = NULL;
    if (cm_engine_open(&o, &eng, err, sizeof err) != CM_OK) return NULL;
    cm_search_opts so = {10, 0, 0};
    if (cm_engine_sync(eng, 0, NULL, NULL, NULL, err, sizeof err) == CM_OK &&
        cm_memory_search(eng, query, &so, &js, err, sizeof err) == CM_OK)
        p = json_loads(js, 0, NULL);
    cm_free(js);
    cm_engine_close(eng);
    return p;
}
