/*
 * status_card.c — the session status card (status_card.h), line by line
 * as 2026.3.22's buildStatusMessage writes it, and its formats (time ago,
 * token counts, the user's time).
 */
#include "status_card.h"

#include <math.h>
#include <time.h>

#include "../base/zone.h"

/* JavaScript's Math.round for the non-negative values used here. */
static int64_t S_round(double v)
{
    return (int64_t)floor(v + 0.5);
}

void cm_status_time_ago(int64_t ms, char out[32])
{
    if (ms < 0) {
        snprintf(out, 32, "unknown");
        return;
    }
    int64_t sec = S_round((double)ms / 1000.0), min = S_round((double)sec / 60.0);
    if (min < 1) {
        snprintf(out, 32, "just now");
        return;
    }
    if (min < 60) {
        snprintf(out, 32, "%lldm ago", (long long)min);
        return;
    }
    int64_t h = S_round((double)min / 60.0);
    if (h < 48)
        snprintf(out, 32, "%lldh ago", (long long)h);
    else
        snprintf(out, 32, "%lldd ago", (long long)S_round((double)h / 24.0));
}

void cm_status_token_count(int64_t n, char out[16])
{
    double v = n > 0 ? (double)n : 0;
    if (v >= 1e6) {
        snprintf(out, 16, "%.1fm", v / 1e6);
    } else if (v >= 1e3) {
        char k[12];
        snprintf(k, sizeof k, "%.*f", v >= 1e4 ? 0 : 1, v / 1e3);
        if (strtod(k, NULL) >= 1000)
            snprintf(out, 16, "%.1fm", v / 1e6);
        else
            snprintf(out, 16, "%sk", k);
    } else {
        snprintf(out, 16, "%lld", (long long)(v + 0.5));
    }
}

void cm_status_user_time(int64_t now_ms, const char *zone, bool h24, char out[96])
{
    static const char *const days[] = {"Sunday",   "Monday", "Tuesday", "Wednesday",
                                       "Thursday", "Friday", "Saturday"};
    static const char *const months[] = {"January",   "February", "March",    "April",
                                         "May",       "June",     "July",     "August",
                                         "September", "October",  "November", "December"};
    struct tm tm;
    cm_zone_localtime(zone, now_ms / 1000, &tm);
    int d = tm.tm_mday;
    const char *suf = d % 100 >= 11 && d % 100 <= 13 ? "th"
                      : d % 10 == 1                  ? "st"
                      : d % 10 == 2                  ? "nd"
                      : d % 10 == 3                  ? "rd"
                                                     : "th";
    char when[16];
    if (h24)
        snprintf(when, sizeof when, "%02d:%02d", tm.tm_hour, tm.tm_min);
    else
        snprintf(when, sizeof when, "%d:%02d %s", tm.tm_hour % 12 ? tm.tm_hour % 12 : 12, tm.tm_min,
                 tm.tm_hour < 12 ? "AM" : "PM");
    snprintf(out, 96, "%s, %s %d%s, %d \xe2\x80\x94 %s", days[tm.tm_wday % 7],
             months[tm.tm_mon % 12], d, suf, tm.tm_year + 1900, when);
}

/* A string member of o, or dflt when it is missing or not a string. */
static const char *S_str(const json_t *o, const char *k, const char *dflt)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s && *s ? s : dflt;
}

/* A number member of o: true with *v when it is one. */
static bool S_num(const json_t *o, const char *k, double *v)
{
    const json_t *x = json_object_get(o, k);
    if (!json_is_number(x)) return false;
    *v = json_number_value(x);
    return isfinite(*v);
}

/* formatUsd: two decimals from a cent up, four below. */
static cm_rc S_usd(buf *out, double v)
{
    return cm_buf_printf(out, v >= 0.01 ? "$%.2f" : "$%.4f", v);
}

/* "🧮 Tokens: 1.2k in / 300 out", then " · 💵 Cost: $0.01" when shown. */
static cm_rc S_usage(const status_card_in *in, buf *out)
{
    cm_rc rc = CM_OK;
    double i = 0, o = 0;
    bool hi = S_num(in->entry, "inputTokens", &i), ho = S_num(in->entry, "outputTokens", &o);
    bool cost = in->show_cost && (hi || ho) && in->cost_known;
    if (!hi && !ho && !cost) return CM_OK;
    char a[16] = "?", b[16] = "?";
    if (hi) cm_status_token_count((int64_t)i, a);
    if (ho) cm_status_token_count((int64_t)o, b);
    if (hi || ho) rc = cm_buf_printf(out, "\n🧮 Tokens: %s in / %s out", a, b);
    if (!rc && cost) rc = cm_buf_adds(out, hi || ho ? " · 💵 Cost: " : "\n💵 Cost: ");
    if (!rc && cost) rc = S_usd(out, in->cost_usd);
    return rc;
}

/* "🗄️ Cache: 40% hit · 1.2k cached, 300 new" when anything was cached. */
static cm_rc S_cache(const status_card_in *in, buf *out)
{
    double r = 0, w = 0, i = 0;
    bool hr = S_num(in->entry, "cacheRead", &r), hw = S_num(in->entry, "cacheWrite", &w);
    S_num(in->entry, "inputTokens", &i);
    if (!(hr && r > 0) && !(hw && w > 0)) return CM_OK;
    char a[16] = "0", b[16] = "0";
    if (hr) cm_status_token_count((int64_t)r, a);
    if (hw) cm_status_token_count((int64_t)w, b);
    double total = (hr ? r : 0) + (hw ? w : 0) + i;
    int64_t pct = total > 0 && hr ? S_round(r / total * 100.0) : 0;
    return cm_buf_printf(out, "\n🗄️ Cache: %lld%% hit · %s cached, %s new", (long long)pct, a,
                         b);
}

/* "📚 Context: 12k/200k (6%) · 🧹 Compactions: 0". */
static cm_rc S_context(const status_card_in *in, buf *out)
{
    double t = 0, i = 0, o = 0, c = 0;
    if (!S_num(in->entry, "totalTokens", &t)) {
        S_num(in->entry, "inputTokens", &i);
        S_num(in->entry, "outputTokens", &o);
        t = i + o;
    }
    S_num(in->entry, "compactionCount", &c);
    char a[16], b[16] = "?";
    cm_status_token_count((int64_t)t, a);
    if (in->context_tokens > 0) cm_status_token_count(in->context_tokens, b);
    cm_rc rc = cm_buf_printf(out, "\n📚 Context: %s/%s", a, b);
    if (!rc && in->context_tokens > 0) {
        int64_t pct = S_round(t / (double)in->context_tokens * 100.0);
        rc = cm_buf_printf(out, " (%lld%%)", (long long)(pct > 999 ? 999 : pct));
    }
    if (!rc) rc = cm_buf_printf(out, " · 🧹 Compactions: %lld", (long long)c);
    return rc;
}

/* Whether the session is a group's or a channel's. */
static bool S_group(const status_card_in *in)
{
    const char *ct = S_str(in->entry, "chatType", "");
    const char *k = in->session_key ? in->session_key : "";
    return !strcmp(ct, "group") || !strcmp(ct, "channel") || strstr(k, ":group:") ||
           strstr(k, ":channel:");
}

cm_rc cm_status_card(const status_card_in *in, buf *out)
{
    cm_rc rc = CM_OK;
    const json_t *e = in->entry;
    const json_t *dflt = json_object_get(json_object_get(in->config, "agents"), "defaults");
    char ago[32];
    double upd = 0;
    CHECK(cm_buf_adds(out, "🦞 QuantumClaw 2026.3.22 (clawmem " CM_VERSION ")"));
    if (in->time_line) CHECK(cm_buf_printf(out, "\n%s", in->time_line));
    CHECK(cm_buf_printf(out, "\n🧠 Model: %s", in->model && *in->model ? in->model : "unknown"));
    if (in->auth && *in->auth) CHECK(cm_buf_printf(out, " · 🔑 %s", in->auth));
    CHECK(S_usage(in, out));
    CHECK(S_cache(in, out));
    CHECK(S_context(in, out));
    CHECK(cm_buf_printf(out, "\n🧵 Session: %s • ",
                        in->session_key ? in->session_key : "unknown"));
    if (S_num(e, "updatedAt", &upd)) {
        cm_status_time_ago(in->now_ms - (int64_t)upd, ago);
        CHECK(cm_buf_printf(out, "updated %s", ago));
    } else {
        CHECK(cm_buf_adds(out, "no activity"));
    }
    const char *verbose = S_str(e, "verboseLevel", S_str(dflt, "verboseDefault", "off"));
    const char *reasoning = S_str(e, "reasoningLevel", "off");
    CHECK(cm_buf_printf(out, "\n⚙️ Runtime: direct · Think: %s",
                        in->thinking && *in->thinking ? in->thinking : "off"));
    if (json_is_true(json_object_get(e, "fastMode"))) CHECK(cm_buf_adds(out, " · Fast: on"));
    if (!strcmp(verbose, "full") || !strcmp(verbose, "on"))
        CHECK(cm_buf_adds(out, !strcmp(verbose, "full") ? " · verbose:full" : " · verbose"));
    if (strcmp(reasoning, "off")) CHECK(cm_buf_printf(out, " · Reasoning: %s", reasoning));
    CHECK(cm_buf_adds(out, "\n"));
    if (S_group(in))
        CHECK(cm_buf_printf(out, "👥 Activation: %s · ", S_str(e, "groupActivation", "mention")));
    CHECK(cm_buf_adds(out, in->queue_line ? in->queue_line : "🪢 Queue: unknown"));
out:
    return rc;
}
