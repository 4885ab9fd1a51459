/*
 * test_redact.c — secrets out of messages (base/redact), one-line message
 * cleaning (cm_seterr) and JSON strings that are always valid UTF-8.
 */
#include <jansson.h>

#include "../src/base/redact.h"
#include "../src/base/utf8.h"
#include "test.h"

static char out[2048];

/* cm_redact_text with the given secrets and header lines; returns out. */
static const char *red(const char *const *headers, const char *url, const char *body, size_t max)
{
    redact r;
    cm_redact_init(&r);
    for (size_t i = 0; headers && headers[i]; i++)
        cm_redact_add_header(&r, headers[i]);
    cm_redact_add_url(&r, url);
    buf b = BUF_INIT;
    cm_redact_text(&r, body, strlen(body), max, &b);
    snprintf(out, sizeof out, "%s", b.data);
    cm_buf_release(&b);
    cm_redact_release(&r);
    return out;
}

TEST(redact_request_secrets)
{
    const char *h[] = {"Authorization: Bearer sk-abc123SECRETVALUE", "X-Team-Token: teamtok42",
                       "Content-Type: application/json", NULL};
    /* The exact values anywhere, whatever surrounds them. */
    EXPECT_STR(red(h, NULL, "bad token sk-abc123SECRETVALUE!, team=teamtok42;", 0),
               "bad token [redacted]!, team=[redacted];");
    /* A header echoed back: name kept, value gone. */
    EXPECT_STR(red(h, NULL, "{\"headers\":{\"Authorization\":\"Bearer sk-abc123SECRETVALUE\"}}", 0),
               "{\"headers\":{\"Authorization\":\"[redacted]\"}}");
    /* Plain headers are not secrets. */
    EXPECT_STR(red(h, NULL, "want application/json", 0), "want application/json");
    /* URL userinfo and query values. */
    EXPECT_STR(red(NULL, "https://bob:hunter2pw@api.example/v1?key=AIzaQUERYKEY&x=1",
                   "user bob pass hunter2pw key AIzaQUERYKEY", 0),
               "user bob pass [redacted] key [redacted]");
}

TEST(redact_patterns_without_secrets)
{
    EXPECT_STR(red(NULL, NULL, "Authorization: Bearer abc.def-ghi\nnext", 0),
               "Authorization: [redacted] next");
    EXPECT_STR(red(NULL, NULL, "got bearer eyJhbGciOi.x.y here", 0), "got bearer [redacted] here");
    EXPECT_STR(red(NULL, NULL, "x-goog-api-key=AIzaSyD-123456789012345678901234567890", 0),
               "x-goog-api-key=[redacted]");
    EXPECT_STR(red(NULL, NULL, "GET /v1?key=abcd1234&alt=json", 0),
               "GET /v1?key=[redacted]&alt=json");
    EXPECT_STR(red(NULL, NULL, "{\"api_key\": \"abcdef\"}", 0), "{\"api_key\": \"[redacted]\"}");
    EXPECT_STR(red(NULL, NULL, "Incorrect API key provided: sk-proj-AAAAAAAAAAAAAAAAAAAAAAAA.", 0),
               "Incorrect API key provided: [redacted].");
    EXPECT_STR(red(NULL, NULL, "token hf_ABCDEFGHIJKLMNOPQRSTUV", 0), "token [redacted]");
    /* Ordinary words stay. */
    EXPECT_STR(red(NULL, NULL, "monkey=banana, skipped sk-short, keyboard", 0),
               "monkey=banana, skipped sk-short, keyboard");
}

TEST(redact_one_line_and_cap)
{
    EXPECT_STR(red(NULL, NULL, "  a\r\n\x1b[2Jb\t\xc2\x85 c\xff  ", 0), "a [2Jb c\xEF\xBF\xBD");
    EXPECT_STR(red(NULL, NULL, "abcdefghij", 4), "abcd\xE2\x80\xA6");
    EXPECT_STR(red(NULL, NULL, "漢字漢字", 2), "漢字\xE2\x80\xA6");
}

TEST(redact_url_for_messages)
{
    char u[200];
    cm_redact_url_to("https://user:pw@host.example:8443/a/b?key=K#frag", u, sizeof u);
    EXPECT_STR(u, "https://host.example:8443/a/b");
    cm_redact_url_to("http://h/p\n\x1b", u, sizeof u);
    EXPECT_STR(u, "http://h/p\\n\\x1b");
    cm_redact_url_to("https://token@h/p", u, sizeof u);
    EXPECT_STR(u, "https://h/p");
    cm_redact_url_to("https://h/path@x?q=1", u, sizeof u); /* '@' after the authority is a path */
    EXPECT_STR(u, "https://h/path@x");
    cm_redact_url_to("https://h/0123456789", u, 12);
    EXPECT(strlen(u) < 12);
}

TEST(redact_message_escaping)
{
    char err[64];
    cm_seterr(err, sizeof err, CM_EIO, "%s: not readable", "memory/a\nfake line\x1b[0m\xff.md");
    EXPECT_STR(err, "memory/a\\nfake line\\x1b[0m\\xff.md: not readable");
    /* Cut at an escape boundary, never inside one. */
    char small[12];
    cm_seterr(small, sizeof small, CM_EIO, "ab\x01\x02\x03\x04");
    EXPECT_STR(small, "ab\\x01\\x02");
    /* Clean messages are left alone (tabs included are escaped). */
    cm_seterr(err, sizeof err, CM_EIO, "plain %d", 5);
    EXPECT_STR(err, "plain 5");
}

TEST(redact_json_strings_always_valid)
{
    const char raw[] = "a\xff\xc3(b\x7f\xc2\x9b\xe6\xbc\xa2\x01\"\\";
    buf b = BUF_INIT;
    EXPECT_INT(cm_utf8_add_json_str(&b, raw, sizeof raw - 1), CM_OK);
    EXPECT_STR(b.data, "\"a\xEF\xBF\xBD\xEF\xBF\xBD(b\\u007f\\u009b\xe6\xbc\xa2\\u0001\\\"\\\\\"");
    json_t *j = json_loads(b.data, JSON_DECODE_ANY, NULL);
    EXPECT(j != NULL);
    json_decref(j);
    cm_buf_release(&b);
}

/* A Telegram bot token in a URL cut for a message: the URL used to be cut at
 * 150 characters before anything was redacted, so with a long base URL the
 * exact-token redactor missed the cut token (bot id + 23 secret characters
 * in `gateway status`). Every cut position now shows none of it. */
TEST(redact_bot_token_before_any_cut)
{
    static const char token[] = "123456789:AAE-secretTokenValue_xyz0123456789ab";
    for (size_t pad = 100; pad < 160; pad++) {
        buf url = BUF_INIT;
        (void)!cm_buf_adds(&url, "https://api.example/");
        for (size_t k = 0; k < pad; k++)
            (void)!cm_buf_addc(&url, 'p');
        (void)!cm_buf_printf(&url, "/bot%s/getUpdates?offset=1", token);
        char u[151];
        cm_redact_url_to(url.data, u, sizeof u);
        if (strstr(u, "AAE") || strstr(u, "3456789:") || strstr(u, "secret"))
            test_fail(__FILE__, __LINE__, "pad %zu: %s", pad, u);
        /* the same through cm_redact_text, cut at any length */
        buf o = BUF_INIT;
        EXPECT_INT(cm_redact_text(NULL, url.data, url.len, pad, &o), CM_OK);
        if (strstr(o.data, "AAE") || strstr(o.data, "secret"))
            test_fail(__FILE__, __LINE__, "pad %zu: %s", pad, o.data);
        cm_buf_release(&o);
        cm_buf_release(&url);
    }
    char u[300];
    cm_redact_url_to("https://api.telegram.org/bot123456:AAE-x/getMe", u, sizeof u);
    EXPECT_STR(u, "https://api.telegram.org/bot[redacted]/getMe");
    /* text already cut by someone else, and the bare token shape */
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"GET /bot123456:AAE-sec", "GET /bot[redacted]"},
        {"GET /bot1234567", "GET /bot[redacted]"},
        {"GET /bot1234567\xE2\x80\xA6", "GET /bot[redacted]\xE2\x80\xA6"},
        {"token 123456789:AAE-secretTokenValue_xyz0123456789ab here",
         "token [redacted] here"},
        {"meet at 10:30, robot 12:3", "meet at 10:30, robot 12:3"},
        {"/bots/list and /bot/x", "/bots/list and /bot/x"},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        buf o = BUF_INIT;
        EXPECT_INT(cm_redact_text(NULL, cases[i].in, strlen(cases[i].in), 0, &o), CM_OK);
        EXPECT_STR(o.data, cases[i].out);
        cm_buf_release(&o);
    }
}

/* cm_redact_text of body with dsn's secrets (cm_redact_add_conninfo), no
 * patterns: what the DSN itself hides. */
static const char *red_dsn(const char *dsn, const char *body)
{
    redact r;
    cm_redact_init(&r);
    r.patterns = 0;
    cm_redact_add_conninfo(&r, dsn);
    buf b = BUF_INIT;
    cm_redact_text(&r, body, strlen(body), 0, &b);
    snprintf(out, sizeof out, "%s", b.data);
    cm_buf_release(&b);
    cm_redact_release(&r);
    return out;
}

TEST(redact_conninfo_secrets)
{
    /* keyword form: password and sslpassword, quoted (with an escaped quote)
     * or not; a word without "=" (a password's second half); not the host */
    const char *kw = "host=db.example port=5432 password = 'it\\'s s3cret' sslpassword=kp4ss "
                     "user=claw half";
    EXPECT_STR(red_dsn(kw, "it\\'s s3cret | kp4ss | half | db.example | claw"),
               "[redacted] | [redacted] | [redacted] | db.example | claw");
    /* URI form: the whole string, userinfo and query values */
    const char *uri = "postgresql://claw:pw%41xyz@db.example/mem?password=qpass99";
    EXPECT_STR(red_dsn(uri, uri), "[redacted]");
    EXPECT_STR(red_dsn(uri, "pw%41xyz pwAxyz qpass99 db.example"),
               "[redacted] [redacted] [redacted] db.example");
    /* an unterminated quote: the rest is the password */
    EXPECT_STR(red_dsn("host=x password='open quote", "open quote"), "[redacted]");
    EXPECT_STR(red_dsn(NULL, "nothing"), "nothing");
}
