/*
 * test_base.c — buf, UTF-8, SHA-256 and the JSON5 reader.
 */
#include <dirent.h>
#include <jansson.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../src/base/fs.h"
#include "../src/base/json5.h"
#include "../src/base/lockfile.h"
#include "../src/base/sha256.h"
#include "../src/base/suggest.h"
#include "../src/base/utf8.h"
#include "test.h"

TEST(buf_cap_refuses_and_keeps_content)
{
    buf b;
    cm_buf_init(&b, 8);
    EXPECT_INT(cm_buf_adds(&b, "12345"), CM_OK);
    EXPECT_INT(cm_buf_adds(&b, "6789"), CM_ETOOBIG);
    EXPECT_STR(b.data, "12345");
    EXPECT_INT(cm_buf_adds(&b, "678"), CM_OK);
    EXPECT_STR(b.data, "12345678");
    cm_buf_release(&b);
}

TEST(buf_empty_is_never_null)
{
    buf b = BUF_INIT, zeroed = {0};
    EXPECT(b.data && b.data[0] == 0 && b.len == 0);
    cm_buf_reset(&zeroed); /* a buf in a zeroed struct becomes a proper empty one */
    EXPECT(zeroed.data && zeroed.data[0] == 0);
    char *s = cm_buf_detach(&b); /* "" the caller frees */
    EXPECT(s && s[0] == 0);
    free(s);
    EXPECT(b.data && b.data[0] == 0);
    EXPECT_INT(cm_buf_adds(&b, "x"), CM_OK);
    cm_buf_release(&b);
    EXPECT(b.data && b.data[0] == 0 && b.cap == 0);
    cm_buf_release(&b); /* twice is harmless */
    cm_buf_init(&b, 0);
    EXPECT(b.data && b.data[0] == 0);
}

TEST(buf_json_writer_error_sticks)
{
    buf b;
    cm_buf_init(&b, 12);
    jw w = {&b, CM_OK};
    cm_jw_raw(&w, "{\"k\":");
    cm_jw_str(&w, "a long value"); /* over the cap */
    EXPECT_INT(w.rc, CM_ETOOBIG);
    cm_jw_raw(&w, "}"); /* would fit, but the run has failed */
    cm_jw_str(&w, NULL);
    EXPECT_INT(w.rc, CM_ETOOBIG);
    EXPECT_STR(b.data, "{\"k\":");
    cm_buf_reset(&b);
    w = (jw){&b, CM_OK};
    cm_jw_str(&w, NULL);
    cm_jw_printf(&w, ",%d", 7);
    EXPECT_INT(w.rc, CM_OK);
    EXPECT_STR(b.data, "null,7");
    cm_buf_release(&b);
}

TEST(buf_json_string_escapes)
{
    buf b = BUF_INIT;
    const char s[] = "a\"b\\c\n\t\x01 é";
    EXPECT_INT(cm_utf8_add_json_str(&b, s, sizeof s - 1), CM_OK);
    EXPECT_STR(b.data, "\"a\\\"b\\\\c\\n\\t\\u0001 é\"");
    json_t *j = json_loads(b.data, JSON_DECODE_ANY, NULL);
    EXPECT(j && strcmp(json_string_value(j), s) == 0);
    json_decref(j);
    cm_buf_release(&b);
}

TEST(utf8_decode_rejects_overlong_and_surrogates)
{
    int32_t cp;
    EXPECT_INT(cm_utf8_decode("\xC0\xAF", 2, &cp), 1);
    EXPECT_INT(cp, -1);
    EXPECT_INT(cm_utf8_decode("\xED\xA0\x80", 3, &cp), 1); /* U+D800 */
    EXPECT_INT(cp, -1);
    EXPECT_INT(cm_utf8_decode("\xF4\x90\x80\x80", 4, &cp), 1); /* > U+10FFFF */
    EXPECT_INT(cm_utf8_decode("\xE6\x9D\xB1", 3, &cp), 3);
    EXPECT_INT(cp, 0x6771);
    EXPECT_INT(cm_utf8_decode("\xF0\x9F\x98\x80", 4, &cp), 4);
    EXPECT_INT(cp, 0x1F600);
    EXPECT_INT(cm_utf8_valid_prefix("ab\xE6\x9D", 4), 2);
}

TEST(utf8_repair_replaces_each_bad_byte)
{
    buf b = BUF_INIT;
    EXPECT_INT(cm_utf8_repair(&b,
                              "a\xFF"
                              "b\xE6\x9D",
                              5),
               CM_OK);
    EXPECT_STR(b.data, "a\xEF\xBF\xBD"
                       "b\xEF\xBF\xBD\xEF\xBF\xBD");
    cm_buf_release(&b);
}

TEST(utf8_cjk_expand_bigrams)
{
    buf b = BUF_INIT;
    EXPECT_INT(cm_utf8_cjk_expand(&b, "go 東京都 now", strlen("go 東京都 now")), CM_OK);
    EXPECT_STR(b.data, "go  東京 京都 都  now");
    cm_buf_reset(&b);
    EXPECT_INT(cm_utf8_cjk_expand(&b, "서울에서", strlen("서울에서")), CM_OK);
    EXPECT_STR(b.data, " 서울 울에 에서 서 ");
    cm_buf_reset(&b);
    EXPECT_INT(cm_utf8_cjk_expand(&b, "x字y", strlen("x字y")), CM_OK);
    EXPECT_STR(b.data, "x 字 y");
    cm_buf_release(&b);
}

/* The expansion copies the bytes between CJK runs in one piece; checked
 * against a character-at-a-time model on random mixes of ASCII, Latin,
 * Cyrillic, characters just below and above U+1100, CJK, Hangul, emoji and
 * invalid bytes, and on the empty string. */
static void cjk_model(buf *out, const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        int32_t cp;
        size_t l = cm_utf8_decode(s + i, n - i, &cp);
        if (!cm_utf8_is_cjk(cp)) {
            cm_buf_add(out, s + i, l);
            i += l;
            continue;
        }
        size_t prev = i, prevlen = l;
        i += l;
        cm_buf_addc(out, ' ');
        for (;;) {
            int32_t next;
            size_t nl = i < n ? cm_utf8_decode(s + i, n - i, &next) : 0;
            if (!nl || !cm_utf8_is_cjk(next)) break;
            cm_buf_add(out, s + prev, prevlen + nl);
            cm_buf_addc(out, ' ');
            prev = i;
            prevlen = nl;
            i += nl;
        }
        cm_buf_add(out, s + prev, prevlen);
        cm_buf_addc(out, ' ');
    }
}

TEST(utf8_cjk_expand_matches_a_per_character_model)
{
    static const char *const parts[] = {"a", " ", "é", "ж", "\xE0\xBF\xBF", "\xE1\x83\xBF",
                                        "\xE1\x84\x80", "\xE1\xB8\x80", "東", "京", "서",
                                        "\xF0\x9F\x98\x80", "\xF0\xA0\x80\x80", "\xFF",
                                        "\xE1", "\x80", "\xE4\xB8"};
    buf got = BUF_INIT, want = BUF_INIT, in = BUF_INIT;
    unsigned seed = 12345;
    EXPECT_INT(cm_utf8_cjk_expand(&got, "", 0), CM_OK);
    EXPECT_INT((int)got.len, 0);
    for (int round = 0; round < 2000; round++) {
        cm_buf_reset(&in);
        cm_buf_reset(&got);
        cm_buf_reset(&want);
        int k = (int)((seed = seed * 1103515245u + 12345u) >> 16) % 12;
        for (int j = 0; j < k; j++) {
            seed = seed * 1103515245u + 12345u;
            const char *p = parts[(seed >> 16) % (sizeof parts / sizeof *parts)];
            cm_buf_add(&in, p, strlen(p));
        }
        EXPECT_INT(cm_utf8_cjk_expand(&got, in.data ? in.data : "", in.len), CM_OK);
        cjk_model(&want, in.data ? in.data : "", in.len);
        EXPECT_INT((int)got.len, (int)want.len);
        EXPECT(got.len == want.len && (got.len == 0 || memcmp(got.data, want.data, got.len) == 0));
    }
    cm_buf_release(&got);
    cm_buf_release(&want);
    cm_buf_release(&in);
}

/* FIPS 180-4's examples (one block, two blocks, a million bytes) and the
 * empty message. */
TEST(sha256_known_vectors)
{
    static const struct {
        const char *msg;
        const char *hex;
    } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrl"
         "m"
         "nopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
    };
    char hex[65];
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        cm_sha256_hex(v[i].msg, strlen(v[i].msg), hex);
        EXPECT_STR(hex, v[i].hex);
    }
    char *a = malloc(1000000);
    EXPECT(a != NULL);
    memset(a, 'a', 1000000);
    cm_sha256_hex(a, 1000000, hex);
    EXPECT_STR(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(a);
}

/* The built-in code against libcrypto's at every length up to five blocks
 * (every padding case) and at odd addresses, once the process's built-in
 * share is spent; and one digest against coreutils' sha256sum, a reference
 * outside both. Without libcrypto the built-in code serves all: the
 * comparisons still hold, and the test says libcrypto was not there. */
TEST(sha256_builtin_matches_libcrypto_and_sha256sum)
{
    bool lib = cm_sha256_uses_libcrypto();
    size_t n = 1 << 20;
    unsigned char *data = malloc(n + 1);
    EXPECT(data != NULL);
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (size_t i = 0; i <= n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        data[i] = (unsigned char)x;
    }
    unsigned char a[32], b[32];
    cm_sha256(data, SHA256_SMALL, a); /* spends what is left of the built-in share */
    cm_sha256(data, SHA256_SMALL, b); /* by libcrypto */
    EXPECT(memcmp(a, b, 32) == 0);
    for (size_t len = 0; len <= 5 * 64; len++) {
        cm_sha256(data + (len & 1), len, a);
        cm_sha256_portable(data + (len & 1), len, b);
        EXPECT(memcmp(a, b, 32) == 0);
    }
    cm_sha256(data + 1, n, a);
    cm_sha256_portable(data + 1, n, b);
    EXPECT(memcmp(a, b, 32) == 0);

    char *dir = tmp_dir();
    write_bytes(dir, "data", data, n);
    run_result r = run_cmd(NULL, (const char *const[]){"sha256sum", path_in(dir, "data"), NULL});
    EXPECT_INT(r.status, 0);
    EXPECT(r.out && strlen(r.out) > 64);
    char line[65];
    memcpy(line, r.out, 64);
    line[64] = 0;
    run_result_release(&r);
    char hex[65];
    cm_sha256_hex(data, n, hex);
    EXPECT_STR(hex, line);
    free(data);
    if (!lib) SKIP("libcrypto", "libcrypto.so.3 could not be loaded: the built-in code served all");
}

/* The command loads libcrypto (and libcurl) only when it needs them, so a
 * search process never pays for their relocations: neither is a dynamic
 * dependency, nor is libcrypto linked in statically (its symbol names would
 * be in the program's symbol table). */
TEST(sha256_command_does_not_link_libcrypto)
{
    const char *bin = getenv("CLAWMEM_BIN") ? getenv("CLAWMEM_BIN") : "build/clawmem";
    run_result r = run_cmd(NULL, (const char *const[]){"ldd", bin, NULL});
    EXPECT_INT(r.status, 0);
    EXPECT(r.out && strstr(r.out, "libc.so") != NULL); /* ldd did list the libraries */
    EXPECT(strstr(r.out, "libcrypto") == NULL);
    EXPECT(strstr(r.out, "libcurl") == NULL);
    run_result_release(&r);
    FILE *f = fopen(bin, "rb");
    EXPECT(f != NULL);
    static char chunk[1 << 16];
    static const char sym[] = "OPENSSL_init_crypto";
    size_t have = 0, got;
    bool found = false, has_main = false;
    while ((got = fread(chunk + have, 1, sizeof chunk - have, f)) > 0) {
        have += got;
        found = found || memmem(chunk, have, sym, sizeof sym - 1) != NULL;
        has_main = has_main || memmem(chunk, have, "cm_engine_open", 14) != NULL;
        size_t keep = sizeof sym; /* a name across two reads */
        if (have > keep) {
            memmove(chunk, chunk + have - keep, keep);
            have = keep;
        }
    }
    fclose(f);
    EXPECT(has_main); /* the symbol table is there to look in */
    EXPECT(!found);
}

static char *parse_err(const char *text)
{
    static char err[512];
    json5_doc d;
    err[0] = 0;
    if (cm_json5_parse(text, strlen(text), "cfg.json", &d, err, sizeof err) == CM_OK) {
        cm_json5_doc_release(&d);
        return NULL;
    }
    return err;
}

TEST(json5_accepts_the_json5_extensions)
{
    const char *text =
        "// comment\n{\n  unquoted: 'single \\'quoted\\'',\n  /* block */ "
        "\"dq\": [1, 2, 3,],\n  hex: 0x1F, pos: +1.5, lead: .5, trail: 5.,\n"
        "  inf: -Infinity, nested: {a: null, b: true,},\n  esc: '\\u00e9\\x41',\n}\n";
    json5_doc d;
    char err[256];
    EXPECT_INT(cm_json5_parse(text, strlen(text), "t", &d, err, sizeof err), CM_OK);
    EXPECT_STR(json_string_value(json_object_get(d.root, "unquoted")), "single 'quoted'");
    EXPECT_INT(json_array_size(json_object_get(d.root, "dq")), 3);
    EXPECT_INT(json_integer_value(json_object_get(d.root, "hex")), 31);
    EXPECT_NEAR(json_number_value(json_object_get(d.root, "pos")), 1.5, 1e-12);
    EXPECT_NEAR(json_number_value(json_object_get(d.root, "lead")), 0.5, 1e-12);
    EXPECT_NEAR(json_number_value(json_object_get(d.root, "trail")), 5, 1e-12);
    EXPECT(json_number_value(json_object_get(d.root, "inf")) < -1e308);
    EXPECT_STR(json_string_value(json_object_get(d.root, "esc")), "éA");
    int line, col;
    EXPECT(cm_json5_where(&d, d.root, "hex", 0, &line, &col));
    EXPECT_INT(line, 5);
    EXPECT_INT(col, 3);
    cm_json5_doc_release(&d);
}

TEST(json5_errors_name_line_and_column)
{
    EXPECT_STR(parse_err("{\n  a: 1\n  b: 2\n}"), "cfg.json:3:3: expected ',' or '}'");
    EXPECT_STR(parse_err("{a: 'x"), "cfg.json:1:7: unterminated string");
    EXPECT_STR(parse_err("{a: 1} x"), "cfg.json:1:8: unexpected content after the value");
    EXPECT_STR(parse_err("{a: @}"), "cfg.json:1:5: unexpected character, expected a value");
    EXPECT_STR(parse_err("/* open"), "cfg.json:1:8: unterminated /* comment");
    EXPECT_STR(parse_err(""), "cfg.json:1:1: unexpected end of file, expected a value");
    EXPECT(parse_err("{a: 'bad \\u12'}") != NULL);
    EXPECT(parse_err("{a: '\\0'}") != NULL); /* NUL in a string is refused */
}

TEST(json5_nesting_is_bounded)
{
    char deep[2000];
    memset(deep, '[', sizeof deep - 1);
    deep[sizeof deep - 1] = 0;
    EXPECT_CONTAINS(parse_err(deep), "nesting too deep");
}

TEST(fs_normalise_paths)
{
    struct {
        const char *in, *out;
        bool ok;
    } cases[] = {
        {"memory/./a.md", "memory/a.md", true},
        {"memory/x/../a.md", "memory/a.md", true},
        {"../a.md", "a.md", false},
        {"a//b/", "a/b", true},
        {"/w/ws/../team/p.md", "/w/team/p.md", true},
        {"/..", "/", false},
        {"memory/2026-02-10.md", "memory/2026-02-10.md", true},
        {"", "", true},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        char *p = cm_strdup(cases[i].in);
        bool ok = cm_fs_normalise(p);
        EXPECT_STR(p, cases[i].out);
        EXPECT_INT(ok, cases[i].ok);
        free(p);
    }
}

/* A condition variable's deadline: ms from now, nanoseconds normalised. */
TEST(base_deadline_in_is_ms_from_now)
{
    for (int64_t ms = 0; ms < 3000; ms += 333) {
        int64_t before = cm_now_ms();
        struct timespec t = cm_deadline_in(CLOCK_MONOTONIC, ms);
        int64_t at = (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
        EXPECT(t.tv_nsec >= 0 && t.tv_nsec < 1000000000L);
        EXPECT(at >= before + ms && at <= cm_now_ms() + ms + 1);
    }
}

TEST(suggest_edit_distance_and_closest)
{
    EXPECT_INT(cm_edit_distance("serch", 5, "search", 6), 1);
    EXPECT_INT(cm_edit_distance("stauts", 6, "status", 6), 1); /* a swap costs 1 */
    EXPECT_INT(cm_edit_distance("kitten", 6, "sitting", 7), 3);
    EXPECT_INT(cm_edit_distance("", 0, "abc", 3), 3);
    EXPECT_INT(cm_edit_distance("MemorySearch", 12, "memorysearch", 12), 0); /* case folded */
    char big[SUGGEST_MAX_LEN + 2];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = 0;
    EXPECT(cm_edit_distance(big, strlen(big), "a", 1) == SIZE_MAX);
    suggest s;
    char out[SUGGEST_MAX_LEN + 1];
    cm_suggest_init(&s, "--max-result");
    cm_suggest_add_list(&s, "--json|--max-results|--min-score");
    EXPECT(cm_suggest_result(&s, out, sizeof out));
    EXPECT_STR(out, "--max-results");
    cm_suggest_init(&s, "x"); /* too short to guess from */
    cm_suggest_add_list(&s, "a|b");
    EXPECT(!cm_suggest_result(&s, out, sizeof out));
    EXPECT_STR(out, "");
    cm_suggest_init(&s, "get"); /* the word itself is no suggestion */
    cm_suggest_add_list(&s, "get");
    EXPECT(!cm_suggest_result(&s, out, sizeof out));
    cm_suggest_init(&s, "indx"); /* the closest wins, the first on a tie */
    cm_suggest_add_list(&s, "inbox|index|indy");
    EXPECT(cm_suggest_result(&s, out, sizeof out));
    EXPECT_STR(out, "index");
}

/* The start time (field 22 of /proc/self/stat) of this process, or -1. */
static long long self_starttime(void)
{
    char text[1024];
    FILE *f = fopen("/proc/self/stat", "r");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    text[n] = 0;
    char *p = strrchr(text, ')');
    if (!p) return -1;
    p++;
    for (int field = 3; field < 22 && *p; field++) {
        while (*p == ' ')
            p++;
        while (*p && *p != ' ')
            p++;
    }
    return strtoll(p, NULL, 10);
}

/* The sidecar of a lock taken on path names this process: its pid and
 * starttime (1: yes, 0: no). */
static int sidecar_names_me(const char *path)
{
    lockfile l;
    char err[256], side[4200];
    if (cm_lockfile_take(&l, path, LOCKFILE_APPEND, NULL, err, sizeof err)) return 0;
    snprintf(side, sizeof side, "%s.lock", path);
    json_t *j = json_load_file(side, 0, NULL);
    int ok = json_integer_value(json_object_get(j, "pid")) == (json_int_t)getpid() &&
             json_integer_value(json_object_get(j, "starttime")) == self_starttime();
    json_decref(j);
    cm_lockfile_release(&l);
    return ok;
}

/* The sidecar's starttime is the writer's own, also in a child forked
 * after the parent took a lock (the value is kept per process). */
TEST(lockfile_sidecar_names_the_process_also_after_fork)
{
    char *dir = tmp_dir();
    buf a = BUF_INIT, b = BUF_INIT;
    cm_fs_join(&a, dir, "a.jsonl");
    cm_fs_join(&b, dir, "b.jsonl");
    EXPECT(sidecar_names_me(a.data));
    EXPECT(sidecar_names_me(a.data));
    /* a child forked two clock ticks after this process started has
     * another starttime: wait until then (ticks since boot) */
    long hz = sysconf(_SC_CLK_TCK);
    for (;;) {
        struct timespec now;
        clock_gettime(CLOCK_BOOTTIME, &now);
        long long ticks = (long long)now.tv_sec * hz + (long long)now.tv_nsec * hz / 1000000000;
        if (ticks >= self_starttime() + 2) break;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    pid_t pid = fork();
    if (pid == 0) {
        _exit(sidecar_names_me(b.data) ? 0 : 1);
    }
    int status = 0;
    EXPECT(pid > 0 && waitpid(pid, &status, 0) == pid);
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    cm_buf_release(&a);
    cm_buf_release(&b);
}

/* A replacement written in pieces (each pushed to the disk before the
 * next) gives the file cm_lockfile_replace gives: the same bytes whatever
 * the piece's size (one byte, a size that does not divide the length, one
 * larger than the data, 0: whole), mode 0600, no temporary file left. */
TEST(lockfile_replace_paced_writes_the_same_file)
{
    char *dir = tmp_dir();
    buf p = BUF_INIT, data = BUF_INIT, got = BUF_INIT;
    cm_fs_join(&p, dir, "sessions.json");
    for (int i = 0; i < 3000; i++)
        cm_buf_printf(&data, "%d,", i * 7919);
    static const size_t chunks[] = {1, 7, 4096, 1 << 20, 0};
    for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++) {
        size_t n = chunks[c] < 100 ? 40 * chunks[c] : data.len; /* tiny pieces: a short file */
        lockfile l;
        char err[256];
        EXPECT_INT(cm_lockfile_take(&l, p.data, LOCKFILE_REPLACE, NULL, err, sizeof err), CM_OK);
        EXPECT_INT(cm_lockfile_replace_paced(&l, data.data, n, chunks[c], err, sizeof err), CM_OK);
        cm_lockfile_release(&l);
        cm_buf_reset(&got);
        EXPECT_INT(cm_fs_read_file(p.data, 1 << 20, &got, err, sizeof err), CM_OK);
        EXPECT(got.len == n && !memcmp(got.data, data.data, n));
        struct stat st;
        EXPECT(stat(p.data, &st) == 0 && (st.st_mode & 0777) == 0600);
        DIR *d = opendir(dir);
        struct dirent *de;
        int others = 0;
        while (d && (de = readdir(d)))
            if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
                strcmp(de->d_name, "sessions.json"))
                others++;
        if (d) closedir(d);
        EXPECT_INT(others, 0);
    }
    cm_buf_release(&p);
    cm_buf_release(&data);
    cm_buf_release(&got);
}
