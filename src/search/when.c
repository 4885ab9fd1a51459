/*
 * when.c — a question's date expression as a range of days (when.h). The
 * query is cut into words (letters, digits, UTF-8 letters), lower-cased; the
 * first word that opens a known pattern decides, with the words around it.
 */
#include "when.h"

#define WORD_MAX 24
#define MAX_WORDS 64

typedef struct word {
    size_t start, end; /* bytes in the query */
    char w[WORD_MAX + 1];
    int num; /* the leading number ("4", "4th"), else -1 */
} word;

int64_t cm_when_day(int y, int m, int d)
{
    /* days since 1970-01-01 (Howard Hinnant's days_from_civil) */
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

void cm_when_civil(int64_t day, int *y, int *m, int *d)
{
    day += 719468;
    int64_t era = (day >= 0 ? day : day - 146096) / 146097;
    int64_t doe = day - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = (int)(yoe + era * 400 + (*m <= 2));
}

/* 0 Sunday .. 6 Saturday (day 0 was a Thursday) */
static int weekday(int64_t day)
{
    return (int)(((day % 7) + 11) % 7);
}

static int month_days(int y, int m)
{
    return (int)(cm_when_day(m == 12 ? y + 1 : y, m == 12 ? 1 : m + 1, 1) - cm_when_day(y, m, 1));
}

/* Index of w in a NULL-terminated list of |-separated alternatives, or -1. */
static int find(const char *w, const char *const *list)
{
    for (int i = 0; list[i]; i++) {
        for (const char *p = list[i]; *p;) {
            const char *bar = strchr(p, '|');
            size_t len = bar ? (size_t)(bar - p) : strlen(p);
            if (strlen(w) == len && memcmp(w, p, len) == 0) return i;
            p += len + (bar != NULL);
        }
    }
    return -1;
}

static const char *const weekdays[] = {
    "sunday|domingo",
    "monday|lunes|segunda",
    "tuesday|martes|terça|terca",
    "wednesday|miércoles|miercoles|quarta",
    "thursday|jueves|quinta",
    "friday|viernes|sexta",
    "saturday|sábado|sabado",
    NULL};
static const char *const months[] = {
    "january|enero|janeiro|jan",   "february|febrero|fevereiro|feb",
    "march|marzo|março|marco|mar", "april|abril|apr",
    "may|mayo|maio",               "june|junio|junho|jun",
    "july|julio|julho|jul",        "august|agosto|aug",
    "september|septiembre|setiembre|setembro|sep|sept",
    "october|octubre|outubro|oct", "november|noviembre|novembro|nov",
    "december|diciembre|dezembro|dec",
    NULL};
/* full month names: the short forms count only beside a day number */
static bool full_month(const char *w)
{
    return strlen(w) > 3 || strcmp(w, "may") == 0;
}
static const char *const last_before[] = {"last|past|previous", NULL};
static const char *const last_after[] = {"pasado|pasada|passado|passada", NULL};
static const char *const this_before[] = {"this|esta|este|current", NULL};
static const char *const numbers[] = {"zero", "one|a|an|un|una|um|uma", "two|dos|dois|duas",
                                      "three|tres|três", "four|cuatro|quatro", "five|cinco",
                                      "six|seis", "seven|siete|sete", "eight|ocho|oito",
                                      "nine|nueve|nove", "ten|diez|dez", NULL};

static bool is(const word *v, size_t n, size_t i, const char *const *list)
{
    return i < n && find(v[i].w, list) >= 0;
}

/* The number a word stands for (digits, "4th", or a number word), or -1. */
static int number(const word *v, size_t n, size_t i)
{
    if (i >= n) return -1;
    if (v[i].num >= 0) return v[i].num;
    return find(v[i].w, numbers);
}

/* The words of q[0..n), at most max of them, into v. */
static size_t words_of(const char *q, size_t n, word *v, size_t max)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k < max;) {
        unsigned char c = (unsigned char)q[i];
        if (c == 0xC2 && i + 1 < n && (q[i + 1] == '\xBF' || q[i + 1] == '\xA1')) {
            i += 2; /* ¿ ¡ */
            continue;
        }
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                     c >= 0x80;
        if (!alnum) {
            i++;
            continue;
        }
        word *w = &v[k];
        size_t s = i, len = 0;
        while (i < n) {
            c = (unsigned char)q[i];
            if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c >= 0x80))
                break;
            if (len < WORD_MAX) w->w[len++] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
            i++;
        }
        w->w[len] = 0;
        w->start = s;
        w->end = i;
        w->num = -1;
        if (w->w[0] >= '0' && w->w[0] <= '9') {
            int x = 0;
            size_t d = 0;
            while (d < len && d < 5 && w->w[d] >= '0' && w->w[d] <= '9')
                x = x * 10 + (w->w[d++] - '0');
            const char *suf = w->w + d;
            if (!*suf || !strcmp(suf, "st") || !strcmp(suf, "nd") || !strcmp(suf, "rd") ||
                !strcmp(suf, "th") || !strcmp(suf, "º"))
                w->num = x;
        }
        k++;
    }
    return k;
}

/* An ISO date yyyy-mm-dd at q[i..]: its day, and its length in *len. */
static bool iso_at(const char *q, size_t n, size_t i, int64_t *day, size_t *len)
{
    static const char pat[] = "dddd-dd-dd";
    if (i + 10 > n || (i > 0 && q[i - 1] >= '0' && q[i - 1] <= '9')) return false;
    for (size_t k = 0; k < 10; k++) {
        bool digit = q[i + k] >= '0' && q[i + k] <= '9';
        if (pat[k] == 'd' ? !digit : q[i + k] != '-') return false;
    }
    if (i + 10 < n && q[i + 10] >= '0' && q[i + 10] <= '9') return false;
    int y = (q[i] - '0') * 1000 + (q[i + 1] - '0') * 100 + (q[i + 2] - '0') * 10 + (q[i + 3] - '0');
    int m = (q[i + 5] - '0') * 10 + (q[i + 6] - '0'), d = (q[i + 8] - '0') * 10 + (q[i + 9] - '0');
    if (m < 1 || m > 12 || d < 1 || d > month_days(y, m)) return false;
    *day = cm_when_day(y, m, d);
    *len = 10;
    return true;
}

/* The range of a month (m 1..12) of year y, or of the latest such month
 * not after today when y is 0; never past today. */
static when_range month_range(int y, int m, int64_t today)
{
    int ty, tm, td;
    cm_when_civil(today, &ty, &tm, &td);
    if (!y) y = m > tm ? ty - 1 : ty;
    when_range r = {cm_when_day(y, m, 1), cm_when_day(y, m, month_days(y, m))};
    if (r.last > today) r.last = today;
    return r;
}

/* Tries the patterns at word i; sets *r and the words used [*a, *b]. */
static bool match_at(const word *v, size_t n, size_t i, int64_t today, when_range *r, size_t *a,
                     size_t *b)
{
    const char *w = v[i].w;
    int ty, tm, td;
    cm_when_civil(today, &ty, &tm, &td);
    int64_t monday = today - (weekday(today) + 6) % 7;
    bool prev_last = i > 0 && is(v, n, i - 1, last_before), next_last = is(v, n, i + 1, last_after);
    bool prev_this = i > 0 && is(v, n, i - 1, this_before);
    *a = prev_last || prev_this ? i - 1 : i;
    *b = next_last ? i + 1 : i;
    if (!strcmp(w, "today") || !strcmp(w, "hoy") || !strcmp(w, "hoje") || !strcmp(w, "tonight")) {
        *r = (when_range){today, today};
        return true;
    }
    if (!strcmp(w, "anteayer") || !strcmp(w, "anteontem")) {
        *r = (when_range){today - 2, today - 2};
        return true;
    }
    if (!strcmp(w, "yesterday") || !strcmp(w, "ayer") || !strcmp(w, "ontem")) {
        int64_t d = today - 1;
        if (i >= 2 && !strcmp(v[i - 1].w, "before") && !strcmp(v[i - 2].w, "day")) {
            d = today - 2;
            *a = i - 2;
        }
        *r = (when_range){d, d};
        return true;
    }
    int wd = find(w, weekdays);
    if (wd >= 0) {
        if (i > 0 && !strcmp(v[i - 1].w, "next")) return false;
        int64_t k = (weekday(today) - wd + 7) % 7;
        if (k == 0 && !prev_this) k = 7; /* on a Tuesday, "Tuesday" is the one before */
        if (i + 1 < n && !strcmp(v[i + 1].w, "feira")) *b = i + 1; /* segunda-feira */
        *r = (when_range){today - k, today - k};
        return true;
    }
    if (!strcmp(w, "week") || !strcmp(w, "semana")) {
        if (prev_last || next_last) {
            *r = (when_range){monday - 7, monday - 1};
            return true;
        }
        if (prev_this) {
            *r = (when_range){monday, today};
            return true;
        }
        return false;
    }
    if (!strcmp(w, "month") || !strcmp(w, "mes") || !strcmp(w, "mês")) {
        if (prev_last || next_last) {
            *r = month_range(tm == 1 ? ty - 1 : ty, tm == 1 ? 12 : tm - 1, today);
            return true;
        }
        if (prev_this) {
            *r = month_range(ty, tm, today);
            return true;
        }
        return false;
    }
    if (!strcmp(w, "year") || !strcmp(w, "año") || !strcmp(w, "ano")) {
        if (prev_last || next_last) {
            *r = (when_range){cm_when_day(ty - 1, 1, 1), cm_when_day(ty - 1, 12, 31)};
            return true;
        }
        if (prev_this) {
            *r = (when_range){cm_when_day(ty, 1, 1), today};
            return true;
        }
        return false;
    }
    /* "3 days ago", "a week ago"; "hace 3 días", "há 3 dias" */
    int num = number(v, n, i);
    if (num > 0 && num <= 400 && i + 1 < n) {
        const char *u = v[i + 1].w;
        bool days = !strcmp(u, "day") || !strcmp(u, "days") || !strcmp(u, "días") ||
                    !strcmp(u, "dias") || !strcmp(u, "dia") || !strcmp(u, "día");
        bool weeks = !strcmp(u, "week") || !strcmp(u, "weeks") || !strcmp(u, "semanas");
        bool ago = i + 2 < n && !strcmp(v[i + 2].w, "ago");
        bool hace = i > 0 && (!strcmp(v[i - 1].w, "hace") || !strcmp(v[i - 1].w, "há") ||
                              !strcmp(v[i - 1].w, "ha"));
        if ((days || weeks) && (ago || hace)) {
            *a = hace ? i - 1 : i;
            *b = ago ? i + 2 : i + 1;
            int64_t d = today - (int64_t)num * (weeks ? 7 : 1);
            *r = weeks ? (when_range){d - 3, d + 3 > today ? today : d + 3} : (when_range){d, d};
            return true;
        }
    }
    int m = find(w, months);
    if (m < 0) return false;
    m++;
    /* a day number beside it: "May 4", "4 May", "4th of May", "4 de mayo" */
    int day = -1, year = 0;
    size_t lo = i, hi = i;
    if (i + 1 < n && v[i + 1].num >= 1 && v[i + 1].num <= 31) {
        day = v[i + 1].num;
        hi = i + 1;
    } else if (i >= 1 && v[i - 1].num >= 1 && v[i - 1].num <= 31) {
        day = v[i - 1].num;
        lo = i - 1;
    } else if (i >= 2 && v[i - 2].num >= 1 && v[i - 2].num <= 31 &&
               (!strcmp(v[i - 1].w, "of") || !strcmp(v[i - 1].w, "de"))) {
        day = v[i - 2].num;
        lo = i - 2;
    }
    size_t y = hi + 1;
    if (y < n && (!strcmp(v[y].w, "de") || !strcmp(v[y].w, "of"))) y++;
    if (y < n && v[y].num >= 1900 && v[y].num <= 2999) {
        year = v[y].num;
        hi = y;
    }
    if (day < 0 && !full_month(w)) return false;
    if (day < 0 && !strcmp(w, "may") && !year) { /* "may" the verb, unless "in May" */
        static const char *const ctx[] = {"in|since|during|early|late|mid|of|until", NULL};
        if (!(i > 0 && is(v, n, i - 1, ctx)) && !prev_last) return false;
    }
    *a = prev_last || prev_this ? CM_MIN(lo, i - 1) : lo;
    *b = hi;
    if (day < 0) {
        *r = month_range(year, m, today);
        if (prev_last && !year) *r = month_range(ty - 1 + (m < tm), m, today);
        return r->first <= r->last;
    }
    if (!year) year = cm_when_day(ty, m, 1) + day - 1 > today ? ty - 1 : ty;
    if (day > month_days(year, m)) return false;
    int64_t d = cm_when_day(year, m, day);
    *r = (when_range){d, d};
    return d <= today;
}

bool cm_when_find(const char *q, size_t n, int64_t today, char *rest, when_range *out)
{
    word v[MAX_WORDS];
    for (size_t i = 0; i < n; i++) {
        int64_t d;
        size_t len;
        if (iso_at(q, n, i, &d, &len) && d <= today) {
            memcpy(rest, q, n);
            memset(rest + i, ' ', len);
            rest[n] = 0;
            *out = (when_range){d, d};
            return true;
        }
    }
    size_t nw = words_of(q, n, v, MAX_WORDS);
    for (size_t i = 0; i < nw; i++) {
        size_t a, b;
        when_range r;
        if (!match_at(v, nw, i, today, &r, &a, &b)) continue;
        memcpy(rest, q, n);
        memset(rest + v[a].start, ' ', v[b].end - v[a].start);
        rest[n] = 0;
        *out = r;
        return true;
    }
    return false;
}

bool cm_when_asks(const char *q, size_t n)
{
    static const char *const when[] = {"when|cuándo|cuando|quando", NULL};
    static const char *const which[] = {"what|which|qué|que|cuál|qual", NULL};
    static const char *const unit[] = {
        "year|month|day|date|week|años|año|mes|día|semana|ano|mês|dia", NULL};
    static const char *const how_many[] = {"cuántos|cuántas|quantos|quantas", NULL};
    static const char *const units[] = {
        "years|months|days|weeks|años|meses|días|semanas|anos|dias", NULL};
    word v[3];
    size_t k = words_of(q, n, v, 3);
    if (!k) return false;
    if (find(v[0].w, when) >= 0) return true;
    if (k >= 2 && find(v[0].w, which) >= 0 && find(v[1].w, unit) >= 0) return true;
    if (k >= 2 && find(v[0].w, how_many) >= 0 && find(v[1].w, units) >= 0) return true;
    return k >= 3 && !strcmp(v[0].w, "how") && !strcmp(v[1].w, "many") && find(v[2].w, units) >= 0;
}

/* Whether the word at v[i] (of n) speaks of a time. */
static bool time_word(const word *v, size_t n, size_t i)
{
    static const char *const rel[] = {
        "today|tonight|tomorrow|yesterday|hoy|mañana|ayer|hoje|amanhã|ontem|weekend", NULL};
    static const char *const unit[] = {"week|weeks|month|months|year|years|semana|mes|mês", NULL};
    static const char *const around[] = {"last|next|ago|pasado|pasada|passado|passada|próximo",
                                         NULL};
    const char *w = v[i].w;
    if (find(w, rel) >= 0 || find(w, weekdays) >= 0) return true;
    if (find(w, months) >= 0) {
        bool beside = (i + 1 < n && v[i + 1].num > 0) || (i > 0 && v[i - 1].num > 0);
        return beside || (full_month(w) && strcmp(w, "may") != 0);
    }
    if (find(w, unit) >= 0)
        return (i > 0 && find(v[i - 1].w, around) >= 0) || (i + 1 < n && find(v[i + 1].w, around) >= 0);
    const char *suf = w;
    while (*suf >= '0' && *suf <= '9')
        suf++;
    if (suf > w && suf - w <= 2 && (!strcmp(suf, "am") || !strcmp(suf, "pm") || !strcmp(suf, "h")))
        return true; /* 6pm, 9am, 18h */
    if (v[i].num >= 0) { /* 6 pm, 18:30 (18 then 30), 2023 */
        if (i + 1 < n && (!strcmp(v[i + 1].w, "am") || !strcmp(v[i + 1].w, "pm"))) return true;
        if (v[i].num >= 1900 && v[i].num <= 2099 && strlen(w) == 4) return true;
        if (i + 1 < n && v[i + 1].start == v[i].end + 1 && v[i].num <= 24 &&
            v[i + 1].num >= 0 && v[i + 1].num < 60 && strlen(v[i + 1].w) == 2)
            return true; /* hh:mm (the separator is one byte) */
    }
    return false;
}

bool cm_when_mentions(const char *text, size_t n)
{
    word v[MAX_WORDS];
    for (size_t line = 0; line < n;) {
        const char *nl = memchr(text + line, '\n', n - line);
        size_t end = nl ? (size_t)(nl - text) : n;
        if (text[line] != '#') { /* headings (a file's date, a session's time) say nothing */
            for (size_t at = line; at < end;) {
                size_t nw = words_of(text + at, end - at, v, MAX_WORDS);
                if (!nw) break;
                for (size_t i = 0; i < nw; i++)
                    if (time_word(v, nw, i)) return true;
                at += nw < MAX_WORDS ? end - at : v[nw - 1].start;
            }
        }
        line = end + 1;
    }
    return false;
}
