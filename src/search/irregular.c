/*
 * irregular.c — the table of irregular.h: one row a verb, base form first,
 * then its simple past and past participle (NULL when it is the past, or
 * when the form is mostly another word). A linear scan: 84 rows, a few
 * hundred short comparisons a keyword.
 */
#include "irregular.h"

static const char *const verbs[][3] = {
    {"become", "became", NULL},      {"begin", "began", "begun"},     {"bend", "bent", NULL},
    {"bind", "bound", NULL},         {"blow", "blew", "blown"},       {"break", "broke", "broken"},
    {"bring", "brought", NULL},      {"build", "built", NULL},        {"buy", "bought", NULL},
    {"catch", "caught", NULL},       {"choose", "chose", "chosen"},   {"come", "came", NULL},
    {"deal", "dealt", NULL},         {"dig", "dug", NULL},            {"draw", "drew", "drawn"},
    {"drink", "drank", "drunk"},     {"drive", "drove", "driven"},    {"eat", "ate", "eaten"},
    {"fall", "fell", "fallen"},      {"feed", "fed", NULL},           {"feel", "felt", NULL},
    {"fight", "fought", NULL},       {"find", "found", NULL},         {"fly", "flew", "flown"},
    {"forget", "forgot", "forgotten"}, {"forgive", "forgave", "forgiven"},
    {"freeze", "froze", "frozen"},   {"get", "got", "gotten"},        {"give", "gave", "given"},
    {"go", "went", "gone"},          {"grow", "grew", "grown"},       {"hang", "hung", NULL},
    {"hear", "heard", NULL},         {"hide", "hid", "hidden"},       {"hold", "held", NULL},
    {"keep", "kept", NULL},          {"know", "knew", "known"},       {"lead", "led", NULL},
    {"leave", "left", NULL},         {"lend", "lent", NULL},          {"light", "lit", NULL},
    {"lose", "lost", NULL},          {"make", "made", NULL},          {"mean", "meant", NULL},
    {"meet", "met", NULL},           {"overcome", "overcame", NULL},  {"pay", "paid", NULL},
    {"ride", "rode", "ridden"},      {"ring", "rang", "rung"},        {"rise", "risen", NULL},
    {"run", "ran", NULL},            {"see", "saw", "seen"},          {"seek", "sought", NULL},
    {"sell", "sold", NULL},          {"send", "sent", NULL},          {"shake", "shook", "shaken"},
    {"shoot", "shot", NULL},         {"show", "shown", NULL},         {"sing", "sang", "sung"},
    {"sink", "sank", "sunk"},        {"sit", "sat", NULL},            {"sleep", "slept", NULL},
    {"slide", "slid", NULL},         {"speak", "spoke", "spoken"},    {"spend", "spent", NULL},
    {"spin", "spun", NULL},          {"stand", "stood", NULL},        {"steal", "stole", "stolen"},
    {"stick", "stuck", NULL},        {"strike", "struck", NULL},      {"swim", "swam", "swum"},
    {"take", "took", "taken"},       {"teach", "taught", NULL},       {"tear", "tore", "torn"},
    {"tell", "told", NULL},          {"think", "thought", NULL},      {"throw", "threw", "thrown"},
    {"undergo", "underwent", "undergone"}, {"understand", "understood", NULL},
    {"wake", "woke", "woken"},       {"wear", "wore", "worn"},        {"win", "won", NULL},
    {"withdraw", "withdrew", "withdrawn"}, {"write", "wrote", "written"},
};

size_t cm_irregular_forms(const char *w, size_t len, const char **out, size_t cap)
{
    for (size_t r = 0; r < sizeof verbs / sizeof verbs[0]; r++) {
        int hit = -1;
        for (int c = 0; c < 3 && hit < 0; c++)
            if (verbs[r][c] && strlen(verbs[r][c]) == len && memcmp(verbs[r][c], w, len) == 0)
                hit = c;
        if (hit < 0) continue;
        size_t n = 0;
        for (int c = 0; c < 3 && n < cap; c++)
            if (c != hit && verbs[r][c]) out[n++] = verbs[r][c];
        return n;
    }
    return 0;
}
