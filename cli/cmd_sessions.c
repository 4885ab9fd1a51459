/*
 * cmd_sessions.c — `clawmem sessions`: list, show, append, reset, delete
 * and flush --dry-run over the public session API, in text or --json.
 */
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

const char usage_sessions[] =
    "usage: clawmem sessions list [--json]\n"
    "       clawmem sessions show KEY [--last N] [--json]\n"
    "       clawmem sessions append KEY --role user|assistant TEXT [--json]\n"
    "       clawmem sessions reset KEY [--json]\n"
    "       clawmem sessions delete KEY\n"
    "       clawmem sessions flush KEY [--dry-run [--prompt TEXT] [--context-window N]\n"
    "                              [--read-only]] [--json]\n"
    "       clawmem sessions compact KEY [--json]\n"
    "The agent's sessions as QuantumClaw keeps them: <stateDir>/agents/<agentId>/sessions/\n"
    "sessions.json and one <sessionId>.jsonl transcript each. KEY is a session key\n"
    "(agent:main:main, or main; agent:<id>: is added when missing). reset starts the\n"
    "session again (the transcript is kept as *.jsonl.reset.<time>); delete removes it\n"
    "(*.jsonl.deleted.<time>). flush runs the memory flush now (a silent turn that may append\n"
    "to today's memory/YYYY-MM-DD.md; memory_write must be enabled); with --dry-run it says\n"
    "whether the flush is due before the next turn, and why. compact summarises the older\n"
    "turns into a compaction record now.\n";

static void iso(long long ms, char out[32])
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 32, "%Y-%m-%d %H:%M:%S", &tm);
}

static const char *str(const json_t *o, const char *k)
{
    const char *v = json_string_value(json_object_get(o, k));
    return v ? v : "";
}

static void print_list(json_t *j)
{
    json_t *arr = json_object_get(j, "sessions");
    if (!json_array_size(arr)) {
        puts("No sessions.");
        return;
    }
    size_t i;
    json_t *s;
    json_array_foreach(arr, i, s)
    {
        char when[32];
        iso(json_integer_value(json_object_get(s, "updatedAt")), when);
        put_safe(stdout, str(s, "key"), 0);
        fputs("  ", stdout);
        put_safe(stdout, str(s, "sessionId"), 0);
        printf("  updated %s  %lld bytes  compactions %lld\n", when,
               (long long)json_integer_value(json_object_get(s, "transcriptBytes")),
               (long long)json_integer_value(json_object_get(s, "compactionCount")));
    }
}

/* A record's text: a message's text blocks (or string content). */
static void record_text(const json_t *content, FILE *f)
{
    if (json_is_string(content)) {
        put_safe(f, json_string_value(content), 1);
        return;
    }
    size_t i;
    json_t *b;
    json_array_foreach(content, i, b)
    {
        const char *t = str(b, "type");
        if (!strcmp(t, "text"))
            put_safe(f, str(b, "text"), 1);
        else if (!strcmp(t, "toolCall")) {
            fputs("[tool call ", f);
            put_safe(f, str(b, "name"), 0);
            fputc(']', f);
        }
    }
}

/* Prints literal text and values in turn (text, value, text, value, …,
 * NULL): the values escaped, as they come from files others write. */
static void print_fields(const char *text, ...)
{
    va_list ap;
    va_start(ap, text);
    for (int k = 0; text; k++, text = va_arg(ap, const char *))
        if (k % 2)
            put_safe(stdout, text, 0);
        else
            fputs(text, stdout);
    va_end(ap);
}

static void print_show(json_t *j)
{
    json_t *e = json_object_get(j, "entry");
    fputs("Session: ", stdout);
    put_safe(stdout, str(j, "key"), 0);
    fputs("\nId: ", stdout);
    put_safe(stdout, str(e, "sessionId"), 0);
    fputs("\nTranscript: ", stdout);
    put_safe(stdout, str(j, "transcript"), 0);
    printf("\nCompactions: %lld\n",
           (long long)json_integer_value(json_object_get(e, "compactionCount")));
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(j, "records"), i, r)
    {
        const char *type = str(r, "type");
        fputs("\n[", stdout);
        put_safe(stdout, str(r, "timestamp"), 0);
        fputs("] ", stdout);
        if (!strcmp(type, "message")) {
            json_t *m = json_object_get(r, "message");
            put_safe(stdout, str(m, "role"), 0);
            fputs(": ", stdout);
            record_text(json_object_get(m, "content"), stdout);
        } else if (!strcmp(type, "compaction")) {
            fputs("compaction: ", stdout);
            put_safe(stdout, str(r, "summary"), 1);
        } else {
            put_safe(stdout, type, 0);
        }
    }
    putchar('\n');
}

int cmd_sessions(const cm_options *opt, int argc, char **argv)
{
    const char *sub = NULL, *key = NULL, *role = NULL, *text = NULL, *prompt = NULL;
    int json = 0, dry = 0, ro = 0;
    long last = 0, cw = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help")) return fputs(usage_sessions, stdout), 0;
        if (!strcmp(a, "--json"))
            json = 1;
        else if (!strcmp(a, "--dry-run"))
            dry = 1;
        else if (!strcmp(a, "--read-only"))
            ro = 1;
        else if (!strcmp(a, "--role") || !strcmp(a, "--last") || !strcmp(a, "--prompt") ||
                 !strcmp(a, "--context-window")) {
            if (i + 1 >= argc) return die("sessions: %s needs a value", a);
            const char *v = argv[++i];
            char *end;
            if (!strcmp(a, "--role"))
                role = v;
            else if (!strcmp(a, "--prompt"))
                prompt = v;
            else {
                long n = strtol(v, &end, 10);
                if (*end || n < 0) return die("sessions: %s needs a number, got '%s'", a, v);
                if (!strcmp(a, "--last"))
                    last = n;
                else
                    cw = n;
            }
        } else if (a[0] == '-' && a[1]) {
            return unknown_option("sessions", a,
                                  "--json|--dry-run|--read-only|--role|--last|--prompt|"
                                  "--context-window|--help");
        } else if (!sub)
            sub = a;
        else if (!key)
            key = a;
        else if (!text)
            text = a;
        else
            return die("sessions: too many arguments (see clawmem sessions --help)");
    }
    if (!sub)
        return die("sessions: say list, show, append, reset, delete or flush (see clawmem sessions "
                   "--help)");
    bool needs_key = strcmp(sub, "list") != 0;
    if (needs_key && !key) return die("sessions %s: a session KEY is needed", sub);
    if (!strcmp(sub, "append") && (!role || !text))
        return die("sessions append: --role user|assistant and TEXT are needed");
    char err[CM_ERR_SIZE], *out = NULL;
    if ((!strcmp(sub, "flush") && !dry) || !strcmp(sub, "compact")) {
        cm_options o = *opt;
        o.allow_write = 1; /* the flush writes memory */
        cm_agent *ag = NULL;
        if (cm_agent_open(&o, &ag, err, sizeof err)) return die("%s", err);
        cm_rc r2 = sub[0] == 'f' ? cm_agent_flush(ag, key, &out, err, sizeof err)
                                 : cm_agent_compact(ag, key, &out, err, sizeof err);
        cm_agent_close(ag);
        if (r2) return die("sessions %s: %s", sub, err);
        if (json)
            puts(out);
        else
            printf("%s %s\n", key, sub[0] == 'f' ? "flushed" : "compacted");
        cm_free(out);
        return 0;
    }
    cm_sessions *s = NULL;
    if (cm_sessions_open(opt, &s, err, sizeof err)) return die("%s", err);
    cm_rc rc;
    if (!strcmp(sub, "list"))
        rc = cm_sessions_list(s, &out, err, sizeof err);
    else if (!strcmp(sub, "show"))
        rc = cm_sessions_show(s, key, (unsigned)last, &out, err, sizeof err);
    else if (!strcmp(sub, "append"))
        rc = cm_sessions_append(s, key, role, text, &out, err, sizeof err);
    else if (!strcmp(sub, "reset"))
        rc = cm_sessions_reset(s, key, &out, err, sizeof err);
    else if (!strcmp(sub, "delete"))
        rc = cm_sessions_delete(s, key, err, sizeof err);
    else if (!strcmp(sub, "flush"))
        rc = cm_sessions_flush_check(s, key, prompt, cw, !ro, &out, err, sizeof err);
    else {
        cm_sessions_close(s);
        return die("sessions: unknown subcommand '%s' (see clawmem sessions --help)", sub);
    }
    cm_sessions_close(s);
    if (rc) return die("sessions %s: %s", sub, err);
    if (json || !out) {
        if (out)
            puts(out);
        else if (json)
            puts("{}");
        else
            printf("deleted %s\n", key);
        cm_free(out);
        return 0;
    }
    json_t *j = json_loads(out, 0, NULL);
    cm_free(out);
    if (!strcmp(sub, "list"))
        print_list(j);
    else if (!strcmp(sub, "show"))
        print_show(j);
    else if (!strcmp(sub, "append"))
        print_fields("appended ", str(j, "id"), " to ", str(j, "key"), " (session ",
                     str(j, "sessionId"), ")\n", NULL);
    else if (!strcmp(sub, "reset"))
        print_fields("", str(j, "key"), " starts again as session ", str(j, "sessionId"), "\n",
                     NULL);
    else if (!strcmp(sub, "flush")) {
        printf("Memory flush due: %s (%s)\n",
               json_is_true(json_object_get(j, "due")) ? "yes" : "no", str(j, "reason"));
        printf("Tokens: %lld of threshold %lld\n",
               (long long)json_integer_value(json_object_get(j, "tokens")),
               (long long)json_integer_value(json_object_get(j, "threshold")));
        print_fields("Target: ", str(j, "targetPath"), "\n", NULL);
    }
    json_decref(j);
    return 0;
}
