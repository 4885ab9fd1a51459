/*
 * qmd_env.c — see qmd_env.h.
 */
#include <dirent.h>
#include <signal.h>

#include "qmd_env.h"

static void on_log(void *ctx, cm_log_level level, const char *msg)
{
    qenv *q = ctx;
    if (level >= CM_LOG_WARN) cm_buf_printf(&q->log, "%s\n", msg);
}

void qenv_init(qenv *q, const char *config)
{
    memset(q, 0, sizeof *q);
    q->dir = tmp_dir();
    snprintf(q->ws, sizeof q->ws, "%s/ws", q->dir);
    snprintf(q->state, sizeof q->state, "%s/state", q->dir);
    snprintf(q->cfg, sizeof q->cfg, "%s/quantumclaw.json", q->dir);
    snprintf(q->fake, sizeof q->fake, "%s/fake", q->dir);
    write_file(q->dir, "quantumclaw.json", config);
    write_file(q->ws, "MEMORY.md", "# Memory\n\nThe router uses VLAN 20 for AdGuard.\n");
}

cm_engine *qopen(qenv *q)
{
    cm_options o = {NULL, q->ws, q->cfg, q->state, on_log, q, 0};
    cm_engine *e = NULL;
    char err[512];
    if (cm_engine_open(&o, &e, err, sizeof err)) {
        fprintf(stderr, "  open: %s\n", err);
        return NULL;
    }
    return e;
}

json_t *qsearch(cm_engine *e, const char *query, const char *key)
{
    char *js = NULL, err[512];
    if (cm_memory_search_session(e, query, NULL, key, &js, err, sizeof err)) {
        fprintf(stderr, "  search: %s\n", err);
        return NULL;
    }
    json_t *o = json_loads(js, 0, NULL);
    cm_free(js);
    return o;
}

size_t nresults(const json_t *o)
{
    return json_array_size(json_object_get(o, "results"));
}

const char *r_str(const json_t *o, size_t i, const char *k)
{
    return json_string_value(json_object_get(json_array_get(json_object_get(o, "results"), i), k));
}

json_t *qstatus(cm_engine *e)
{
    char *js = NULL, err[512];
    if (cm_engine_status(e, 0, &js, err, sizeof err)) return NULL;
    json_t *o = json_loads(js, 0, NULL);
    cm_free(js);
    return o;
}

int leftovers(const char *dir)
{
    int n = 0;
    DIR *d = opendir("/proc");
    struct dirent *de;
    while (d && (de = readdir(d))) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        if (*end || pid <= 0 || pid == getpid()) continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/%ld/environ", pid);
        buf b = BUF_INIT;
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        char tmp[4096];
        size_t k;
        while ((k = fread(tmp, 1, sizeof tmp, f)) > 0)
            cm_buf_add(&b, tmp, k);
        fclose(f);
        for (size_t i = 0; i < b.len; i += strlen(b.data + i) + 1)
            if (strstr(b.data + i, dir) && !strncmp(b.data + i, "XDG_CACHE_HOME=", 15)) {
                /* a zombie being reaped by someone else is not ours to count */
                char st[64];
                snprintf(st, sizeof st, "/proc/%ld/stat", pid);
                buf s = BUF_INIT;
                FILE *g = fopen(st, "r");
                if (g) {
                    k = fread(tmp, 1, sizeof tmp - 1, g);
                    tmp[k] = 0;
                    fclose(g);
                    char *rp = strrchr(tmp, ')');
                    if (!(rp && rp[1] == ' ' && rp[2] == 'Z')) n++;
                }
                cm_buf_release(&s);
                break;
            }
        cm_buf_release(&b);
    }
    if (d) closedir(d);
    return n;
}

int leftovers_settled(const char *dir)
{
    int n = leftovers(dir);
    for (int i = 0; n && i < 250; i++) {
        nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
        n = leftovers(dir);
    }
    return n;
}

void qenv_release(qenv *q)
{
    cm_buf_release(&q->log);
}

int64_t fake_now = 1700000000000;

int64_t fake_clock(void *ctx)
{
    return __atomic_load_n((int64_t *)ctx, __ATOMIC_SEQ_CST);
}
