/*
 * fuzz_path.c — path resolution on arbitrary bytes under a temporary root
 * full of symbolic links (to "..", to an outside directory, to an outside
 * file, relative and absolute): whatever cm_path_open_beneath, cm_path_open_dir or
 * memory_get (cm_tools_get) opens must lie inside the workspace — a file or
 * directory outside it, or the outside file's text, traps.
 */
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/base/fs.h"
#include "../../src/base/path.h"
#include "../../src/tools/tools.h"
#include "fuzz.h"

static char root[4096], ws[4200];
static int ws_fd = -1;
static cm_config cfg;
static char *extra[] = {(char *)"extra"};
/* inodes of everything inside the workspace */
static ino_t inside[64];
static size_t ninside;

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    return remove(p);
}

static void cleanup(void)
{
    if (root[0]) nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void put(const char *rel, const char *text)
{
    char p[4400];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    char *d = cm_fs_dirname(p);
    cm_fs_mkdirs(d, NULL, 0);
    free(d);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void link_at(const char *target, const char *rel)
{
    char p[4400];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    if (symlink(target, p) != 0) __builtin_trap();
}

static int note_inside(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)p;
    (void)f;
    if ((flag == FTW_F || flag == FTW_D) && ninside < 64) inside[ninside++] = st->st_ino;
    return 0;
}

static void setup(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(root, sizeof root, "%s/clawmem-fuzz-path-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(root)) __builtin_trap();
    atexit(cleanup);
    char out[4400];
    snprintf(ws, sizeof ws, "%s/ws", root);
    snprintf(out, sizeof out, "%s/outside", root);
    put("ws/MEMORY.md", "inside\n");
    put("ws/memory/a.md", "inside\n");
    put("ws/memory/d/b.md", "inside\nline two\r\n");
    put("ws/extra/e.md", "inside\n");
    put("outside/s.md", "SECRET\n");
    put("outside/memory/x.md", "SECRET\n");
    link_at("..", "ws/memory/up");
    link_at(out, "ws/memory/out");
    link_at("../../outside", "ws/memory/rel");
    link_at("../../outside/s.md", "ws/memory/o.md");
    link_at("/", "ws/memory/d/slash");
    link_at(out, "ws/extra/x");
    nftw(ws, note_inside, 16, FTW_PHYS);
    cfg.workspace = ws;
    cfg.extra_paths.v = extra;
    cfg.extra_paths.n = 1;
    ws_fd = open(ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (ws_fd < 0) __builtin_trap();
}

static void must_be_inside(int fd)
{
    struct stat st;
    if (fstat(fd, &st) != 0) __builtin_trap();
    for (size_t i = 0; i < ninside; i++)
        if (inside[i] == st.st_ino) return;
    __builtin_trap();
}

int fuzz_path(const uint8_t *data, size_t size)
{
    if (ws_fd < 0) setup();
    if (size > 4096) return 0;
    char *s = cm_strndup((const char *)data, size); /* cut at the first NUL */
    if (!s) return 0;
    char err[512];
    for (int fallback = 0; fallback < 2; fallback++) {
        cm_path_force_fallback(fallback);
        int fd = -1, dir = -1;
        const char *leaf;
        if (cm_path_open_beneath(ws_fd, s, O_RDONLY, &fd, NULL, err, sizeof err) == CM_OK) {
            must_be_inside(fd);
            close(fd);
        }
        if (cm_path_open_dir(ws_fd, s, 0, &dir, &leaf, err, sizeof err) == CM_OK) {
            must_be_inside(dir);
            close(dir);
        }
    }
    cm_path_force_fallback(0);
    buf out = BUF_INIT;
    long from = size ? data[0] % 4 : 0;
    if (cm_tools_get(&cfg, (const char *)data, size, from, 0, 0, &out, err, sizeof err) == CM_OK) {
        const char *text = strstr(out.data, ",\"text\":"); /* after "path" */
        if (!text || strstr(text, "SECRET")) __builtin_trap();
    }
    cm_buf_release(&out);
    free(s);
    return 0;
}

FUZZ_ENTRY(fuzz_path)
