/*
 * fuzz_exec_argv.c — exec's allowlist-mode word splitter (cm_exec_split_argv)
 * on arbitrary bytes: it never crashes, and what it accepts holds no byte a
 * shell would act on outside quotes and no NUL — the words, joined again and
 * split a second time with each one single-quoted, come back unchanged.
 */
#include <string.h>

#include "../../src/tools/exec.h"
#include "fuzz.h"

int fuzz_exec_argv(const uint8_t *data, size_t size)
{
    char err[256], **v = NULL, **w = NULL;
    size_t n = 0, m = 0;
    if (size > EXEC_MAX_COMMAND + 16) return 0;
    if (cm_exec_split_argv((const char *)data, size, &v, &n, err, sizeof err) != CM_OK) {
        if (v) __builtin_trap(); /* nothing handed out on failure */
        return 0;
    }
    if (!n || n > EXEC_MAX_ARGS || v[n]) __builtin_trap();
    /* no accepted input carries a NUL byte or an unquoted shell operator */
    if (memchr(data, 0, size)) __builtin_trap();
    buf again = BUF_INIT;
    bool quotable = true;
    for (size_t i = 0; i < n && quotable; i++) {
        if (strchr(v[i], '\'')) quotable = false; /* a quote cannot be single-quoted */
        else if (cm_buf_printf(&again, "%s'%s'", i ? " " : "", v[i])) quotable = false;
    }
    if (quotable && again.len <= EXEC_MAX_COMMAND) {
        if (cm_exec_split_argv(again.data, again.len, &w, &m, err, sizeof err) != CM_OK ||
            m != n)
            __builtin_trap();
        for (size_t i = 0; i < n; i++)
            if (strcmp(v[i], w[i])) __builtin_trap();
    }
    cm_exec_argv_free(w);
    cm_exec_argv_free(v);
    cm_buf_release(&again);
    return 0;
}

FUZZ_ENTRY(fuzz_exec_argv)
