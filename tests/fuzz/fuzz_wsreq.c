/*
 * fuzz_wsreq.c — one text message of a gateway protocol client (hostile)
 * through the request parser and the dispatch of gw_ws.c: as the first
 * message of a connection (the connect handshake: frame shape, protocol
 * range, auth, role, scopes, device refused) and from a connected client
 * holding every scope (each method's params parsed and checked: chat.*,
 * sessions.*, logs.tail, the clawmem.* methods, …). The gateway has no
 * runtime (chat.send answers UNAVAILABLE) and its state dir is a temporary
 * one, removed by fuzz_wsreq_stop; memory.* are left out (each call opens a
 * memory engine). Never a crash, a leak or a hang; a connected client is
 * never closed by a request, and a handshake never turns a client ready
 * without the token.
 */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../src/gateway/control/gw_ws_int.h"
#include "fuzz.h"

#define TOKEN "fuzz-token-0001"

static gw_ws *S_w;
static json_t *S_cfg;
static char S_dir[64], S_ws[96], S_state[96];
static cm_options S_opt;

static int S_rm(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)st, (void)flag, (void)f;
    return remove(path);
}

void fuzz_wsreq_stop(void)
{
    cm_gw_ws_free(S_w);
    S_w = NULL;
    json_decref(S_cfg);
    S_cfg = NULL;
    if (S_dir[0]) nftw(S_dir, S_rm, 16, FTW_DEPTH | FTW_PHYS);
    S_dir[0] = 0;
}

static gw_ws *S_gateway(void)
{
    if (S_w) return S_w;
    snprintf(S_dir, sizeof S_dir, "/tmp/clawmem-fuzz-wsreq-XXXXXX");
    if (!mkdtemp(S_dir)) __builtin_trap();
    snprintf(S_ws, sizeof S_ws, "%s/ws", S_dir);
    snprintf(S_state, sizeof S_state, "%s/state", S_dir);
    mkdir(S_ws, 0700);
    mkdir(S_state, 0700);
    S_cfg =
        json_pack("{s:{s:{s:s}},s:{s:{s:s,s:{s:s}}}}", "gateway", "auth", "token", TOKEN, "agents",
                  "defaults", "model", "openai/gpt-t", "memorySearch", "provider", "none");
    S_opt = (cm_options){NULL, S_ws, NULL, S_state, NULL, NULL, 0};
    gw_ws_opts o = {S_cfg, &S_opt, NULL, NULL, NULL, NULL, NULL, "fuzz", NULL, NULL, NULL};
    char err[256];
    if (cm_gw_ws_new(&o, &S_w, err, sizeof err)) __builtin_trap();
    atexit(fuzz_wsreq_stop);
    return S_w;
}

int fuzz_wsreq(const uint8_t *data, size_t size)
{
    gw_ws *w = S_gateway();
    const char *text = (const char *)data;
    /* the handshake */
    gw_ws_client fresh;
    memset(&fresh, 0, sizeof fresh);
    snprintf(fresh.conn_id, sizeof fresh.conn_id, "fuzz-1");
    bool go = cm_gw_ws_message(w, &fresh, text, size);
    json_t *f = json_loadb(text, size, 0, NULL);
    const char *tok = json_string_value(
        json_object_get(json_object_get(json_object_get(f, "params"), "auth"), "token"));
    if (fresh.ready && !(tok && !strcmp(tok, TOKEN)))
        __builtin_trap(); /* connected without the token */
    if (go && fresh.ready) go = cm_gw_ws_message(w, &fresh, "{}", 2); /* a bad frame after */
    /* a connected client: the method's own parsing */
    const char *m = json_string_value(json_object_get(f, "method"));
    bool skip = m && !strncmp(m, "memory.", 7);
    json_decref(f);
    if (!skip) {
        gw_ws_client cl;
        memset(&cl, 0, sizeof cl);
        snprintf(cl.conn_id, sizeof cl.conn_id, "fuzz-2");
        cl.ready = cl.scope_read = cl.scope_write = cl.scope_admin = true;
        if (!cm_gw_ws_message(w, &cl, text, size)) __builtin_trap();
    }
    (void)go;
    return 0;
}

FUZZ_ENTRY(fuzz_wsreq)
