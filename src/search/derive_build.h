/*
 * derive_build.h — converts WordNet 3.0's database (the data.noun,
 * data.verb, data.adj and data.adv files of Debian's wordnet-base package,
 * /usr/share/wordnet) into derive.h's table: for each derivation pointer
 * ("+") between two one-word lemmas of lower-case ASCII letters, each word
 * lists the other, and every such lemma is a key (with no words when it has
 * no derivations). Run at build time (make); the search only reads the
 * result.
 */
#ifndef CM_DERIVE_BUILD_H
#define CM_DERIVE_BUILD_H

#include "../base/common.h"

/* Writes the table converted from the WordNet files in wndir to out_path
 * (through a temporary file renamed over it, so a reader never sees half a
 * table). CM_ENOTFOUND when wndir lacks a data file; CM_EIO, CM_ENOMEM, or
 * CM_EINVAL for a malformed file, err saying which. */
cm_rc cm_derive_convert(const char *wndir, const char *out_path, char *err, size_t errlen);

#endif
