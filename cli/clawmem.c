/*
 * clawmem.c — the clawmem command line: status, index, search, get, watch, mcp,
 * help. Global options go before or after the command. Uses only
 * the public header; turns the engine's JSON payloads into the text output of
 * `openclaw memory …` unless --json is given. Exit 0 on success (a search
 * that found nothing included), 1 on a usage or runtime error (a search that
 * could not run, --json or not), with one "clawmem: error: …" line on
 * stderr; what goes wrong without stopping the command is a "clawmem:
 * warning: …". Commands are a table; a mistyped command or option gets
 * "did you mean …?" (src/base/suggest.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../server/mcp.h"
#include "../server/serve.h"
#include "../src/base/suggest.h"
#include "cli.h"
#include "clawmem.h"

static const char usage_main[] =
    "usage: clawmem [--agent ID] [--workspace DIR] [--config FILE] [--state-dir DIR] COMMAND "
    "[ARGS]\n"
    "       clawmem help [COMMAND]\n"
    "\n"
    "Indexes an agent's Markdown memory (MEMORY.md, memory/*.md, extraPaths) and searches it.\n"
    "\n"
    "commands:\n"
    "  status [--json] [--deep]       what is indexed, where, and any problems\n"
    "  index [--force|--drop]         bring the index up to date (--force: rebuild it,\n"
    "                                 --drop: remove it)\n"
    "  search QUERY [--max-results N] [--min-score X] [--json] [--no-sync]\n"
    "                                 memory_search: ranked snippets with path and lines\n"
    "  get PATH [--from N] [--lines N] [--offset B] [--json]\n"
    "                                 memory_get: read a memory file or a line range\n"
    "  watch [--debounce MS] [--quiet]\n"
    "                                 keep the index fresh as files change (until Ctrl-C)\n"
    "  mcp [--allow-write] [--no-watch] [--debounce MS]\n"
    "                                 MCP server on stdin/stdout: memory_search, memory_get\n"
    "                                 (and memory_write with --allow-write)\n"
    "  serve [--listen ADDR:PORT] [--tokens FILE] [--allow-write] [--allow-origin ORIGIN]\n"
    "                                 MCP over Streamable HTTP at /mcp for the config's agents\n"
    "  sessions list|show|append|reset|delete|flush|compact [KEY] [--json]\n"
    "                                 the agent's sessions (sessions.json, transcripts)\n"
    "  models status|run [--session KEY] [PROMPT] [--json]\n"
    "                                 the model runner: auth profiles, fallback, one turn\n"
    "  pairing list|approve CHANNEL [CODE] [--json]\n"
    "                                 who may message the agent: pending pairing codes\n"
    "  gateway [run|status] [--listen ADDR:PORT] [--workers N] [--json]\n"
    "                                 chat channels in, agent replies out (until SIGTERM)\n"
    "  chat [MESSAGE]                 talk to the agent: through a running gateway, else here\n"
    "  agents list|delete ID [--yes]  the agents the store holds; delete: every row of one\n"
    "  help [COMMAND]                 this text, or one command's\n"
    "\n"
    "options (before or after the command):\n"
    "  --agent ID        agent id (default: main)\n"
    "  --workspace DIR   workspace (default: agents.defaults.workspace, else "
    "<stateDir>/workspace)\n"
    "  --config FILE     config file (default: $QUANTUMCLAW_CONFIG_PATH, else "
    "<stateDir>/quantumclaw.json)\n"
    "  --state-dir DIR   state dir (default: $QUANTUMCLAW_STATE_DIR, else ~/.quantumclaw)\n"
    "  --help, --version\n"
    "\n"
    "`clawmem help COMMAND` or `clawmem COMMAND --help` describes one command; "
    "`man clawmem`\n"
    "has the details (files, environment).\n";

static const char usage_status[] =
    "usage: clawmem status [--json] [--deep]\n"
    "Shows the workspace, config, index path, file and chunk counts, the search mode and files\n"
    "that could not be indexed. --deep also checks the index's integrity and counts files\n"
    "that changed since the last sync.\n";
static const char usage_index[] =
    "usage: clawmem index [--force | --drop] [--verbose] [--json]\n"
    "Syncs the index with the memory files: unchanged files cost one stat, changed files are\n"
    "re-chunked. --force rebuilds the whole index into a new file (also repairs a corrupt one).\n"
    "--drop removes the agent's index (a PostgreSQL index: every row of the agent; with the QMD\n"
    "backend also QMD's own) and leaves the memory files as they are; the next `clawmem index`\n"
    "builds it again.\n";
static const char usage_search[] =
    "usage: clawmem search QUERY [--max-results N] [--min-score X] [--json] [--no-sync]\n"
    "                      [--session-key KEY]\n"
    "Runs memory_search: syncs changed files first (one stat per memory file, read-only when\n"
    "nothing changed; none at all while `clawmem watch` or `clawmem mcp` keeps the index\n"
    "fresh; if another process is writing the index it does not wait), then prints each hit as\n"
    "`score path:start-end` followed by its snippet, or `No matches.`\n"
    "--no-sync searches the index as it is, for callers that keep it fresh themselves\n"
    "(`clawmem index` after writing, a watcher): no file is looked at.\n"
    "--session-key KEY searches as that session (e.g. agent:main:telegram:direct:42): it\n"
    "decides memory.citations \"auto\" and, with memory.backend \"qmd\", memory.qmd.scope\n"
    "(default: direct chats only; no key is no chat type, denied by that default).\n";
static const char usage_get[] =
    "usage: clawmem get PATH [--from N] [--lines N] [--offset B] [--json]\n"
    "Runs memory_get: prints a memory file (workspace-relative path), or N lines from line\n"
    "--from (--offset: B bytes into it, to continue a line cut at 1 MiB). A file that does\n"
    "not exist yet prints nothing.\n";

static const char usage_watch[] =
    "usage: clawmem watch [--debounce MS] [--quiet] [--verbose]\n"
    "Syncs now, then whenever memory files change (inotify, one descriptor for the whole\n"
    "tree, debounced by sync.watchDebounceMs or --debounce), until SIGINT or SIGTERM.\n"
    "Prints one line per sync on stdout (time, files, indexed, unchanged, removed; --quiet:\n"
    "none); a failed sync is one line on stderr.\n";
static const char usage_mcp[] =
    "usage: clawmem mcp [--allow-write] [--no-watch] [--debounce MS] [--session-key KEY]\n"
    "                   [--first-sync-wait MS] [--verbose]\n"
    "Serves the memory tools over MCP (JSON-RPC on stdin/stdout) to an agent. The index is\n"
    "kept fresh in the background (the watcher, unless --no-watch or sync.watch is false)\n"
    "and searches never wait for it, except those before the first sync ended: they wait\n"
    "up to --first-sync-wait MS (5000; 0: no wait), then say so in the payload's \"status\".\n"
    "--allow-write adds memory_write (also config clawmem.memoryWrite: true). Logs go to\n"
    "stderr. --session-key KEY: the session\n"
    "memory_search runs as (memory.citations \"auto\", memory.qmd.scope) unless a call passes\n"
    "its own \"sessionKey\" argument.\n";

static const char usage_serve[] =
    "usage: clawmem serve [--listen ADDR:PORT] [--tokens FILE] [--allow-write]\n"
    "                     [--allow-origin ORIGIN]... [--max-engines N] [--max-engine-mb MB]\n"
    "                     [--max-conns N] [--max-conns-per-addr N] [--no-watch] [--debounce MS]\n"
    "                     [--first-sync-wait MS] [--verbose]\n"
    "Serves the memory tools of every agent in the config's agents.list[] over MCP\n"
    "Streamable HTTP (protocol 2025-11-25 with sessions, and the stateless 2026-07-28) at\n"
    "http://ADDR:PORT/mcp, until SIGINT or SIGTERM. Prints \"listening on URL\" once bound.\n"
    "  --listen ADDR:PORT   default 127.0.0.1:8765 (port 0: any free port). Plain HTTP:\n"
    "                       put a reverse proxy in front for TLS.\n"
    "  --tokens FILE        JSON5 {\"<token>\": {agent: \"<id>\", write: true|false}}: a client\n"
    "                       sends Authorization: Bearer <token> and reaches that agent only\n"
    "                       (also at /mcp/<id>); write: true offers memory_write when the\n"
    "                       agent's writing is enabled. Without it: loopback only, every\n"
    "                       agent at /mcp/<id> (/mcp: the default agent).\n"
    "  --allow-write        enable memory_write (also config clawmem.memoryWrite: true)\n"
    "  --allow-origin O     a browser Origin allowed besides loopback ones (DNS rebinding)\n"
    "  --max-engines N      agents' engines open at once, least recently used closed (32)\n"
    "  --max-engine-mb MB   their estimated memory (vectors, page cache) at most MB: the\n"
    "                       least recently used idle ones closed above it (default: none)\n"
    "  --max-conns N        connections at once (256)\n"
    "  --max-conns-per-addr N  ... from one client address (a quarter of --max-conns, at\n"
    "                       least 8); behind a reverse proxy every client has its address:\n"
    "                       give --max-conns there\n"
    "  --no-watch           no watchers (else one per open agent on a local file system)\n"
    "  --first-sync-wait MS an agent's first searches wait this long for its first sync\n"
    "                       (default 5000; 0: no wait)\n"
    "GET /healthz answers 200 while the process runs, with the open engines and their\n"
    "estimated MB; GET /readyz answers 200 when every store the agents use answers (each\n"
    "PostgreSQL server a SELECT 1), else 503: probes for a load balancer, no token needed.\n";

static int verbose, quiet;

static void on_log(void *ctx, cm_log_level level, const char *msg)
{
    (void)ctx;
    if (level < CM_LOG_WARN && !verbose) return;
    fprintf(stderr, "clawmem: %s",
            level >= CM_LOG_ERROR ? "error: " : level == CM_LOG_WARN ? "warning: " : "");
    put_safe(stderr, msg, 0);
    fputc('\n', stderr);
}

static int parse_long(const char *s, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max) return -1;
    *out = v;
    return 0;
}

/* ---- progress bar -------------------------------------------------------- */

typedef struct progress {
    struct timespec t0, last;
    int shown;
    int downloads_only; /* a search's sync: only a model download is worth a bar */
    uint64_t dl_start;  /* bytes already there when this download began (a resume) */
} progress;

static double since(const struct timespec *a)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - a->tv_sec) + (double)(t.tv_nsec - a->tv_nsec) / 1e9;
}

static void draw_bar(char bar[32], double frac)
{
    int width = 24, fill = (int)(frac * width + 0.5);
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '#' : '-';
    bar[width] = 0;
}

/* A local model on its way from Hugging Face, before the sync proper. */
static void download_progress(progress *pr, const cm_progress *p)
{
    bool done = p->download_total && p->download_done == p->download_total;
    if (!pr->shown) pr->dl_start = p->download_done, pr->shown = 1;
    if (!done && since(&pr->last) < 0.1) return;
    clock_gettime(CLOCK_MONOTONIC, &pr->last);
    double el = since(&pr->t0), mb = (double)(p->download_done - pr->dl_start) / 1e6;
    double frac = p->download_total ? (double)p->download_done / (double)p->download_total : 0;
    double rate = el > 0 ? mb / el : 0;
    double eta = rate > 0 ? (double)(p->download_total - p->download_done) / 1e6 / rate : 0;
    char bar[32];
    draw_bar(bar, frac);
    const char *name = strrchr(p->download, '/');
    fprintf(stderr, "\rdownloading %s [%s] %.0f/%.0f MB  %.1f MB/s  ETA %.0fs ",
            name ? name + 1 : p->download, bar, (double)p->download_done / 1e6,
            (double)p->download_total / 1e6, rate, eta);
    if (done) {
        fputc('\n', stderr);
        pr->shown = 0;
        clock_gettime(CLOCK_MONOTONIC, &pr->t0); /* the files' rates start now */
    }
}

static int on_progress(void *ctx, const cm_progress *p)
{
    progress *pr = ctx;
    if (p->download) {
        download_progress(pr, p);
        return 0;
    }
    if (pr->downloads_only) return 0;
    if (p->batch_state) { /* remote.batch: waiting for the provider's batches */
        fprintf(stderr, "\rembedding batches: %zu pending (%zu chunks), oldest %-12s      ",
                p->batches_pending, p->batch_chunks, p->batch_state);
        pr->shown = 1;
        return 0;
    }
    bool done = p->files_done == p->files_total;
    if (!done && since(&pr->last) < 0.1) return 0;
    clock_gettime(CLOCK_MONOTONIC, &pr->last);
    double el = since(&pr->t0);
    double mb = (double)p->bytes_done / 1e6;
    double rate = el > 0 ? mb / el : 0;
    double frac = p->bytes_total
                      ? (double)p->bytes_done / (double)p->bytes_total
                      : (p->files_total ? (double)p->files_done / (double)p->files_total : 1);
    double eta = frac > 0 ? el / frac - el : 0;
    char bar[32];
    draw_bar(bar, frac);
    fprintf(stderr, "\r[%s] %zu/%zu files  %.1f MB/s  ETA %.0fs ", bar, p->files_done,
            p->files_total, rate, eta < 0 ? 0 : eta);
    pr->shown = 1;
    return 0;
}

/* ---- commands ------------------------------------------------------------ */

static int print_json_or(const char *json, int as_json, int (*text)(json_t *))
{
    if (as_json) {
        fputs(json, stdout);
        fputc('\n', stdout);
        return 0;
    }
    json_error_t je;
    json_t *root = json_loads(json, 0, &je);
    if (!root) return die("internal error: bad payload (%s)", je.text);
    int r = text(root);
    json_decref(root);
    return r;
}

static const char *jstr(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* Prints fmt with each "%s" replaced by the next string, escaped by
 * put_safe (strings from the index may hold any bytes). */
static void out_line(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    for (const char *p = fmt; *p; p++) {
        if (p[0] == '%' && p[1] == 's') {
            put_safe(stdout, va_arg(ap, const char *), 0);
            p++;
        } else {
            fputc(*p, stdout);
        }
    }
    va_end(ap);
}

static int status_text(json_t *s)
{
    out_line("Agent: %s\n", jstr(s, "agentId"));
    out_line("Workspace: %s%s\n", jstr(s, "workspace"),
             json_is_true(json_object_get(s, "workspaceExists")) ? "" : " (missing)");
    out_line("Config: %s%s\n", jstr(s, "configPath"),
             json_is_true(json_object_get(s, "configFound")) ? "" : " (not found; defaults)");
    out_line("Index: %s\n", jstr(s, "indexPath"));
    if (json_object_get(s, "indexError")) out_line("Index error: %s\n", jstr(s, "indexError"));
    printf("Files: %lld  Chunks: %lld\n",
           (long long)json_integer_value(json_object_get(s, "files")),
           (long long)json_integer_value(json_object_get(s, "chunks")));
    out_line("Provider: %s (requested: %s)  Search: %s  Tokenizer: %s\n", jstr(s, "provider"),
             jstr(s, "requestedProvider"), jstr(s, "search"), jstr(s, "ftsTokenizer"));
    if (json_string_value(json_object_get(s, "providerNote")))
        out_line("Note: %s\n", jstr(s, "providerNote"));
    json_t *vec = json_object_get(s, "vector"), *cache = json_object_get(s, "cache");
    if (json_is_true(json_object_get(vec, "enabled"))) {
        printf("Vectors: %lld (%lld dimensions, ",
               (long long)json_integer_value(json_object_get(vec, "vectors")),
               (long long)json_integer_value(json_object_get(vec, "dims")));
        out_line("%s", jstr(vec, "path"));
        printf(")  Cache: %lld of %lld entries\n",
               (long long)json_integer_value(json_object_get(cache, "entries")),
               (long long)json_integer_value(json_object_get(cache, "maxEntries")));
    }
    if (json_string_value(json_object_get(s, "lastError")))
        out_line("Last provider error: %s\n", jstr(s, "lastError"));
    json_t *qmd = json_object_get(s, "qmd");
    if (qmd) { /* memory.backend = "qmd" */
        out_line("Backend: %s", jstr(s, "backend"));
        out_line(" (QMD %s, mode %s", jstr(qmd, "command"), jstr(qmd, "searchMode"));
        printf(", %zu collections, %lld documents)\n",
               json_array_size(json_object_get(qmd, "collections")),
               (long long)json_integer_value(json_object_get(qmd, "documents")));
        json_t *fb = json_object_get(s, "fallback");
        if (fb) out_line("QMD failed, the builtin index answers: %s\n", jstr(fb, "reason"));
        if (json_object_get(qmd, "lastUpdateError"))
            out_line("Last QMD update error: %s\n", jstr(qmd, "lastUpdateError"));
    }
    json_t *batch = json_object_get(s, "batch");
    if (json_is_true(json_object_get(batch, "enabled"))) {
        json_t *pend = json_object_get(batch, "pending");
        printf("Batch: %s, %zu pending",
               json_is_true(json_object_get(batch, "active")) ? "on" : "unused",
               json_array_size(pend));
        size_t i;
        json_t *b;
        json_array_foreach(pend, i, b)
            out_line("  %s %s (%lld chunks)", jstr(b, "id"), jstr(b, "state"),
                     (long long)json_integer_value(json_object_get(b, "chunks")));
        printf("\n");
        if (json_string_value(json_object_get(batch, "lastError")))
            out_line("Last batch error: %s\n", jstr(batch, "lastError"));
    }
    if (json_object_get(s, "integrity")) {
        out_line("Integrity: %s", jstr(s, "integrity"));
        printf("  Files needing sync: %lld\n",
               (long long)json_integer_value(json_object_get(s, "dirtyFiles")));
    }
    json_t *probs = json_object_get(s, "problems");
    if (json_array_size(probs)) {
        printf("Problems:\n");
        size_t i;
        json_t *p;
        json_array_foreach(probs, i, p) out_line("  %s: %s\n", jstr(p, "path"), jstr(p, "problem"));
    }
    return 0;
}

/* One result of the text output (cm_memory_search_each); *ctx counts them. */
static int search_line(void *ctx, const cm_search_result *r)
{
    size_t *shown = ctx;
    printf("%s%.3f ", (*shown)++ ? "\n" : "", r->score);
    out_line("%s", r->path);
    printf(":%d-%d\n", r->start_line, r->end_line);
    /* The snippet keeps its lines; its "Source: <citation>" footer is a
     * file name, escaped like the one above. */
    const char *snip = r->snippet, *cite = r->citation;
    size_t sl = strlen(snip), cl = strlen(cite), fl = strlen("\n\nSource: ") + cl;
    if (cl && sl >= fl && !strncmp(snip + sl - fl, "\n\nSource: ", fl - cl) &&
        !strcmp(snip + sl - cl, cite)) {
        char *body = strndup(snip, sl - fl);
        put_safe(stdout, body ? body : "", 1);
        free(body);
        out_line("\n\nSource: %s", cite);
    } else {
        put_safe(stdout, snip, 1);
    }
    fputc('\n', stdout);
    return 0;
}

static int get_text(json_t *s)
{
    const char *t = jstr(s, "text");
    fputs(t, stdout);
    if (*t && t[strlen(t) - 1] != '\n') fputc('\n', stdout);
    if (json_is_true(json_object_get(s, "truncated")))
        fprintf(stderr,
                "clawmem: warning: output cut at 1 MiB; continue with --from %lld%s%.0lld\n",
                (long long)json_integer_value(json_object_get(s, "nextFrom")),
                json_object_get(s, "nextOffset") ? " --offset " : "",
                (long long)json_integer_value(json_object_get(s, "nextOffset")));
    return 0;
}

static int cmd_status(cm_engine *e, int argc, char **argv)
{
    int as_json = 0, deep = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            as_json = 1;
        else if (!strcmp(argv[i], "--deep"))
            deep = 1;
        else if (!strcmp(argv[i], "--help"))
            return fputs(usage_status, stdout), 0;
        else
            return unknown_option("status", argv[i], "--json|--deep|--help");
    }
    char err[CM_ERR_SIZE], *json = NULL;
    if (cm_engine_status(e, deep, &json, err, sizeof err)) return die("%s", err);
    int r = print_json_or(json, as_json, status_text);
    cm_free(json);
    return r;
}

static int cmd_index(cm_engine *e, int argc, char **argv)
{
    int force = 0, as_json = 0, drop = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--force"))
            force = 1;
        else if (!strcmp(argv[i], "--drop"))
            drop = 1;
        else if (!strcmp(argv[i], "--verbose"))
            verbose = 1;
        else if (!strcmp(argv[i], "--json"))
            as_json = 1;
        else if (!strcmp(argv[i], "--help"))
            return fputs(usage_index, stdout), 0;
        else
            return unknown_option("index", argv[i], "--force|--drop|--verbose|--json|--help");
    }
    if (drop && force) return die("index: --drop and --force do not go together");
    if (drop) {
        char err[CM_ERR_SIZE];
        int had = 0;
        if (cm_engine_drop_index(e, &had, err, sizeof err)) return die("%s", err);
        if (as_json)
            printf("{\"dropped\":%s}\n", had ? "true" : "false");
        else
            puts(
                had ? "Dropped the index; the memory files are untouched (`clawmem index` rebuilds "
                      "it)."
                    : "Nothing to drop: there is no index yet.");
        return 0;
    }
    progress pr = {0};
    clock_gettime(CLOCK_MONOTONIC, &pr.t0);
    pr.last = pr.t0;
    bool tty = isatty(2) && !as_json;
    cm_sync_stats st;
    char err[CM_ERR_SIZE];
    cm_rc rc = cm_engine_sync(e, force ? CM_SYNC_FORCE : 0, tty ? on_progress : NULL, &pr, &st, err,
                              sizeof err);
    if (pr.shown) fputc('\n', stderr);
    if (rc) return die("%s", err);
    double secs = since(&pr.t0);
    if (as_json) {
        printf("{\"files\":%zu,\"indexed\":%zu,\"unchanged\":%zu,\"removed\":%zu,\"skipped\":%zu,"
               "\"chunks\":%zu,\"bytesRead\":%llu,\"rebuilt\":%s,\"seconds\":%.3f}\n",
               st.files_seen, st.files_indexed, st.files_unchanged, st.files_removed,
               st.files_skipped, st.chunks_written, (unsigned long long)st.bytes_read,
               st.rebuilt ? "true" : "false", secs);
    } else {
        printf("Indexed %zu of %zu files (%zu chunks) in %.2fs%s; %zu unchanged, %zu removed, "
               "%zu skipped.\n",
               st.files_indexed, st.files_seen, st.chunks_written, secs,
               st.rebuilt ? " (full rebuild)" : "", st.files_unchanged, st.files_removed,
               st.files_skipped);
        if (st.batches_submitted || st.batches_completed || st.batches_failed || st.batches_pending)
            printf("Embedding batches: %zu submitted, %zu collected, %zu failed, %zu pending at "
                   "the provider.\n",
                   st.batches_submitted, st.batches_completed, st.batches_failed,
                   st.batches_pending);
    }
    return 0;
}

static int cmd_search(cm_engine *e, int argc, char **argv)
{
    cm_search_opts o = {0, -1, 0};
    const char *query = NULL, *session_key = NULL;
    int as_json = 0, sync = 1;
    for (int i = 0; i < argc; i++) {
        long v;
        if (!strcmp(argv[i], "--json")) {
            as_json = 1;
        } else if (!strcmp(argv[i], "--no-sync")) {
            sync = 0;
        } else if (!strcmp(argv[i], "--session-key")) {
            if (i + 1 >= argc || !*argv[i + 1]) return die("search: --session-key needs a key");
            session_key = argv[++i];
        } else if (!strcmp(argv[i], "--help")) {
            return fputs(usage_search, stdout), 0;
        } else if (!strcmp(argv[i], "--max-results")) {
            if (i + 1 >= argc || parse_long(argv[++i], 1, 1000, &v))
                return die("search: --max-results needs a number from 1 to 1000");
            o.max_results = (int)v;
        } else if (!strcmp(argv[i], "--min-score")) {
            char *end;
            if (i + 1 >= argc) return die("search: --min-score needs a number from 0 to 1");
            o.min_score = strtod(argv[++i], &end);
            if (*end || end == argv[i] || !(o.min_score >= 0 && o.min_score <= 1))
                return die("search: --min-score needs a number from 0 to 1");
        } else if (argv[i][0] == '-' && argv[i][1] == '-' && argv[i][2]) {
            return unknown_option("search", argv[i],
                                  "--json|--no-sync|--session-key|--max-results|--min-score|--help");
        } else if (!query) {
            query = argv[i];
        } else {
            return die("search: one QUERY only (quote it: clawmem search \"%s ...\")", query);
        }
    }
    if (!query) return die("search: missing QUERY (see clawmem help search)");
    char err[CM_ERR_SIZE], sync_err[CM_ERR_SIZE] = "", *json = NULL;
    /* Sync first, without waiting: if another process is writing, search the
     * last committed state rather than block. A failed sync is a warning,
     * shown only when the search then answers (a search that cannot run
     * says why itself: one line, not two). */
    progress pr = {.downloads_only = 1};
    clock_gettime(CLOCK_MONOTONIC, &pr.t0);
    pr.last = pr.t0;
    cm_rc rc = sync ? cm_engine_sync(e, CM_SYNC_NOWAIT | CM_SYNC_UNLESS_WATCHED,
                                     isatty(2) ? on_progress : NULL, &pr, NULL, sync_err,
                                     sizeof sync_err)
                    : CM_OK;
    if (rc == CM_EBUSY) sync_err[0] = 0;
    /* Exit 0: the search answered (no match included); 1: it could not run,
     * with one error line and nothing on stdout, --json or not. */
    size_t shown = 0;
    if (as_json)
        rc = cm_memory_search_session(e, query, &o, session_key, &json, err, sizeof err);
    else
        rc = cm_memory_search_each(e, query, &o, session_key, search_line, &shown, err, sizeof err);
    if (!rc && json) { /* the payload of a search that could not run */
        json_t *p = json_loads(json, 0, NULL);
        if (json_is_true(json_object_get(p, "disabled"))) {
            const char *why = json_string_value(json_object_get(p, "error"));
            snprintf(err, sizeof err, "%s", why ? why : "the index cannot be searched");
            rc = CM_EUNAVAILABLE;
        }
        json_decref(p);
    }
    if (rc == CM_EUNAVAILABLE) {
        cm_free(json);
        return die("search unavailable: %s", err);
    }
    if (rc) return die("search: %s", err);
    if (sync_err[0]) warn("sync failed: %s", sync_err);
    if (json) {
        fputs(json, stdout);
        fputc('\n', stdout);
        cm_free(json);
    } else if (!shown) {
        printf("No matches.\n");
    }
    return 0;
}

static int cmd_get(cm_engine *e, int argc, char **argv)
{
    const char *path = NULL;
    long from = 0, lines = 0, offset = 0;
    int as_json = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            as_json = 1;
        } else if (!strcmp(argv[i], "--help")) {
            return fputs(usage_get, stdout), 0;
        } else if (!strcmp(argv[i], "--from") || !strcmp(argv[i], "--lines")) {
            long *dst = argv[i][2] == 'f' ? &from : &lines;
            if (i + 1 >= argc || parse_long(argv[i + 1], 1, 1L << 40, dst))
                return die("get: %s needs a positive number", argv[i]);
            i++;
        } else if (!strcmp(argv[i], "--offset")) {
            if (i + 1 >= argc || parse_long(argv[i + 1], 0, 1L << 40, &offset))
                return die("get: --offset needs a number >= 0");
            i++;
        } else if (argv[i][0] == '-' && argv[i][1] == '-' && argv[i][2]) {
            return unknown_option("get", argv[i], "--json|--from|--lines|--offset|--help");
        } else if (!path) {
            path = argv[i];
        } else {
            return die("get: one PATH only");
        }
    }
    if (!path) return die("get: missing PATH (see clawmem get --help)");
    char err[CM_ERR_SIZE], *json = NULL;
    if (cm_memory_get_at(e, path, from, offset, lines, &json, err, sizeof err))
        return die("%s", err);
    int r = print_json_or(json, as_json, get_text);
    cm_free(json);
    return r;
}

static volatile int stop_flag;

static void on_stop(int sig)
{
    (void)sig;
    stop_flag = 1;
}

/* One line per sync: on stdout, unless --quiet; failures on stderr. */
static void on_sync(void *ctx, cm_rc rc, const cm_sync_stats *st, const char *err)
{
    (void)ctx;
    if (rc) {
        warn("sync failed: %s", err);
        return;
    }
    if (quiet) return;
    char when[16];
    time_t now = time(NULL);
    struct tm tm;
    strftime(when, sizeof when, "%H:%M:%S", localtime_r(&now, &tm));
    printf("%s synced %zu files: %zu indexed, %zu unchanged, %zu removed%s\n", when, st->files_seen,
           st->files_indexed, st->files_unchanged, st->files_removed,
           st->rebuilt ? " (rebuilt)" : "");
    fflush(stdout);
}

/* Parses "--debounce MS" at argv[*i]; returns -1 on a bad value. */
static int parse_debounce(int argc, char **argv, int *i, int *out)
{
    long v;
    if (*i + 1 >= argc || parse_long(argv[*i + 1], 0, 3600000, &v)) return -1;
    *out = (int)v;
    (*i)++;
    return 0;
}

static int cmd_watch(cm_engine *e, int argc, char **argv)
{
    cm_watch_opts o = {&stop_flag, -1, -1, on_sync, NULL, 0};
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--help"))
            return fputs(usage_watch, stdout), 0;
        else if (!strcmp(argv[i], "--verbose"))
            verbose = 1;
        else if (!strcmp(argv[i], "--quiet"))
            quiet = 1;
        else if (!strcmp(argv[i], "--debounce")) {
            if (parse_debounce(argc, argv, &i, &o.debounce_ms))
                return die("watch: --debounce needs milliseconds (0..3600000)");
        } else
            return unknown_option("watch", argv[i], "--debounce|--quiet|--verbose|--help");
    }
    struct sigaction sa = {0};
    sa.sa_handler = on_stop;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    char err[CM_ERR_SIZE];
    if (cm_engine_watch(e, &o, err, sizeof err)) return die("%s", err);
    return 0;
}

static int cmd_mcp(const cm_options *base, int argc, char **argv)
{
    cm_options opt = *base;
    mcp_opts mo = {-1, -1, NULL, -1};
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--help"))
            return fputs(usage_mcp, stdout), 0;
        else if (!strcmp(argv[i], "--verbose"))
            verbose = 1;
        else if (!strcmp(argv[i], "--allow-write"))
            opt.allow_write = 1;
        else if (!strcmp(argv[i], "--no-watch"))
            mo.watch = 0;
        else if (!strcmp(argv[i], "--session-key")) {
            if (i + 1 >= argc || !*argv[i + 1]) return die("mcp: --session-key needs a key");
            mo.session_key = argv[++i];
        } else if (!strcmp(argv[i], "--debounce")) {
            if (parse_debounce(argc, argv, &i, &mo.debounce_ms))
                return die("mcp: --debounce needs milliseconds (0..3600000)");
        } else if (!strcmp(argv[i], "--first-sync-wait")) {
            if (parse_debounce(argc, argv, &i, &mo.first_sync_wait_ms))
                return die("mcp: --first-sync-wait needs milliseconds (0..3600000)");
        } else
            return unknown_option("mcp", argv[i],
                                  "--allow-write|--no-watch|--debounce|--session-key|--verbose|"
                                  "--help");
    }
    return mcp_serve(&opt, &mo);
}

static int serve_pipe[2] = {-1, -1};

#define SERVE_OPTIONS                                                                             \
    "--listen|--tokens|--allow-write|--allow-origin|--max-engines|--max-engine-mb|--max-conns|"   \
    "--max-conns-per-addr|"                                                                       \
    "--no-watch|--debounce|--first-sync-wait|--verbose|--help"

static void on_serve_stop(int sig)
{
    (void)sig;
    int saved = errno;
    ssize_t w = write(serve_pipe[1], "x", 1);
    (void)w;
    errno = saved;
}

static int cmd_serve(const cm_options *base, int argc, char **argv)
{
    cm_options opt = *base;
    serve_opts so = {NULL, NULL, NULL, 0, 0, -1, -1, -1, -1, 0, 0};
    const char **origins = calloc((size_t)argc + 1, sizeof *origins);
    size_t norigins = 0;
    int rc = 1;
    if (!origins) return die("out of memory");
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!strcmp(a, "--help")) {
            fputs(usage_serve, stdout);
            rc = 0;
            goto out;
        } else if (!strcmp(a, "--verbose"))
            verbose = 1;
        else if (!strcmp(a, "--allow-write"))
            opt.allow_write = 1;
        else if (!strcmp(a, "--no-watch"))
            so.watch = 0;
        else if (!strcmp(a, "--debounce")) {
            if (parse_debounce(argc, argv, &i, &so.debounce_ms)) {
                die("serve: --debounce needs milliseconds (0..3600000)");
                goto out;
            }
        } else if (!strcmp(a, "--first-sync-wait")) {
            if (parse_debounce(argc, argv, &i, &so.first_sync_wait_ms)) {
                die("serve: --first-sync-wait needs milliseconds (0..3600000)");
                goto out;
            }
        } else if (!strcmp(a, "--listen") && v) {
            so.listen = argv[++i];
        } else if (!strcmp(a, "--tokens") && v) {
            so.tokens_path = argv[++i];
        } else if (!strcmp(a, "--allow-origin") && v) {
            origins[norigins++] = argv[++i];
        } else if ((!strcmp(a, "--max-engines") || !strcmp(a, "--max-conns") ||
                    !strcmp(a, "--max-conns-per-addr")) &&
                   v) {
            long n = strtol(v, &end, 10);
            if (!*v || *end || n < 1 || n > 100000) {
                die("serve: %s needs a number from 1 to 100000", a);
                goto out;
            }
            *(!strcmp(a, "--max-engines")        ? &so.max_engines
              : !strcmp(a, "--max-conns-per-addr") ? &so.max_conns_per_addr
                                                   : &so.max_conns) = (int)n;
            i++;
        } else if (!strcmp(a, "--max-engine-mb") && v) {
            double mb = strtod(v, &end);
            if (!*v || *end || !(mb >= 0.1 && mb <= 1048576)) {
                die("serve: --max-engine-mb needs megabytes from 0.1 to 1048576");
                goto out;
            }
            so.max_engine_bytes = (size_t)(mb * 1048576.0);
            i++;
        } else if (!v && option_in("--listen|--tokens|--allow-origin|--max-engines|--max-conns|"
                                   "--max-engine-mb|--max-conns-per-addr",
                                   a)) {
            die("serve: %s needs a value", a);
            goto out;
        } else {
            unknown_option("serve", a, SERVE_OPTIONS);
            goto out;
        }
    }
    so.origins = origins;
    if (pipe(serve_pipe) != 0) {
        die("serve: pipe: %s", strerror(errno));
        goto out;
    }
    struct sigaction sa = {0};
    sa.sa_handler = on_serve_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    so.stop_fd = serve_pipe[0];
    rc = mcp_serve_http(&opt, &so);
out:
    free(origins);
    return rc;
}

/* The global option a names, or NULL. */
static const char **global_opt(cm_options *opt, const char *a)
{
    return !strcmp(a, "--agent")       ? &opt->agent_id
           : !strcmp(a, "--workspace") ? &opt->workspace
           : !strcmp(a, "--config")    ? &opt->config_path
           : !strcmp(a, "--state-dir") ? &opt->state_dir
                                       : NULL;
}

/* Takes the global options out of a command's arguments (they may follow
 * the command: `clawmem search q --workspace w`), leaving the rest in order.
 * -1 when one lacks its value. */
static int take_global_opts(cm_options *opt, int *argc, char **argv)
{
    int n = 0;
    for (int i = 0; i < *argc; i++) {
        const char **dst = global_opt(opt, argv[i]);
        if (!dst) {
            argv[n++] = argv[i];
            continue;
        }
        if (i + 1 >= *argc) return die("%s needs a value", argv[i]), -1;
        *dst = argv[++i];
    }
    *argc = n;
    return 0;
}

/* The commands: those that run on the agent's open engine (engine_fn), and
 * those that open what they need themselves (own_fn). */
typedef struct command {
    const char *name;
    int (*engine_fn)(cm_engine *e, int argc, char **argv);
    int (*own_fn)(const cm_options *opt, int argc, char **argv);
    const char *usage;
} command;

static int cmd_help(const cm_options *opt, int argc, char **argv);

static const command commands[] = {
    {"status", cmd_status, NULL, usage_status},
    {"index", cmd_index, NULL, usage_index},
    {"search", cmd_search, NULL, usage_search},
    {"get", cmd_get, NULL, usage_get},
    {"watch", cmd_watch, NULL, usage_watch},
    {"mcp", NULL, cmd_mcp, usage_mcp},
    {"serve", NULL, cmd_serve, usage_serve},
    {"sessions", NULL, cmd_sessions, usage_sessions},
    {"models", NULL, cmd_models, usage_models},
    {"pairing", NULL, cmd_pairing, usage_pairing},
    {"agents", NULL, cmd_agents, usage_agents},
    {"gateway", NULL, cmd_gateway, usage_gateway},
    {"chat", NULL, cmd_chat, usage_chat},
    {"help", NULL, cmd_help, usage_main},
};

static const command *find_command(const char *name)
{
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(commands[i].name, name)) return &commands[i];
    return NULL;
}

/* die() about an unknown command, with the closest one when it is a typo. */
static int unknown_command(const char *prefix, const char *name)
{
    suggest sg;
    char near[SUGGEST_MAX_LEN + 1];
    cm_suggest_init(&sg, name);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        cm_suggest_add(&sg, commands[i].name, strlen(commands[i].name));
    if (cm_suggest_result(&sg, near, sizeof near))
        return die("%sunknown command '%s' (did you mean %s?)", prefix, name, near);
    return die("%sunknown command '%s' (see clawmem help)", prefix, name);
}

/* clawmem help [COMMAND]; --help (or -h) anywhere: this text, as every
 * command answers its --help. */
static int cmd_help(const cm_options *opt, int argc, char **argv)
{
    (void)opt;
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) argc = 0;
    if (argc == 0) return fputs(usage_main, stdout), 0;
    if (argc > 1) return die("help: one COMMAND only (see clawmem help)");
    const command *c = find_command(argv[0]);
    if (!c) return unknown_command("help: ", argv[0]);
    fputs(c->usage, stdout);
    return 0;
}

int main(int argc, char **argv)
{
    cm_process_init();
    cm_options opt = {0};
    opt.log = on_log;
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *a = argv[i];
        const char **dst = global_opt(&opt, a);
        if (dst) {
            if (i + 1 >= argc) return die("%s needs a value", a);
            *dst = argv[++i];
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage_main, stdout);
            return 0;
        } else if (!strcmp(a, "--version")) {
            printf("clawmem %s\n", CM_VERSION);
            return 0;
        } else {
            return unknown_option("", a, "--version");
        }
    }
    if (i >= argc)
        return die("missing COMMAND: status, index, search, get, watch, mcp, serve, sessions, "
                   "models, pairing, agents, gateway, chat or help (see clawmem help)");
    const char *name = argv[i++];
    int nargs = argc - i;
    char **args = argv + i;
    const command *c = find_command(name);
    if (!c) return unknown_command("", name);
    if (c->own_fn == cmd_help) return cmd_help(&opt, nargs, args);
    if (take_global_opts(&opt, &nargs, args)) return 1;
    if (c->own_fn) return c->own_fn(&opt, nargs, args);
    for (int k = 0; k < nargs; k++) /* --help needs no engine (and no valid config) */
        if (!strcmp(args[k], "--help")) return c->engine_fn(NULL, nargs, args);
    char err[CM_ERR_SIZE];
    cm_engine *e = NULL;
    if (cm_engine_open(&opt, &e, err, sizeof err)) return die("%s", err);
    int r = c->engine_fn(e, nargs, args);
    cm_engine_close(e);
    return r;
}
