/*
 * engine_lru.h — which of `clawmem serve`'s open engines to close so that
 * what they hold fits a memory budget (--max-engine-mb): a pure choice over
 * a snapshot of the engines, made under serve.c's lock; the closing happens
 * outside it.
 */
#ifndef CM_ENGINE_LRU_H
#define CM_ENGINE_LRU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct lru_item {
    uint64_t last_used; /* a tick: larger is more recent */
    size_t bytes;       /* cm_engine_memory at its last use */
    bool busy;          /* a request holds it: never closed */
} lru_item;

/* Marks in close[0..n) the engines to close so that the total of bytes
 * fits cap: idle ones, least recently used first, never the item keep
 * (the one just used; SIZE_MAX: none), stopping as soon as the rest fit.
 * When busy engines alone exceed cap, every idle one but keep is marked.
 * Returns how many were marked; cap 0 marks none (no budget). */
size_t cm_engine_lru_over(const lru_item *v, size_t n, size_t cap, size_t keep, bool *close);

#endif
