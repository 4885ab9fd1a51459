/*
 * debounce.c — inbound debounce: rapid text messages from one sender in one
 * conversation become one agent turn that replies to the newest message;
 * media and control commands flush the batch and stay standalone. Deadlines
 * are driven by the caller's clock (cm_gw_debounce_due); nothing here sleeps.
 * Pending batches sit in an array searched linearly (one per live sender).
 */
#include "debounce.h"
#include "commands.h"

#include <ctype.h>
#include <math.h>

typedef struct db_batch {
    char *key;
    int64_t deadline;
    gw_turn turn; /* the merged turn so far */
    size_t bytes;
} db_batch;

struct gw_debounce {
    const cm_rtcfg *cfg; /* borrowed; swapped by cm_gw_debounce_set_config */
    db_batch *v;
    size_t n, cap;
};

int64_t cm_gw_debounce_ms(const cm_rtcfg *cfg, const char *channel)
{
    int64_t ms = GW_DEBOUNCE_MS_DEFAULT;
    if (!cfg) return ms;
    if (channel && cm_rt_map_get(&cfg->messages.inbound_by_channel, channel, &ms)) return ms;
    if (cfg->messages.inbound_debounce_ms != CM_RT_UNSET) return cfg->messages.inbound_debounce_ms;
    return GW_DEBOUNCE_MS_DEFAULT;
}

static void S_turn_release(gw_turn *t)
{
    free(t->channel), free(t->account), free(t->peer), free(t->session), free(t->thread);
    free(t->message_id), free(t->sender), free(t->text);
    free(t->sender_name), free(t->sender_username), free(t->chat_title);
    memset(t, 0, sizeof *t);
}

void cm_gw_turns_release(gw_turns *t)
{
    for (size_t i = 0; i < t->n; i++)
        S_turn_release(&t->v[i]);
    free(t->v);
    memset(t, 0, sizeof *t);
}

static cm_rc S_dup(char **dst, const char *src)
{
    free(*dst);
    *dst = NULL;
    if (!src) return CM_OK;
    *dst = cm_strdup(src);
    return *dst ? CM_OK : CM_ENOMEM;
}

/* Sets t's metadata from m (the newest message); text untouched. */
static cm_rc S_turn_meta(gw_turn *t, const gw_msg *m)
{
    cm_rc rc = CM_OK;
    CHECK(S_dup(&t->channel, m->channel));
    CHECK(S_dup(&t->account, m->account));
    CHECK(S_dup(&t->peer, m->peer));
    CHECK(S_dup(&t->session, m->session));
    CHECK(S_dup(&t->thread, m->thread));
    CHECK(S_dup(&t->message_id, m->message_id));
    CHECK(S_dup(&t->sender, m->sender));
    CHECK(S_dup(&t->sender_name, m->sender_name));
    CHECK(S_dup(&t->sender_username, m->sender_username));
    CHECK(S_dup(&t->chat_title, m->chat_title));
    t->ts_ms = m->ts_ms;
    t->is_group = m->is_group;
    t->has_media = m->has_media;
    t->mentioned = t->mentioned || m->mentioned;
out:
    return rc;
}

/* Moves *t into ready (t left zeroed). A merged turn whose text is blank is
 * dropped, as 2026.3.22 drops it. */
static cm_rc S_emit(gw_turns *ready, gw_turn *t)
{
    bool blank = true;
    for (const char *p = t->text; p && *p && blank; p++)
        blank = isspace((unsigned char)*p);
    if (t->count > 1 && blank) {
        S_turn_release(t);
        return CM_OK;
    }
    if (ready->n == ready->cap) {
        size_t cap = ready->cap ? ready->cap * 2 : 8;
        gw_turn *v = realloc(ready->v, cap * sizeof *v);
        if (!v) return CM_ENOMEM;
        ready->v = v;
        ready->cap = cap;
    }
    ready->v[ready->n++] = *t;
    memset(t, 0, sizeof *t);
    return CM_OK;
}

cm_rc cm_gw_debounce_open(const cm_rtcfg *cfg, gw_debounce **out)
{
    *out = NULL;
    gw_debounce *d = calloc(1, sizeof *d);
    if (!d) return CM_ENOMEM;
    d->cfg = cfg;
    *out = d;
    return CM_OK;
}

void cm_gw_debounce_set_config(gw_debounce *d, const cm_rtcfg *cfg)
{
    d->cfg = cfg;
}

void cm_gw_debounce_close(gw_debounce *d)
{
    if (!d) return;
    for (size_t i = 0; i < d->n; i++) {
        free(d->v[i].key);
        S_turn_release(&d->v[i].turn);
    }
    free(d->v);
    free(d);
}

size_t cm_gw_debounce_pending(const gw_debounce *d)
{
    return d ? d->n : 0;
}

int64_t cm_gw_debounce_next_deadline(const gw_debounce *d)
{
    int64_t t = INT64_MAX;
    for (size_t i = 0; d && i < d->n; i++)
        t = CM_MIN(t, d->v[i].deadline);
    return t;
}

/* Emits batch i and removes it from the array (order of the rest kept). */
static cm_rc S_flush_at(gw_debounce *d, size_t i, gw_turns *ready)
{
    cm_rc rc = S_emit(ready, &d->v[i].turn);
    if (rc) return rc;
    free(d->v[i].key);
    memmove(&d->v[i], &d->v[i + 1], (d->n - i - 1) * sizeof *d->v);
    d->n--;
    return CM_OK;
}

static const char *S_or(const char *s, const char *dflt)
{
    return s && *s ? s : dflt;
}

cm_rc cm_gw_debounce_push(gw_debounce *d, const gw_msg *m, int64_t now_ms, gw_turns *ready)
{
    cm_rc rc = CM_OK;
    gw_turn single = {0};
    buf key;
    cm_buf_init(&key, 0);
    bool keyed = m->sender && *m->sender && m->peer && *m->peer && m->channel;
    if (keyed)
        CHECK(cm_buf_printf(&key, "%s\x1f%s\x1f%s\x1f%s\x1f%s", m->channel,
                            S_or(m->account, "default"), m->peer, S_or(m->thread, ""), m->sender));
    size_t at = d->n;
    for (size_t i = 0; keyed && i < d->n; i++)
        if (strcmp(d->v[i].key, key.data) == 0) at = i;
    int64_t window = cm_gw_debounce_ms(d->cfg, m->channel);
    const char *p = m->text ? m->text : "";
    while (isspace((unsigned char)*p))
        p++;
    bool debounce = keyed && window > 0 && !m->has_media && *p &&
                    !cm_gw_is_control_command(m->text, d->cfg ? d->cfg->root : NULL);
    if (!debounce) {
        if (at < d->n) CHECK(S_flush_at(d, at, ready));
        CHECK(S_turn_meta(&single, m));
        CHECK(S_dup(&single.text, m->text));
        single.count = 1;
        CHECK(S_emit(ready, &single));
        goto out;
    }
    size_t tlen = strlen(m->text);
    if (at < d->n && (d->v[at].turn.count >= GW_DEBOUNCE_MAX_PARTS ||
                      d->v[at].bytes + tlen + 1 > GW_DEBOUNCE_MAX_BYTES)) {
        CHECK(S_flush_at(d, at, ready)); /* a runaway burst: cut it here */
        at = d->n;
    }
    if (at == d->n) {
        if (d->n == d->cap) {
            size_t cap = d->cap ? d->cap * 2 : 8;
            db_batch *v = realloc(d->v, cap * sizeof *v);
            if (!v) {
                rc = CM_ENOMEM;
                goto out;
            }
            d->v = v;
            d->cap = cap;
        }
        memset(&d->v[at], 0, sizeof d->v[at]);
        d->v[at].key = cm_buf_detach(&key);
        d->n++;
    }
    db_batch *b = &d->v[at];
    gw_turn *t = &b->turn;
    CHECK(S_turn_meta(t, m));
    if (*m->text) {
        size_t old = t->text ? strlen(t->text) : 0;
        char *nt = realloc(t->text, old + 1 + tlen + 1);
        if (!nt) {
            rc = CM_ENOMEM;
            goto out;
        }
        if (old) nt[old++] = '\n';
        memcpy(nt + old, m->text, tlen + 1);
        t->text = nt;
        b->bytes = old + tlen;
    }
    t->count++;
    b->deadline = now_ms + window;
out:
    S_turn_release(&single);
    cm_buf_release(&key);
    return rc;
}

cm_rc cm_gw_debounce_due(gw_debounce *d, int64_t now_ms, gw_turns *ready)
{
    cm_rc rc = CM_OK;
    for (;;) {
        size_t best = d->n;
        for (size_t i = 0; i < d->n; i++)
            if (d->v[i].deadline <= now_ms &&
                (best == d->n || d->v[i].deadline < d->v[best].deadline))
                best = i;
        if (best == d->n) break;
        CHECK(S_flush_at(d, best, ready));
    }
out:
    return rc;
}

cm_rc cm_gw_debounce_flush_all(gw_debounce *d, gw_turns *ready)
{
    return cm_gw_debounce_due(d, INT64_MAX, ready);
}
