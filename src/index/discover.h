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

/* Whether the config indexes session transcripts (experimental.sessionMemory
 * with "sessions" among the sources). */
bool cm_discover_sessions_on(const cm_config *cfg);

#endif
