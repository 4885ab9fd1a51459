/*
 * fuzz_config.c — the JSON5 reader and the config resolver on arbitrary bytes:
 * must never crash, leak or accept a value outside its range.
 */
#include "../../src/config/config.h"
#include "fuzz.h"

int fuzz_config(const uint8_t *data, size_t size)
{
    cm_config c;
    char err[512];
    cm_config_args a = {"main", "/ws", NULL, "/state"};
    if (config_parse((const char *)data, size, "fuzz.json", &a, NULL, &c, err, sizeof err) ==
        CM_OK) {
        if (c.min_score < 0 || c.min_score > 1 || c.chunk_overlap >= c.chunk_tokens ||
            c.vector_weight + c.text_weight < 0.999 || c.vector_weight + c.text_weight > 1.001)
            __builtin_trap();
        config_release(&c);
    }
    return 0;
}

FUZZ_ENTRY(fuzz_config)
