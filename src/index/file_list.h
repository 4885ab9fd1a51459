/*
 * file_list.h — what a walk of the memory roots (discover.h) hands over: the
 * list of memory files with their roots' descriptors, the problems seen, and
 * reading a listed file through its root's descriptor one component at a
 * time (openat with O_NOFOLLOW), never by name from "/". Also the path
 * helpers the walk and the reader share.
 */
#ifndef CM_FILE_LIST_H
#define CM_FILE_LIST_H

#include <sys/stat.h>

#include "../base/buf.h"

/* The problem recorded for a symbolic link named like a note. */
#define DISCOVER_SYMLINK_PROBLEM "symbolic link, not followed"

typedef struct mem_file {
    char *rel;     /* workspace-relative with '/', e.g. "memory/2026-02-10.md" or "../notes/a.md" */
    char *abs;     /* absolute path (for messages; never opened by name) */
    uint32_t root; /* index into file_list.roots */
    uint32_t sub;  /* abs + sub: the path below that root's directory */
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

/* A directory the walk started from: the workspace, or the directory that
 * holds an extraPath outside it. Its descriptor lives as long as the list. */
typedef struct mem_root {
    int fd;
    char *abs;
} mem_root;

typedef struct file_list {
    mem_file *v; /* sorted by rel (but see cm_discover_files_unsorted) */
    size_t n, cap;
    uint64_t total_bytes;
    mem_root *roots;
    size_t nroots;
    size_t dirs_read;         /* directories read by the walk */
    size_t dir_probes;        /* slots looked at to drop directories reached twice */
    size_t helpers;           /* threads the walk started besides the caller's */
    struct name_block *names; /* where every abs and rel lie (file_list.c) */
    /* The directory records of the walk (cm_discover_files_hinted): for each
     * directory read whose ctime was older than the walk's record_before,
     *   dev u64, ino u64, ctime_ns i64, len u32, then len bytes: the names the
     *   walk looked at in it (.md files, links, subdirectories; each
     *   NUL-terminated, in a row),
     * native byte order. Empty when the walk recorded none. */
    buf dir_record;
    size_t dirs_hinted; /* directories whose names came from a hint, not read */
} file_list;

/* Sorts l->v by rel (strcmp order). */
void cm_discover_sort(file_list *l);
void cm_index_file_list_release(file_list *l);
/* n bytes for paths in l's current block of names (freed with the list),
 * or NULL when out of memory. */
char *cm_index_file_list_names(file_list *l, size_t n);
/* Moves src's blocks of names to dst's chain (dst's current block stays
 * the one cm_index_file_list_names fills). */
void cm_index_file_list_absorb_names(file_list *dst, file_list *src);

/* Reads files of a list, each reached from its root's descriptor one
 * component at a time (openat with O_NOFOLLOW; O_NONBLOCK until fstat proves
 * a regular file, so a FIFO or device never blocks). Keeps the descriptor of
 * the last directory, so files of one directory cost one open each. */
typedef struct file_reader {
    const file_list *l;
    uint32_t root;
    int dirfd; /* -1: none */
    buf dir;   /* the path of dirfd below its root */
} file_reader;

void cm_index_file_reader_init(file_reader *r, const file_list *l);
/* Appends f's bytes to out; *st receives the fstat of the descriptor that was
 * read (size and mtime to store come from there, not from the walk). Fails
 * with CM_EIO (not there any more, a symbolic link, not a regular file, an
 * I/O error), CM_ETOOBIG (over max) or CM_ENOMEM; why receives the reason
 * without the path. */
cm_rc cm_index_file_reader_read(file_reader *r, const mem_file *f, size_t max, buf *out,
                                struct stat *st, char *why, size_t whylen);
void cm_index_file_reader_release(file_reader *r);

cm_rc cm_index_problem_add(problem_list *l, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void cm_index_problem_list_release(problem_list *l);

/* Opens the directory at path (its first len bytes, '/'-separated, relative)
 * below the directory fd one component at a time with openat(O_NOFOLLOW |
 * O_DIRECTORY): a symbolic link anywhere fails with ELOOP, "." and ".."
 * with EINVAL. len 0 gives a duplicate of fd. Returns a new descriptor
 * (O_CLOEXEC), or -1 with errno. */
int cm_discover_open_dir(int fd, const char *path, size_t len);
/* openat(O_NOFOLLOW | O_DIRECTORY) of name in dirfd failed with e: ELOOP
 * when name is a symbolic link (openat says ENOTDIR), else e. */
int cm_discover_link_errno(int dirfd, const char *name, int e);

/* Appends to out the path of abs relative to the directory base (both
 * absolute, normalised): "memory/a.md", or "../x/a.md" outside base. */
cm_rc cm_discover_relpath(buf *out, const char *base, const char *abs);

/* True when rel is a daily note path "memory/YYYY-MM-DD.md"; sets the date. */
bool cm_discover_daily_date(const char *rel, int *y, int *m, int *d);

#endif
