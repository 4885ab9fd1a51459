/*
 * test_caps.c — caps and input tolerance (issue 27 item 6): numbers out of
 * range in state files, a model streaming without end, hostile Telegram
 * updates, and tokens in long error URLs.
 */
#include <jansson.h>

#include "../src/base/buf.h"
#include "../src/base/jnum.h"
#include "../src/session/sessions.h"
#include "test.h"

#define T0 1800000000000LL

TEST(caps_jnum_clamps_before_converting)
{
    static const struct {
        const char *json;
        int64_t want;
    } cases[] = {
        {"1e300", 1000},          {"-1e300", -1000}, {"1.7976931348623157e308", 1000},
        {"9223372036854775807", 1000}, {"-9223372036854775808", -1000}, {"12.9", 12},
        {"-12.9", -12},           {"\"5\"", 7},      {"null", 7},
        {"true", 7},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        json_t *v = json_loads(cases[i].json, JSON_DECODE_ANY, NULL);
        EXPECT(v != NULL);
        EXPECT_INT(cm_jnum_int64(v, -1000, 1000, 7), cases[i].want);
        json_decref(v);
    }
    EXPECT_INT(cm_jnum_int64(NULL, 0, 1, 7), 7);
    json_t *big = json_real(1e300);
    EXPECT_INT(cm_jnum_int64(big, INT64_MIN, INT64_MAX, 0), INT64_MAX);
    json_decref(big);
}

/* sessions.json with out-of-range numbers: updatedAt 1e300 and
 * compactionCount 1e300 / -1e300 were cast as they were (on x86 to
 * INT64_MIN, so the count went negative and updatedAt backwards). */
TEST(caps_session_numbers_range_checked)
{
    char *state = tmp_dir();
    write_file(state, "agents/main/sessions/sessions.json",
               "{\"agent:main:main\":{\"sessionId\":\"0d4f6f2e-1b1a-4c39-9f53-3a1b3f6f0a11\","
               "\"updatedAt\":1e300,\"compactionCount\":1e300,\"totalTokens\":-1e300},"
               "\"agent:main:other\":{\"sessionId\":\"0d4f6f2e-1b1a-4c39-9f53-3a1b3f6f0a12\","
               "\"updatedAt\":-1e300,\"compactionCount\":-1e300}}");
    buf p = BUF_INIT;
    char err[256];
    session_store s;
    cm_session_store_path(&p, state, "main");
    EXPECT_INT(cm_session_store_read(&s, p.data, err, sizeof err), CM_OK);
    cm_buf_release(&p);
    EXPECT_INT(cm_session_compacted(&s, "agent:main:main", 0, T0, err, sizeof err), CM_OK);
    json_t *e = cm_session_store_get(&s, "agent:main:main");
    EXPECT_INT(json_integer_value(json_object_get(e, "compactionCount")), (int64_t)INT32_MAX + 1);
    EXPECT_INT(json_integer_value(json_object_get(e, "updatedAt")), CM_JNUM_MS_MAX);
    EXPECT_INT(cm_session_compacted(&s, "agent:main:other", 0, T0, err, sizeof err), CM_OK);
    e = cm_session_store_get(&s, "agent:main:other");
    EXPECT_INT(json_integer_value(json_object_get(e, "compactionCount")), 1);
    EXPECT_INT(json_integer_value(json_object_get(e, "updatedAt")), T0);
    cm_session_store_release(&s);
}
