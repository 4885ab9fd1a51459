/*
 * store_swap.h — a rebuild's temporary file and its atomic swap into place
 * (store_swap.c). Included by store.h.
 */
#ifndef CM_STORE_SWAP_H
#define CM_STORE_SWAP_H

#include "../base/common.h"

/* Rebuild plumbing. The temporary file for a rebuild of path is
 * "<path>.rebuild-<pid>"; cm_store_swap makes it the index atomically (after the
 * old index's WAL has been checkpointed away); cm_store_remove_leftovers deletes
 * rebuild files of dead processes. All three follow symbolic links at path:
 * an index that is a link to a file elsewhere is rebuilt there, and the link
 * stays. */
char *cm_store_rebuild_path(const char *path);
cm_rc cm_store_swap(const char *tmp, const char *path, char *err, size_t errlen);
/* Opens the file at path with a shared flock() held on it, the file still at
 * path once the lock is taken: cm_store_swap holds the exclusive lock from
 * before it removes the old index's -wal and -shm until after its rename, so
 * a connection made while the guard is held pairs the file at path with that
 * file's own -wal and -shm. Returns the descriptor (close it to let go; an
 * unlocked one where the file system has no flock()), or -1 with errno
 * (ENOENT: nothing at path). */
int cm_store_swap_guard(const char *path);
/* mine: also the files named after this process (a dead process's pid
 * reused by it), for a caller holding the writer lock, under which no
 * engine of this process is rebuilding. */
void cm_store_remove_leftovers(const char *path, bool mine);

#endif
