/*
 * test_multimodal.c — multimodal memory (memorySearch.multimodal) against
 * the loopback fake of Gemini: the config rules, image and audio files under
 * extraPaths only (memory roots Markdown-only, symbolic links ignored), one
 * request per file whose parts are the label and the bytes as inline data
 * with the MIME type of its extension or signature, the size cap, media hits
 * in search payloads, memory_get's refusal, a provider's "too large", and a
 * change of outputDimensionality rebuilding the index.
 */
#include <jansson.h>
#include <unistd.h>

#include "../include/clawmem.h"
#include "../src/config/config.h"
#include "../src/embed/multimodal.h"
#include "../src/index/media.h"
#include "../src/index/watch.h"
#include "fakeserver.h"
#include "test.h"

typedef struct mm {
    char *dir;
    char ws[1024], state[1024], cfg[1024];
    char base[64];
    fake_server *srv;
} mm;

/* One sample per extension: name, bytes, the MIME type expected. */
typedef struct sample {
    const char *name;
    const char *data;
    size_t len;
    const char *mime;
} sample;

#define S(name, lit, mime)                                                                         \
    {                                                                                              \
        name, lit, sizeof(lit) - 1, mime                                                           \
    }
static const sample samples[] = {
    S("beach.png", "\x89PNG\r\n\x1a\n sunset beach volleyball", "image/png"),
    S("lake.jpg", "\xFF\xD8\xFF\xE0 mountain lake canoe", "image/jpeg"),
    S("city.jpeg", "\xFF\xD8\xFF\xE1 night city skyline", "image/jpeg"),
    S("cat.webp", "RIFF\x10\0\0\0WEBPVP8  sleepy orange cat", "image/webp"),
    S("dance.gif", "GIF89a dancing robot loop", "image/gif"),
    S("phone.heic",
      "\0\0\0\x18"
      "ftypheic phone photo garden",
      "image/heic"),
    S("scan.heif",
      "\0\0\0\x18"
      "ftypmif1 receipt scan grocery",
      "image/heif"),
    S("plain.png", "no signature at all", "image/png"), /* the extension decides */
    S("song.mp3", "ID3\x03\0 guitar song chorus", "audio/mpeg"),
    S("memo.wav", "RIFF\x10\0\0\0WAVEfmt  voice memo dentist", "audio/wav"),
    S("birds.ogg", "OggS\0 morning birds chirping", "audio/ogg"),
    S("call.opus", "OggS\0 OpusHead phone call notes", "audio/ogg"),
    S("talk.m4a",
      "\0\0\0\x18"
      "ftypM4A  conference talk keynote",
      "audio/mp4"),
    S("radio.aac", "\xFF\xF1\x50\x80 radio jingle", "audio/aac"),
    S("piano.FLAC", "fLaC piano sonata", "audio/flac"), /* any case */
};

static void mm_config(mm *m, const char *extra)
{
    char text[2048];
    snprintf(
        text, sizeof text,
        "{agents:{defaults:{memorySearch:{provider:'gemini',model:'gemini-embedding-2-preview',"
        "remote:{baseUrl:'%s',apiKey:'k'},extraPaths:['assets'],%s}}}}",
        m->base, extra ? extra : "multimodal:{enabled:true},outputDimensionality:768");
    write_file(m->dir, "qc.json", text);
}

static void mm_init(mm *m)
{
    setenv("CLAWMEM_HTTP_BACKOFF_MS", "5", 1);
    setenv("CLAWMEM_HTTP_TIMEOUT_MS", "5000", 1);
    unsetenv("GEMINI_API_KEY");
    m->dir = tmp_dir();
    snprintf(m->ws, sizeof m->ws, "%s/ws", m->dir);
    snprintf(m->state, sizeof m->state, "%s/state", m->dir);
    snprintf(m->cfg, sizeof m->cfg, "%s/qc.json", m->dir);
    m->srv = fake_start(64, m->base);
    mm_config(m, NULL);
    write_file(m->ws, "MEMORY.md", "# Facts\nThe dog Biscuit likes the beach.\n");
    write_file(m->ws, "assets/notes.md", "Holiday plans for the coast.\n");
}

static cm_engine *mm_open(mm *m, char *err, size_t errlen)
{
    cm_options o = {NULL, m->ws, m->cfg, m->state, NULL, NULL, 0};
    cm_engine *e = NULL;
    if (cm_engine_open(&o, &e, err, errlen)) return NULL;
    return e;
}

static cm_rc mm_sync(mm *m, cm_sync_stats *st)
{
    char err[512];
    cm_engine *e = mm_open(m, err, sizeof err);
    if (!e) {
        fprintf(stderr, "  open: %s\n", err);
        return CM_ECONFIG;
    }
    cm_rc rc = cm_engine_sync(e, 0, NULL, NULL, st, err, sizeof err);
    if (rc) fprintf(stderr, "  sync: %s\n", err);
    cm_engine_close(e);
    return rc;
}

static json_t *mm_json(mm *m, bool status, const char *q)
{
    char err[512], *js = NULL;
    cm_engine *e = mm_open(m, err, sizeof err);
    cm_search_opts o = {20, 0, 0};
    if (status)
        cm_engine_status(e, 0, &js, err, sizeof err);
    else
        cm_memory_search(e, q, &o, &js, err, sizeof err);
    json_t *j = js ? json_loads(js, 0, NULL) : NULL;
    cm_free(js);
    cm_engine_close(e);
    return j;
}

/* The index of the first request whose body contains needle, or -1. */
static int find_request(mm *m, const char *needle)
{
    for (int i = 0; i < fake_count(m->srv); i++) {
        const fake_request *r = fake_get(m->srv, i);
        if (r->body && strstr(r->body, needle)) return i;
    }
    return -1;
}

/* The problems of status, as one string "path: problem\n...". */
static char *problems_of(mm *m)
{
    json_t *s = mm_json(m, true, NULL);
    buf b = BUF_INIT;
    size_t i;
    json_t *p;
    cm_buf_adds(&b, "");
    json_array_foreach(json_object_get(s, "problems"), i, p)
        cm_buf_printf(&b, "%s: %s\n", json_string_value(json_object_get(p, "path")),
                      json_string_value(json_object_get(p, "problem")));
    json_decref(s);
    return cm_buf_detach(&b);
}

TEST(multimodal_media_names_types_and_base64)
{
    EXPECT_INT(cm_index_media_kind_of_name("a/b.PNG"), CM_MEDIA_IMAGE);
    EXPECT_INT(cm_index_media_kind_of_name("x.opus"), CM_MEDIA_AUDIO);
    EXPECT_INT(cm_index_media_kind_of_name("x.md"), 0);
    EXPECT_INT(cm_index_media_kind_of_name("png"), 0);
    EXPECT_INT(cm_index_media_kind_of_name("x.mp4"), 0); /* video is not a modality here */
    for (size_t i = 0; i < ARRAY_LEN(samples); i++)
        EXPECT_STR(cm_index_media_mime(samples[i].name, (const unsigned char *)samples[i].data,
                                       samples[i].len),
                   samples[i].mime);
    /* a PDF named .png is a PDF; a ZIP gives way to the extension */
    EXPECT_STR(cm_index_media_mime("a.png", (const unsigned char *)"%PDF-1.7", 8),
               "application/pdf");
    EXPECT_STR(cm_index_media_mime("a.png", (const unsigned char *)"PK\x03\x04", 4), "image/png");
    EXPECT(cm_index_media_mime("a.txt", (const unsigned char *)"hello", 5) == NULL);
    static const char *const in[] = {"", "M", "Ma", "Man", "Many", "\xff\xfe\xfd\x00"};
    static const char *const want[] = {"", "TQ==", "TWE=", "TWFu", "TWFueQ==", "//79AA=="};
    for (size_t i = 0; i < ARRAY_LEN(in); i++) {
        buf b = BUF_INIT;
        EXPECT_INT(cm_index_media_base64(&b, in[i], i == 5 ? 4 : strlen(in[i])), CM_OK);
        EXPECT_STR(b.data ? b.data : "", want[i]);
        cm_buf_release(&b);
    }
    /* the chunk: label, and a hash over path, label, type and bytes */
    buf l1 = BUF_INIT, l2 = BUF_INIT;
    char h1[SHA256_HEX_LEN + 1], h2[SHA256_HEX_LEN + 1];
    EXPECT_INT(
        cm_index_media_chunk(CM_MEDIA_AUDIO, "assets/a.mp3", "audio/mpeg", "abc", 3, &l1, h1),
        CM_OK);
    EXPECT_STR(l1.data, "Audio file: assets/a.mp3");
    EXPECT_INT(
        cm_index_media_chunk(CM_MEDIA_AUDIO, "assets/a.mp3", "audio/mpeg", "abd", 3, &l2, h2),
        CM_OK);
    EXPECT(strcmp(h1, h2) != 0);
    cm_buf_release(&l1);
    cm_buf_release(&l2);
}

/* Loads config text; returns rc, err receives the message. */
static cm_rc parse_cfg(const char *text, cm_config *c, char *err, size_t errlen)
{
    cm_config_args a = {NULL, "/tmp", NULL, "/tmp/mm-state"};
    return cm_config_parse(text, strlen(text), "qc.json", &a, NULL, c, err, errlen);
}

TEST(multimodal_config_rules)
{
    cm_config c;
    char err[512];
    /* another provider, or Gemini's older model: an error naming the key */
    static const char *const wrong[] = {
        "{agents:{defaults:{memorySearch:{provider:'openai',multimodal:{enabled:true}}}}}",
        "{agents:{defaults:{memorySearch:{multimodal:{enabled:true}}}}}",
        "{agents:{defaults:{memorySearch:{provider:'gemini',multimodal:{enabled:true}}}}}",
        "{agents:{defaults:{memorySearch:{provider:'gemini',model:'gemini-embedding-001',"
        "multimodal:{enabled:true,modalities:['image']}}}}}",
    };
    for (size_t i = 0; i < ARRAY_LEN(wrong); i++) {
        EXPECT_INT(parse_cfg(wrong[i], &c, err, sizeof err), CM_ECONFIG);
        EXPECT_CONTAINS(err, "memorySearch.multimodal requires memorySearch.provider \"gemini\"");
        EXPECT_CONTAINS(err, "gemini-embedding-2-preview");
    }
    /* a fallback other than "none" */
    EXPECT_INT(
        parse_cfg("{agents:{defaults:{memorySearch:{provider:'gemini',model:"
                  "'gemini-embedding-2-preview',fallback:'openai',multimodal:{enabled:true}}}}}",
                  &c, err, sizeof err),
        CM_ECONFIG);
    EXPECT_CONTAINS(err, "memorySearch.fallback must be \"none\"");
    /* the agent's own entry can break the rule too */
    EXPECT_INT(parse_cfg("{agents:{defaults:{memorySearch:{provider:'gemini',model:"
                         "'models/gemini-embedding-2-preview',multimodal:{enabled:true}}},"
                         "list:[{id:'main',memorySearch:{fallback:'local'}}]}}",
                         &c, err, sizeof err),
               CM_ECONFIG);
    EXPECT_CONTAINS(err, "memorySearch.fallback");
    /* fine: the right provider and model, fallback none or unset */
    EXPECT_INT(
        parse_cfg("{agents:{defaults:{memorySearch:{provider:'gemini',model:"
                  "'gemini-embedding-2-preview',fallback:'none',multimodal:{enabled:true}}}}}",
                  &c, err, sizeof err),
        CM_OK);
    EXPECT_INT(c.multimodal, CM_MEDIA_IMAGE | CM_MEDIA_AUDIO);
    EXPECT_INT(c.multimodal_max_bytes, CM_MEDIA_MAX_BYTES_DEFAULT);
    cm_config_release(&c);
    EXPECT_INT(parse_cfg("{agents:{defaults:{memorySearch:{provider:'gemini',model:"
                         "'gemini/gemini-embedding-2-preview',multimodal:{enabled:true,"
                         "modalities:['audio'],maxFileBytes:1234}}}}}",
                         &c, err, sizeof err),
               CM_OK);
    EXPECT_INT(c.multimodal, CM_MEDIA_AUDIO);
    EXPECT_INT(c.multimodal_max_bytes, 1234);
    cm_config_release(&c);
    EXPECT_INT(parse_cfg("{agents:{defaults:{memorySearch:{provider:'gemini',model:"
                         "'gemini-embedding-2-preview',multimodal:{enabled:true,"
                         "modalities:['image','all']}}}}}",
                         &c, err, sizeof err),
               CM_OK);
    EXPECT_INT(c.multimodal, CM_MEDIA_IMAGE | CM_MEDIA_AUDIO);
    cm_config_release(&c);
    /* off: no rule applies, nothing is media */
    EXPECT_INT(parse_cfg("{agents:{defaults:{memorySearch:{provider:'openai',fallback:'local',"
                         "multimodal:{enabled:false,modalities:['image']}}}}}",
                         &c, err, sizeof err),
               CM_OK);
    EXPECT_INT(c.multimodal, 0);
    EXPECT_INT(cm_index_media_kind(&c, "a.png"), 0);
    cm_config_release(&c);
    /* bad values name their key with line:column */
    EXPECT_INT(parse_cfg("{agents:{defaults:{memorySearch:{multimodal:{modalities:['video']}}}}}",
                         &c, err, sizeof err),
               CM_ECONFIG);
    EXPECT_CONTAINS(err, "multimodal.modalities[0]");
    EXPECT_INT(parse_cfg("{agents:{defaults:{memorySearch:{multimodal:{maxFileBytes:0}}}}}", &c,
                         err, sizeof err),
               CM_ECONFIG);
    EXPECT_CONTAINS(err, "multimodal.maxFileBytes");
    /* Gemini Embedding 2's dimensions: 768, 1536 or 3072 */
    EXPECT_INT(parse_cfg("{agents:{defaults:{memorySearch:{provider:'gemini',model:"
                         "'gemini-embedding-2-preview',outputDimensionality:1000}}}}",
                         &c, err, sizeof err),
               CM_ECONFIG);
    EXPECT_CONTAINS(err, "memorySearch.outputDimensionality");
}

TEST(multimodal_request_parts_per_extension)
{
    mm m;
    mm_init(&m);
    for (size_t i = 0; i < ARRAY_LEN(samples); i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "assets/%s%s", i % 2 ? "sub/" : "", samples[i].name);
        write_bytes(m.ws, rel, samples[i].data, samples[i].len);
    }
    /* not media here: the memory roots stay Markdown-only, and the workspace
     * itself is not an extraPath */
    write_bytes(m.ws, "memory/pic.png", samples[0].data, samples[0].len);
    write_bytes(m.ws, "top.png", samples[0].data, samples[0].len);
    write_file(m.ws, "assets/readme.txt", "not memory");
    cm_sync_stats st;
    EXPECT_INT(mm_sync(&m, &st), CM_OK);
    EXPECT_INT(st.files_seen, 2 + ARRAY_LEN(samples));
    EXPECT_INT(st.chunks_embedded, 2 + ARRAY_LEN(samples));
    for (size_t i = 0; i < ARRAY_LEN(samples); i++) {
        char label[256], part[512];
        unsigned kind = cm_index_media_kind_of_name(samples[i].name);
        snprintf(label, sizeof label, "{\"text\":\"%s file: assets/%s%s\"}",
                 kind == CM_MEDIA_AUDIO ? "Audio" : "Image", i % 2 ? "sub/" : "", samples[i].name);
        int k = find_request(&m, label);
        EXPECT(k >= 0);
        const fake_request *r = fake_get(m.srv, k);
        EXPECT_STR(r->path, "/models/gemini-embedding-2-preview:batchEmbedContents");
        EXPECT_CONTAINS(r->headers, "x-goog-api-key: k");
        buf b64 = BUF_INIT;
        EXPECT_INT(cm_index_media_base64(&b64, samples[i].data, samples[i].len), CM_OK);
        snprintf(part, sizeof part, "%s,{\"inlineData\":{\"mimeType\":\"%s\",\"data\":\"%s\"}}]}",
                 label, samples[i].mime, b64.data);
        EXPECT_CONTAINS(r->body, part);
        cm_buf_release(&b64);
    }
    /* the whole body of one, exactly */
    buf want = BUF_INIT, b64 = BUF_INIT;
    cm_index_media_base64(&b64, samples[0].data, samples[0].len);
    cm_buf_printf(
        &want,
        "{\"requests\":[{\"model\":\"models/gemini-embedding-2-preview\",\"content\":{"
        "\"parts\":[{\"text\":\"Image file: assets/beach.png\"},{\"inlineData\":{"
        "\"mimeType\":\"image/png\",\"data\":\"%s\"}}]},\"taskType\":\"RETRIEVAL_DOCUMENT\","
        "\"outputDimensionality\":768}]}",
        b64.data);
    int k = find_request(&m, "assets/beach.png");
    EXPECT(k >= 0);
    EXPECT_STR(fake_get(m.srv, k)->body, want.data);
    cm_buf_release(&want);
    cm_buf_release(&b64);
    /* Markdown under extraPaths is text as before; nothing else was sent */
    k = find_request(&m, "Holiday plans");
    EXPECT(k >= 0);
    EXPECT(!strstr(fake_get(m.srv, k)->body, "inlineData"));
    EXPECT_INT(find_request(&m, "memory/pic.png"), -1);
    EXPECT_INT(find_request(&m, "top.png"), -1);
    EXPECT_INT(find_request(&m, "readme"), -1);
    /* a second sync has nothing to send */
    int before = fake_count(m.srv);
    EXPECT_INT(mm_sync(&m, &st), CM_OK);
    EXPECT_INT(st.files_indexed, 0);
    EXPECT_INT(fake_count(m.srv), before);
    /* only audio: the images leave the index */
    mm_config(&m, "multimodal:{enabled:true,modalities:['audio']},outputDimensionality:768");
    EXPECT_INT(mm_sync(&m, &st), CM_OK);
    json_t *s = mm_json(&m, true, NULL);
    EXPECT_INT(json_integer_value(json_object_get(s, "files")), 2 + 7);
    EXPECT_STR(json_string_value(json_array_get(
                   json_object_get(json_object_get(s, "multimodal"), "modalities"), 0)),
               "audio");
    json_decref(s);
    fake_stop(m.srv);
}

TEST(multimodal_size_cap_and_wrong_content_are_problems)
{
    mm m;
    mm_init(&m);
    mm_config(&m, "multimodal:{enabled:true,maxFileBytes:64},outputDimensionality:768");
    char big[100];
    memcpy(big, "\x89PNG\r\n\x1a\n", 8);
    memset(big + 8, 'x', sizeof big - 8);
    write_bytes(m.ws, "assets/big.png", big, sizeof big);
    write_bytes(m.ws, "assets/small.png", big, 40);
    write_file(m.ws, "assets/doc.png", "%PDF-1.7 not an image");
    cm_sync_stats st;
    EXPECT_INT(mm_sync(&m, &st), CM_OK);
    char *p = problems_of(&m);
    EXPECT_CONTAINS(p, "assets/big.png: skipped: 100 bytes, over multimodal.maxFileBytes (64)");
    EXPECT_CONTAINS(p, "assets/doc.png: content is application/pdf, not image; not indexed");
    free(p);
    EXPECT_INT(find_request(&m, "assets/big.png"), -1);
    EXPECT_INT(find_request(&m, "assets/doc.png"), -1);
    EXPECT(find_request(&m, "assets/small.png") >= 0);
    fake_stop(m.srv);
}

TEST(multimodal_hits_in_payloads_and_memory_get_refuses)
{
    mm m;
    mm_init(&m);
    write_bytes(m.ws, "assets/beach.png", samples[0].data, samples[0].len);
    write_bytes(m.ws, "assets/memo.wav", samples[9].data, samples[9].len);
    EXPECT_INT(mm_sync(&m, NULL), CM_OK);
    int before = fake_count(m.srv);
    /* the query stays text; the image is found by what its bytes hold */
    json_t *j = mm_json(&m, false, "sunset volleyball");
    EXPECT_STR(json_string_value(json_object_get(j, "model")), "gemini-embedding-2-preview");
    json_t *top = json_array_get(json_object_get(j, "results"), 0);
    EXPECT_STR(json_string_value(json_object_get(top, "path")), "assets/beach.png");
    EXPECT_INT(json_integer_value(json_object_get(top, "startLine")), 1);
    EXPECT_INT(json_integer_value(json_object_get(top, "endLine")), 1);
    EXPECT_CONTAINS(json_string_value(json_object_get(top, "snippet")),
                    "Image file: assets/beach.png");
    json_decref(j);
    EXPECT_INT(fake_count(m.srv), before + 1);
    const fake_request *q = fake_get(m.srv, before);
    EXPECT_CONTAINS(q->path, ":embedContent");
    EXPECT(!strstr(q->body, "inlineData"));
    /* keyword search finds a media file by its label */
    j = mm_json(&m, false, "memo wav audio");
    bool found = false;
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(j, "results"), i,
                       r) if (!strcmp(json_string_value(json_object_get(r, "path")),
                                      "assets/memo.wav")) found = true;
    EXPECT(found);
    json_decref(j);
    /* memory_get never returns the bytes */
    char err[512], *js = NULL;
    cm_engine *e = mm_open(&m, err, sizeof err);
    EXPECT(e != NULL);
    EXPECT_INT(cm_memory_get(e, "assets/beach.png", 0, 0, &js, err, sizeof err), CM_EPATH);
    EXPECT(js == NULL);
    EXPECT_CONTAINS(err, "assets/beach.png: an image file, not Markdown");
    EXPECT_INT(cm_memory_get(e, "assets/memo.wav", 0, 0, &js, err, sizeof err), CM_EPATH);
    EXPECT_CONTAINS(err, "an audio file, not Markdown");
    EXPECT_INT(cm_memory_get(e, "assets/notes.md", 0, 0, &js, err, sizeof err), CM_OK);
    EXPECT_CONTAINS(js, "Holiday plans");
    cm_free(js);
    cm_engine_close(e);
    fake_stop(m.srv);
}

static long status_dims(mm *m, long *vectors)
{
    json_t *s = mm_json(m, true, NULL);
    json_t *v = json_object_get(s, "vector");
    long d = (long)json_integer_value(json_object_get(v, "dims"));
    *vectors = (long)json_integer_value(json_object_get(v, "vectors"));
    json_decref(s);
    return d;
}

TEST(multimodal_dimension_change_rebuilds)
{
    mm m;
    mm_init(&m);
    write_bytes(m.ws, "assets/beach.png", samples[0].data, samples[0].len);
    cm_sync_stats st;
    long vectors = 0;
    EXPECT_INT(mm_sync(&m, &st), CM_OK);
    EXPECT_INT(st.rebuilt, 1);
    EXPECT_INT(status_dims(&m, &vectors), 768);
    EXPECT_INT(vectors, 3);
    /* another outputDimensionality: the whole index again, nothing from the
     * cache of the other size, and the new size asked of Gemini */
    static const char *const cfgs[] = {"outputDimensionality:1536", ""};
    static const long dims[] = {1536, 3072}; /* unset: the model's 3072 */
    for (size_t i = 0; i < 2; i++) {
        char extra[256];
        snprintf(extra, sizeof extra, "multimodal:{enabled:true}%s%s", *cfgs[i] ? "," : "",
                 cfgs[i]);
        mm_config(&m, extra);
        int before = fake_count(m.srv);
        EXPECT_INT(mm_sync(&m, &st), CM_OK);
        EXPECT_INT(st.rebuilt, 1);
        EXPECT_INT(st.chunks_embedded, 3);
        EXPECT_INT(st.cache_hits, 0);
        EXPECT_INT(status_dims(&m, &vectors), dims[i]);
        EXPECT_INT(vectors, 3);
        char want[64];
        snprintf(want, sizeof want, "\"outputDimensionality\":%ld", dims[i]);
        bool media_seen = false;
        for (int k = before; k < fake_count(m.srv); k++) {
            EXPECT_CONTAINS(fake_get(m.srv, k)->body, want);
            media_seen |= strstr(fake_get(m.srv, k)->body, "inlineData") != NULL;
        }
        EXPECT(media_seen);
        /* unchanged settings: no rebuild */
        EXPECT_INT(mm_sync(&m, &st), CM_OK);
        EXPECT_INT(st.rebuilt, 0);
    }
    fake_stop(m.srv);
}

TEST(multimodal_symlinks_ignored)
{
    mm m;
    mm_init(&m);
    char *out = tmp_dir();
    write_bytes(out, "real.png", samples[0].data, samples[0].len);
    write_bytes(out, "dir/inner.mp3", samples[8].data, samples[8].len);
    write_bytes(m.ws, "assets/ok.gif", samples[4].data, samples[4].len);
    EXPECT_INT(symlink(path_in(out, "real.png"), path_in(m.ws, "assets/link.png")), 0);
    EXPECT_INT(symlink(path_in(out, "dir"), path_in(m.ws, "assets/linkdir")), 0);
    cm_sync_stats st;
    EXPECT_INT(mm_sync(&m, &st), CM_OK);
    EXPECT(find_request(&m, "assets/ok.gif") >= 0);
    EXPECT_INT(find_request(&m, "link.png"), -1);
    EXPECT_INT(find_request(&m, "inner.mp3"), -1);
    char *p = problems_of(&m);
    EXPECT_CONTAINS(p, "assets/link.png: symbolic link, not followed");
    free(p);
    /* nor does the engine read a media file through a link swapped in later:
     * the file's bytes no longer match its chunk (the next sync re-reads it) */
    json_t *s = mm_json(&m, true, NULL);
    EXPECT_INT(json_integer_value(json_object_get(s, "files")), 3);
    json_decref(s);
    fake_stop(m.srv);
}

TEST(multimodal_too_large_is_not_retried)
{
    mm m;
    mm_init(&m);
    write_bytes(m.ws, "assets/beach.png", samples[0].data, samples[0].len);
    /* media files go first, each in its own request: Gemini refuses the image */
    fake_push(m.srv, FAKE_STATUS, 413, -1);
    cm_sync_stats st;
    EXPECT_INT(mm_sync(&m, &st), CM_OK);
    EXPECT_INT(st.chunks_embedded, 2);
    int before = fake_count(m.srv);
    EXPECT_INT(mm_sync(&m, &st), CM_OK);
    EXPECT_INT(fake_count(m.srv), before); /* marked done: not sent again */
    /* a transient failure is retried by the next sync */
    write_bytes(m.ws, "assets/lake.jpg", samples[1].data, samples[1].len);
    fake_push(m.srv, FAKE_STATUS, 400, -1);
    EXPECT_INT(mm_sync(&m, &st), CM_OK);
    EXPECT_INT(st.chunks_embedded, 0);
    EXPECT_INT(mm_sync(&m, &st), CM_OK);
    EXPECT_INT(st.chunks_embedded, 1);
    fake_stop(m.srv);
}

TEST(multimodal_extra_path_files_and_outside_dirs)
{
    /* an extraPath naming one media file, and a directory outside the
     * workspace: both indexed and embedded (read through their roots) */
    mm m;
    mm_init(&m);
    char *out = tmp_dir(), text[2048];
    write_bytes(out, "pics/lake.jpg", samples[1].data, samples[1].len);
    write_bytes(m.ws, "voice.wav", samples[9].data, samples[9].len);
    snprintf(
        text, sizeof text,
        "{agents:{defaults:{memorySearch:{provider:'gemini',model:'gemini-embedding-2-preview',"
        "remote:{baseUrl:'%s',apiKey:'k'},extraPaths:['voice.wav','%s/pics'],"
        "multimodal:{enabled:true},outputDimensionality:768}}}}",
        m.base, out);
    write_file(m.dir, "qc.json", text);
    cm_sync_stats st;
    EXPECT_INT(mm_sync(&m, &st), CM_OK);
    EXPECT_INT(st.chunks_embedded, 3); /* MEMORY.md, the two media files */
    EXPECT(find_request(&m, "\"Audio file: voice.wav\"") >= 0);
    json_t *j = mm_json(&m, false, "mountain lake canoe");
    const char *path = json_string_value(
        json_object_get(json_array_get(json_object_get(j, "results"), 0), "path"));
    EXPECT(path && strstr(path, "pics/lake.jpg") && !strncmp(path, "../", 3));
    json_decref(j);
    fake_stop(m.srv);
}

static unsigned settle(watcher *w)
{
    unsigned what = 0;
    for (int i = 0; i < 20; i++) { /* events arrive promptly; give them 200 ms */
        usleep(10000);
        what |= cm_watcher_read(w);
    }
    return what;
}

TEST(multimodal_watcher_sees_media_under_extra_paths)
{
    char *dir = tmp_dir(), ws[1024];
    snprintf(ws, sizeof ws, "%s/ws", dir);
    write_file(ws, "assets/a.md", "a\n");
    char *extra[] = {(char *)"assets"};
    for (unsigned on = 0; on < 2; on++) {
        cm_config c = {0};
        c.workspace = ws;
        c.extra_paths.v = extra;
        c.extra_paths.n = 1;
        c.multimodal = on ? CM_MEDIA_IMAGE : 0;
        watcher *w = NULL;
        char err[256];
        EXPECT_INT(cm_watcher_open(&c, NULL, &w, err, sizeof err), CM_OK);
        EXPECT_INT(settle(w), 0);
        write_file(ws, "assets/song.mp3", "ID3 not an image modality");
        write_file(ws, "assets/b.txt", "not memory");
        EXPECT_INT(settle(w), 0);
        write_bytes(ws, on ? "assets/sub.png" : "assets/x.png", samples[0].data, samples[0].len);
        EXPECT_INT(settle(w) & WATCH_CHANGED, on ? WATCH_CHANGED : 0);
        cm_watcher_close(w);
    }
}
