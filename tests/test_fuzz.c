/*
 * test_fuzz.c — replays each fuzz target's seed corpus (tests/fuzz/corpus/
 * TARGET/) plus generated pathological inputs, so what fuzzing once found
 * stays fixed.
 */
#include <dirent.h>

#include "../src/base/fs.h"
#include "fuzz/fuzz.h"
#include "test.h"

static int replay(const char *name, int (*fn)(const uint8_t *, size_t))
{
    char dir[256];
    snprintf(dir, sizeof dir, "tests/fuzz/corpus/%s", name);
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char p[512], err[256];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        buf b = BUF_INIT;
        if (cm_fs_read_file(p, 1 << 24, &b, err, sizeof err) == CM_OK) {
            fn((const uint8_t *)(b.data), b.len);
            n++;
        }
        cm_buf_release(&b);
    }
    closedir(d);
    return n;
}

TEST(fuzz_corpus_config)
{
    EXPECT(replay("config", fuzz_config) >= 5);
}

TEST(fuzz_corpus_chunk)
{
    EXPECT(replay("chunk", fuzz_chunk) >= 5);
}

TEST(fuzz_corpus_query)
{
    EXPECT(replay("query", fuzz_query) >= 5);
}

TEST(fuzz_corpus_embed)
{
    EXPECT(replay("embed", fuzz_embed) >= 5);
}

TEST(fuzz_corpus_batch)
{
    EXPECT(replay("batch", fuzz_batch) >= 5);
}

TEST(fuzz_corpus_llm)
{
    EXPECT(replay("llm", fuzz_llm) >= 5);
}

TEST(fuzz_corpus_httpd)
{
    EXPECT(replay("httpd", fuzz_httpd) >= 5);
    fuzz_httpd_stop();
}

TEST(fuzz_corpus_path)
{
    EXPECT(replay("path", fuzz_path) >= 5);
}

TEST(fuzz_corpus_session)
{
    EXPECT(replay("session", fuzz_session) >= 5);
}

TEST(fuzz_corpus_blocks)
{
    EXPECT(replay("blocks", fuzz_blocks) >= 5);
}

TEST(fuzz_corpus_tg_html)
{
    EXPECT(replay("tg_html", fuzz_tg_html) >= 5);
}

TEST(fuzz_corpus_tg_update)
{
    EXPECT(replay("tg_update", fuzz_tg_update) >= 5);
}

TEST(fuzz_pathological_inputs)
{
    /* 100k headings, a 1 MB line of CJK, 20k nested brackets */
    buf b = BUF_INIT;
    for (int i = 0; i < 100000; i++)
        cm_buf_adds(&b, "#\n");
    fuzz_chunk((const uint8_t *)b.data, b.len);
    cm_buf_reset(&b);
    while (b.len < (1u << 20))
        cm_buf_adds(&b, "東京서울");
    fuzz_chunk((const uint8_t *)b.data, b.len);
    fuzz_query((const uint8_t *)b.data, b.len);
    cm_buf_reset(&b);
    for (int i = 0; i < 20000; i++)
        cm_buf_adds(&b, "{a:[");
    fuzz_config((const uint8_t *)b.data, b.len);
    cm_buf_release(&b);
}

TEST(fuzz_corpus_web_html)
{
    EXPECT(replay("web_html", fuzz_web_html) >= 5);
    /* pathological: 2 MB of '<' and of nested tags end in time */
    size_t n = 2u << 20;
    char *p = malloc(n);
    memset(p, '<', n);
    fuzz_web_html((const uint8_t *)p, n);
    for (size_t i = 0; i + 3 <= n; i += 3)
        memcpy(p + i, "<a>", 3);
    fuzz_web_html((const uint8_t *)p, n);
    free(p);
}

TEST(fuzz_corpus_wsframe)
{
    EXPECT(replay("wsframe", fuzz_wsframe) >= 5);
}

TEST(fuzz_corpus_wsreq)
{
    EXPECT(replay("wsreq", fuzz_wsreq) >= 5);
    fuzz_wsreq_stop();
}

TEST(fuzz_corpus_exec_argv)
{
    EXPECT(replay("exec_argv", fuzz_exec_argv) >= 5);
}
