/*
 * fs.h — file-system helpers: bounded whole-file reads, directory creation,
 * path joining and the durable-rename dance. Paths are NUL-terminated UTF-8.
 */
#ifndef CM_FS_H
#define CM_FS_H

#include "buf.h"

/* Reads the whole file into out (appending) unless it exceeds max bytes
 * (CM_ETOOBIG). CM_ENOTFOUND when it does not exist (also when a component of
 * its directory is not a directory), CM_EIO otherwise: a symbolic link as the
 * last component, or anything but a regular file (a FIFO or a device is
 * refused at once, never waited on). */
cm_rc cm_fs_read_file(const char *path, size_t max, buf *out, char *err, size_t errlen);

/* As cm_fs_read_file, but a symbolic link at path is followed (the config file:
 * dotfile managers make it a link). Still never blocks on a FIFO. */
cm_rc cm_fs_read_file_follow(const char *path, size_t max, buf *out, char *err, size_t errlen);

/* mkdir -p with mode 0700 for the created directories. */
cm_rc cm_fs_mkdirs(const char *path, char *err, size_t errlen);

/* Appends a joined with b ("a/b"); b absolute → b alone. */
cm_rc cm_fs_join(buf *out, const char *a, const char *b);

/* Returns the directory part of path in a new string ("." when none). */
char *cm_fs_dirname(const char *path);

/* For messages: path itself when it is at most FS_CLIP_MAX bytes, else its
 * start and its end around "...", cut at UTF-8 boundaries, in out. A long
 * path never pushes the reason out of a bounded message buffer. */
#define FS_CLIP_MAX 240
const char *cm_fs_clip(const char *path, char out[FS_CLIP_MAX + 1]);

/* fsyncs the directory holding path, so a rename into it is durable. */
void cm_fs_sync_dir(const char *path);

/* Lexically normalises path in place: drops "." parts, empty parts and
 * trailing slashes, resolves "x/.." (no file-system access). Returns false
 * when a ".." climbs above the start ("/.." stays "/" for an absolute path,
 * and still returns false). */
bool cm_fs_normalise(char *path);

/* Expands a leading "~/" with $HOME. Returns a new string or NULL on ENOMEM. */
char *cm_fs_expand_home(const char *path);

/* Finds a file installed beside clawmem, for an installation that can move:
 * for each rel in rels (NULL-terminated, relative paths), tries "<dir>/<rel>"
 * where dir is the directory of the shared library holding clawmem's code
 * (libclawmem.so), else of the running program (/proc/self/exe). Returns the
 * first that exists in a new string, or NULL. */
char *cm_fs_find_beside(const char *const *rels);

#endif
