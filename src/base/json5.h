/*
 * json5.h — a JSON5 reader (comments, trailing commas, unquoted keys,
 * single-quoted strings, hex numbers, Infinity/NaN, leading '+') producing a
 * jansson tree, with the line:column of every member kept on the side so that
 * a config error can point at the offending value. Nesting is capped at 128.
 */
#ifndef CM_JSON5_H
#define CM_JSON5_H

#include <jansson.h>

#include "common.h"

typedef struct json5_pos {
    const json_t *parent; /* the object or array holding the value */
    char *key;            /* member name, or NULL for an array element */
    size_t index;         /* array index when key is NULL */
    int line, col;        /* 1-based, columns counted in bytes */
} json5_pos;

typedef struct json5_doc {
    json_t *root;
    json5_pos *pos;
    size_t npos, cap;
} json5_doc;

/* Parses text[0..n). On failure err reads "<name>:<line>:<col>: <what>". */
cm_rc cm_json5_parse(const char *text, size_t n, const char *name, json5_doc *doc, char *err,
                     size_t errlen);
void cm_json5_doc_release(json5_doc *doc);

/* Where the member `key` of object `parent` (or element `index` of array
 * `parent` when key is NULL) starts. False when unknown. */
bool cm_json5_where(const json5_doc *doc, const json_t *parent, const char *key, size_t index,
                    int *line, int *col);

#endif
