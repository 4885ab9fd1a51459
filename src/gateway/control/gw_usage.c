/*
 * gw_usage.c — clawmem.models.usage (clawmem's own method, operator.read),
 * for the Models page: the tokens the default agent's transcripts record,
 * summed per provider and model over their assistant messages' "usage"
 * (input, output, cacheRead, cacheWrite, totalTokens, cost.total).
 *   {} -> {models:[{provider, model, messages, input, output, cacheRead,
 *          cacheWrite, totalTokens, cost}], files, partialFiles, truncated, ts}
 * Bounded: at most USAGE_MAX_FILES transcripts (*.jsonl of the agent's
 * sessions directory), of each only the last USAGE_TAIL_BYTES (partialFiles
 * counts those read in part), USAGE_TOTAL_BYTES in all (truncated: some
 * transcripts left unread), lines over USAGE_LINE_BYTES skipped; models
 * sorted by totalTokens, most first. Transcripts are hostile input: a value
 * that is not a non-negative number under USAGE_ONE_MAX counts as 0.
 */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gw_usage.h"

#define USAGE_MAX_FILES   2000
#define USAGE_TAIL_BYTES  (4 * 1024 * 1024)
#define USAGE_LINE_BYTES  (1024 * 1024)
#define USAGE_TOTAL_BYTES (64 * 1024 * 1024)
#define USAGE_ONE_MAX     1e12

static const char *const usage_fields[] = {"input", "output", "cacheRead", "cacheWrite",
                                           "totalTokens"};

static double num(const json_t *v)
{
    double d = json_is_number(v) ? json_number_value(v) : 0;
    return d > 0 && d < USAGE_ONE_MAX ? d : 0;
}

/* Adds one line's assistant usage to sums (an object keyed provider "/" model). */
static void add_line(json_t *sums, const char *line, size_t len)
{
    if (len > USAGE_LINE_BYTES || !memchr(line, '"', len)) return;
    json_t *r = json_loadb(line, len, 0, NULL);
    const json_t *m = json_object_get(r, "message");
    const char *role = json_string_value(json_object_get(m, "role"));
    const json_t *u = json_object_get(m, "usage");
    const char *prov = json_string_value(json_object_get(m, "provider"));
    const char *model = json_string_value(json_object_get(m, "model"));
    if (!role || strcmp(role, "assistant") || !json_is_object(u)) goto out;
    if (!prov) prov = "";
    if (!model) model = "";
    char key[512];
    snprintf(key, sizeof key, "%.200s/%.200s", prov, model);
    json_t *s = json_object_get(sums, key);
    if (!s) {
        s = json_pack("{s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:f}", "provider", prov, "model", model,
                      "messages", (json_int_t)0, "input", (json_int_t)0, "output", (json_int_t)0,
                      "cacheRead", (json_int_t)0, "cacheWrite", (json_int_t)0, "totalTokens",
                      (json_int_t)0, "cost", 0.0);
        if (!s || json_object_set_new(sums, key, s)) goto out;
    }
    json_object_set_new(s, "messages",
                        json_integer(json_integer_value(json_object_get(s, "messages")) + 1));
    for (size_t i = 0; i < sizeof usage_fields / sizeof *usage_fields; i++) {
        json_int_t v = (json_int_t)num(json_object_get(u, usage_fields[i]));
        json_object_set_new(
            s, usage_fields[i],
            json_integer(json_integer_value(json_object_get(s, usage_fields[i])) + v));
    }
    double c = num(json_object_get(json_object_get(u, "cost"), "total"));
    json_object_set_new(s, "cost", json_real(json_real_value(json_object_get(s, "cost")) + c));
out:
    json_decref(r);
}

/* Reads the last USAGE_TAIL_BYTES of fd (at most *budget, which it lowers)
 * into sums; *partial when cut. */
static void add_file(json_t *sums, int fd, size_t *budget, bool *partial)
{
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) return;
    off_t tail = *budget < USAGE_TAIL_BYTES ? (off_t)*budget : USAGE_TAIL_BYTES;
    off_t from = st.st_size > tail ? st.st_size - tail : 0;
    size_t n = (size_t)(st.st_size - from);
    *budget -= n;
    char *b = malloc(n + 1);
    if (!b) return;
    ssize_t got = pread(fd, b, n, from);
    if (got > 0) {
        size_t len = (size_t)got, at = 0;
        *partial = from > 0;
        if (from > 0) { /* the first line is cut: skipped */
            const char *nl = memchr(b, '\n', len);
            at = nl ? (size_t)(nl - b) + 1 : len;
        }
        while (at < len) {
            const char *nl = memchr(b + at, '\n', len - at);
            size_t end = nl ? (size_t)(nl - b) : len;
            add_line(sums, b + at, end - at);
            at = end + 1;
        }
    }
    free(b);
}

static int by_total(const void *a, const void *b)
{
    json_int_t x = json_integer_value(json_object_get(*(json_t *const *)a, "totalTokens"));
    json_int_t y = json_integer_value(json_object_get(*(json_t *const *)b, "totalTokens"));
    return x < y ? 1 : x > y ? -1 : 0;
}

void cm_gw_ws_models_usage(gw_ws *w, gw_ws_client *cl, const char *id, json_t *p)
{
    (void)p;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/agents/%s/sessions", w->state_dir, w->agent_id0);
    json_t *sums = json_object(), *models = json_array();
    json_t **v = NULL;
    json_int_t files = 0, partial = 0;
    size_t budget = USAGE_TOTAL_BYTES;
    bool truncated = false;
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && sums && (de = readdir(d))) {
        size_t nl = strlen(de->d_name);
        if (nl < 7 || strcmp(de->d_name + nl - 6, ".jsonl")) continue;
        if (files >= USAGE_MAX_FILES || !budget) {
            truncated = true;
            break;
        }
        int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0) continue;
        bool cut = false;
        add_file(sums, fd, &budget, &cut);
        close(fd);
        files++;
        partial += cut;
    }
    if (d) closedir(d);
    size_t n = json_object_size(sums), i = 0;
    v = n ? malloc(n * sizeof *v) : NULL;
    if (!sums || !models || (n && !v)) {
        json_decref(sums);
        json_decref(models);
        free(v);
        return cm_gw_ws_fail(cl, id, "UNAVAILABLE", "out of memory", NULL);
    }
    const char *k;
    json_t *s;
    json_object_foreach(sums, k, s) v[i++] = s;
    if (n) qsort(v, n, sizeof *v, by_total);
    for (i = 0; i < n; i++)
        json_array_append(models, v[i]);
    free(v);
    json_decref(sums);
    cm_gw_ws_ok(cl, id,
                json_pack("{s:o,s:I,s:I,s:b,s:I}", "models", models, "files", files, "partialFiles",
                          partial, "truncated", truncated, "ts", (json_int_t)cm_wall_ms()));
}
