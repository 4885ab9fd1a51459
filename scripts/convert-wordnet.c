/*
 * convert-wordnet.c — turns WordNet 3.0's database (Debian's wordnet-base,
 * /usr/share/wordnet) into the derivation table the query side of keyword
 * search reads (src/search/derive.h). make runs it once; no WordNet: no
 * table, and search works as without it.
 * Usage: convert-wordnet WORDNET_DIR OUT_TABLE
 */
#include <stdio.h>

#include "../src/base/fs.h"
#include "../src/search/derive_build.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: convert-wordnet WORDNET_DIR OUT_TABLE\n");
        return 2;
    }
    char err[512] = "";
    char *dir = cm_fs_dirname(argv[2]);
    cm_rc rc = dir ? cm_fs_mkdirs(dir, err, sizeof err) : CM_ENOMEM;
    free(dir);
    if (!rc) rc = cm_derive_convert(argv[1], argv[2], err, sizeof err);
    if (rc) {
        fprintf(stderr, "convert-wordnet: %s\n", *err ? err : "out of memory");
        return 1;
    }
    return 0;
}
