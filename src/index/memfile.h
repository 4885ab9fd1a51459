/*
 * memfile.h — the memory files' access rules, below the engine and the tools:
 * which paths name memory files (MEMORY.md, memory/, extraPaths), and
 * reading and writing them through descriptors beneath a trusted root, as
 * QuantumClaw 2026.3.22's memory_get and clawmem's memory_write do.
 */
#ifndef CM_MEMFILE_H
#define CM_MEMFILE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "../base/buf.h"
#include "../base/caps.h"
#include "../config/config.h"

/* cm_index_memfile_read returns at most this many bytes of text, cut at a line end. */
#define MEMFILE_READ_MAX_BYTES CM_CAP_TOOL_GET

/* Where a memory path leads: a trusted root and the path beneath it. */
typedef struct memfile_loc {
    int root;          /* descriptor of the root, -1 when it does not exist (yet) */
    char *inner;       /* beneath root: normalised, no "..", e.g. "memory/2026-02-10.md" */
    char *rel;         /* workspace-relative, normalised: the name in payloads and the index */
    bool in_workspace; /* root is the workspace and inner is MEMORY.md, memory.md or memory/… */
} memfile_loc;

/* Checks a memory path (path[0..len) may hold any bytes) and opens the root
 * it lies beneath. The check is lexical and follows QuantumClaw 2026.3.22:
 * surrounding white space is dropped, the path is resolved against the
 * workspace (an absolute path as it is, ".." resolved by name) and must then
 * be MEMORY.md, memory.md or under memory/ in the workspace, or an extraPaths
 * file, or inside an extraPaths directory, and end in ".md". Rejected with
 * CM_EPATH and the rule broken: empty, NUL bytes, not UTF-8, not .md,
 * outside the memory files. Nothing is followed here: symbolic links are
 * refused later, by the descriptor walk beneath loc->root. create (memory_write):
 * the root directory is created when missing. Release loc with
 * cm_index_memfile_loc_release (also after a failure). */
cm_rc cm_index_memfile_locate(const cm_config *cfg, const char *path, size_t len, bool create,
                              memfile_loc *loc, char *err, size_t errlen);
void cm_index_memfile_loc_release(memfile_loc *loc);

/* Opens the memory file path (NUL-terminated) names for reading, as
 * memory_get does (no symbolic link followed, never blocking, a regular file
 * only); *st receives its fstat and rel (may be NULL) its workspace-relative
 * name. CM_ENOTFOUND when it does not exist. The caller closes *fd. */
cm_rc cm_index_memfile_open(const cm_config *cfg, const char *path, int *fd, struct stat *st,
                            buf *rel, char *err, size_t errlen);

/* cm_index_memfile_open for an image or audio file of multimodal memory (cm_index_media_kind()
 * of cfg), which cm_index_memfile_open and memory_get refuse: the engine reads its bytes
 * to embed them. */
cm_rc cm_index_memfile_open_media(const cm_config *cfg, const char *path, int *fd, struct stat *st,
                                  char *err, size_t errlen);

/* A memory file's text as memory_get returns it. */
typedef struct memfile_text {
    char *path;         /* the normalised workspace-relative name (or the name given) */
    buf text;           /* the bytes read, U+FFFD for invalid UTF-8 */
    long next_from;     /* cut: the line to continue with, else 0 */
    size_t next_offset; /* cut inside one line: the byte offset into next_from, else 0 */
} memfile_text;
void cm_index_memfile_text_release(memfile_text *t);

/* memory_get's read: the file's bytes from line `from` (1-based, <= 0 → 1),
 * `offset` bytes into it, through line from+lines-1 without its final '\n' —
 * the text after a final newline counts as a last, empty line, so a range
 * that reaches it ends with the newline; lines <= 0 means to the end of the
 * file. Over MEMFILE_READ_MAX_BYTES the text is cut after a whole line, with
 * next_from the next line; a single line longer than that is cut at a
 * character boundary with next_offset too (continue with from=next_from,
 * offset=next_offset). A missing file gives empty text. *out is cleared
 * first; release it with cm_index_memfile_text_release (also after a failure). */
cm_rc cm_index_memfile_read(const cm_config *cfg, const char *path, size_t len, long from,
                            long offset, long lines, memfile_text *out, char *err, size_t errlen);

/* cm_index_memfile_read of a file beneath a directory other than the memory files (a
 * QMD collection's root): inner is relative to root ("a/b.md"; refused:
 * absolute, a ".." part, not .md, not UTF-8), read as cm_index_memfile_read reads (no
 * symbolic link followed, root included); name is the path out->path
 * carries. A missing file gives empty text. */
cm_rc cm_index_memfile_read_beneath(const char *root, const char *inner, const char *name,
                                    long from, long offset, long lines, memfile_text *out,
                                    char *err, size_t errlen);

/* memory_write notes are at most this many bytes. */
#define MEMFILE_WRITE_MAX_BYTES CM_CAP_TOOL_WRITE

/* Where cm_index_memfile_write put a note. */
typedef struct memfile_note {
    char *path; /* the file's workspace-relative name (the caller frees it) */
    int start_line, end_line;
    size_t bytes; /* appended: the note and its final '\n' */
} memfile_note;

/* memory_write: appends text (a new paragraph) to the memory file path
 * (path NULL: memory/YYYY-MM-DD.md for the local date of now) and fills
 * *out. Same path rules as cm_index_memfile_read, missing directories created;
 * "MEMORY.md" and "memory.md" both name the indexed long-term file
 * (MEMORY.md if it exists, else memory.md if it exists). Atomic (a
 * temporary file created with O_EXCL under an unpredictable name in the
 * note's directory, fsync, rename, fsync of the directory) under an flock of
 * that directory, so concurrent writers, threads or processes, serialise;
 * temporary files left by killed writers are removed by the next writer of
 * the directory. */
cm_rc cm_index_memfile_write(const cm_config *cfg, const char *path, const char *text, int64_t now,
                             memfile_note *out, char *err, size_t errlen);

#endif
