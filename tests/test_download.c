/*
 * test_download.c — cm_net_model_resolve() against the loopback fake server's GET
 * mode: resume after a cut, a server ignoring Range, 404, a size mismatch, a
 * redirect, 416 on a complete .part, cancellation, two threads wanting the
 * same file, the cache name, plain paths and bad specs. Network-free: 1–3 MB
 * blobs on 127.0.0.1 through $CLAWMEM_HF_ENDPOINT.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../src/base/fs.h"
#include "../src/net/download.h"
#include "fakeserver.h"
#include "test.h"

#define SPEC     "hf:acme/tiny-GGUF/tiny-Q8_0.gguf"
#define URL_PATH "/acme/tiny-GGUF/resolve/main/tiny-Q8_0.gguf"
#define NAME     "hf-acme%2Ftiny-GGUF%2Ftiny-Q8_0.gguf"
#define SIZE     (3u << 20)

static fake_server *srv;
static char base[64];
static unsigned char *blob;

static void setup(void)
{
    setenv("CLAWMEM_HTTP_BACKOFF_MS", "1", 1);
    unsetenv("HF_TOKEN");
    srv = fake_start(8, base);
    setenv("CLAWMEM_HF_ENDPOINT", base, 1);
    if (!blob) {
        blob = malloc(SIZE);
        uint64_t x = 88172645463325252ull;
        for (size_t i = 0; i < SIZE; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            blob[i] = (unsigned char)(x >> 24);
        }
    }
    fake_file(srv, URL_PATH, blob, SIZE);
}

static void teardown(void)
{
    fake_stop(srv);
    unsetenv("CLAWMEM_HF_ENDPOINT");
}

/* The file at path holds exactly data[0..n). */
static bool file_is(const char *path, const void *data, size_t n)
{
    buf b = BUF_INIT;
    bool ok = cm_fs_read_file(path, 64u << 20, &b, NULL, 0) == CM_OK && b.len == n &&
              memcmp(b.data, data, n) == 0;
    cm_buf_release(&b);
    return ok;
}

static long long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

/* How many of the requests so far asked for a given path prefix. */
static int gets_of(const char *prefix)
{
    int k = 0;
    for (int i = 0; i < fake_count(srv); i++)
        if (strncmp(fake_get(srv, i)->path, prefix, strlen(prefix)) == 0) k++;
    return k;
}

typedef struct prog {
    int calls, cancel_after_bytes; /* cancel_after_bytes > 0: cancel once done >= it */
    uint64_t last_done, last_total;
    bool went_back; /* done decreased (allowed only on a restart) */
} prog;

static int on_progress(void *ctx, uint64_t done, uint64_t total)
{
    prog *p = ctx;
    if (p->calls && done < p->last_done) p->went_back = true;
    p->calls++;
    p->last_done = done;
    p->last_total = total;
    return p->cancel_after_bytes > 0 && done >= (uint64_t)p->cancel_after_bytes;
}

TEST(download_resume_after_cut)
{
    setup();
    char *dir = tmp_dir(), err[512] = "", *path = NULL;
    const char *cache = path_in(dir, "models/cache"); /* created on demand */
    fake_push(srv, FAKE_CUT, 1000000, -1);
    prog p = {0};
    EXPECT_INT(cm_net_model_resolve(SPEC, cache, true, on_progress, &p, &path, err, sizeof err),
               CM_OK);
    EXPECT_STR(path, path_in(cache, NAME));
    EXPECT(file_is(path, blob, SIZE));
    EXPECT_INT(file_size(path_in(cache, NAME ".part")), -1);
    EXPECT_INT(fake_count(srv), 2);
    EXPECT_STR(fake_get(srv, 0)->method, "GET");
    EXPECT_STR(fake_get(srv, 0)->path, URL_PATH);
    EXPECT(!strcasestr(fake_get(srv, 0)->headers, "\r\nRange:"));
    EXPECT(!strcasestr(fake_get(srv, 0)->headers, "Authorization"));
    EXPECT_CONTAINS(fake_get(srv, 1)->headers, "\r\nRange: bytes=1000000-\r\n");
    /* progress: called, never backwards, ends at the full size */
    EXPECT(p.calls >= 1);
    EXPECT(!p.went_back);
    EXPECT_INT(p.last_done, SIZE);
    EXPECT_INT(p.last_total, SIZE);
    free(path);
    teardown();
}

TEST(download_existing_file_makes_no_request)
{
    setup();
    char *dir = tmp_dir(), err[512] = "", *path = NULL;
    write_file(dir, NAME, "already here");
    EXPECT_INT(cm_net_model_resolve(SPEC, dir, true, NULL, NULL, &path, err, sizeof err), CM_OK);
    EXPECT_STR(path, path_in(dir, NAME));
    EXPECT(file_is(path, "already here", 12));
    EXPECT_INT(fake_count(srv), 0);
    free(path);
    teardown();
}

TEST(download_fetch_false_is_notfound)
{
    setup();
    char *dir = tmp_dir(), err[512] = "", *path = NULL;
    const char *cache = path_in(dir, "never");
    EXPECT_INT(cm_net_model_resolve(SPEC, cache, false, NULL, NULL, &path, err, sizeof err),
               CM_ENOTFOUND);
    EXPECT(path == NULL);
    EXPECT_CONTAINS(err, "not downloaded");
    EXPECT_CONTAINS(err, URL_PATH);
    EXPECT_INT(fake_count(srv), 0);
    EXPECT_INT(file_size(cache), -1); /* nothing created */
    teardown();
}

TEST(download_server_ignores_range)
{
    setup();
    char *dir = tmp_dir(), err[512] = "", *path = NULL;
    /* a .part of wrong bytes: kept, they would corrupt the file */
    char junk[5000];
    memset(junk, 'x', sizeof junk);
    write_bytes(dir, NAME ".part", junk, sizeof junk);
    fake_push(srv, FAKE_IGNORE_RANGE, 0, -1);
    EXPECT_INT(cm_net_model_resolve(SPEC, dir, true, NULL, NULL, &path, err, sizeof err), CM_OK);
    EXPECT_CONTAINS(fake_get(srv, 0)->headers, "\r\nRange: bytes=5000-\r\n");
    EXPECT_INT(fake_count(srv), 1);
    EXPECT(file_is(path, blob, SIZE));
    EXPECT_INT(file_size(path_in(dir, NAME ".part")), -1);
    free(path);
    teardown();
}

TEST(download_206_from_wrong_offset_restarts)
{
    setup();
    char *dir = tmp_dir(), err[512] = "", *path = NULL;
    char junk[7000];
    memset(junk, 'y', sizeof junk);
    write_bytes(dir, NAME ".part", junk, sizeof junk);
    fake_push(srv, FAKE_WRONG_RANGE, 0, -1); /* 206 "bytes 0-..." to a request from 7000 */
    EXPECT_INT(cm_net_model_resolve(SPEC, dir, true, NULL, NULL, &path, err, sizeof err), CM_OK);
    EXPECT_INT(fake_count(srv), 2);
    EXPECT_CONTAINS(fake_get(srv, 0)->headers, "\r\nRange: bytes=7000-\r\n");
    EXPECT(!strcasestr(fake_get(srv, 1)->headers, "\r\nRange:"));
    EXPECT(file_is(path, blob, SIZE));
    free(path);
    teardown();
}

TEST(download_404_is_clear_and_leaves_nothing)
{
    setup();
    setenv("HF_TOKEN", "hf_secret_token_123", 1);
    char *dir = tmp_dir(), err[512] = "", *path = NULL;
    EXPECT_INT(cm_net_model_resolve("hf:acme/tiny-GGUF/missing.gguf", dir, true, NULL, NULL, &path,
                                    err, sizeof err),
               CM_EIO);
    unsetenv("HF_TOKEN");
    EXPECT(path == NULL);
    EXPECT_CONTAINS(err, "/acme/tiny-GGUF/resolve/main/missing.gguf");
    EXPECT_CONTAINS(err, "HTTP 404");
    EXPECT_CONTAINS(err, "Entry not found");
    EXPECT(!strstr(err, "hf_secret_token_123"));
    EXPECT_INT(fake_count(srv), 1); /* not retried */
    /* the token was sent */
    EXPECT_CONTAINS(fake_get(srv, 0)->headers, "Authorization: Bearer hf_secret_token_123\r\n");
    EXPECT_INT(file_size(path_in(dir, "hf-acme%2Ftiny-GGUF%2Fmissing.gguf")), -1);
    EXPECT_INT(file_size(path_in(dir, "hf-acme%2Ftiny-GGUF%2Fmissing.gguf.part")), -1);
    teardown();
}

TEST(download_size_mismatch_keeps_part)
{
    setup();
    char *dir = tmp_dir(), err[512] = "", *path = NULL;
    fake_push(srv, FAKE_CUT, 100000, -1);
    fake_push(srv, FAKE_SHORT, 500, -1); /* 206 naming the whole rest, 500 bytes missing */
    EXPECT_INT(cm_net_model_resolve(SPEC, dir, true, NULL, NULL, &path, err, sizeof err), CM_EIO);
    EXPECT(path == NULL);
    EXPECT_CONTAINS(err, "size mismatch");
    EXPECT_CONTAINS(err, URL_PATH);
    EXPECT_CONTAINS(err, ".part is kept");
    EXPECT_INT(file_size(path_in(dir, NAME)), -1);
    EXPECT_INT(file_size(path_in(dir, NAME ".part")), SIZE - 500);
    /* a later call resumes where it stopped */
    EXPECT_INT(cm_net_model_resolve(SPEC, dir, true, NULL, NULL, &path, err, sizeof err), CM_OK);
    EXPECT_INT(fake_count(srv), 3);
    char want[64];
    snprintf(want, sizeof want, "\r\nRange: bytes=%u-\r\n", SIZE - 500);
    EXPECT_CONTAINS(fake_get(srv, 2)->headers, want);
    EXPECT(file_is(path, blob, SIZE));
    free(path);
    teardown();
}

TEST(download_gives_up_after_repeated_cuts)
{
    setup();
    char *dir = tmp_dir(), err[512] = "", *path = NULL;
    fake_push(srv, FAKE_CUT, 4096, -1);
    for (int i = 0; i < 5; i++)
        fake_push(srv, FAKE_CUT, 0, -1); /* no progress */
    EXPECT_INT(cm_net_model_resolve(SPEC, dir, true, NULL, NULL, &path, err, sizeof err), CM_EIO);
    EXPECT_INT(fake_count(srv), 6);
    EXPECT_CONTAINS(err, URL_PATH);
    EXPECT_CONTAINS(err, "after 6 attempts");
    EXPECT_CONTAINS(err, "4096 bytes kept");
    EXPECT_INT(file_size(path_in(dir, NAME ".part")), 4096);
    EXPECT_INT(file_size(path_in(dir, NAME)), -1);
    teardown();
}

TEST(download_follows_redirect)
{
    setup();
    char *dir = tmp_dir(), err[512] = "", *path = NULL;
    fake_push(srv, FAKE_REDIRECT, 0, -1);
    EXPECT_INT(cm_net_model_resolve(SPEC, dir, true, NULL, NULL, &path, err, sizeof err), CM_OK);
    EXPECT_INT(fake_count(srv), 2);
    EXPECT_STR(fake_get(srv, 0)->path, URL_PATH);
    EXPECT_STR(fake_get(srv, 1)->path, "/cdn" URL_PATH "?sig=fake");
    EXPECT(file_is(path, blob, SIZE));
    free(path);
    teardown();
}

TEST(download_checks_the_announced_sha256)
{
    setup();
    char *dir = tmp_dir(), err[512] = "", *path = NULL;
    /* a file that does not hash to what the redirect announced is discarded */
    fake_file_etag(srv, URL_PATH, "0000000000000000000000000000000000000000000000000000000000000000");
    fake_push(srv, FAKE_REDIRECT, 0, -1);
    EXPECT_INT(cm_net_model_resolve(SPEC, dir, true, NULL, NULL, &path, err, sizeof err), CM_EIO);
    EXPECT_CONTAINS(err, "sha256");
    EXPECT_CONTAINS(err, "discarded");
    EXPECT_INT(file_size(path_in(dir, NAME)), -1);
    EXPECT(file_size(path_in(dir, NAME ".part")) <= 0);
    teardown();
}

TEST(download_complete_part_416)
{
    setup();
    char *dir = tmp_dir(), err[512] = "", *path = NULL;
    /* a crash between the last byte and the rename: the server answers 416 */
    write_bytes(dir, NAME ".part", blob, SIZE);
    EXPECT_INT(cm_net_model_resolve(SPEC, dir, true, NULL, NULL, &path, err, sizeof err), CM_OK);
    EXPECT_INT(fake_count(srv), 1);
    EXPECT(file_is(path, blob, SIZE));
    /* a .part longer than the file: restarted from zero */
    free(path);
    unlink(path_in(dir, NAME));
    unsigned char *longer = malloc(SIZE + 10);
    memcpy(longer, blob, SIZE);
    memset(longer + SIZE, 'z', 10);
    write_bytes(dir, NAME ".part", longer, SIZE + 10);
    free(longer);
    EXPECT_INT(cm_net_model_resolve(SPEC, dir, true, NULL, NULL, &path, err, sizeof err), CM_OK);
    EXPECT_INT(fake_count(srv), 3);
    EXPECT(!strcasestr(fake_get(srv, 2)->headers, "\r\nRange:"));
    EXPECT(file_is(path, blob, SIZE));
    free(path);
    teardown();
}

TEST(download_cancel_keeps_part)
{
    setup();
    char *dir = tmp_dir(), err[512] = "", *path = NULL;
    prog p = {0};
    p.cancel_after_bytes = 1;
    /* cancelled during the transfer, or at the latest while backing off after the cut */
    setenv("CLAWMEM_HTTP_BACKOFF_MS", "400", 1);
    fake_push(srv, FAKE_CUT, 1000000, -1);
    cm_rc rc = cm_net_model_resolve(SPEC, dir, true, on_progress, &p, &path, err, sizeof err);
    setenv("CLAWMEM_HTTP_BACKOFF_MS", "1", 1);
    EXPECT_INT(rc, CM_ECANCELED);
    EXPECT(path == NULL);
    EXPECT_CONTAINS(err, "cancelled");
    long long part = file_size(path_in(dir, NAME ".part"));
    EXPECT(part > 0 && part < SIZE);
    EXPECT_INT(file_size(path_in(dir, NAME)), -1);
    /* and the next call resumes from there */
    EXPECT_INT(cm_net_model_resolve(SPEC, dir, true, NULL, NULL, &path, err, sizeof err), CM_OK);
    char want[64];
    snprintf(want, sizeof want, "\r\nRange: bytes=%lld-\r\n", part);
    EXPECT_CONTAINS(fake_get(srv, fake_count(srv) - 1)->headers, want);
    EXPECT(file_is(path, blob, SIZE));
    free(path);
    teardown();
}

/* Two threads: the first holds the download until the second is waiting. */
typedef struct racer {
    const char *dir;
    cm_rc rc;
    char *path, err[512];
    int calls;
} racer;
static atomic_int first_started, second_waiting;

static int first_progress(void *ctx, uint64_t done, uint64_t total)
{
    (void)total;
    racer *r = ctx;
    r->calls++;
    if (done > 0 && !atomic_load(&first_started)) {
        atomic_store(&first_started, 1);
        for (int i = 0; i < 300 && !atomic_load(&second_waiting); i++)
            usleep(10000);
    }
    return 0;
}

static int second_progress(void *ctx, uint64_t done, uint64_t total)
{
    (void)done, (void)total;
    racer *r = ctx;
    r->calls++;
    atomic_store(&second_waiting, 1);
    return 0;
}

static void *race_first(void *arg)
{
    racer *r = arg;
    r->rc = cm_net_model_resolve(SPEC, r->dir, true, first_progress, r, &r->path, r->err,
                                 sizeof r->err);
    return NULL;
}

static void *race_second(void *arg)
{
    racer *r = arg;
    r->rc = cm_net_model_resolve(SPEC, r->dir, true, second_progress, r, &r->path, r->err,
                                 sizeof r->err);
    return NULL;
}

TEST(download_two_threads_one_transfer)
{
    setup();
    char *dir = tmp_dir();
    racer a = {dir, CM_EIO, NULL, "", 0}, b = {dir, CM_EIO, NULL, "", 0};
    atomic_store(&first_started, 0);
    atomic_store(&second_waiting, 0);
    pthread_t ta, tb;
    pthread_create(&ta, NULL, race_first, &a);
    for (int i = 0; i < 500 && !atomic_load(&first_started); i++)
        usleep(10000);
    bool overlapped = atomic_load(&first_started);
    pthread_create(&tb, NULL, race_second, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    EXPECT(overlapped);
    EXPECT(atomic_load(&second_waiting)); /* b really waited for a's lock */
    EXPECT_INT(a.rc, CM_OK);
    EXPECT_INT(b.rc, CM_OK);
    EXPECT_STR(a.path, b.path);
    EXPECT_INT(fake_count(srv), 1);
    EXPECT_INT(gets_of(URL_PATH), 1);
    EXPECT(file_is(a.path, blob, SIZE));
    EXPECT_INT(file_size(path_in(dir, NAME ".part")), -1);
    free(a.path);
    free(b.path);
    teardown();
}

TEST(download_encodes_path_and_names_cache_file)
{
    setup();
    char *dir = tmp_dir(), err[512] = "", *path = NULL;
    static const char small[] = "small model bytes";
    fake_file(srv, "/acme/r.x_y-z/resolve/main/sub%20dir/a%2Bb~1.gguf", small, sizeof small - 1);
    EXPECT_INT(cm_net_model_resolve("hf:acme/r.x_y-z/sub dir/a+b~1.gguf", dir, true, NULL, NULL,
                                    &path, err, sizeof err),
               CM_OK);
    EXPECT_STR(fake_get(srv, 0)->path, "/acme/r.x_y-z/resolve/main/sub%20dir/a%2Bb~1.gguf");
    EXPECT_STR(path, path_in(dir, "hf-acme%2Fr.x_y-z%2Fsub%20dir%2Fa%2Bb%7E1.gguf"));
    EXPECT(file_is(path, small, sizeof small - 1));
    free(path);
    /* a name too long for the file system: hashed, still ends with the file name */
    char spec[400];
    snprintf(spec, sizeof spec, "hf:acme/r/%0300d.gguf", 7);
    EXPECT_INT(cm_net_model_resolve(spec, dir, false, NULL, NULL, &path, err, sizeof err),
               CM_ENOTFOUND);
    const char *name = strstr(err, "/hf-");
    EXPECT(name != NULL);
    EXPECT(!strstr(name, "%2F"));
    EXPECT_CONTAINS(name, "7.gguf is not downloaded");
    EXPECT(strcspn(name + 1, " ") <= 240);
    teardown();
}

TEST(download_plain_paths_and_bad_specs)
{
    char err[512] = "", *path = NULL;
    EXPECT_INT(
        cm_net_model_resolve("/models/m.gguf", NULL, true, NULL, NULL, &path, err, sizeof err),
        CM_OK);
    EXPECT_STR(path, "/models/m.gguf");
    free(path);
    EXPECT_INT(cm_net_model_resolve("rel/m.gguf", NULL, false, NULL, NULL, &path, err, sizeof err),
               CM_OK);
    EXPECT_STR(path, "rel/m.gguf");
    free(path);
    const char *home = getenv("HOME");
    char *saved = home ? cm_strdup(home) : NULL;
    setenv("HOME", "/home/tester", 1);
    EXPECT_INT(cm_net_model_resolve("~/m/e.gguf", NULL, true, NULL, NULL, &path, err, sizeof err),
               CM_OK);
    EXPECT_STR(path, "/home/tester/m/e.gguf");
    free(path);
    /* "~/" in the cache directory too */
    EXPECT_INT(cm_net_model_resolve(SPEC, "~/.cache/m", false, NULL, NULL, &path, err, sizeof err),
               CM_ENOTFOUND);
    EXPECT_CONTAINS(err, "/home/tester/.cache/m/" NAME);
    if (saved) setenv("HOME", saved, 1);
    free(saved);
    const char *bad[] = {"hf:acme/repo",         "hf:acme/repo/",    "hf:/repo/f.gguf",
                         "hf:acme//f.gguf",      "hf:ac me/r/f",     "hf:a/r/x/../f.gguf",
                         "hf:a/r/./f.gguf",      "hf:a/r/d//f.gguf", "hf:a/r/f.gguf/",
                         "hf:a/r/bad\nname.gguf"};
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        err[0] = 0;
        EXPECT_INT(cm_net_model_resolve(bad[i], "/tmp", true, NULL, NULL, &path, err, sizeof err),
                   CM_EINVAL);
        EXPECT(path == NULL);
        EXPECT_CONTAINS(err, "local.modelPath");
    }
    EXPECT_INT(cm_net_model_resolve("", "/tmp", true, NULL, NULL, &path, err, sizeof err),
               CM_EINVAL);
    EXPECT_INT(cm_net_model_resolve(SPEC, NULL, true, NULL, NULL, &path, err, sizeof err),
               CM_EINVAL);
}

TEST(download_echoing_server_is_redacted)
{
    setup();
    char ep[128];
    snprintf(ep, sizeof ep, "http://hfuser:endpointpw77@%s", base + 7);
    setenv("CLAWMEM_HF_ENDPOINT", ep, 1);
    setenv("HF_TOKEN", "hf_echoedTOKEN0123456789", 1);
    char *dir = tmp_dir(), err[512] = "", *path = NULL;
    fake_push(srv, FAKE_ECHO, 403, -1);
    EXPECT_INT(cm_net_model_resolve(SPEC, dir, true, NULL, NULL, &path, err, sizeof err), CM_EIO);
    unsetenv("HF_TOKEN");
    EXPECT_CONTAINS(fake_get(srv, 0)->headers, "hf_echoedTOKEN0123456789");
    EXPECT_CONTAINS(err, "HTTP 403");
    EXPECT_CONTAINS(err, "unauthorized");
    EXPECT_CONTAINS(err, URL_PATH);
    EXPECT(!strstr(err, "hf_echoedTOKEN0123456789"));
    EXPECT(!strstr(err, "endpointpw77"));
    EXPECT(!strstr(err, "hfuser"));
    for (const char *c = err; *c; c++)
        EXPECT((unsigned char)*c >= 0x20);
    teardown();
}

/* A download that failed without a byte is remembered: until its backoff
 * (60 s, doubling) has passed, calls fail at once without a request, with
 * fetch true or false; a success clears the record. Time is injected. */
TEST(download_failure_remembered_with_backoff)
{
    setup();
    char *dir = tmp_dir(), err[512] = "", *path = NULL;
    const int64_t t0 = 1800000000000;
    const char *failed = path_in(dir, "hf-acme%2Ftiny-GGUF%2Flater.gguf.failed");
#define LATER "hf:acme/tiny-GGUF/later.gguf"
    EXPECT_INT(cm_net_model_resolve_at(LATER, dir, true, t0, NULL, NULL, &path, err, sizeof err),
               CM_EIO);
    EXPECT_INT(fake_count(srv), 1);
    EXPECT(file_size(failed) > 0);
    buf rec = BUF_INIT;
    EXPECT_INT(cm_fs_read_file(failed, 1 << 16, &rec, NULL, 0), CM_OK);
    EXPECT_CONTAINS(rec.data, "\"time\":1800000000000");
    EXPECT_CONTAINS(rec.data, "\"failures\":1");
    EXPECT_CONTAINS(rec.data, "HTTP 404");
    cm_buf_release(&rec);
    /* within the minute: no request, the reason and the wait in the error */
    err[0] = 0;
    EXPECT_INT(
        cm_net_model_resolve_at(LATER, dir, true, t0 + 1500, NULL, NULL, &path, err, sizeof err),
        CM_EIO);
    EXPECT_CONTAINS(err, "failed 1 time in a row");
    EXPECT_CONTAINS(err, "HTTP 404");
    EXPECT_CONTAINS(err, "next attempt in 59s");
    EXPECT_CONTAINS(err, ".failed to try now");
    EXPECT_INT(
        cm_net_model_resolve_at(LATER, dir, false, t0 + 1500, NULL, NULL, &path, err, sizeof err),
        CM_EIO);
    EXPECT_INT(fake_count(srv), 1);
    /* due after 60 s: tried again, fails again; now 120 s to wait */
    EXPECT_INT(
        cm_net_model_resolve_at(LATER, dir, true, t0 + 60000, NULL, NULL, &path, err, sizeof err),
        CM_EIO);
    EXPECT_INT(fake_count(srv), 2);
    EXPECT_INT(cm_net_model_resolve_at(LATER, dir, true, t0 + 60000 + 119000, NULL, NULL, &path,
                                       err, sizeof err),
               CM_EIO);
    EXPECT_CONTAINS(err, "failed 2 times in a row");
    EXPECT_INT(fake_count(srv), 2);
    /* the file appears; once due, it is fetched and the record goes */
    fake_file(srv, "/acme/tiny-GGUF/resolve/main/later.gguf", blob, 1000);
    EXPECT_INT(cm_net_model_resolve_at(LATER, dir, true, t0 + 60000 + 120000, NULL, NULL, &path,
                                       err, sizeof err),
               CM_OK);
    EXPECT_INT(fake_count(srv), 3);
    EXPECT(file_is(path, blob, 1000));
    EXPECT_INT(file_size(failed), -1);
    free(path);
    /* a cut download that brought bytes is not remembered: the next call resumes */
    fake_push(srv, FAKE_CUT, 100000, -1);
    for (int i = 0; i < 5; i++)
        fake_push(srv, FAKE_CUT, 0, -1);
    path = NULL;
    EXPECT_INT(cm_net_model_resolve_at(SPEC, dir, true, t0, NULL, NULL, &path, err, sizeof err),
               CM_EIO);
    EXPECT_INT(file_size(path_in(dir, NAME ".failed")), -1);
    EXPECT_INT(cm_net_model_resolve_at(SPEC, dir, true, t0 + 1, NULL, NULL, &path, err, sizeof err),
               CM_OK);
    free(path);
#undef LATER
    teardown();
}
