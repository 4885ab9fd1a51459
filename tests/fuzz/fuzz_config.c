/*
 * fuzz_config.c — the JSON5 reader and the config resolver on arbitrary bytes:
 * must never crash, leak or accept a value outside its range. Bytes after a
 * line "%%" are the clawmem.json overlay.
 */
#include "../../src/config/config.h"
#include "fuzz.h"

int fuzz_config(const uint8_t *data, size_t size)
{
    cm_config c;
    char err[512];
    cm_config_args a = {"main", "/ws", NULL, "/state"};
    const char *text = (const char *)data;
    config_text m = {text, size, "fuzz.json"}, o = {NULL, 0, "clawmem.json"};
    for (size_t i = 0; i + 4 <= size; i++)
        if (memcmp(text + i, "\n%%\n", 4) == 0) {
            m.n = i;
            o.text = text + i + 4;
            o.n = size - i - 4;
            break;
        }
    if (cm_config_parse_files(&m, &o, &a, NULL, &c, err, sizeof err) == CM_OK) {
        if (c.min_score < 0 || c.min_score > 1 || c.chunk_overlap >= c.chunk_tokens ||
            c.vector_weight + c.text_weight < 0.999 || c.vector_weight + c.text_weight > 1.001 ||
            c.candidate_multiplier < 1 || c.candidate_multiplier > 20 || c.max_results < 1 ||
            c.max_results > 1000 || c.half_life_days < 1 || !c.overlay_path)
            __builtin_trap();
        cm_config_release(&c);
    }
    return 0;
}

FUZZ_ENTRY(fuzz_config)
