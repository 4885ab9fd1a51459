/*
 * test_compat.c — the shared config file stays QuantumClaw's: the example
 * configs parse in clawmem without a warning (always), and every example
 * quantumclaw.json in the repository passes the reference's own
 * `openclaw config validate` (openclaw@2026.3.22 in build/peers, which
 * scripts/install-reference.sh installs; about 2 s a config, so only with
 * CLAWMEM_COMPAT=1, as `make compat` runs it).
 */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../src/base/fs.h"
#include "../src/config/config.h"
#include "test.h"

#define REF_PKG  "build/peers/openclaw-2026.3.22/node_modules/openclaw"
#define REF_NODE "build/peers/node/bin/node"

static char compat_warnings[4096];

static void compat_collect(void *ctx, cm_log_level lv, const char *msg)
{
    (void)ctx;
    (void)lv;
    size_t n = strlen(compat_warnings);
    snprintf(compat_warnings + n, sizeof compat_warnings - n, "%s\n", msg);
}

TEST(compat_examples_parse_without_warnings)
{
    buf main = BUF_INIT, over = BUF_INIT;
    char err[512];
    EXPECT_INT(cm_fs_read_file("examples/quantumclaw.json5", 1 << 20, &main, err, sizeof err),
               CM_OK);
    EXPECT_INT(cm_fs_read_file("examples/clawmem.json5", 1 << 20, &over, err, sizeof err), CM_OK);
    if (test_failed()) goto out;
    cm_logger lg = {compat_collect, NULL};
    cm_config_args a = {NULL, NULL, NULL, "/tmp/qc-state"};
    config_text m = {main.data, main.len, "quantumclaw.json5"};
    config_text o = {over.data, over.len, "clawmem.json5"};
    cm_config c;
    static const char *const vars[] = {"OPENAI_API_KEY", "TELEGRAM_BOT_TOKEN",
                                       "TELEGRAM_WORK_BOT_TOKEN", "QUANTUMCLAW_GATEWAY_TOKEN"};
    for (size_t i = 0; i < ARRAY_LEN(vars); i++)
        setenv(vars[i], "compat-test-value", 1);
    compat_warnings[0] = 0;
    unsetenv("CLAWMEM_CONFIG_PATH");
    EXPECT_INT(cm_config_parse_files(&m, &o, &a, &lg, &c, err, sizeof err), CM_OK);
    for (size_t i = 0; i < ARRAY_LEN(vars); i++)
        unsetenv(vars[i]);
    EXPECT_STR(compat_warnings, "");
    /* both files' keys arrive: the overlay's HTTP channel, the shared apiRoot */
    const json_t *ch = json_object_get(c.root, "channels");
    EXPECT(json_is_true(json_object_get(json_object_get(ch, "http"), "enabled")));
    EXPECT_STR(json_string_value(json_object_get(json_object_get(ch, "telegram"), "apiRoot")),
               "https://api.telegram.org");
    cm_config_release(&c);
out:
    cm_buf_release(&main);
    cm_buf_release(&over);
}

TEST(compat_example_configs_pass_the_reference)
{
    const char *on = getenv("CLAWMEM_COMPAT");
    if (!on || strcmp(on, "1"))
        SKIP("compat", "set CLAWMEM_COMPAT=1 (make compat) to run openclaw config validate");
    if (access(REF_PKG "/openclaw.mjs", R_OK) || access(REF_NODE, X_OK))
        SKIP("compat", "no reference in build/peers (scripts/install-reference.sh installs it)");
    FILE *p = popen(REF_NODE " tests/compat/validate-configs.mjs " REF_PKG " . 2>&1", "r");
    EXPECT(p != NULL);
    if (!p) return;
    buf out = BUF_INIT;
    char line[1024];
    while (fgets(line, sizeof line, p))
        cm_buf_adds(&out, line);
    int st = pclose(p);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        test_fail(__FILE__, __LINE__, "openclaw config validate rejected a config:\n%s",
                  out.data ? out.data : "");
    EXPECT_CONTAINS(out.data ? out.data : "", "ok   examples/quantumclaw.json5");
    cm_buf_release(&out);
}
