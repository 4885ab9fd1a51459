/*
 * bench_transcript.c — `make bench`: what a turn reads of its transcript as
 * the transcript grows. For each size (MB) a transcript is generated —
 * ~1 KB messages, a compaction every ~1 MB (its firstKeptEntryId 20 records
 * back), as a long-lived session accumulates them — then, in a fresh child
 * process, the session's history is built as a turn builds it
 * (cm_agent_session_history: the last compaction's kept records on) and,
 * for comparison, every record is parsed and kept as a turn did before
 * (capped at 512 MiB). 1 GB only when CLAWMEM_BENCH_TRANSCRIPT_GB is not 0. Prints one JSON array: size, latency and peak RSS of both.
 * Usage: bench_transcript WORKDIR [MB...] (default 1 100 1024)
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../src/agent/session_turn.h"
#include "../src/base/caps.h"
#include "../src/session/transcript.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* Writes a transcript of about mb megabytes at path (kept when it exists). */
static int generate(const char *path, long mb)
{
    struct stat st;
    if (!stat(path, &st) && st.st_size >= mb * 1000000L) return 0;
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    char text[1001];
    memset(text, 'x', 1000);
    text[1000] = 0;
    fprintf(f, "{\"type\":\"session\",\"version\":3,\"id\":\"bench\",\"timestamp\":"
               "\"2027-01-01T00:00:00.000Z\",\"cwd\":\"/\"}\n");
    long long size = 0, since = 0;
    unsigned id = 1;
    while (size < mb * 1000000LL) {
        int n;
        if (since >= 1000000) {
            n = fprintf(f,
                        "{\"type\":\"compaction\",\"id\":\"%08x\",\"parentId\":\"%08x\","
                        "\"timestamp\":\"2027-01-01T00:00:00.000Z\",\"summary\":\"up to "
                        "record %u\",\"firstKeptEntryId\":\"%08x\",\"tokensBefore\":250000}\n",
                        id, id - 1, id, id - 20);
            since = 0;
        } else {
            n = fprintf(f,
                        "{\"type\":\"message\",\"id\":\"%08x\",\"parentId\":\"%08x\","
                        "\"timestamp\":\"2027-01-01T00:00:00.000Z\",\"message\":{\"role\":"
                        "\"%s\",\"content\":[{\"type\":\"text\",\"text\":\"%u %s\"}],"
                        "\"timestamp\":1798761600000}}\n",
                        id, id - 1, id % 2 ? "user" : "assistant", id, text);
        }
        id++;
        size += n;
        since += n;
    }
    return fclose(f);
}

/* The old turn's read: every record kept in memory. */
static bool keep(void *ctx, int line, json_t *rec)
{
    (void)line;
    json_array_append((json_t *)ctx, rec);
    return true;
}

/* In a child: {"ms","rss_kb","messages"} of one way of reading path. */
static json_t *measure(const char *path, bool whole)
{
    int fds[2];
    if (pipe(fds)) return NULL;
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        char err[256];
        double t0 = now_ms();
        long n = 0;
        cm_rc rc;
        if (whole) {
            json_t *all = json_array();
            rc = cm_transcript_read(path, CM_CAP_TRANSCRIPT, keep, all, err, sizeof err);
            n = (long)json_array_size(all);
            json_decref(all);
        } else {
            json_t *hist = NULL;
            rc = cm_agent_session_history(path, &hist, err, sizeof err);
            n = (long)json_array_size(hist);
            json_decref(hist);
        }
        double ms = now_ms() - t0;
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        char out[512];
        int len = rc ? snprintf(out, sizeof out, "{\"error\":\"%.200s\"}", err)
                     : snprintf(out, sizeof out, "{\"ms\":%.2f,\"rss_kb\":%ld,\"records\":%ld}",
                                ms, ru.ru_maxrss, n);
        if (write(fds[1], out, (size_t)len) < 0) _exit(1);
        _exit(0);
    }
    close(fds[1]);
    char line[512];
    ssize_t r = read(fds[0], line, sizeof line - 1);
    close(fds[0]);
    waitpid(pid, NULL, 0);
    line[r > 0 ? r : 0] = 0;
    return json_loads(line, 0, NULL);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs("usage: bench_transcript WORKDIR [MB...]\n", stderr);
        return 1;
    }
    long sizes[16] = {1, 100, 1024};
    int ns = 3;
    if (argc > 2)
        for (ns = 0; ns < 16 && ns + 2 < argc; ns++)
            sizes[ns] = strtol(argv[ns + 2], NULL, 10);
    json_t *out = json_array();
    for (int i = 0; i < ns; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/transcript-%ldmb.jsonl", argv[1], sizes[i]);
        if (generate(path, sizes[i])) {
            fprintf(stderr, "bench_transcript: cannot write %s\n", path);
            return 1;
        }
        json_t *turn = measure(path, false), *whole = measure(path, true);
        json_array_append_new(out, json_pack("{s:i,s:o,s:o}", "transcript_mb", (int)sizes[i],
                                             "turn_read", turn ? turn : json_null(),
                                             "whole_file_read_before", whole ? whole : json_null()));
        unlink(path);
    }
    char *s = json_dumps(out, JSON_INDENT(2));
    puts(s);
    free(s);
    json_decref(out);
    return 0;
}
