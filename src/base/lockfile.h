/*
 * lockfile.h — writing a file that other processes (clawmem's and
 * QuantumClaw's) read and write too: the state dir's auth-profiles.json,
 * sessions.json and session transcripts.
 *
 * A writer first takes an flock() — on the file's directory for a file that
 * is replaced whole (a rename swaps the inode, so the file itself cannot
 * carry the lock), on the file itself for an append-only file — which
 * queues clawmem's own processes without polling; then QuantumClaw's
 * sidecar `<file>.lock` ({"pid","createdAt","starttime"}, created whole with
 * O_EXCL semantics), which QuantumClaw honours. A sidecar is stale when its
 * process is gone (dead, zombie, or its pid reused) or it is older than the
 * stale age, and is then taken over. Replaced files are written to a
 * temporary name in the same directory, fsynced, renamed and the directory
 * fsynced: readers see the old or the new file, never a torn one; temporary
 * files of killed writers are removed by the next writer.
 *
 * The paths are the state dir's (trusted); the last component is still
 * never followed if it is a symbolic link.
 */
#ifndef CM_LOCKFILE_H
#define CM_LOCKFILE_H

#include "common.h"

typedef enum lockfile_mode {
    LOCKFILE_REPLACE, /* the file is replaced whole (cm_lockfile_replace) */
    LOCKFILE_APPEND   /* the file is appended to through l->fd */
} lockfile_mode;

typedef struct lockfile {
    int fd;    /* LOCKFILE_APPEND: the file, open O_RDWR | O_APPEND; else -1 */
    int dirfd; /* the file's directory */
    int flockfd;
    char path[4096], sidecar[4200];
    bool has_sidecar;
} lockfile;

typedef struct lockfile_opts {
    int64_t stale_ms;   /* a sidecar older than this is stale; 0: 30 s */
    int64_t timeout_ms; /* how long to wait for another holder; 0: 10 s */
} lockfile_opts;

/* Takes the write lock of path (its directory is created, mode 0700).
 * CM_EBUSY when another process keeps it past the timeout; CM_EIO. */
cm_rc cm_lockfile_take(lockfile *l, const char *path, lockfile_mode mode, const lockfile_opts *o,
                       char *err, size_t errlen);
/* Releases the lock (and closes l->fd). Safe on a lock never taken. */
void cm_lockfile_release(lockfile *l);

/* Replaces the locked file's content with data[0..n) atomically, mode 0600. */
cm_rc cm_lockfile_replace(lockfile *l, const char *data, size_t n, char *err, size_t errlen);

/* The same, for a large file written while other threads of the process
 * wait on fdatasyncs of their own (the gateway's sessions.json beside its
 * journals and transcripts): data is written in pieces of chunk bytes, each
 * pushed to the disk (sync_file_range) before the next, with a rest after
 * each as long as it took (at most 20 ms), so that no fdatasync of another
 * file waits behind the whole file's writeback and the disk is shared
 * while the file is written. The result is the same as
 * cm_lockfile_replace's (chunk 0: the same call); the lock is held longer. */
cm_rc cm_lockfile_replace_paced(lockfile *l, const char *data, size_t n, size_t chunk, char *err,
                                size_t errlen);

#endif
