/*
 * path.h — resolving a relative path beneath a trusted directory without ever
 * following a symbolic link, and opening what it names without blocking.
 *
 * A caller checks a path once (lexically), opens the trusted root (the
 * workspace, an extraPaths root) as a descriptor, and from then on works only
 * with descriptors: the directory that holds the file comes from
 * cm_path_open_dir, and every read, stat, write, lock and rename is done
 * relative to it (openat, fstatat, renameat, ...). A directory swapped for a
 * symbolic link at any moment is refused, never followed, so nothing outside
 * the root is reached. The walk uses openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS) where the kernel has it, and
 * otherwise openat(O_NOFOLLOW | O_DIRECTORY) one component at a time.
 */
#ifndef CM_PATH_H
#define CM_PATH_H

#include <sys/stat.h>
#include <sys/types.h>

#include "buf.h"

/* cm_path_open_dir: create the directories missing on the way (mode 0700). */
#define PATH_MKDIRS 1u

/* Opens the directory that holds the last component of rel, walking down from
 * the directory descriptor root. rel is relative, its components separated by
 * single '/' and none of them empty, "." or ".." (CM_EPATH otherwise: the
 * caller normalises first). On success *dir is a new O_DIRECTORY|O_CLOEXEC
 * descriptor the caller closes (a duplicate of root when rel has one
 * component) and *leaf points into rel at its last component. root stays
 * open and is not moved. Failures, with rel named in the message:
 * CM_ENOTFOUND a directory on the way does not exist (without PATH_MKDIRS);
 * CM_EPATH a component is a symbolic link or not a directory, a name is too
 * long, or rel is malformed; CM_EIO otherwise. Thread-safe. */
cm_rc cm_path_open_dir(int root, const char *rel, unsigned flags, int *dir, const char **leaf,
                       char *err, size_t errlen);

/* Opens name (a single component) in the directory dir without following a
 * symbolic link and without blocking on a FIFO or a device: the open uses
 * O_NONBLOCK|O_NOFOLLOW|O_NOCTTY|O_CLOEXEC, fstat must show a regular file,
 * then O_NONBLOCK is cleared. oflags is O_RDONLY, O_WRONLY or O_RDWR plus
 * any of O_CREAT, O_EXCL, O_TRUNC, O_APPEND; mode applies with O_CREAT. *fd
 * (closed by the caller) and *st (its fstat, may be NULL) are set on success.
 * CM_ENOTFOUND when it does not exist, CM_EPATH when it is a symbolic link or
 * not a regular file, CM_EIO otherwise (errno is left as the open set it, so
 * an O_EXCL caller can tell EEXIST). Thread-safe. */
cm_rc cm_path_open_file(int dir, const char *name, int oflags, mode_t mode, int *fd,
                        struct stat *st, char *err, size_t errlen);

/* cm_path_open_dir (without PATH_MKDIRS) then cm_path_open_file on the leaf. */
cm_rc cm_path_open_beneath(int root, const char *rel, int oflags, int *fd, struct stat *st,
                           char *err, size_t errlen);

/* Opens the trusted root directory at path (symbolic links in it are
 * followed: it is configuration, not something an agent names); with
 * nofollow, a symbolic link as its last component is refused (CM_EPATH).
 * CM_ENOTFOUND when it does not exist. The caller closes *fd. */
cm_rc cm_path_open_root(const char *path, bool nofollow, int *fd, char *err, size_t errlen);

/* Reads the open file fd from its current offset to its end into out
 * (appending), CM_ETOOBIG past max bytes; name is for messages. */
cm_rc cm_path_read_fd(int fd, const char *name, size_t max, buf *out, char *err, size_t errlen);

/* Test hook: nonzero forces the per-component openat walk (as on a kernel
 * without openat2). Not thread-safe to change while walks run. */
void cm_path_force_fallback(int on);

#endif
