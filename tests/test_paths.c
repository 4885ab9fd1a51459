/*
 * test_paths.c — nothing outside the memory files is read, written or waited
 * on: the descriptor walk (base/path), memory_get and memory_write racing a
 * thread that swaps a directory and a symbolic link to the outside with
 * renameat2(RENAME_EXCHANGE), FIFOs swapped in for notes, planted hard links
 * at temporary names, names near NAME_MAX, MEMORY.md vs memory.md, a written
 * note found at once, memory_get's fidelity with QuantumClaw 2026.3.22, the
 * symlinked lock file and the config file that is a FIFO or a symlink. Races
 * run a bounded time; anything that could hang runs under a watchdog.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../src/base/fs.h"
#include "../src/base/path.h"
#include "../src/config/config.h"
#include "../src/tools/tools.h"
#include "test.h"

#define RACE_MS 1000

static char *slurp(const char *path)
{
    buf b = BUF_INIT;
    char err[256];
    if (cm_fs_read_file(path, 1 << 26, &b, err, sizeof err) != CM_OK) return NULL;
    return cm_buf_detach(&b);
}

static size_t count_of(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; p && (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* ---- a thread exchanging two names -------------------------------------- */

typedef struct swapper {
    const char *a, *b;
    atomic_int stop;
    long swaps;
    pthread_t tid;
} swapper;

static void *swap_main(void *arg)
{
    swapper *s = arg;
    while (!atomic_load(&s->stop))
        if (renameat2(AT_FDCWD, s->a, AT_FDCWD, s->b, RENAME_EXCHANGE) == 0) s->swaps++;
    return NULL;
}

static void swap_start(swapper *s, const char *a, const char *b)
{
    s->a = a;
    s->b = b;
    atomic_store(&s->stop, 0);
    s->swaps = 0;
    pthread_create(&s->tid, NULL, swap_main, s);
}

static void swap_stop(swapper *s)
{
    atomic_store(&s->stop, 1);
    pthread_join(s->tid, NULL);
}

/* ---- a watchdog: runs fn on a thread, false when it did not end in time -- */

static bool within(void *(*fn)(void *), void *arg, int ms)
{
    pthread_t t;
    if (pthread_create(&t, NULL, fn, arg)) return false;
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += ms / 1000;
    dl.tv_nsec += (long)(ms % 1000) * 1000000;
    if (dl.tv_nsec >= 1000000000) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000;
    }
    if (pthread_timedjoin_np(t, NULL, &dl) == 0) return true;
    pthread_detach(t); /* hung: leave it, the test has failed */
    return false;
}

typedef struct ws_env {
    char *dir;
    char ws[1024], out[1024];
    cm_config cfg;
} ws_env;

static void ws_init(ws_env *w)
{
    memset(w, 0, sizeof *w);
    w->dir = tmp_dir();
    snprintf(w->ws, sizeof w->ws, "%s/ws", w->dir);
    snprintf(w->out, sizeof w->out, "%s/outside", w->dir);
    write_file(w->dir, "ws/memory/sub/note.md", "INSIDE\n");
    write_file(w->dir, "outside/note.md", "OUTSIDE\n");
    w->cfg.workspace = w->ws;
}

static cm_rc get(const ws_env *w, const char *path, long from, long offset, long lines, buf *out,
                 char *err, size_t errlen)
{
    cm_buf_reset(out);
    return cm_tools_get(&w->cfg, path, strlen(path), from, offset, lines, out, err, errlen);
}

/* ---- the walk ------------------------------------------------------------ */

TEST(paths_walk_never_follows_a_link)
{
    ws_env w;
    ws_init(&w);
    EXPECT(symlink(w.out, path_in(w.ws, "memory/lnk")) == 0);
    EXPECT(symlink("..", path_in(w.ws, "memory/up")) == 0);
    EXPECT(mkfifo(path_in(w.ws, "memory/pipe.md"), 0600) == 0);
    int root = -1, fd = -1;
    char err[512];
    EXPECT_INT(cm_path_open_root(w.ws, false, &root, err, sizeof err), CM_OK);
    for (int fallback = 0; fallback < 2; fallback++) {
        cm_path_force_fallback(fallback);
        EXPECT_INT(
            cm_path_open_beneath(root, "memory/sub/note.md", O_RDONLY, &fd, NULL, err, sizeof err),
            CM_OK);
        close(fd);
        EXPECT_INT(
            cm_path_open_beneath(root, "memory/lnk/note.md", O_RDONLY, &fd, NULL, err, sizeof err),
            CM_EPATH);
        EXPECT_CONTAINS(err, "symbolic link");
        EXPECT_INT(cm_path_open_beneath(root, "memory/up/ws/memory/sub/note.md", O_RDONLY, &fd,
                                        NULL, err, sizeof err),
                   CM_EPATH);
        EXPECT_INT(cm_path_open_beneath(root, "memory/../memory/sub/note.md", O_RDONLY, &fd, NULL,
                                        err, sizeof err),
                   CM_EPATH);
        EXPECT_INT(cm_path_open_beneath(root, "/etc/passwd", O_RDONLY, &fd, NULL, err, sizeof err),
                   CM_EPATH);
        EXPECT_INT(
            cm_path_open_beneath(root, "memory/none/x.md", O_RDONLY, &fd, NULL, err, sizeof err),
            CM_ENOTFOUND);
        EXPECT_INT(cm_path_open_beneath(root, "memory/sub/note.md/x.md", O_RDONLY, &fd, NULL, err,
                                        sizeof err),
                   CM_EPATH);
        EXPECT_INT(
            cm_path_open_beneath(root, "memory/pipe.md", O_RDONLY, &fd, NULL, err, sizeof err),
            CM_EPATH);
        EXPECT_CONTAINS(err, "not a regular file");
        int dir = -1;
        const char *leaf;
        EXPECT_INT(cm_path_open_dir(root, fallback ? "memory/new1/a/b.md" : "memory/new0/a/b.md",
                                    PATH_MKDIRS, &dir, &leaf, err, sizeof err),
                   CM_OK);
        EXPECT_STR(leaf, "b.md");
        close(dir);
        EXPECT_INT(cm_path_open_dir(root, "memory/lnk/made/b.md", PATH_MKDIRS, &dir, &leaf, err,
                                    sizeof err),
                   CM_EPATH);
    }
    cm_path_force_fallback(0);
    struct stat st;
    EXPECT(stat(path_in(w.ws, "memory/new1/a"), &st) == 0 && S_ISDIR(st.st_mode));
    EXPECT(stat(path_in(w.out, "made"), &st) != 0); /* nothing created outside */
    close(root);
}

/* ---- races --------------------------------------------------------------- */

TEST(paths_get_races_a_swapped_directory)
{
    ws_env w;
    ws_init(&w);
    char sub[1100], lnk[1100];
    snprintf(sub, sizeof sub, "%s/memory/sub", w.ws);
    snprintf(lnk, sizeof lnk, "%s/memory/lnk", w.ws);
    EXPECT(symlink(w.out, lnk) == 0);
    long calls = 0, inside = 0, outside = 0;
    buf b = BUF_INIT;
    char err[512];
    for (int fallback = 0; fallback < 2; fallback++) {
        cm_path_force_fallback(fallback);
        swapper s;
        swap_start(&s, sub, lnk);
        int64_t t0 = cm_now_ms();
        while (cm_now_ms() - t0 < RACE_MS / 2 && calls < 200000) {
            const char *p = calls & 1 ? "memory/lnk/note.md" : "memory/sub/note.md";
            if (get(&w, p, 0, 0, 0, &b, err, sizeof err) == CM_OK) {
                outside += strstr(b.data, "OUTSIDE") != NULL;
                inside += strstr(b.data, "INSIDE") != NULL;
            }
            calls++;
        }
        swap_stop(&s);
        EXPECT(s.swaps > 10);
    }
    cm_path_force_fallback(0);
    cm_buf_release(&b);
    printf("     memory_get: %ld calls, %ld inside, %ld outside\n", calls, inside, outside);
    EXPECT(calls > 1000);
    EXPECT(inside > 0);
    EXPECT_INT(outside, 0);
}

TEST(paths_write_races_a_swapped_directory)
{
    ws_env w;
    ws_init(&w);
    char sub[1100], lnk[1100];
    snprintf(sub, sizeof sub, "%s/memory/sub", w.ws);
    snprintf(lnk, sizeof lnk, "%s/memory/lnk", w.ws);
    EXPECT(symlink(w.out, lnk) == 0);
    long calls = 0, acked = 0;
    buf b = BUF_INIT;
    char err[512], note[64];
    for (int fallback = 0; fallback < 2; fallback++) {
        cm_path_force_fallback(fallback);
        swapper s;
        swap_start(&s, sub, lnk);
        int64_t t0 = cm_now_ms();
        while (cm_now_ms() - t0 < RACE_MS / 2 && calls < 100000) {
            snprintf(note, sizeof note, "note-%06ld", calls);
            cm_buf_reset(&b);
            if (cm_tools_write(&w.cfg, "memory/sub/note.md", note, 0, &b, NULL, err, sizeof err) ==
                CM_OK)
                acked++;
            calls++;
        }
        swap_stop(&s);
    }
    cm_path_force_fallback(0);
    cm_buf_release(&b);
    /* The real directory is under one of the two names. */
    struct stat st;
    const char *real = lstat(sub, &st) == 0 && S_ISDIR(st.st_mode) ? sub : lnk;
    char *text = slurp(path_in(real, "note.md"));
    char *out = slurp(path_in(w.out, "note.md"));
    printf("     memory_write: %ld calls, %ld acknowledged\n", calls, acked);
    EXPECT(acked > 5);
    EXPECT(text != NULL);
    EXPECT_INT(count_of(text, "note-"), acked); /* none lost, none twice */
    EXPECT(strstr(text, "OUTSIDE") == NULL);    /* nothing copied in */
    EXPECT_STR(out, "OUTSIDE\n");               /* nothing written out */
    DIR *d = opendir(w.out);
    int entries = 0;
    for (struct dirent *de; d && (de = readdir(d));)
        entries += de->d_name[0] != '.' || (de->d_name[1] && strcmp(de->d_name, ".."));
    if (d) closedir(d);
    EXPECT_INT(entries, 1); /* only note.md: no temporary file landed outside */
    free(text);
    free(out);
}

/* ---- FIFOs ---------------------------------------------------------------- */

typedef struct fifo_run {
    ws_env *w;
    int n;
    int errors, ok;
} fifo_run;

static void *fifo_calls(void *arg)
{
    fifo_run *f = arg;
    buf b = BUF_INIT;
    char err[512];
    for (int i = 0; i < f->n; i++) {
        cm_rc rc = get(f->w, "memory/n.md", 0, 0, 0, &b, err, sizeof err);
        if (rc == CM_OK)
            f->ok++;
        else
            f->errors++;
        cm_buf_reset(&b);
        rc = cm_tools_write(&f->w->cfg, "memory/n.md", "fifo race", 0, &b, NULL, err, sizeof err);
        if (rc == CM_OK)
            f->ok++;
        else
            f->errors++;
    }
    cm_buf_release(&b);
    return NULL;
}

TEST(paths_fifo_never_blocks)
{
    ws_env w;
    ws_init(&w);
    write_file(w.ws, "memory/n.md", "note\n");
    EXPECT(mkfifo(path_in(w.ws, "memory/pipe.md"), 0600) == 0);
    buf b = BUF_INIT;
    char err[512];
    int64_t t0 = cm_now_ms();
    EXPECT_INT(get(&w, "memory/pipe.md", 0, 0, 0, &b, err, sizeof err), CM_EPATH);
    EXPECT_CONTAINS(err, "not a regular file");
    EXPECT_INT(cm_tools_write(&w.cfg, "memory/pipe.md", "x", 0, &b, NULL, err, sizeof err),
               CM_EPATH);
    EXPECT(cm_now_ms() - t0 < 2000);
    cm_buf_release(&b);
    /* A FIFO swapped in and out for the note while memory_get and
     * memory_write run: every call ends, under a watchdog. */
    EXPECT(mkfifo(path_in(w.ws, "memory/f"), 0600) == 0);
    char n[1100], f[1100];
    snprintf(n, sizeof n, "%s/memory/n.md", w.ws);
    snprintf(f, sizeof f, "%s/memory/f", w.ws);
    swapper s;
    swap_start(&s, n, f);
    fifo_run run = {&w, 1000, 0, 0};
    bool done = within(fifo_calls, &run, 30000);
    swap_stop(&s);
    EXPECT(done);
    EXPECT(run.errors > 0 || run.ok > 0);
}

/* ---- temporary files and names ------------------------------------------- */

TEST(paths_write_temp_hard_link_and_stale_temps)
{
    ws_env w;
    ws_init(&w);
    write_file(w.out, "secret.md", "SECRET\n");
    write_file(w.ws, "memory/note.md", "first\n");
    char planted[1200];
    const char *secret = path_in(w.out, "secret.md");
    /* the old predictable name, and names of the new pattern */
    snprintf(planted, sizeof planted, "%s/memory/.note.md.clawmem-%ld.tmp", w.ws, (long)getpid());
    EXPECT(link(secret, planted) == 0);
    EXPECT(link(secret, path_in(w.ws, "memory/.clawmem-0000000000000000.tmp")) == 0);
    /* a killed writer's leftover, and a user's file that only looks alike */
    write_file(w.ws, "memory/.clawmem-0123456789abcdef.tmp", "stale");
    write_file(w.ws, "memory/.clawmem-notes.tmp", "mine");
    buf b = BUF_INIT;
    char err[512];
    EXPECT_INT(cm_tools_write(&w.cfg, "memory/note.md", "second", 0, &b, NULL, err, sizeof err),
               CM_OK);
    cm_buf_release(&b);
    char *s = slurp(secret), *note = slurp(path_in(w.ws, "memory/note.md"));
    EXPECT_STR(s, "SECRET\n");
    EXPECT_STR(note, "first\n\nsecond\n");
    struct stat st;
    EXPECT(lstat(planted, &st) != 0);
    EXPECT(lstat(path_in(w.ws, "memory/.clawmem-0123456789abcdef.tmp"), &st) != 0);
    EXPECT(lstat(path_in(w.ws, "memory/.clawmem-notes.tmp"), &st) == 0);
    free(s);
    free(note);
}

TEST(paths_write_name_near_name_max)
{
    ws_env w;
    ws_init(&w);
    char rel[NAME_MAX + 16];
    int k = snprintf(rel, sizeof rel, "memory/");
    for (int i = 0; i < NAME_MAX - 3; i++)
        rel[k++] = 'n';
    snprintf(rel + k, sizeof rel - (size_t)k, ".md");
    EXPECT_INT(strlen(strrchr(rel, '/') + 1), NAME_MAX);
    buf b = BUF_INIT;
    char err[512];
    EXPECT_INT(cm_tools_write(&w.cfg, rel, "long name one", 0, &b, NULL, err, sizeof err), CM_OK);
    cm_buf_reset(&b);
    EXPECT_INT(cm_tools_write(&w.cfg, rel, "long name two", 0, &b, NULL, err, sizeof err), CM_OK);
    EXPECT_INT(get(&w, rel, 0, 0, 0, &b, err, sizeof err), CM_OK);
    EXPECT_CONTAINS(b.data, "long name one\\n\\nlong name two\\n");
    cm_buf_release(&b);
}

TEST(paths_write_memory_md_goes_to_the_indexed_file)
{
    ws_env w;
    ws_init(&w);
    buf b = BUF_INIT;
    char err[512];
    /* MEMORY.md exists: "memory.md" writes into it, never a file nobody indexes */
    write_file(w.ws, "MEMORY.md", "# Long term\n");
    EXPECT_INT(cm_tools_write(&w.cfg, "memory.md", "kept in MEMORY", 0, &b, NULL, err, sizeof err),
               CM_OK);
    EXPECT_CONTAINS(b.data, "\"path\":\"MEMORY.md\"");
    struct stat st;
    bool ci = lstat(path_in(w.ws, "memory.md"), &st) == 0; /* a case-insensitive file system */
    char *m = slurp(path_in(w.ws, "MEMORY.md"));
    EXPECT_CONTAINS(m, "kept in MEMORY");
    free(m);
    /* only memory.md exists: "MEMORY.md" writes into it */
    ws_env v;
    ws_init(&v);
    write_file(v.ws, "memory.md", "# lower\n");
    cm_buf_reset(&b);
    EXPECT_INT(cm_tools_write(&v.cfg, "MEMORY.md", "kept in memory", 0, &b, NULL, err, sizeof err),
               CM_OK);
    if (!ci) {
        EXPECT_CONTAINS(b.data, "\"path\":\"memory.md\"");
        EXPECT(lstat(path_in(v.ws, "MEMORY.md"), &st) != 0);
    }
    m = slurp(path_in(v.ws, "memory.md"));
    EXPECT_CONTAINS(m, "kept in memory");
    free(m);
    cm_buf_release(&b);
}

/* ---- memory_get fidelity ------------------------------------------------- */

TEST(paths_get_is_the_files_bytes)
{
    ws_env w;
    ws_init(&w);
    write_file(w.ws, "memory/crlf.md", "a\r\nb\r\n");
    write_file(w.ws, "memory/lf.md", "x\ny\n");
    write_file(w.ws, "MEMORY.md", "top\n");
    EXPECT(symlink(path_in(w.out, "note.md"), path_in(w.ws, "memory/link.md")) == 0);
    buf b = BUF_INIT;
    char err[512], p[1200];
    struct {
        const char *path;
        long from, lines;
        const char *want;
    } cases[] = {
        {"memory/crlf.md", 0, 0, "{\"path\":\"memory/crlf.md\",\"text\":\"a\\r\\nb\\r\\n\"}"},
        {"memory/crlf.md", 2, 1, "{\"path\":\"memory/crlf.md\",\"text\":\"b\\r\"}"},
        {"memory/crlf.md", 1, 3, "{\"path\":\"memory/crlf.md\",\"text\":\"a\\r\\nb\\r\\n\"}"},
        {"memory/lf.md", 0, 0, "{\"path\":\"memory/lf.md\",\"text\":\"x\\ny\\n\"}"},
        {"memory/lf.md", 2, 0, "{\"path\":\"memory/lf.md\",\"text\":\"y\\n\"}"},
        {"memory/lf.md", 2, 1, "{\"path\":\"memory/lf.md\",\"text\":\"y\"}"},
        {"memory/lf.md", 3, 0, "{\"path\":\"memory/lf.md\",\"text\":\"\"}"},
        {"memory/lf.md", 4, 0, "{\"path\":\"memory/lf.md\",\"text\":\"\"}"},
        {"memory/../MEMORY.md", 0, 0, "{\"path\":\"MEMORY.md\",\"text\":\"top\\n\"}"},
        {"  memory//lf.md\n", 1, 1, "{\"path\":\"memory/lf.md\",\"text\":\"x\"}"},
        {"../ws/memory/lf.md", 1, 1, "{\"path\":\"memory/lf.md\",\"text\":\"x\"}"},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        EXPECT_INT(get(&w, cases[i].path, cases[i].from, 0, cases[i].lines, &b, err, sizeof err),
                   CM_OK);
        EXPECT_STR(b.data, cases[i].want);
    }
    snprintf(p, sizeof p, "%s/memory/lf.md", w.ws); /* absolute, inside */
    EXPECT_INT(get(&w, p, 0, 0, 0, &b, err, sizeof err), CM_OK);
    EXPECT_STR(b.data, "{\"path\":\"memory/lf.md\",\"text\":\"x\\ny\\n\"}");
    snprintf(p, sizeof p, "%s/memory/link.md", w.ws); /* absolute, a link: refused */
    EXPECT_INT(get(&w, p, 0, 0, 0, &b, err, sizeof err), CM_EPATH);
    EXPECT_CONTAINS(err, "symbolic link");
    snprintf(p, sizeof p, "%s/note.md", w.out); /* absolute, outside */
    EXPECT_INT(get(&w, p, 0, 0, 0, &b, err, sizeof err), CM_EPATH);
    cm_buf_release(&b);
}

TEST(paths_get_continues_inside_a_long_line)
{
    ws_env w;
    ws_init(&w);
    buf t = BUF_INIT, got = BUF_INIT, b = BUF_INIT;
    while (t.len < TOOLS_GET_MAX_BYTES * 5 / 2)
        cm_buf_adds(&t, "abcé"); /* a 2-byte character falls on some cut */
    cm_buf_adds(&t, "\r\nsecond line\n");
    for (int i = 0; i < 20000; i++)
        cm_buf_adds(&t, "a short line of text\n");
    write_file(w.ws, "memory/long.md", t.data);
    char err[512];
    long from = 1, offset = 0;
    int parts = 0;
    bool inside_line = false;
    for (; parts < 20; parts++) {
        EXPECT_INT(get(&w, "memory/long.md", from, offset, 0, &b, err, sizeof err), CM_OK);
        json_t *j = json_loads(b.data, 0, NULL);
        EXPECT(j != NULL);
        const char *text = json_string_value(json_object_get(j, "text"));
        EXPECT(strlen(text) <= TOOLS_GET_MAX_BYTES);
        cm_buf_adds(&got, text);
        bool more = json_is_true(json_object_get(j, "truncated"));
        from = (long)json_integer_value(json_object_get(j, "nextFrom"));
        offset = (long)json_integer_value(json_object_get(j, "nextOffset"));
        inside_line |= offset > 0;
        json_decref(j);
        if (!more) break;
    }
    EXPECT(inside_line);
    EXPECT(parts >= 2); /* three parts at least: two cuts inside the 2.5 MiB line */
    EXPECT_INT(got.len, t.len);
    EXPECT(memcmp(got.data, t.data, t.len) == 0); /* the parts add up to the file, byte for byte */
    /* an offset inside a character starts at the next one */
    EXPECT_INT(get(&w, "memory/long.md", 1, 3, 1, &b, err, sizeof err), CM_OK);
    EXPECT_CONTAINS(b.data, "\"text\":\"éabc");
    EXPECT_INT(get(&w, "memory/long.md", 1, 4, 1, &b, err, sizeof err), CM_OK);
    EXPECT_CONTAINS(b.data, "\"text\":\"abcé");
    cm_buf_release(&t);
    cm_buf_release(&got);
    cm_buf_release(&b);
}

/* ---- through the engine -------------------------------------------------- */

typedef struct eng_env {
    char *dir;
    char ws[1024], state[1024], cfg[1024];
} eng_env;

static cm_engine *eng_open(eng_env *e, bool write_cfg)
{
    if (write_cfg) {
        e->dir = tmp_dir();
        snprintf(e->ws, sizeof e->ws, "%s/ws", e->dir);
        snprintf(e->state, sizeof e->state, "%s/state", e->dir);
        snprintf(e->cfg, sizeof e->cfg, "%s/config.json", e->dir);
        write_file(e->dir, "config.json", "{}");
        write_file(e->dir, "ws/MEMORY.md", "# Memory\n\nThe router is an Omada.\n");
    }
    cm_options o = {NULL, e->ws, e->cfg, e->state, NULL, NULL, 1};
    cm_engine *eng = NULL;
    char err[512];
    if (cm_engine_open(&o, &eng, err, sizeof err) != CM_OK) {
        fprintf(stderr, "  open: %s\n", err);
        return NULL;
    }
    return eng;
}

TEST(paths_written_note_is_found_at_once)
{
    eng_env env;
    cm_engine *e = eng_open(&env, true);
    EXPECT(e != NULL);
    char err[512], *js = NULL;
    EXPECT_INT(cm_engine_sync(e, 0, NULL, NULL, NULL, err, sizeof err), CM_OK);
    /* no watcher, no sync: the write itself indexes the note */
    EXPECT_INT(cm_memory_write(e, NULL, "The zebracorn password hint is the blue door.", 0, &js,
                               err, sizeof err),
               CM_OK);
    cm_free(js);
    EXPECT_INT(cm_memory_search(e, "zebracorn", NULL, &js, err, sizeof err), CM_OK);
    EXPECT_CONTAINS(js, "zebracorn");
    EXPECT_CONTAINS(js, "\"path\":\"memory/");
    cm_free(js);
    /* memory.md while MEMORY.md exists: the note lands in MEMORY.md, and is found */
    EXPECT_INT(cm_memory_write(e, "memory.md", "Quokkafish live in the long-term file.", 0, &js,
                               err, sizeof err),
               CM_OK);
    EXPECT_CONTAINS(js, "\"path\":\"MEMORY.md\"");
    cm_free(js);
    /* another engine (another process's view) sees both */
    cm_engine *r = eng_open(&env, false);
    EXPECT(r != NULL);
    EXPECT_INT(cm_memory_search(r, "quokkafish", NULL, &js, err, sizeof err), CM_OK);
    EXPECT_CONTAINS(js, "\"path\":\"MEMORY.md\"");
    cm_free(js);
    EXPECT_INT(cm_memory_search(r, "Omada", NULL, &js, err, sizeof err), CM_OK);
    EXPECT_CONTAINS(js, "\"path\":\"MEMORY.md\"");
    cm_free(js);
    cm_engine_close(r);
    cm_engine_close(e);
}

TEST(paths_lock_file_symlink_is_not_followed)
{
    eng_env env;
    cm_engine *e = eng_open(&env, true);
    EXPECT(e != NULL);
    write_file(env.dir, "target.txt", "KEEP ME\n");
    char lock[1200], err[512];
    write_file(env.state, "memory/.keep", "");
    snprintf(lock, sizeof lock, "%s/memory/main.clawmem.sqlite.lock", env.state);
    EXPECT(symlink(path_in(env.dir, "target.txt"), lock) == 0);
    EXPECT(cm_engine_sync(e, 0, NULL, NULL, NULL, err, sizeof err) != CM_OK);
    EXPECT_CONTAINS(err, "symbolic link");
    char *t = slurp(path_in(env.dir, "target.txt"));
    EXPECT_STR(t, "KEEP ME\n");
    free(t);
    cm_engine_close(e);
}

typedef struct cfg_run {
    const char *path;
    cm_rc rc;
    cm_config cfg;
    char err[512];
} cfg_run;

static void *load_cfg(void *arg)
{
    cfg_run *c = arg;
    cm_config_args a = {NULL, NULL, c->path, NULL};
    cm_logger lg = {0};
    c->rc = cm_config_init(&a, &lg, &c->cfg, c->err, sizeof c->err);
    return NULL;
}

TEST(paths_config_fifo_fails_and_symlink_is_followed)
{
    char *d = tmp_dir();
    char fifo[1100];
    snprintf(fifo, sizeof fifo, "%s/fifo.json", d);
    EXPECT(mkfifo(fifo, 0600) == 0);
    cfg_run c = {fifo, CM_OK, {0}, ""};
    EXPECT(within(load_cfg, &c, 10000)); /* today: hangs */
    EXPECT(c.rc != CM_OK);
    EXPECT_CONTAINS(c.err, "not a regular file");
    /* a dotfile manager's link is followed */
    write_file(d, "dotfiles/quantumclaw.json", "{memory: {citations: \"off\"}}");
    char lnk[1100];
    snprintf(lnk, sizeof lnk, "%s/quantumclaw.json", d);
    EXPECT(symlink(path_in(d, "dotfiles/quantumclaw.json"), lnk) == 0);
    cfg_run l = {lnk, CM_OK, {0}, ""};
    EXPECT(within(load_cfg, &l, 10000));
    EXPECT_INT(l.rc, CM_OK);
    EXPECT_INT(l.cfg.citations, CM_CITE_OFF);
    cm_config_release(&l.cfg);
}

static json_t *rpc_call(proc *p, const char *req)
{
    proc_send(p, req);
    char *line = proc_line(p, 10000);
    json_t *j = line ? json_loads(line, 0, NULL) : NULL;
    free(line);
    return j;
}

static size_t mcp_hits(proc *p, const char *q)
{
    char req[512];
    snprintf(req, sizeof req,
             "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":"
             "\"memory_search\",\"arguments\":{\"query\":\"%s\"}}}",
             q);
    json_t *r = rpc_call(p, req);
    size_t n = json_array_size(json_object_get(
        json_object_get(json_object_get(r, "result"), "structuredContent"), "results"));
    json_decref(r);
    return n;
}

TEST(paths_mcp_written_note_is_found_without_a_watcher)
{
    char *d = tmp_dir();
    write_file(d, "ws/MEMORY.md", "# Facts\n\n- The dog is called Biscuit.\n");
    write_file(d, "qc.json", "{}");
    char ws[1100], state[1100];
    snprintf(ws, sizeof ws, "%s/ws", d);
    snprintf(state, sizeof state, "%s/state", d);
    const char *args[] = {"--workspace",         ws,    "--state-dir", state,           "--config",
                          path_in(d, "qc.json"), "mcp", "--no-watch",  "--allow-write", NULL};
    proc p;
    proc_start(&p, NULL, args);
    /* the one sync at start */
    bool ready = false;
    for (int t = 0; t < 10000 && !ready; t += 50) {
        ready = mcp_hits(&p, "Biscuit") > 0;
        if (!ready) usleep(50000);
    }
    EXPECT(ready);
    json_t *r = rpc_call(&p, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\",\"params\":{"
                             "\"name\":\"memory_write\",\"arguments\":{\"text\":\"The zebracorn "
                             "lives behind the blue door.\"}}}");
    EXPECT(json_is_false(json_object_get(json_object_get(r, "result"), "isError")));
    json_decref(r);
    EXPECT_INT(mcp_hits(&p, "zebracorn"), 1); /* at once: no watcher, no waiting */
    EXPECT_INT(proc_stop(&p, 0, 5000), 0);
}
