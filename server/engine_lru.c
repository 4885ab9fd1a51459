/*
 * engine_lru.c — the memory budget of serve's engine LRU (engine_lru.h).
 */
#include "engine_lru.h"

size_t cm_engine_lru_over(const lru_item *v, size_t n, size_t cap, size_t keep, bool *close)
{
    size_t total = 0, marked = 0;
    for (size_t i = 0; i < n; i++) {
        close[i] = false;
        total += v[i].bytes;
    }
    while (cap && total > cap) {
        size_t victim = SIZE_MAX;
        for (size_t i = 0; i < n; i++)
            if (!close[i] && !v[i].busy && i != keep &&
                (victim == SIZE_MAX || v[i].last_used < v[victim].last_used))
                victim = i;
        if (victim == SIZE_MAX) break; /* what is left is in use, or the one just used */
        close[victim] = true;
        total -= v[victim].bytes;
        marked++;
    }
    return marked;
}
