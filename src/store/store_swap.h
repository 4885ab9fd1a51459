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
 * rebuild files of dead processes. */
char *cm_store_rebuild_path(const char *path);
cm_rc cm_store_swap(const char *tmp, const char *path, char *err, size_t errlen);
void cm_store_remove_leftovers(const char *path);

#endif
