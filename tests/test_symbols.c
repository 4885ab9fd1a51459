/*
 * test_symbols.c — the names libclawmem.a exports. Every one starts with
 * `cm_`, so the library can be linked into any program: the public API is
 * what include/ declares (cm_engine_open, cm_memory_search, …); an internal
 * function shared between files is `cm_<module>_<verb>` after the module that
 * owns it (cm_buf_add, cm_store_open, cm_gw_queue_next, cm_engine_rebuild);
 * file-local functions are static and unprefixed. Handles are opened and
 * closed, values initialised and released (clear, free), as in git.
 */
#include <libgen.h>

#include "../src/base/buf.h"
#include "test.h"

/* `nm -g --defined-only` prints "addr T name" per symbol: each name
 * without the prefix is named in the failure (the compiler's own, starting
 * with "__", do not count). */
TEST(symbols_exported_start_with_cm)
{
    const char *bin = getenv("CLAWMEM_BIN");
    char dir[4096], lib[4200];
    snprintf(dir, sizeof dir, "%s", bin && *bin ? bin : "build/clawmem");
    snprintf(lib, sizeof lib, "%s/libclawmem.a", dirname(dir));
    const char *argv[] = {"nm", "-g", "--defined-only", lib, NULL};
    run_result r = run_cmd(NULL, argv);
    EXPECT_INT(r.status, 0);
    buf bad = BUF_INIT;
    int nbad = 0, total = 0;
    for (const char *line = r.out ? r.out : ""; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        const char *name = memrchr(line, ' ', len);
        if (name && name > line && name[-1] != ':' && len > 0 && line[len - 1] != ':') {
            name++;
            size_t nl = (size_t)(line + len - name);
            total++;
            /* names with "__" are the compiler's (__odr_asan.x under ASan) */
            if ((nl < 3 || memcmp(name, "cm_", 3) != 0) && (nl < 2 || memcmp(name, "__", 2) != 0)) {
                nbad++;
                EXPECT_INT(cm_buf_printf(&bad, " %.*s", (int)nl, name), CM_OK);
            }
        }
        line += len + (end != NULL);
    }
    EXPECT(total > 100); /* nm read the library */
    if (nbad)
        test_fail(__FILE__, __LINE__, "%d of %d exported symbols lack the cm_ prefix:%s", nbad,
                  total, bad.data);
    cm_buf_release(&bad);
    run_result_release(&r);
}

/* The library never changes the process environment: setenv("TZ") and
 * tzset() raced with every other thread's localtime_r and getenv (issue 27). */
TEST(symbols_library_leaves_the_environment_alone)
{
    const char *bin = getenv("CLAWMEM_BIN");
    char dir[4096], lib[4200];
    snprintf(dir, sizeof dir, "%s", bin && *bin ? bin : "build/clawmem");
    snprintf(lib, sizeof lib, "%s/libclawmem.a", dirname(dir));
    const char *argv[] = {"nm", "-u", lib, NULL};
    run_result r = run_cmd(NULL, argv);
    EXPECT_INT(r.status, 0);
    static const char *const banned[] = {"setenv", "unsetenv", "putenv", "tzset", "clearenv"};
    for (const char *line = r.out ? r.out : ""; *line;) {
        size_t len = strcspn(line, "\n");
        const char *name = memrchr(line, ' ', len);
        name = name ? name + 1 : line;
        size_t nl = (size_t)(line + len - name);
        for (size_t i = 0; i < ARRAY_LEN(banned); i++)
            if (nl == strlen(banned[i]) && !memcmp(name, banned[i], nl))
                test_fail(__FILE__, __LINE__, "libclawmem.a calls %s", banned[i]);
        line += len + (line[len] == '\n');
    }
    run_result_release(&r);
}
