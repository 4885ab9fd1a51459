/*
 * test.h — the test harness: TEST(name) registers a test at load time, the
 * runner (runner.c) runs them in file order, optionally filtered by a name
 * prefix, and prints "N passed, N failed". CHECK_* macros record a failure
 * with file:line and return from the test.
 */
#ifndef CM_TEST_H
#define CM_TEST_H

#include "../src/base/common.h"
#include "../src/base/buf.h"

typedef void (*test_fn)(void);
void test_register(const char *name, test_fn fn);
void test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
bool test_failed(void);
/* Marks the running test skipped for lack of requirement req (e.g. "llama",
 * "node"); a requirement listed in $CLAWMEM_TEST_REQUIRE (comma-separated, set
 * by CI) turns the skip into a failure. */
void test_skip(const char *file, int line, const char *req, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define TEST(name)                                                                                 \
    static void test_##name(void);                                                                 \
    __attribute__((constructor)) static void register_##name(void)                                 \
    {                                                                                              \
        test_register(#name, test_##name);                                                         \
    }                                                                                              \
    static void test_##name(void)

#define EXPECT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            test_fail(__FILE__, __LINE__, "expected: %s", #cond);                                  \
            return;                                                                                \
        }                                                                                          \
    } while (0)

#define EXPECT_INT(a, b)                                                                           \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        if (a_ != b_) {                                                                            \
            test_fail(__FILE__, __LINE__, "%s == %s: got %lld, want %lld", #a, #b, a_, b_);        \
            return;                                                                                \
        }                                                                                          \
    } while (0)

#define EXPECT_STR(a, b)                                                                           \
    do {                                                                                           \
        const char *a_ = (a), *b_ = (b);                                                           \
        if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                                   \
            test_fail(__FILE__, __LINE__, "%s == %s:\n  got:  %s\n  want: %s", #a, #b,             \
                      a_ ? a_ : "(null)", b_ ? b_ : "(null)");                                     \
            return;                                                                                \
        }                                                                                          \
    } while (0)

#define EXPECT_CONTAINS(hay, needle)                                                               \
    do {                                                                                           \
        const char *h_ = (hay), *n_ = (needle);                                                    \
        if (!h_ || !strstr(h_, n_)) {                                                              \
            test_fail(__FILE__, __LINE__, "%s should contain \"%s\":\n  %s", #hay, n_,             \
                      h_ ? h_ : "(null)");                                                         \
            return;                                                                                \
        }                                                                                          \
    } while (0)

#define EXPECT_NEAR(a, b, eps)                                                                     \
    do {                                                                                           \
        double a_ = (a), b_ = (b);                                                                 \
        if (!(a_ - b_ <= (eps) && b_ - a_ <= (eps))) {                                             \
            test_fail(__FILE__, __LINE__, "%s ~= %s: got %.6f, want %.6f", #a, #b, a_, b_);        \
            return;                                                                                \
        }                                                                                          \
    } while (0)

/* Skips the rest of the test: SKIP("llama", "no llama.cpp in this build"). */
#define SKIP(req, ...)                                                                             \
    do {                                                                                           \
        test_skip(__FILE__, __LINE__, req, __VA_ARGS__);                                           \
        return;                                                                                    \
    } while (0)

/* ---- helpers (helpers.c) ---- */

/* A fresh empty directory under $TMPDIR; removed by the runner at exit. */
char *tmp_dir(void);
/* Writes a file (creating parent directories). */
void write_file(const char *dir, const char *rel, const char *text);
void write_bytes(const char *dir, const char *rel, const void *data, size_t n);
/* Appends "dir/rel" to a static rotating buffer; valid for a few calls. */
const char *path_in(const char *dir, const char *rel);
/* Sets a file's mtime to unix seconds t. */
void set_mtime(const char *path, long t);
/* Runs fn(arg) in a forked child that has no rights over files it does not
 * own: as root the child drops to uid/gid 65534 (tree is handed to that user
 * first). Returns the child's exit code (fn's result), 90 when it could not
 * drop, 100 when it did not exit. */
int run_unprivileged(const char *tree, int (*fn)(void *), void *arg);
/* Opens an engine on workspace ws, state dir state and config cfg, syncs,
 * runs memory_search (10 results, minScore 0) and closes it: the payload
 * parsed (json_decref it), or NULL when any step fails. */
struct json_t *sync_search(const char *ws, const char *state, const char *cfg, const char *query);

typedef struct run_result {
    int status; /* exit code, or 128+signal */
    char *out, *err;
} run_result;

/* Runs build/clawmem (or $CLAWMEM_BIN) with args (NULL-terminated) and env
 * additions ("K=V", NULL-terminated, may be NULL), capturing stdout/stderr. */
run_result run_clawmem(const char *const *env, const char *const *args);
/* Runs any command (argv, NULL-terminated; looked up in $PATH) the same way. */
run_result run_cmd(const char *const *env, const char *const *argv);
void run_result_release(run_result *r);

/* A running clawmem with pipes to its stdin and stdout (stderr is kept in a
 * file), for the MCP and watch tests. */
typedef struct proc {
    int pid, in, out;
    buf pending; /* stdout bytes not yet returned as lines */
    char errpath[4096];
} proc;

void proc_start(proc *p, const char *const *env, const char *const *args);
/* After each test (runner.c): kills and reaps what the test started and did
 * not proc_stop (a failed EXPECT returns before it), saying so on stderr. */
void proc_reap_leftovers(const char *test);
/* Writes s plus a newline. */
void proc_send(proc *p, const char *s);
/* The next stdout line (malloc'd), or NULL after timeout_ms or at EOF. */
char *proc_line(proc *p, int timeout_ms);
/* Closes stdin (or sends sig when nonzero) and waits up to timeout_ms for the
 * exit; returns the exit status (128+signal), or -1 if it had to be killed. */
int proc_stop(proc *p, int sig, int timeout_ms);
/* What the process wrote to stderr so far (malloc'd). */
char *proc_stderr(const proc *p);

/* What QuantumClaw 2026.3.22's memory sync does to its index at path (the
 * file and its schema created first when absent): a files row for rel, its
 * chunk with text, the chunk's FTS row and its meta row. */
void qc_index_sync(const char *path, const char *rel, const char *text);

/* PRAGMA integrity_check of the SQLite file at path says "ok" (opened
 * read-write, so a WAL left by a killed writer is recovered first). */
bool db_integrity_ok(const char *path);

/* The PostgreSQL store's tests. pg_dsn is the test cluster's DSN while a
 * TEST_BOTH test runs over PostgreSQL, else NULL. TEST_BOTH(name) defines
 * name (over SQLite) and name_pg (over PostgreSQL, skipped without
 * $CLAWMEM_TEST_PG_DSN, see scripts/pg-test-cluster.sh) with one body. */
extern const char *pg_dsn;
#define TEST_BOTH(name)                                                                            \
    static void name##_body(void);                                                                 \
    TEST(name)                                                                                     \
    {                                                                                              \
        pg_dsn = NULL;                                                                             \
        name##_body();                                                                             \
    }                                                                                              \
    TEST(name##_pg)                                                                                \
    {                                                                                              \
        const char *dsn = getenv("CLAWMEM_TEST_PG_DSN");                                           \
        if (!dsn || !*dsn) SKIP("postgres", "no PostgreSQL cluster (CLAWMEM_TEST_PG_DSN)");        \
        pg_dsn = dsn;                                                                              \
        name##_body();                                                                             \
        pg_dsn = NULL;                                                                             \
    }                                                                                              \
    static void name##_body(void)
/* Writes <state>/clawmem.json choosing the postgres store of pg_dsn, and
 * drops agent's rows left by an earlier test. */
void pg_overlay(const char *state, const char *agent);
/* cm_store_check of agent's index in pg_dsn. */
bool pg_integrity_ok(const char *agent);

/* Number of open descriptors of process pid (0: this process). */
int count_fds(int pid);

#endif
