/*
 * discover.h — which files are memory: MEMORY.md (else memory.md), every .md
 * under memory/, and extraPaths (files, or directories scanned recursively),
 * where multimodal memory's image and audio files count too (media.h; over
 * multimodal.maxFileBytes they become problems).
 * Symbolic links are never followed: the walk starts from a descriptor of
 * the workspace (and of each extraPath outside it) and goes one component at
 * a time with openat(O_NOFOLLOW), so a directory swapped for a symbolic link
 * mid-walk is refused, never followed; reading a file (file_reader) walks the
 * same way. A file reached twice (same device and inode) is listed once;
 * unreadable directories, oversized files and symbolic links named like notes
 * become problems, never failures. Costs one stat per file and no reads; the
 * walk runs on up to 4 threads.
 */
#ifndef CM_DISCOVER_H
#define CM_DISCOVER_H

#include "../base/buf.h"
#include "../config/config.h"
#include "../base/caps.h"
#include "file_list.h"

/* Memory files larger than this are skipped with a warning (64 MiB). */
#define DISCOVER_MAX_FILE_BYTES CM_CAP_MEMORY_FILE

/* Lists the memory files of cfg's workspace. Fails only on out-of-memory; a
 * missing workspace is simply empty (status reports it). */
cm_rc cm_discover_files(const cm_config *cfg, file_list *out, problem_list *problems);
/* The same list in no particular order (out->v is not sorted by rel until
 * cm_discover_sort): for the no-change check, which looks files up by path
 * and so spares a process that changes nothing the sort. */
cm_rc cm_discover_files_unsorted(const cm_config *cfg, file_list *out, problem_list *problems);

/* How far ctime must lie behind the clock before a directory's names are
 * recorded (2 s: FAT's timestamp granularity, and far above the coarse
 * clock tick that Linux file systems stamp ctime from). */
#define DISCOVER_RECORD_MARGIN_NS 2000000000LL

/* cm_discover_files_unsorted with directory records (file_list.h's
 * dir_record layout). hint/hint_len: the records a walk made before (NULL:
 * none; records that do not parse are all ignored). A directory (outside
 * the media-counting extraPaths) whose device, inode and ctime equal a
 * record's is not read: its names are taken from the record, and each is
 * still stat'd as read ones are, so an in-place edit is seen as before. Any
 * entry added, removed or renamed in a directory changes its ctime (which,
 * unlike mtime, no utimensat can set back). record_before_ns (0: none): a
 * directory whose ctime is older than this (the real time minus
 * DISCOVER_RECORD_MARGIN_NS, ns since the epoch) is recorded into
 * out->dir_record, when its file system is one known to change ctime
 * with every entry (ext4, xfs, btrfs, tmpfs, overlayfs, f2fs, zfs,
 * bcachefs; a FUSE or network one may report a fixed or cached ctime). The
 * margin is the rule for a clock coarser than the change: an entry added in
 * the same tick as the ctime read would leave it unchanged, so only a ctime
 * already older than any tick the next change could get is trusted. */
cm_rc cm_discover_files_hinted(const cm_config *cfg, const void *hint, size_t hint_len,
                               int64_t record_before_ns, file_list *out, problem_list *problems);

/* Whether the config indexes session transcripts (experimental.sessionMemory
 * with "sessions" among the sources). */
bool cm_discover_sessions_on(const cm_config *cfg);

#endif
