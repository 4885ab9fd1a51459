/*
 * runner.c — the test runner. Usage: test_runner [NAME_PREFIX...]
 * Runs every registered test (or those whose name starts with a prefix),
 * prints failures as they happen and "N passed, N failed, N skipped" at the
 * end; exits 1 if any failed. A test skipped for a requirement named in
 * $CLAWMEM_TEST_REQUIRE (comma-separated, e.g. "llama,node") fails instead,
 * so CI cannot pass by skipping. Temporary directories are removed at exit.
 */
#include <stdarg.h>
#include <time.h>

#include "test.h"

#define MAX_TESTS 1024

static struct {
    const char *name;
    test_fn fn;
} tests[MAX_TESTS];
static size_t ntests;
static bool current_failed;
static char current_skip[512]; /* why the running test was skipped, or "" */

void test_register(const char *name, test_fn fn)
{
    if (ntests < MAX_TESTS) {
        tests[ntests].name = name;
        tests[ntests].fn = fn;
        ntests++;
    }
}

void test_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "  %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    current_failed = true;
}

bool test_failed(void)
{
    return current_failed;
}

/* Whether req is one of the comma-separated names in $CLAWMEM_TEST_REQUIRE. */
static bool required(const char *req)
{
    const char *list = getenv("CLAWMEM_TEST_REQUIRE");
    size_t n = strlen(req);
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, req, n) == 0) return true;
        p = e ? e + 1 : p + len;
    }
    return false;
}

void test_skip(const char *file, int line, const char *req, const char *fmt, ...)
{
    char why[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (required(req)) {
        test_fail(file, line, "required \"%s\" is missing: %s", req, why);
        return;
    }
    snprintf(current_skip, sizeof current_skip, "%s: %s", req, why);
}

void tmp_cleanup(void);

int main(int argc, char **argv)
{
    int passed = 0, failed = 0, skipped = 0;
    for (size_t i = 0; i < ntests; i++) {
        bool selected = argc < 2;
        for (int a = 1; a < argc && !selected; a++)
            selected = strncmp(tests[i].name, argv[a], strlen(argv[a])) == 0;
        if (!selected) continue;
        current_failed = false;
        current_skip[0] = 0;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        tests[i].fn();
        clock_gettime(CLOCK_MONOTONIC, &t1);
        proc_reap_leftovers(tests[i].name);
        double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
        if (current_failed) {
            failed++;
            fprintf(stderr, "FAIL %s\n", tests[i].name);
        } else if (current_skip[0]) {
            skipped++;
            printf("skip %-44s (%s)\n", tests[i].name, current_skip);
        } else {
            passed++;
            printf("ok   %-44s %8.1f ms\n", tests[i].name, ms);
        }
        fflush(stdout);
    }
    tmp_cleanup();
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}
