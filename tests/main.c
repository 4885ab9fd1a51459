/*
 * main.c — the test runner. Usage: test_runner [NAME_PREFIX...]
 * Runs every registered test (or those whose name starts with a prefix),
 * prints failures as they happen and "N passed, N failed" at the end; exits 1
 * if any failed. Temporary directories are removed at exit.
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

void tmp_cleanup(void);

int main(int argc, char **argv)
{
    int passed = 0, failed = 0;
    for (size_t i = 0; i < ntests; i++) {
        bool selected = argc < 2;
        for (int a = 1; a < argc && !selected; a++)
            selected = strncmp(tests[i].name, argv[a], strlen(argv[a])) == 0;
        if (!selected) continue;
        current_failed = false;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        tests[i].fn();
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
        if (current_failed) {
            failed++;
            fprintf(stderr, "FAIL %s\n", tests[i].name);
        } else {
            passed++;
            printf("ok   %-44s %8.1f ms\n", tests[i].name, ms);
        }
        fflush(stdout);
    }
    tmp_cleanup();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
