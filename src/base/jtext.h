/*
 * jtext.h — JSON text written directly into a buf, byte for byte as
 * jansson's compact dump (json_dumps with JSON_COMPACT) writes the same
 * value, for hot paths that would otherwise build a jansson tree only to
 * dump it (a model request body is 10–20 KB each turn). Strings must be
 * valid UTF-8, as json_string requires: anything else is CM_EINVAL and the
 * caller takes the jansson path instead.
 */
#ifndef CM_JTEXT_H
#define CM_JTEXT_H

#include "buf.h"

/* Appends s (NUL-terminated) as a JSON string: '"' and '\\' escaped,
 * \b \f \n \r \t by name, other bytes below 0x20 as \u00XX (upper-case hex),
 * everything else as it is. CM_EINVAL when s is NULL or not valid UTF-8
 * (out is then left as it was); CM_ENOMEM. */
cm_rc cm_jtext_string(buf *out, const char *s);

/* Appends "key": and s as cm_jtext_string does (key is trusted ASCII
 * without characters to escape). */
cm_rc cm_jtext_member(buf *out, const char *key, const char *s);

#endif
