/*
 * bench_store.c — the first write of sessions.json after a process starts
 * (issue 27): a store of ENTRIES entries as QuantumClaw writes it
 * (JSON.stringify(store, null, 2); the shape clawmem's turns leave), read
 * once by the index, then one entry changed durably: the time of that first
 * write, of a second one, the entries whose text each write formatted, and
 * the process's CPU time for the first. Prints one JSON object.
 * Usage: bench_store DIR [ENTRIES]   (default 100,000)
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "../src/base/fs.h"
#include "../src/session/sessions.h"
#include "../src/session/store_index.h"
#include "../src/session/transcript.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static double cpu_ms(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs("usage: bench_store DIR [ENTRIES]\n", stderr);
        return 1;
    }
    long long n = argc > 2 ? strtoll(argv[2], NULL, 10) : 100000;
    buf dir = BUF_INIT, path = BUF_INIT, key = BUF_INIT;
    cm_buf_printf(&dir, "%s/agents/main/sessions", argv[1]);
    cm_fs_mkdirs(dir.data, NULL, 0);
    cm_buf_printf(&path, "%s/sessions.json", dir.data);
    json_t *st = json_object();
    for (long long i = 0; i < n; i++) {
        char id[37];
        cm_transcript_uuid(id);
        cm_buf_reset(&key);
        cm_buf_printf(&key, "agent:main:telegram:direct:%lld", 100000000 + i);
        json_object_set_new(
            st, key.data,
            json_pack("{s:s,s:I,s:s,s:i,s:s,s:i,s:b,s:i,s:i,s:i,s:i,s:s,s:s,s:s,s:{s:s,s:s}}",
                      "sessionId", id, "updatedAt", (json_int_t)(1790000000000LL + i),
                      "sessionFile", "/state/agents/main/sessions/x.jsonl", "compactionCount", 0,
                      "chatType", "direct", "totalTokens", 1200, "totalTokensFresh", 1,
                      "inputTokens", 1100, "outputTokens", 100, "cacheRead", 0, "cacheWrite", 0,
                      "model", "fake", "modelProvider", "openai", "lastChannel", "telegram",
                      "origin", "provider", "telegram", "chatType", "direct"));
    }
    if (json_dump_file(st, path.data, JSON_INDENT(2) | JSON_PRESERVE_ORDER)) return 1;
    json_decref(st);
    char err[512];
    session_store s;
    double t0 = now_ms(), c0 = cpu_ms();
    if (cm_session_store_read(&s, path.data, err, sizeof err)) {
        fprintf(stderr, "bench_store: %s\n", err);
        return 1;
    }
    double t1 = now_ms(), c1 = cpu_ms();
    store_ix_stats x0, x1, x2;
    cm_store_ix_stats_get(s.ix, &x0);
    double w[2];
    for (int k = 0; k < 2; k++) {
        double a = now_ms();
        json_t *patch = json_pack("{s:i}", "totalTokens", 1300 + k);
        if (cm_session_note(&s, "agent:main:telegram:direct:100000007", patch, 1800000000000LL + k,
                            NULL, err, sizeof err)) {
            fprintf(stderr, "bench_store: %s\n", err);
            return 1;
        }
        json_decref(patch);
        w[k] = now_ms() - a;
        cm_store_ix_stats_get(s.ix, k ? &x2 : &x1);
    }
    double c2 = cpu_ms();
    printf("{\"entries\":%lld,\"read_ms\":%.1f,\"read_cpu_ms\":%.1f,\"first_write_ms\":%.1f,"
           "\"first_write_formatted\":%lld,\"second_write_ms\":%.1f,"
           "\"second_write_formatted\":%lld,\"writes_cpu_ms\":%.1f}\n",
           n, t1 - t0, c1 - c0, w[0], (long long)(x1.formatted - x0.formatted), w[1],
           (long long)(x2.formatted - x1.formatted), c2 - c1);
    cm_session_store_release(&s);
    cm_buf_release(&dir);
    cm_buf_release(&path);
    cm_buf_release(&key);
    return 0;
}
