/*
 * derive_build.c — WordNet's data files into derive.h's table. A synset's
 * line in data.POS: offset, lexicographer file, type, word count (2 hex
 * digits), that many "word lex_id" pairs, pointer count (3 decimal digits),
 * that many "symbol offset pos source/target" pointers, then the frames and
 * gloss. A pointer's offset is the target synset's byte offset in the data
 * file of its part of speech; source/target (4 hex digits) number the words
 * of the two synsets from 1 (0000: the synsets as a whole). The files'
 * licence header lines start with two spaces.
 */
#include "derive_build.h"

#include "../base/buf.h"
#include "../base/fs.h"

#include <errno.h>
#include <unistd.h>

#define NPOS          4
#define DERIVE_WN_MAX (64u << 20) /* data.noun is 15 MB */
static const char *const pos_file[NPOS] = {"data.noun", "data.verb", "data.adj", "data.adv"};

/* The data file of a pointer's part of speech (n v a s r), or -1. */
static int pos_index(char c)
{
    return c == 'n' ? 0 : c == 'v' ? 1 : c == 'a' || c == 's' ? 2 : c == 'r' ? 3 : -1;
}

/* The next space-separated field of [*p, end) into f/fl; false at the end. */
static bool field(const char **p, const char *end, const char **f, size_t *fl)
{
    const char *s = *p;
    while (s < end && *s == ' ')
        s++;
    const char *e = s;
    while (e < end && *e != ' ' && *e != '\n')
        e++;
    if (e == s) return false;
    *f = s;
    *fl = (size_t)(e - s);
    *p = e;
    return true;
}

/* The k-th word (from 1) of the synset line at text[off], lower-cased into
 * w (cap bytes), with an adjective's marker ("(a)", "(p)", "(ip)") cut;
 * false when the line or word is malformed or the word is not a one-word
 * lemma of letters a-z. */
static bool synset_word(const char *text, size_t len, size_t off, unsigned k, char *w, size_t cap)
{
    if (off >= len || (off && text[off - 1] != '\n')) return false;
    const char *p = text + off, *end = memchr(p, '\n', len - off), *f;
    size_t fl;
    if (!end) return false;
    for (int i = 0; i < 3; i++) /* offset, lex file, type */
        if (!field(&p, end, &f, &fl)) return false;
    if (!field(&p, end, &f, &fl)) return false;
    unsigned long wc = strtoul(f, NULL, 16);
    if (k == 0 || k > wc) return false;
    for (unsigned i = 1; i <= k; i++) {
        if (!field(&p, end, &f, &fl)) return false;
        if (i == k) break;
        if (!field(&p, end, &f, &fl)) return false; /* lex_id */
    }
    const char *paren = memchr(f, '(', fl);
    if (paren) fl = (size_t)(paren - f);
    if (!fl || fl >= cap) return false;
    for (size_t i = 0; i < fl; i++) {
        char c = f[i] >= 'A' && f[i] <= 'Z' ? (char)(f[i] - 'A' + 'a') : f[i];
        if (c < 'a' || c > 'z') return false;
        w[i] = c;
    }
    w[fl] = 0;
    return true;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Adds "a\tb" to the pair list pairs (one buffer of NUL-terminated
 * strings). */
static cm_rc add_pair(buf *pairs, size_t *n, const char *a, const char *b)
{
    cm_rc rc = cm_buf_adds(pairs, a);
    if (!rc) rc = cm_buf_addc(pairs, '\t');
    if (!rc) rc = cm_buf_adds(pairs, b);
    if (!rc) rc = cm_buf_addc(pairs, 0);
    if (!rc) (*n)++;
    return rc;
}

/* Every derivation pointer of the synset lines of file pi, both ways. */
static cm_rc scan_file(char *const *text, const size_t *len, int pi, buf *pairs, size_t *n)
{
    const char *t = text[pi];
    size_t at = 0;
    while (at < len[pi]) {
        const char *line = t + at, *end = memchr(line, '\n', len[pi] - at), *f;
        size_t fl;
        if (!end) end = t + len[pi];
        at = (size_t)(end - t) + 1;
        if (line[0] == ' ') continue; /* the licence */
        const char *p = line;
        for (int i = 0; i < 3; i++)
            if (!field(&p, end, &f, &fl)) return CM_EINVAL;
        if (!field(&p, end, &f, &fl)) return CM_EINVAL;
        unsigned long wc = strtoul(f, NULL, 16);
        for (unsigned long i = 0; i < 2 * wc; i++)
            if (!field(&p, end, &f, &fl)) return CM_EINVAL;
        for (unsigned k = 1; k <= wc; k++) { /* every lemma a key: its own base */
            char lw[64];
            if (!synset_word(t, len[pi], (size_t)(line - t), k, lw, sizeof lw)) continue;
            cm_rc rc = add_pair(pairs, n, lw, "");
            if (rc) return rc;
        }
        if (!field(&p, end, &f, &fl)) return CM_EINVAL;
        unsigned long pc = strtoul(f, NULL, 10);
        for (unsigned long i = 0; i < pc; i++) {
            const char *sym, *off, *pos, *st;
            size_t sl, ol, pl, stl;
            if (!field(&p, end, &sym, &sl) || !field(&p, end, &off, &ol) ||
                !field(&p, end, &pos, &pl) || !field(&p, end, &st, &stl) || stl != 4)
                return CM_EINVAL;
            if (sl != 1 || sym[0] != '+') continue;
            char hex[3] = {st[0], st[1], 0}, src[64], tgt[64];
            unsigned s = (unsigned)strtoul(hex, NULL, 16);
            hex[0] = st[2];
            hex[1] = st[3];
            unsigned d = (unsigned)strtoul(hex, NULL, 16);
            int tp = pos_index(pos[0]);
            if (!s || !d || tp < 0) continue;
            if (!synset_word(t, len[pi], (size_t)(line - t), s, src, sizeof src)) continue;
            if (!synset_word(text[tp], len[tp], strtoul(off, NULL, 10), d, tgt, sizeof tgt))
                continue;
            if (!strcmp(src, tgt)) continue;
            cm_rc rc = add_pair(pairs, n, src, tgt);
            if (!rc) rc = add_pair(pairs, n, tgt, src);
            if (rc) return rc;
        }
    }
    return CM_OK;
}

/* The sorted pairs as the table's lines into out ("word\t" alone: a
 * lemma with no derivations). */
static cm_rc write_table(char **v, size_t n, buf *out)
{
    cm_rc rc = CM_OK;
    size_t kl0 = 0, nf = 0;
    const char *key = NULL, *last = NULL;
    for (size_t i = 0; i < n && !rc; i++) {
        if (last && !strcmp(last, v[i])) continue; /* the same pair again */
        last = v[i];
        const char *tab = strchr(v[i], '\t');
        size_t kl = (size_t)(tab - v[i]);
        if (!key || kl != kl0 || memcmp(key, v[i], kl)) {
            if (key) rc = cm_buf_addc(out, '\n');
            if (!rc) rc = cm_buf_add(out, v[i], kl + 1);
            key = v[i];
            kl0 = kl;
            nf = 0;
        }
        if (!tab[1]) continue;
        if (!rc && nf++) rc = cm_buf_addc(out, ' ');
        if (!rc) rc = cm_buf_adds(out, tab + 1);
    }
    if (!rc && key) rc = cm_buf_addc(out, '\n');
    return rc;
}

/* data[0..) to path through path.tmp (tmp: scratch), renamed over it. */
static cm_rc write_file(const char *path, const buf *data, buf *tmp, char *err, size_t errlen)
{
    cm_rc rc = CM_EIO;
    tmp->len = 0;
    if (cm_buf_printf(tmp, "%s.tmp", path)) return CM_ENOMEM;
    FILE *f = fopen(tmp->data, "wb");
    if (!f) goto out;
    bool ok = fwrite(data->data, 1, data->len, f) == data->len;
    if (fclose(f) || !ok || rename(tmp->data, path)) goto out;
    rc = CM_OK;
out:
    if (rc) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        unlink(tmp->data);
    }
    return rc;
}

cm_rc cm_derive_convert(const char *wndir, const char *out_path, char *err, size_t errlen)
{
    buf files[NPOS] = {BUF_INIT, BUF_INIT, BUF_INIT, BUF_INIT};
    char *text[NPOS] = {0};
    size_t len[NPOS] = {0}, n = 0;
    buf pairs = BUF_INIT, out = BUF_INIT, path = BUF_INIT;
    char **v = NULL;
    cm_rc rc = CM_OK;
    for (int i = 0; i < NPOS && !rc; i++) {
        path.len = 0;
        rc = cm_buf_printf(&path, "%s/%s", wndir, pos_file[i]);
        if (!rc) rc = cm_fs_read_file_follow(path.data, DERIVE_WN_MAX, &files[i], err, errlen);
        text[i] = files[i].data;
        len[i] = files[i].len;
    }
    if (rc) goto out;
    for (int i = 0; i < NPOS && !rc; i++)
        rc = scan_file(text, len, i, &pairs, &n);
    if (rc == CM_EINVAL) snprintf(err, errlen, "%s: a malformed WordNet data file", wndir);
    if (rc) goto out;
    if (!n) {
        rc = CM_EINVAL;
        snprintf(err, errlen, "%s: no derivations found", wndir);
        goto out;
    }
    if (!(v = malloc(n * sizeof *v))) {
        rc = CM_ENOMEM;
        goto out;
    }
    char *p = pairs.data;
    for (size_t i = 0; i < n; i++) {
        v[i] = p;
        p += strlen(p) + 1;
    }
    qsort(v, n, sizeof *v, cmp_str);
    rc = write_table(v, n, &out);
    if (!rc) rc = write_file(out_path, &out, &path, err, errlen);
out:
    for (int i = 0; i < NPOS; i++)
        cm_buf_release(&files[i]);
    free(v);
    cm_buf_release(&pairs);
    cm_buf_release(&out);
    cm_buf_release(&path);
    return rc;
}
