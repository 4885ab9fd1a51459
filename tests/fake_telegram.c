/*
 * fake_telegram.c — the loopback fake Bot API of fake_telegram.h.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../src/base/buf.h"
#include "../src/base/common.h"
#include "fake_telegram.h"

/* A handler's answer: status and a copy of body. */
static bool tg_answer(int st, const char *body, int *status, char **answer, size_t *answer_len)
{
    *status = st;
    *answer = cm_strdup(body);
    *answer_len = strlen(body);
    return true;
}

/* {"ok":true,"result":[...]}: the updates of keep (objects) and raw
 * ({"id","text"}) merged in id order, at most limit of them. */
static char *answer_of(json_t *keep, json_t *raw, long limit)
{
    buf b = BUF_INIT;
    size_t i = 0, k = 0;
    long n = 0;
    cm_buf_adds(&b, "{\"ok\":true,\"result\":[");
    while ((i < json_array_size(keep) || k < json_array_size(raw)) && n < limit) {
        json_t *u = json_array_get(keep, i), *r = json_array_get(raw, k);
        json_int_t uid = json_integer_value(json_object_get(u, "update_id"));
        json_int_t rid = json_integer_value(json_object_get(r, "id"));
        if (n++) cm_buf_addc(&b, ',');
        if (u && (!r || uid < rid)) {
            char *t = json_dumps(u, JSON_COMPACT);
            cm_buf_adds(&b, t);
            free(t);
            i++;
        } else {
            cm_buf_adds(&b, json_string_value(json_object_get(r, "text")));
            k++;
        }
    }
    cm_buf_adds(&b, "]}");
    return cm_buf_detach(&b);
}

bool tgfake_handler(void *ctx, const char *method, const char *path, const char *body,
                    size_t body_len, int *status, const char **ctype, char **answer,
                    size_t *answer_len)
{
    tgfake *f = ctx;
    (void)method;
    (void)body_len;
    (void)ctype; /* application/json */
    static const char prefix[] = "/bot" TGFAKE_TOKEN "/";
    if (strncmp(path, prefix, strlen(prefix)) != 0)
        return tg_answer(401, "{\"ok\":false,\"error_code\":401,\"description\":\"Unauthorized\"}",
                         status, answer, answer_len);
    const char *m = path + strlen(prefix);
    json_t *in = json_loads(body ? body : "{}", 0, NULL);
    int st = 200;
    char *out = NULL;
    if (!strcmp(m, "getMe")) {
        pthread_mutex_lock(&f->mu);
        f->getme++;
        const char *fail = f->getme_fail;
        if (fail) st = f->getme_fail_status;
        pthread_mutex_unlock(&f->mu);
        out = fail ? cm_strdup(fail)
                   : cm_strdup("{\"ok\":true,\"result\":{\"id\":123456,\"is_bot\":true,"
                               "\"first_name\":\"Claw\",\"username\":\"ClawBot\"}}");
    } else if (!strcmp(m, "getUpdates")) {
        json_t *off = json_object_get(in, "offset");
        long timeout = (long)json_integer_value(json_object_get(in, "timeout"));
        long waited = 0, hold = CM_MIN(f->hold_ms, timeout * 1000);
        for (;;) {
            pthread_mutex_lock(&f->mu);
            /* an offset confirms every update before it */
            json_t *keep = json_array();
            size_t i;
            json_t *u;
            json_array_foreach(f->updates, i, u)
            {
                if (!json_is_integer(off) ||
                    json_integer_value(json_object_get(u, "update_id")) >= json_integer_value(off))
                    json_array_append(keep, u);
            }
            json_decref(f->updates);
            f->updates = keep;
            json_t *rkeep = json_array();
            json_array_foreach(f->raw, i, u)
            {
                if (!json_is_integer(off) ||
                    json_integer_value(json_object_get(u, "id")) >= json_integer_value(off))
                    json_array_append(rkeep, u);
            }
            json_decref(f->raw);
            f->raw = rkeep;
            size_t n = json_array_size(keep) + json_array_size(rkeep);
            long limit = json_is_integer(json_object_get(in, "limit"))
                             ? (long)json_integer_value(json_object_get(in, "limit"))
                             : 100;
            if (n || waited >= hold || atomic_load(&f->stop)) {
                f->polls++;
                json_array_append_new(
                    f->offsets, json_integer(json_is_integer(off) ? json_integer_value(off) : -1));
                out = answer_of(keep, rkeep, limit);
                pthread_mutex_unlock(&f->mu);
                break;
            }
            pthread_mutex_unlock(&f->mu);
            usleep(10000);
            waited += 10;
        }
    } else if (!strcmp(m, "sendMessage")) {
        pthread_mutex_lock(&f->mu);
        json_array_append(f->sent, in);
        json_array_append_new(f->calls, json_pack("{s:s,s:O}", "method", m, "params", in));
        int id = f->next_id++;
        pthread_mutex_unlock(&f->mu);
        char a[96];
        snprintf(a, sizeof a, "{\"ok\":true,\"result\":{\"message_id\":%d}}", id);
        out = cm_strdup(a);
    } else if (!strcmp(m, "editMessageText") || !strcmp(m, "deleteMessage") ||
               !strcmp(m, "sendChatAction") || !strcmp(m, "setMessageReaction")) {
        pthread_mutex_lock(&f->mu);
        bool limited = !strcmp(m, "editMessageText") && f->edit_429 > 0;
        if (limited) {
            f->edit_429--;
            st = 429;
            out = cm_strdup("{\"ok\":false,\"error_code\":429,\"description\":\"Too Many "
                            "Requests: retry after 2\",\"parameters\":{\"retry_after\":2}}");
        } else {
            out = cm_strdup("{\"ok\":true,\"result\":true}");
        }
        json_array_append_new(f->calls, json_pack("{s:s,s:O,s:b}", "method", m, "params", in,
                                                  "limited", limited));
        pthread_mutex_unlock(&f->mu);
    } else {
        st = 404;
        out = cm_strdup("{\"ok\":false,\"error_code\":404,\"description\":\"Not Found\"}");
    }
    json_decref(in);
    *status = st;
    *answer = out;
    *answer_len = out ? strlen(out) : 0;
    return true;
}

void tgfake_init(tgfake *f)
{
    memset(f, 0, sizeof *f);
    pthread_mutex_init(&f->mu, NULL);
    f->updates = json_array();
    f->raw = json_array();
    f->sent = json_array();
    f->offsets = json_array();
    f->calls = json_array();
    f->next_id = 900;
    f->hold_ms = 100;
}

void tgfake_release(tgfake *f)
{
    json_decref(f->updates);
    json_decref(f->raw);
    json_decref(f->sent);
    json_decref(f->offsets);
    json_decref(f->calls);
    pthread_mutex_destroy(&f->mu);
}

void tgfake_add_update(tgfake *f, const char *json)
{
    json_error_t je;
    json_t *u = json_loads(json, 0, &je);
    if (!u) fprintf(stderr, "bad test update: %s\n", je.text);
    pthread_mutex_lock(&f->mu);
    json_array_append_new(f->updates, u);
    pthread_mutex_unlock(&f->mu);
}

void tgfake_add_raw_update(tgfake *f, long long id, const char *text)
{
    pthread_mutex_lock(&f->mu);
    json_array_append_new(f->raw, json_pack("{s:I,s:s}", "id", (json_int_t)id, "text", text));
    pthread_mutex_unlock(&f->mu);
}

int tgfake_polls(tgfake *f)
{
    pthread_mutex_lock(&f->mu);
    int n = f->polls;
    pthread_mutex_unlock(&f->mu);
    return n;
}

int tgfake_count(tgfake *f, const char *method)
{
    pthread_mutex_lock(&f->mu);
    int n = 0;
    size_t i;
    json_t *c;
    json_array_foreach(f->calls, i, c)
    {
        const char *m = json_string_value(json_object_get(c, "method"));
        n += !method || (m && !strcmp(m, method));
    }
    pthread_mutex_unlock(&f->mu);
    return n;
}
