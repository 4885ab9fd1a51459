/*
 * lock.c — who may write, and whether a search may skip the tree walk.
 *
 * Writers serialise on an flock()ed "<index>.lock" file; readers never take
 * it and read the last committed state (WAL).
 *
 * A watcher (cm_engine_watch) holds an flock()ed "<index>.watch" for its
 * life and keeps in it a one-line record: fresh (its last sync is done and
 * no change is pending) or pending. A search's sync (CM_SYNC_UNLESS_WATCHED)
 * skips the tree walk while that lock is held and the record says fresh;
 * the kernel drops the lock when the watcher dies, so a dead watcher is
 * never trusted. See "Freshness" in the README.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "../base/fs.h"
#include "engine_int.h"

cm_rc cm_engine_lock_acquire(cm_engine *e, bool wait, int *fd_out, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf p = BUF_INIT;
    char *dir = cm_fs_dirname(e->cfg.store_path);
    int fd = -1;
    if (!dir) CHECK(CM_ENOMEM);
    CHECK(cm_fs_mkdirs(dir, err, errlen));
    CHECK(cm_buf_printf(&p, "%s.lock", e->cfg.store_path));
    fd = open(p.data, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600); /* a link: not truncated */
    if (fd < 0 && errno == ELOOP) FAIL(CM_EIO, "%s is a symbolic link; remove it", p.data);
    if (fd < 0) FAIL(CM_EIO, "%s: %s", p.data, strerror(errno));
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) break;
        if (errno != EWOULDBLOCK && errno != EINTR)
            FAIL(CM_EIO, "lock %s: %s", p.data, strerror(errno));
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        long waited = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
        if (!wait || waited >= e->busy_ms) {
            char pid[32] = "";
            ssize_t r = pread(fd, pid, sizeof pid - 1, 0);
            pid[r > 0 ? r : 0] = 0;
            pid[strcspn(pid, "\n")] = 0;
            FAIL(CM_EBUSY, "index %s is being updated by another process%s%s%s; try again later",
                 e->cfg.store_path, *pid ? " (pid " : "", pid, *pid ? ")" : "");
        }
        usleep(20000);
    }
    /* The holder's pid is only a courtesy for the busy message above. */
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) == 0) {
        ssize_t w = pwrite(fd, pid, (size_t)n, 0);
        (void)w;
    }
    *fd_out = fd;
    fd = -1;
out:
    if (fd >= 0) close(fd);
    free(dir);
    cm_buf_release(&p);
    return rc;
}

void cm_engine_lock_release(int fd)
{
    if (fd < 0) return;
    int r = ftruncate(fd, 0); /* a stale pid would only mislead a busy message */
    (void)r;
    flock(fd, LOCK_UN);
    close(fd);
}

#define WATCH_RECORD_LEN 128

/* What the record vouches for: this workspace indexed with these settings
 * (the fields of meta_json's fingerprint, the extra paths themselves rather
 * than their hash), as 16 hex digits of a 64-bit FNV-1a: a name, not a
 * secret, so no SHA-256 is needed. */
static void watch_identity(const cm_engine *e, char id[SHA256_HEX_LEN + 1])
{
    const cm_config *c = &e->cfg;
    buf b = BUF_INIT;
    cm_rc rc =
        cm_buf_printf(&b, "%s\n%s\n%s\n%s\n%d %d %d %s " KEYWORD_TEXT_VERSION "\n", c->workspace,
                      e->provider, e->model, e->have_prov ? e->prov.key_hash : "", c->chunk_tokens,
                      c->chunk_overlap, c->output_dims, c->fts_tokenizer);
    for (size_t i = 0; i < c->sources.n && !rc; i++)
        rc = cm_buf_printf(&b, "s %s\n", c->sources.v[i]);
    for (size_t i = 0; i < c->extra_paths.n && !rc; i++)
        rc = cm_buf_printf(&b, "x %s\n", c->extra_paths.v[i]);
    if (!rc && c->multimodal)
        rc = cm_buf_printf(&b, "m %u %d\n", c->multimodal, c->multimodal_max_bytes);
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; !rc && i < b.len; i++)
        h = (h ^ (unsigned char)b.data[i]) * 0x100000001b3ull;
    snprintf(id, SHA256_HEX_LEN + 1, rc ? "unknown" : "%016llx", (unsigned long long)h);
    cm_buf_release(&b);
}

/* "<index>.watch"; the caller frees. */
static char *watch_path(const cm_engine *e)
{
    buf p = BUF_INIT;
    if (cm_buf_printf(&p, "%s.watch", e->cfg.store_path)) {
        cm_buf_release(&p);
        return NULL;
    }
    return cm_buf_detach(&p);
}

/* The record, fixed length so a reader never sees a mix of two: state,
 * sequence, pid and the identity (workspace and index fingerprint), then
 * "end". */
void cm_engine_watch_publish(const cm_engine *e, int fd, const char *state, uint64_t seq)
{
    if (fd < 0) return;
    char ws[SHA256_HEX_LEN + 1], rec[WATCH_RECORD_LEN + 1];
    watch_identity(e, ws);
    int n = snprintf(rec, sizeof rec, "clawmem-watch 1 %-7s %llu %ld %.16s end", state,
                     (unsigned long long)seq, (long)getpid(), ws);
    if (n < 0) return;
    memset(rec + n, ' ', (size_t)(WATCH_RECORD_LEN - 1 - n));
    rec[WATCH_RECORD_LEN - 1] = '\n';
    ssize_t w = pwrite(fd, rec, WATCH_RECORD_LEN, 0);
    (void)w;
}

/* Opens and locks the record file; -1 when another watcher has it (that one
 * publishes) or it cannot be created. */
int cm_engine_watch_claim(const cm_engine *e)
{
    char *p = watch_path(e);
    int fd = p ? open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600) : -1;
    free(p);
    if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

void cm_engine_watch_unclaim(const cm_engine *e, int fd)
{
    if (fd < 0) return;
    cm_engine_watch_publish(e, fd, "stopped", 0);
    flock(fd, LOCK_UN);
    close(fd);
}

/* True when a live watcher keeps this index fresh for this workspace and
 * fingerprint: its lock is held (a shared lock cannot be had) and its record
 * says fresh. */
bool cm_engine_watched_fresh(const cm_engine *e)
{
    char *p = watch_path(e);
    int fd = p ? open(p, O_RDONLY | O_CLOEXEC) : -1;
    free(p);
    if (fd < 0) return false;
    bool fresh = false;
    if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
        flock(fd, LOCK_UN); /* nobody holds it: no live watcher */
    } else if (errno == EWOULDBLOCK) {
        char rec[WATCH_RECORD_LEN + 1], ws[SHA256_HEX_LEN + 1], want[64];
        ssize_t r = pread(fd, rec, WATCH_RECORD_LEN, 0);
        watch_identity(e, ws);
        snprintf(want, sizeof want, " %.16s end", ws);
        if (r == WATCH_RECORD_LEN) {
            rec[r] = 0;
            fresh = !strncmp(rec, "clawmem-watch 1 fresh ", 22) && strstr(rec, want) != NULL;
        }
    }
    close(fd);
    return fresh;
}
