/*
 * test_docs.c — the user documentation stays in step with the program: every
 * option a command's --help names is in that command's entry of the man page
 * (docs/clawmem.1), the README stays a front door (short, linking every
 * docs/ page, as the man page's SEE ALSO names them), and the relative links
 * of README.md and the docs/ pages lead to files that exist. Run from the source
 * tree's root, as the runner is.
 */
#include <dirent.h>
#include <sys/stat.h>

#include "../src/base/buf.h"
#include "../src/base/fs.h"
#include "test.h"

/* The file's bytes (NUL-terminated, malloc'd), or NULL. */
static char *slurp(const char *path)
{
    buf b = BUF_INIT;
    char err[256];
    if (cm_fs_read_file(path, 1 << 22, &b, err, sizeof err)) {
        cm_buf_release(&b);
        return NULL;
    }
    return cm_buf_detach(&b);
}

/* s as roff writes it in the man page: each '-' as "\-". */
static void roff(const char *s, char *out, size_t cap)
{
    size_t n = 0;
    for (; *s && n + 3 < cap; s++) {
        if (*s == '-') out[n++] = '\\';
        out[n++] = *s;
    }
    out[n] = '\0';
}

/* The commands `clawmem help` lists: the first word of each line indented by
 * exactly two spaces after "commands:", up to the blank line. */
static size_t help_commands(const char *help, char names[][32], size_t max)
{
    const char *p = strstr(help, "commands:\n");
    size_t n = 0;
    if (!p) return 0;
    p = strchr(p, '\n') + 1;
    while (*p && *p != '\n' && n < max) {
        const char *eol = strchr(p, '\n');
        if (!eol) break;
        if (p[0] == ' ' && p[1] == ' ' && p[2] >= 'a' && p[2] <= 'z') {
            size_t k = strcspn(p + 2, " \n");
            if (k < 32) {
                memcpy(names[n], p + 2, k);
                names[n++][k] = '\0';
            }
        }
        p = eol + 1;
    }
    return n;
}

/* Whether line (up to its newline) is ".B <cmd>" followed by a space, a
 * backslash or the line's end. */
static bool is_entry_of(const char *line, const char *cmd)
{
    size_t k = strlen(cmd);
    return !strncmp(line, ".B ", 3) && !strncmp(line + 3, cmd, k) &&
           (line[3 + k] == ' ' || line[3 + k] == '\\' || line[3 + k] == '\n');
}

/* The man page's entry of cmd: from its first ".B cmd" line to the next
 * section or another command's entry. Sets *len; NULL when there is none. */
static const char *man_entry(const char *man, const char *cmd, char names[][32], size_t n,
                             size_t *len)
{
    const char *start = NULL, *p = man;
    while (p && *p) {
        const char *eol = strchr(p, '\n');
        if (!start && is_entry_of(p, cmd)) {
            start = p;
        } else if (start) {
            bool other = !strncmp(p, ".SH", 3);
            for (size_t i = 0; i < n && !other; i++)
                other = strcmp(names[i], cmd) && is_entry_of(p, names[i]);
            if (other) break;
        }
        p = eol ? eol + 1 : NULL;
    }
    if (!start) return NULL;
    *len = (size_t)((p && *p ? p : man + strlen(man)) - start);
    return start;
}

/* Whether the entry names option opt (roff form) as a whole option: not
 * merely as the start of a longer one ("--session" in "--session-key"). */
static bool names_option(const char *entry, size_t len, const char *opt)
{
    size_t k = strlen(opt);
    for (const char *p = entry; p + k <= entry + len; p++) {
        if (strncmp(p, opt, k)) continue;
        const char *after = p + k;
        bool longer = after[0] == '\\' && after[1] == '-' && after[2] >= 'a' && after[2] <= 'z';
        if (!longer) return true;
    }
    return false;
}

TEST(docs_man_page_has_every_option_of_every_command)
{
    const char *h[] = {"help", NULL};
    run_result r = run_clawmem(NULL, h);
    EXPECT_INT(r.status, 0);
    char names[32][32];
    size_t n = help_commands(r.out, names, 32);
    run_result_release(&r);
    EXPECT(n >= 10);
    char *man = slurp("docs/clawmem.1");
    EXPECT(man != NULL);
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(names[i], "help")) continue; /* no options */
        const char *a[] = {"help", names[i], NULL};
        r = run_clawmem(NULL, a);
        EXPECT_INT(r.status, 0);
        size_t len = 0;
        const char *entry = man_entry(man, names[i], names, n, &len);
        if (!entry) test_fail(__FILE__, __LINE__, "docs/clawmem.1 has no entry for %s", names[i]);
        for (const char *p = r.out; entry && (p = strstr(p, "--")); p += 2) {
            if (p > r.out && p[-1] != ' ' && p[-1] != '[' && p[-1] != '(' && p[-1] != '\n')
                continue;
            char opt[64], want[160];
            size_t k = 2 + strspn(p + 2, "abcdefghijklmnopqrstuvwxyz-");
            if (k == 2 || k >= sizeof opt) continue;
            memcpy(opt, p, k);
            opt[k] = '\0';
            roff(opt, want, sizeof want);
            if (!names_option(entry, len, want))
                test_fail(__FILE__, __LINE__, "docs/clawmem.1: %s's entry lacks %s (in its --help)",
                          names[i], opt);
        }
        run_result_release(&r);
    }
    free(man);
}

/* The docs/ pages (*.md), sorted by readdir's order; returns how many. */
static size_t doc_pages(char pages[][64], size_t max)
{
    DIR *d = opendir("docs");
    size_t n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)) && n < max) {
        size_t k = strlen(de->d_name);
        if (k > 3 && k < 64 && !strcmp(de->d_name + k - 3, ".md"))
            snprintf(pages[n++], 64, "%.63s", de->d_name);
    }
    if (d) closedir(d);
    return n;
}

TEST(docs_readme_is_a_front_door)
{
    char *readme = slurp("README.md"), *man = slurp("docs/clawmem.1");
    EXPECT(readme && man);
    size_t lines = 0;
    for (const char *p = readme; (p = strchr(p, '\n')); p++)
        lines++;
    if (lines > 200) test_fail(__FILE__, __LINE__, "README.md has %zu lines (200 at most)", lines);
    char pages[64][64];
    size_t n = doc_pages(pages, 64);
    EXPECT(n >= 10);
    for (size_t i = 0; i < n; i++) {
        char link[96], see[160];
        snprintf(link, sizeof link, "](docs/%.63s", pages[i]);
        if (!strstr(readme, link))
            test_fail(__FILE__, __LINE__, "README.md does not link docs/%s", pages[i]);
        roff(pages[i], see, sizeof see);
        const char *also = strstr(man, ".SH SEE ALSO");
        if (!also || !strstr(also, see))
            test_fail(__FILE__, __LINE__, "docs/clawmem.1's SEE ALSO does not name %s", pages[i]);
    }
    /* The two commands of the quick start exist in the Makefile. */
    EXPECT_CONTAINS(readme, "    make demo\n");
    EXPECT_CONTAINS(readme, "    make test\n");
    free(readme);
    free(man);
}

/* Fails the test for each relative link of file (outside code blocks) whose
 * target does not exist; dir is the file's directory ("" or "docs/"). */
static void check_links(const char *file, const char *dir)
{
    char *text = slurp(file);
    if (!text) {
        test_fail(__FILE__, __LINE__, "cannot read %s", file);
        return;
    }
    bool fence = false;
    for (char *line = text; line && *line;) {
        char *eol = strchr(line, '\n');
        if (eol) *eol = '\0';
        if (!strncmp(line, "```", 3)) fence = !fence;
        for (const char *p = line; !fence && (p = strstr(p, "](")); p += 2) {
            const char *t = p + 2;
            size_t k = strcspn(t, ")# ");
            if (!k || !strncmp(t, "http://", 7) || !strncmp(t, "https://", 8)) continue;
            char path[512];
            struct stat st;
            snprintf(path, sizeof path, "%s%.*s", dir, (int)k, t);
            if (stat(path, &st))
                test_fail(__FILE__, __LINE__, "%s links %.*s, which does not exist", file, (int)k,
                          t);
        }
        line = eol ? eol + 1 : NULL;
    }
    free(text);
}

TEST(docs_links_lead_somewhere)
{
    check_links("README.md", "");
    char pages[64][64];
    size_t n = doc_pages(pages, 64);
    EXPECT(n >= 10);
    for (size_t i = 0; i < n; i++) {
        char file[96];
        snprintf(file, sizeof file, "docs/%.63s", pages[i]);
        check_links(file, "docs/");
    }
}
