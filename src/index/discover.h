/*
 * discover.h — which files are memory: MEMORY.md (else memory.md), every .md
 * under memory/, and extraPaths (files, or directories scanned recursively).
 * Symbolic links are never followed; a file reached twice (same device and
 * inode) is listed once; unreadable directories and oversized files become
 * problems, never failures. Costs one stat per file and no reads; the walk
 * runs on up to 4 threads.
 */
#ifndef CM_DISCOVER_H
#define CM_DISCOVER_H

#include "../base/buf.h"
#include "../config/config.h"

/* Memory files larger than this are skipped with a warning (64 MiB). */
#define DISCOVER_MAX_FILE_BYTES ((int64_t)64 << 20)

typedef struct mem_file {
    char *rel; /* workspace-relative with '/', e.g. "memory/2026-02-10.md" or "../notes/a.md" */
    char *abs; /* absolute path */
    const char *source; /* "memory" */
    int64_t size, mtime_ns;
    uint64_t dev, ino; /* identity, to list a file reached twice once */
} mem_file;

typedef struct mem_problem {
    char *path; /* workspace-relative when possible */
    char *what;
} mem_problem;

typedef struct problem_list {
    mem_problem *v;
    size_t n, cap;
} problem_list;

typedef struct file_list {
    mem_file *v; /* sorted by rel */
    size_t n, cap;
    uint64_t total_bytes;
} file_list;

/* Lists the memory files of cfg's workspace. Fails only on out-of-memory; a
 * missing workspace is simply empty (status reports it). */
cm_rc discover_files(const cm_config *cfg, file_list *out, problem_list *problems);
void file_list_release(file_list *l);

cm_rc problem_add(problem_list *l, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void problem_list_release(problem_list *l);

/* Appends to out the path of abs relative to the directory base (both
 * absolute, normalised): "memory/a.md", or "../x/a.md" outside base. */
cm_rc discover_relpath(buf *out, const char *base, const char *abs);

/* True when rel is a daily note path "memory/YYYY-MM-DD.md"; sets the date. */
bool discover_daily_date(const char *rel, int *y, int *m, int *d);

#endif
