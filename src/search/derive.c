/*
 * derive.c — lookups in the derivation table (derive.h): a binary search
 * over the lines of the mapped, sorted text file.
 */
#include "derive.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

cm_rc cm_derive_open(derive_table *t, const char *path, char *err, size_t errlen)
{
    cm_rc rc = CM_EIO;
    struct stat st;
    *t = (derive_table){0};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        rc = errno == ENOENT ? CM_ENOTFOUND : CM_EIO;
        if (rc != CM_ENOTFOUND) snprintf(err, errlen, "%s: %s", path, strerror(errno));
        goto out;
    }
    if (fstat(fd, &st) || st.st_size < 2) {
        snprintf(err, errlen, "%s: empty or unreadable", path);
        goto out;
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        goto out;
    }
    if (((const char *)map)[st.st_size - 1] != '\n') {
        munmap(map, (size_t)st.st_size);
        snprintf(err, errlen, "%s: truncated", path);
        goto out;
    }
    t->map = map;
    t->data = map;
    t->len = (size_t)st.st_size;
    rc = CM_OK;
out:
    if (fd >= 0) close(fd);
    return rc;
}

void cm_derive_close(derive_table *t)
{
    if (t->map) munmap(t->map, t->len);
    *t = (derive_table){0};
}

/* The line holding w[0..len) before its tab, or NULL; its end in *end. */
static const char *find_line(const derive_table *t, const char *w, size_t len, const char **end)
{
    size_t lo = 0, hi = t->len; /* line starts in [lo, hi) */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2, s = mid;
        while (s > lo && t->data[s - 1] != '\n')
            s--;
        const char *line = t->data + s;
        const char *nl = memchr(line, '\n', t->len - s);
        const char *tab = memchr(line, '\t', (size_t)(nl - line));
        size_t kl = tab ? (size_t)(tab - line) : (size_t)(nl - line);
        int c = memcmp(w, line, len < kl ? len : kl);
        if (!c) c = len < kl ? -1 : len > kl ? 1 : 0;
        if (!c) {
            *end = nl;
            return tab ? tab + 1 : nl;
        }
        if (c < 0)
            hi = s;
        else
            lo = (size_t)(nl - t->data) + 1;
    }
    return NULL;
}

/* WordNet's detachment rules (morphy): suffix, replacement; the word as it
 * is first. */
static const char *const rules[][2] = {
    {"", ""},       {"s", ""},      {"ses", "s"}, {"xes", "x"},   {"zes", "z"},
    {"ches", "ch"}, {"shes", "sh"}, {"ies", "y"}, {"es", "e"},    {"es", ""},
    {"ed", "e"},    {"ed", ""},     {"ing", "e"}, {"ing", ""},    {"er", ""},
    {"est", ""},    {"er", "e"},    {"est", "e"}, {"men", "man"},
};

size_t cm_derive_forms(const derive_table *t, const char *w, size_t len, char *out, size_t cap)
{
    char base[64];
    const char *p = NULL, *end = NULL;
    size_t n = 0, at = 0;
    if (cap) out[0] = 0;
    if (!t->data || !cap) return 0;
    for (size_t r = 0; r < sizeof rules / sizeof rules[0] && !p; r++) {
        size_t sl = strlen(rules[r][0]), al = strlen(rules[r][1]);
        if (len <= sl + 2 || len - sl + al >= sizeof base) continue;
        if (memcmp(w + len - sl, rules[r][0], sl)) continue;
        memcpy(base, w, len - sl);
        memcpy(base + len - sl, rules[r][1], al);
        p = find_line(t, base, len - sl + al, &end);
    }
    while (p && p < end) {
        const char *sp = memchr(p, ' ', (size_t)(end - p));
        size_t l = sp ? (size_t)(sp - p) : (size_t)(end - p);
        if (l && at + l + 1 < cap) {
            if (at) out[at++] = ' ';
            memcpy(out + at, p, l);
            at += l;
            out[at] = 0;
            n++;
        }
        p += l + 1;
    }
    return n;
}
