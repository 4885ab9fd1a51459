/*
 * fake_batch.c — the fake batch APIs of fake_batch.h, as a fakeserver.h
 * handler. The JSONL of an upload is the multipart part whose Content-Type
 * is application/jsonl (form-data for OpenAI/Voyage, related for Gemini).
 */
#include <jansson.h>
#include <pthread.h>
#include <time.h>

#include "fake_batch.h"

enum { K_OPENAI, K_VOYAGE, K_GEMINI };

typedef struct ffile {
    char id[64];
    char *data;
    size_t n;
} ffile;

typedef struct fbatch {
    char id[64], input[64], out[64], errf[64];
    int kind;
    fake_batch_plan plan;
    int polls_seen;
    int64_t created_ms;
    bool finished;
} fbatch;

struct fake_batch {
    fake_server *s;
    int dims;
    pthread_mutex_t mu;
    ffile *files;
    size_t nfiles;
    fbatch *batches;
    size_t nb;
    fake_batch_plan queue[32];
    int nq;
    bool released;
    fake_batch_counts c;
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static char *dump(json_t *j, size_t *n)
{
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    *n = s ? strlen(s) : 0;
    return s;
}

/* under b->mu */
static ffile *file_add(fake_batch *b, const char *prefix, char *data, size_t n)
{
    b->files = realloc(b->files, (b->nfiles + 1) * sizeof *b->files);
    ffile *f = &b->files[b->nfiles];
    snprintf(f->id, sizeof f->id, "%s%zu", prefix, b->nfiles + 1);
    f->data = data;
    f->n = n;
    b->nfiles++;
    return f;
}

static ffile *file_find(fake_batch *b, const char *id)
{
    for (size_t i = 0; i < b->nfiles; i++)
        if (!strcmp(b->files[i].id, id)) return &b->files[i];
    return NULL;
}

static fbatch *batch_find(fake_batch *b, const char *id)
{
    for (size_t i = 0; i < b->nb; i++)
        if (!strcmp(b->batches[i].id, id)) return &b->batches[i];
    return NULL;
}

/* The application/jsonl part of a multipart body (malloc'd). */
static char *jsonl_part(const char *body, size_t n, size_t *len)
{
    const char *ct = NULL;
    for (size_t i = 0; i + 25 < n && !ct; i++)
        if (!strncasecmp(body + i, "Content-Type: application/jsonl", 31)) ct = body + i;
    if (!ct) return NULL;
    const char *start = strstr(ct, "\r\n\r\n");
    if (!start) return NULL;
    start += 4;
    const char *end = start;
    while (end < body + n && !(end[0] == '\r' && end + 3 < body + n && !strncmp(end, "\r\n--", 4)))
        end++;
    *len = (size_t)(end - start);
    return cm_strndup(start, *len);
}

static const char *line_text(json_t *j)
{
    json_t *in = json_object_get(json_object_get(j, "body"), "input");
    if (json_is_string(in)) return json_string_value(in);
    if (json_is_array(in)) return json_string_value(json_array_get(in, 0));
    return json_string_value(json_object_get(
        json_array_get(
            json_object_get(json_object_get(json_object_get(j, "request"), "content"), "parts"), 0),
        "text"));
}

static json_t *vec_of(const char *text, int dims)
{
    float v[1024];
    fake_vector(text, dims, v);
    json_t *a = json_array();
    for (int i = 0; i < dims; i++)
        json_array_append_new(a, json_real(v[i]));
    return a;
}

/* Writes the output (and error) file of a completed batch. under b->mu */
static void make_output(fake_batch *b, fbatch *x)
{
    ffile *in = file_find(b, x->input);
    buf out = BUF_INIT, errs = BUF_INIT;
    const char *p = in ? in->data : "";
    size_t left = in ? in->n : 0;
    int k = 0;
    while (left) {
        const char *nl = memchr(p, '\n', left);
        size_t len = nl ? (size_t)(nl - p) : left;
        json_t *j = json_loadb(p, len, 0, NULL);
        p += len + (nl != NULL);
        left -= len + (nl != NULL);
        if (!j) continue;
        const char *id = json_string_value(json_object_get(j, "custom_id"));
        if (!id) id = json_string_value(json_object_get(j, "key"));
        const char *text = line_text(j);
        if (!text) text = "";
        k++;
        json_t *o;
        bool fail = x->plan.fail_text && strstr(text, x->plan.fail_text);
        if (x->plan.drop_text && strstr(text, x->plan.drop_text)) {
            json_decref(j);
            continue;
        }
        if (x->kind == K_GEMINI)
            o = fail ? json_pack("{s:s, s:{s:i, s:s}}", "key", id, "error", "code", 400, "message",
                                 "input rejected")
                     : json_pack("{s:s, s:{s:{s:o}}}", "key", id, "response", "embedding", "values",
                                 vec_of(text, b->dims));
        else if (fail)
            o = json_pack("{s:s, s:s, s:{s:i, s:s, s:{s:{s:s}}}, s:n}", "id", "batch_req_x",
                          "custom_id", id, "response", "status_code", 400, "request_id", "r",
                          "body", "error", "message", "input rejected", "error");
        else
            o = json_pack("{s:s, s:s, s:{s:i, s:s, s:{s:s, s:[{s:s, s:i, s:o}], s:s}}, s:n}", "id",
                          "batch_req_x", "custom_id", id, "response", "status_code", 200,
                          "request_id", "r", "body", "object", "list", "data", "object",
                          "embedding", "index", 0, "embedding", vec_of(text, b->dims), "model",
                          "fake", "error");
        char *s = json_dumps(o, JSON_COMPACT);
        buf *dst = fail && x->kind != K_GEMINI ? &errs : &out;
        cm_buf_adds(dst, s);
        cm_buf_addc(dst, '\n');
        free(s);
        json_decref(o);
        json_decref(j);
    }
    (void)k;
    ffile *of =
        file_add(b, x->kind == K_GEMINI ? "files/out-" : "file-out-", cm_buf_detach(&out), 0);
    of->n = of->data ? strlen(of->data) : 0;
    if (!of->data) of->data = cm_strdup("");
    snprintf(x->out, sizeof x->out, "%s", of->id);
    if (errs.len) {
        size_t en = errs.len;
        ffile *ef = file_add(b, "file-err-", cm_buf_detach(&errs), en);
        snprintf(x->errf, sizeof x->errf, "%s", ef->id);
    }
    cm_buf_release(&errs);
}

/* Advances x on a status request; its state word. under b->mu */
static const char *advance(fake_batch *b, fbatch *x)
{
    if (!x->finished) {
        bool done;
        if (x->plan.hold && !b->released)
            done = false;
        else if (x->plan.delay_ms > 0)
            done = mono_ms() - x->created_ms >= x->plan.delay_ms;
        else
            done = ++x->polls_seen > x->plan.polls;
        if (done) {
            x->finished = true;
            if (!strcmp(x->plan.final, "completed")) make_output(b, x);
        }
    }
    return x->finished ? x->plan.final : "in_progress";
}

static json_t *files_status(fbatch *x, const char *state)
{
    json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s}", "id", x->id, "object", "batch", "endpoint",
                          "/v1/embeddings", "input_file_id", x->input, "status", state);
    json_object_set_new(j, "output_file_id", x->out[0] ? json_string(x->out) : json_null());
    json_object_set_new(j, "error_file_id", x->errf[0] ? json_string(x->errf) : json_null());
    if (!strcmp(state, "failed"))
        json_object_set_new(j, "errors",
                            json_pack("{s:[{s:s, s:s}]}", "data", "code", "invalid", "message",
                                      "the batch was rejected"));
    return j;
}

static json_t *gemini_status(fbatch *x, const char *state)
{
    const char *st = !strcmp(state, "in_progress") ? "BATCH_STATE_RUNNING"
                     : !strcmp(state, "completed") ? "BATCH_STATE_SUCCEEDED"
                     : !strcmp(state, "failed")    ? "BATCH_STATE_FAILED"
                     : !strcmp(state, "expired")   ? "BATCH_STATE_EXPIRED"
                                                   : "BATCH_STATE_CANCELLED";
    json_t *meta =
        json_pack("{s:s, s:s, s:s}", "@type",
                  "type.googleapis.com/google.ai.generativelanguage.v1beta.EmbedContentBatch",
                  "name", x->id, "state", st);
    json_t *j = json_pack("{s:s, s:o, s:b}", "name", x->id, "metadata", meta, "done", x->finished);
    if (x->out[0]) {
        json_object_set_new(meta, "output", json_pack("{s:s}", "responsesFile", x->out));
        json_object_set_new(j, "response",
                            json_pack("{s:s, s:s}", "@type", "x", "responsesFile", x->out));
    }
    if (x->finished && strcmp(state, "completed"))
        json_object_set_new(j, "error",
                            json_pack("{s:i, s:s}", "code", 13, "message", "batch did not finish"));
    return j;
}

static bool handle(void *ctx, const char *method, const char *path, const char *body,
                   size_t body_len, int *status, const char **ctype, char **out, size_t *out_len)
{
    fake_batch *b = ctx;
    bool post = !strcmp(method, "POST"), done = true;
    pthread_mutex_lock(&b->mu);
    b->c.bytes_in += body_len;
    *status = 200;
    *ctype = "application/json";
    if (post && (!strcmp(path, "/v1/files") || !strncmp(path, "/upload/v1beta/files", 20))) {
        bool gem = path[1] == 'u';
        size_t n = 0;
        char *jsonl = jsonl_part(body, body_len, &n);
        b->c.uploads++;
        b->c.upload_bytes += body_len;
        if (!jsonl) {
            *status = 400;
            *out = dump(json_pack("{s:{s:s}}", "error", "message", "no jsonl part"), out_len);
        } else {
            for (size_t i = 0; i < n; i++)
                b->c.lines_uploaded += jsonl[i] == '\n';
            ffile *f = file_add(b, gem ? "files/in-" : "file-in-", jsonl, n);
            *out = gem ? dump(json_pack("{s:{s:s, s:s}}", "file", "name", f->id, "mimeType",
                                        "application/jsonl"),
                              out_len)
                       : dump(json_pack("{s:s, s:s, s:i, s:s}", "id", f->id, "object", "file",
                                        "bytes", (int)n, "purpose", "batch"),
                              out_len);
        }
    } else if (post && (!strcmp(path, "/v1/batches") || strstr(path, ":asyncBatchEmbedContent"))) {
        json_t *in = json_loadb(body, body_len, 0, NULL);
        bool gem = strstr(path, ":async") != NULL;
        const char *file =
            gem ? json_string_value(json_object_get(
                      json_object_get(json_object_get(in, "batch"), "inputConfig"), "fileName"))
                : json_string_value(json_object_get(in, "input_file_id"));
        b->c.creates++;
        if (!file || !file_find(b, file)) {
            *status = 400;
            *out = dump(json_pack("{s:{s:s}}", "error", "message", "unknown input file"), out_len);
        } else {
            b->batches = realloc(b->batches, (b->nb + 1) * sizeof *b->batches);
            fbatch *x = &b->batches[b->nb++];
            memset(x, 0, sizeof *x);
            snprintf(x->id, sizeof x->id, gem ? "batches/b%zu" : "batch_%zu", b->nb);
            snprintf(x->input, sizeof x->input, "%s", file);
            x->kind = gem ? K_GEMINI : json_object_get(in, "request_params") ? K_VOYAGE : K_OPENAI;
            x->plan = (fake_batch_plan){.polls = 1, .final = "completed"};
            if (b->nq) {
                x->plan = b->queue[0];
                memmove(b->queue, b->queue + 1, (size_t)(b->nq - 1) * sizeof *b->queue);
                b->nq--;
                if (!x->plan.final) x->plan.final = "completed";
            }
            x->created_ms = mono_ms();
            *out = gem ? dump(gemini_status(x, "pending"), out_len)
                       : dump(files_status(x, "validating"), out_len);
        }
        json_decref(in);
    } else if (!post &&
               (!strncmp(path, "/v1/batches/", 12) || !strncmp(path, "/v1beta/batches/", 16))) {
        fbatch *x = batch_find(b, path + (path[3] == 'b' ? 8 : 12));
        b->c.polls++;
        if (!x) {
            *status = 404;
            *out = dump(json_pack("{s:{s:s}}", "error", "message", "no such batch"), out_len);
        } else {
            const char *st = advance(b, x);
            *out = x->kind == K_GEMINI ? dump(gemini_status(x, st), out_len)
                                       : dump(files_status(x, st), out_len);
        }
    } else if (!post && (!strncmp(path, "/v1/files/", 10) ||
                         !strncmp(path, "/download/v1beta/files/", 23))) {
        char id[128];
        if (path[1] == 'd') /* /download/v1beta/files/ID:download?alt=media */
            snprintf(id, sizeof id, "files/%.*s", (int)strcspn(path + 23, ":?"), path + 23);
        else /* /v1/files/ID/content */
            snprintf(id, sizeof id, "%.*s", (int)strcspn(path + 10, "/"), path + 10);
        ffile *f = file_find(b, id);
        b->c.downloads++;
        if (!f) {
            *status = 404;
            *out = dump(json_pack("{s:{s:s}}", "error", "message", "no such file"), out_len);
        } else {
            *ctype = "application/octet-stream";
            *out = malloc(f->n + 1);
            memcpy(*out, f->data, f->n);
            *out_len = f->n;
        }
    } else {
        if (post)
            b->c.sync_posts++;
        else
            b->c.other++;
        done = false;
    }
    pthread_mutex_unlock(&b->mu);
    return done;
}

fake_batch *fake_batch_start(fake_server *s, int dims)
{
    fake_batch *b = calloc(1, sizeof *b);
    b->s = s;
    b->dims = dims;
    pthread_mutex_init(&b->mu, NULL);
    fake_handler(s, handle, b);
    return b;
}

void fake_batch_stop(fake_batch *b)
{
    if (!b) return;
    fake_handler(b->s, NULL, NULL);
    for (size_t i = 0; i < b->nfiles; i++)
        free(b->files[i].data);
    free(b->files);
    free(b->batches);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

void fake_batch_script(fake_batch *b, const fake_batch_plan *plan)
{
    pthread_mutex_lock(&b->mu);
    if (b->nq < 32) b->queue[b->nq++] = *plan;
    pthread_mutex_unlock(&b->mu);
}

void fake_batch_release(fake_batch *b)
{
    pthread_mutex_lock(&b->mu);
    b->released = true;
    pthread_mutex_unlock(&b->mu);
}

fake_batch_counts fake_batch_counts_get(fake_batch *b)
{
    pthread_mutex_lock(&b->mu);
    fake_batch_counts c = b->c;
    pthread_mutex_unlock(&b->mu);
    return c;
}

void fake_batch_id(fake_batch *b, int i, char out[64])
{
    pthread_mutex_lock(&b->mu);
    snprintf(out, 64, "%s", i >= 0 && (size_t)i < b->nb ? b->batches[i].id : "");
    pthread_mutex_unlock(&b->mu);
}

char *fake_batch_upload(fake_batch *b, int i)
{
    char *r = NULL;
    int k = 0;
    pthread_mutex_lock(&b->mu);
    for (size_t j = 0; j < b->nfiles && !r; j++)
        if (strstr(b->files[j].id, "in-") && k++ == i)
            r = cm_strndup(b->files[j].data, b->files[j].n);
    pthread_mutex_unlock(&b->mu);
    return r;
}
