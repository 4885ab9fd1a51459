/*
 * store_ix_int.h — what store_index.c (the index: reads, updates, the
 * journal's appends) and store_writer.c (the registry of stores, their
 * writes and the writer thread) share: the index's fields and two helpers.
 * Not for other files.
 */
#ifndef CM_STORE_IX_INT_H
#define CM_STORE_IX_INT_H

#include <pthread.h>
#include <sys/stat.h>
#include <time.h>

#include "store_index.h"
#include "store_wal.h"

/* A member of the last written text: its entry (a reference) and bytes. */
typedef struct member_pos {
    json_t *e;
    size_t off, len;
} member_pos;

typedef struct file_id {
    bool exists;
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
} file_id;

struct store_ix {
    char *path;
    pthread_mutex_t mu; /* guards every field below */
    json_t *doc;        /* key -> entry (entries never change once here) */
    json_t *dirty;      /* unwritten: key -> true (ours wins whole) | a patch of fields */
    file_id id;         /* of the file doc reflects */
    bool loaded;
    bool loading;        /* a thread is reading the file: the others wait for it */
    pthread_cond_t cv;   /* loading ended */
    int writing;      /* writes of this process in progress (the lock is held) */
    int64_t last_now; /* the latest now_ms of an update */
    store_ix_opts o;
    store_ix_stats st;
    /* The last write's text and where each member's text is in it (see
     * serialise). Used only by writes, which hold the store's lock file. */
    char *text;
    size_t text_len;
    struct member_pos *mt;
    size_t mt_n;
    /* The text the last read of the file parsed and its members' places
     * (scan_members), for the next write to start from instead of
     * formatting every entry (NULL: none); under mu, taken by the write. */
    char *seed;
    size_t seed_len;
    struct member_pos *seed_mt;
    size_t seed_n;
    /* The journal of deferred changes (store_wal.h): wal is the generation
     * new records go to (NULL: none open yet); wal_done the files whose
     * records are all in memory and are unlinked after the next write of
     * the store (earlier generations whose write failed, a crashed
     * process's journals replayed here). */
    store_wal_file *wal, *wal_done;
    /* The writer's copy of the store (see flush_locked); wdoc_stale: doc was
     * re-read since, a whole copy is due. */
    json_t *wdoc;
    bool wdoc_stale;
    int64_t wal_gen, wal_seq;
    uint64_t wal_bytes; /* journal bytes appended since the last write began */
    struct store_ix *next;
};

/* The identity of the file at path (exists false: none). */
void cm_store_ix_id_of(const char *path, file_id *f);

/* Appends text[0..n) (whole lines) to the journal file w and waits for an
 * fdatasync that covers it (a group commit with the other appends). The
 * caller took w->users under ix->mu and holds no mutex; it is given back. */
cm_rc cm_store_ix_wal_append(store_ix *ix, store_wal_file *w, const char *text, size_t n, char *err,
                             size_t errlen);

/* Drops the entries' references of n member places and frees them. */
void cm_store_ix_members_free(member_pos *mt, size_t n);

#endif
