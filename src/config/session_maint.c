/*
 * session_maint.c — session.maintenance: a table of its keys (name, kind,
 * destination) read as QuantumClaw 2026.3.22's zod schema accepts them
 * (durations with the default unit "d", byte sizes with the default unit
 * "b", positive integers, mode "warn"|"enforce"), then the derived defaults
 * of store-maintenance.ts (resetArchiveRetention = pruneAfter, highWaterBytes
 * = 80% of maxDiskBytes).
 */
#include <ctype.h>
#include <math.h>

#include "config_int.h"

#define DAY_MS (24LL * 3600 * 1000)

typedef enum mkind { M_MODE, M_DURATION, M_DURATION_OR_FALSE, M_BYTES, M_POSINT, M_DAYS } mkind;

typedef struct mfield {
    const char *key;
    mkind kind;
    size_t off; /* in cm_session_maint */
} mfield;

#define AT(m) offsetof(cm_session_maint, m)
static const mfield mfields[] = {
    {"mode", M_MODE, AT(enforce)},
    {"pruneAfter", M_DURATION, AT(prune_after_ms)},
    {"pruneDays", M_DAYS, AT(prune_after_ms)},
    {"maxEntries", M_POSINT, AT(max_entries)},
    {"rotateBytes", M_BYTES, AT(rotate_bytes)},
    {"resetArchiveRetention", M_DURATION_OR_FALSE, AT(reset_retention_ms)},
    {"maxDiskBytes", M_BYTES, AT(max_disk_bytes)},
    {"highWaterBytes", M_BYTES, AT(high_water_bytes)},
};

void cm_session_maint_defaults(cm_session_maint *m)
{
    memset(m, 0, sizeof *m);
    m->prune_after_ms = 30 * DAY_MS;
    m->max_entries = 500;
    m->rotate_bytes = 10 << 20;
    m->reset_retention_ms = m->prune_after_ms;
    m->max_disk_bytes = -1;
    m->high_water_bytes = -1;
}

bool cm_config_byte_size(const char *s, int64_t *bytes)
{
    while (isspace((unsigned char)*s))
        s++;
    if (!isdigit((unsigned char)*s)) return false;
    char *end;
    double v = strtod(s, &end);
    if (!isfinite(v) || v < 0 || v > 9e15) return false;
    char unit[4] = "";
    size_t n = 0;
    while (isalpha((unsigned char)*end) && n < 3)
        unit[n++] = (char)tolower((unsigned char)*end++);
    unit[n] = 0;
    while (isspace((unsigned char)*end))
        end++;
    if (*end) return false;
    static const struct {
        const char *u;
        double mul;
    } units[] = {{"", 1},          {"b", 1},          {"k", 1024.0},       {"kb", 1024.0},
                 {"m", 1048576.0}, {"mb", 1048576.0}, {"g", 1073741824.0}, {"gb", 1073741824.0},
                 {"t", 1099511627776.0}, {"tb", 1099511627776.0}};
    for (size_t i = 0; i < ARRAY_LEN(units); i++)
        if (!strcmp(unit, units[i].u)) {
            double b = round(v * units[i].mul);
            if (b > 9e18) return false;
            *bytes = (int64_t)b;
            return true;
        }
    return false;
}

/* The value as the reference's String(raw).trim() sees it. */
static bool as_text(const json_t *v, char *out, size_t n)
{
    if (json_is_string(v)) return snprintf(out, n, "%s", json_string_value(v)) < (int)n;
    if (json_is_integer(v)) return snprintf(out, n, "%" JSON_INTEGER_FORMAT, json_integer_value(v)) > 0;
    if (json_is_real(v)) return snprintf(out, n, "%.17g", json_real_value(v)) > 0;
    return false;
}

static cm_rc apply(ctx *c, const json_t *o, const mfield *f, const json_t *v, cm_session_maint *m)
{
    char path[96], text[128];
    snprintf(path, sizeof path, "session.maintenance.%s", f->key);
    int64_t *dst = (int64_t *)(void *)((char *)m + f->off);
    switch (f->kind) {
    case M_MODE: {
        const char *s = json_string_value(v);
        if (!s || !cm_config_in_choices("enforce|warn", s))
            return cm_config_bad(c, o, f->key, path, "expected \"warn\" or \"enforce\"");
        m->enforce = !strcmp(s, "enforce");
        return CM_OK;
    }
    case M_POSINT:
    case M_DAYS:
        if (!json_is_integer(v) || json_integer_value(v) < 1 ||
            json_integer_value(v) > (json_int_t)1 << 40)
            return cm_config_bad(c, o, f->key, path, "expected a positive integer");
        /* pruneAfter wins over the older pruneDays */
        if (f->kind == M_DAYS) {
            if (!json_object_get(o, "pruneAfter")) *dst = json_integer_value(v) * DAY_MS;
        } else
            *dst = json_integer_value(v);
        return CM_OK;
    case M_DURATION_OR_FALSE:
        if (json_is_false(v)) {
            *dst = -1;
            m->reset_retention_set = true;
            return CM_OK;
        }
        /* fall through */
    case M_DURATION:
        if (!as_text(v, text, sizeof text) || !cm_config_duration_ms(text, DAY_MS, dst))
            return cm_config_bad(c, o, f->key, path, "invalid duration (use ms, s, m, h, d)");
        if (f->kind == M_DURATION_OR_FALSE) m->reset_retention_set = true;
        return CM_OK;
    case M_BYTES:
        if (!as_text(v, text, sizeof text) || !cm_config_byte_size(text, dst))
            return cm_config_bad(c, o, f->key, path, "invalid size (use b, kb, mb, gb, tb)");
        if (f->off == AT(high_water_bytes)) m->high_water_set = true;
        return CM_OK;
    }
    return CM_OK;
}

cm_rc cm_config_read_session_maint(ctx *c, const json_t *root)
{
    const json_t *session = json_object_get(root, "session"), *o;
    if (!json_is_object(session) || !(o = json_object_get(session, "maintenance"))) return CM_OK;
    if (!json_is_object(o))
        return cm_config_bad(c, session, "maintenance", "session.maintenance",
                             "expected an object");
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)o, k, v)
    {
        const mfield *f = NULL;
        for (size_t i = 0; i < ARRAY_LEN(mfields) && !f; i++)
            if (!strcmp(mfields[i].key, k)) f = &mfields[i];
        if (!f) {
            cm_config_warn(c, o, k, 0, "unknown key session.maintenance.%s", k);
            continue;
        }
        cm_rc rc = apply(c, o, f, v, &c->cfg->session_maint);
        if (rc) return rc;
    }
    return CM_OK;
}

void cm_config_session_maint_finish(cm_session_maint *m)
{
    if (!m->reset_retention_set) m->reset_retention_ms = m->prune_after_ms;
    if (m->max_disk_bytes < 0)
        m->high_water_bytes = -1;
    else if (!m->high_water_set)
        m->high_water_bytes =
            m->max_disk_bytes <= 0
                ? 0
                : CM_MAX(1, CM_MIN(m->max_disk_bytes, (int64_t)floor((double)m->max_disk_bytes * 0.8)));
    else
        m->high_water_bytes = CM_MIN(m->high_water_bytes, m->max_disk_bytes);
}
