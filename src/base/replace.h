/*
 * replace.h — replacing a file beneath a directory descriptor atomically: a
 * temporary file created with O_EXCL under an unpredictable name in the same
 * directory, written, fsync'ed, renamed over the file, the directory
 * fsync'ed. Writers of one directory serialise on an flock of the directory
 * (its inode, unlike the file's, is not replaced by the rename), so the
 * temporary files left by killed writers can be swept by the next one.
 */
#ifndef CM_REPLACE_H
#define CM_REPLACE_H

#include <sys/types.h>

#include "common.h"

/* Removes temporary files of writers that were killed. Call with the
 * directory's flock held: every writer holds it while its file exists. */
void cm_replace_sweep(int dir);

/* Creates a temporary file in dir (O_EXCL, no symbolic link followed, mode
 * 0644); name (64 bytes) receives its name, *fd the descriptor. */
cm_rc cm_replace_temp(int dir, char name[64], int *fd, char *err, size_t errlen);

/* Replaces (or creates) leaf in dir with data[0..len): flock of dir, sweep,
 * temporary file, write, fsync, rename, fsync of dir. An existing file's
 * permission bits are kept; a new file gets mode. A symbolic link or
 * non-regular file at leaf is refused (CM_EPATH). shown names the file in
 * messages. Thread- and process-safe. */
cm_rc cm_replace_file(int dir, const char *leaf, const void *data, size_t len, mode_t mode,
                      const char *shown, char *err, size_t errlen);

#endif
