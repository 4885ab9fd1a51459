/*
 * stopwords.c — the function words a question is made of, in the languages
 * QuantumClaw 2026.3.22's keyword extraction covers (English, Spanish,
 * Portuguese, Arabic, Chinese, Japanese, Korean), plus the English pronoun,
 * auxiliary and clitic forms its list lacks. Lower-case; one array per
 * language, looked up linearly (a query has at most 64 tokens).
 */
#include "stopwords.h"

static const char *const en[] = {
    "there",   "here",       "than",    "too",       "very",       "so",         "such",
    "other",   "some",       "more",    "most",      "own",        "same",       "only",
    "not",     "no",         "nor",     "up",        "out",        "off",        "down",
    "further", "once",       "few",     "likely",    "considered", "kind",       "any",
    "many",    "much",       "ever",    "yet",       "else",       "a",          "about",
    "above",   "after",      "again",   "ago",       "all",        "also",       "am",
    "an",      "and",        "any",     "anything",  "are",        "as",         "at",
    "be",      "been",       "before",  "being",     "below",      "between",    "both",
    "but",     "by",         "can",     "could",     "d",          "did",        "do",
    "does",    "doing",      "during",  "each",      "earlier",    "everything", "find",
    "for",     "from",       "get",     "give",      "had",        "has",        "have",
    "having",  "he",         "help",    "her",       "hers",       "herself",    "him",
    "himself", "his",        "how",     "i",         "if",         "in",         "into",
    "is",      "it",         "its",     "itself",    "just",       "later",      "ll",
    "m",       "me",         "might",   "my",        "myself",     "nothing",    "now",
    "of",      "on",         "or",      "our",       "ours",       "over",       "please",
    "re",      "recently",   "s",       "she",       "should",     "show",       "something",
    "stuff",   "t",          "tell",    "that",      "the",        "their",      "theirs",
    "them",    "themselves", "then",    "these",     "they",       "thing",      "things",
    "this",    "those",      "through", "to",        "today",      "tomorrow",   "under",
    "us",      "ve",         "was",     "we",        "were",       "what",       "when",
    "where",   "which",      "while",   "who",       "whom",       "whose",      "why",
    "will",    "with",       "would",   "yesterday", "you",        "your",       "yours",
    "because", "may"};

static const char *const es[] = {"a",       "ahora",    "antes",
                                 "ayer",    "ayuda",    "como",
                                 "con",     "cuando",   "cuándo",
                                 "cómo",    "de",       "del",
                                 "despues", "después",  "donde",
                                 "dónde",   "el",       "ella",
                                 "ellas",   "ellos",    "en",
                                 "entre",   "es",       "esa",
                                 "ese",     "esta",     "estar",
                                 "este",    "favor",    "fue",
                                 "fueron",  "haber",    "hacer",
                                 "hoy",     "la",       "las",
                                 "los",     "mañana",   "me",
                                 "mi",      "nosotras", "nosotros",
                                 "o",       "para",     "pero",
                                 "por",     "porque",   "porqué",
                                 "que",     "qué",      "recientemente",
                                 "ser",     "si",       "sobre",
                                 "son",     "tener",    "tu",
                                 "tus",     "un",       "una",
                                 "unas",    "unos",     "usted",
                                 "ustedes", "y",        "yo"};

static const char *const pt[] = {
    "a",     "agora",  "ajuda",  "amanhã", "antes", "as",    "com",
    "como",  "da",     "de",     "depois", "do",    "e",     "ela",
    "elas",  "ele",    "eles",   "em",     "entre", "essa",  "esse",
    "esta",  "estar",  "este",   "eu",     "fazer", "favor", "foi",
    "foram", "hoje",   "mas",    "me",     "meu",   "minha", "nos",
    "nós",   "o",      "onde",   "ontem",  "os",    "ou",    "para",
    "por",   "porque", "porquê", "quando", "que",   "quê",   "recentemente",
    "se",    "ser",    "sobre",  "são",    "ter",   "um",    "uma",
    "umas",  "uns",    "você",   "vocês",  "é"};

static const char *const ar[] = {
    "ال",    "و",    "أو",   "لكن",    "ثم",  "بل",    "أنا",  "نحن",  "هو",   "هي",   "هم",
    "هذا",   "هذه",  "ذلك",  "تلك",    "هنا", "هناك",  "من",   "إلى",  "الى",  "في",   "على",
    "عن",    "مع",   "بين",  "ل",      "ب",   "ك",     "كان",  "كانت", "يكون", "تكون", "صار",
    "أصبح",  "يمكن", "ممكن", "بالأمس", "امس", "اليوم", "غدا",  "الآن", "قبل",  "بعد",  "مؤخرا",
    "لماذا", "كيف",  "ماذا", "متى",    "أين", "هل",    "فضلك", "فضلا", "ساعد"};

/* Chinese and Japanese words: dropped where a CJK run holds them. */
static const char *const zh_ja[] = {
    "我们",   "你们",   "他们",   "这个", "那个", "这些",   "那些", "可以",  "但是",
    "因为",   "所以",   "如果",   "虽然", "之前", "以前",   "之后", "以后",  "刚才",
    "现在",   "昨天",   "今天",   "明天", "最近", "东西",   "事情", "什么",  "哪个",
    "哪些",   "怎么",   "为什么", "多少", "帮忙", "告诉",   "これ", "それ",  "あれ",
    "この",   "その",   "あの",   "ここ", "そこ", "あそこ", "する", "した",  "して",
    "です",   "ます",   "いる",   "ある", "なる", "できる", "こと", "もの",  "ため",
    "そして", "しかし", "また",   "でも", "から", "まで",   "より", "だけ",  "なぜ",
    "どう",   "いつ",   "どこ",   "どれ", "昨日", "今日",   "明日", "さっき"};

/* Single Chinese characters that are grammar, not content, wherever they
 * stand in a run (other single-character stop words, such as 是 or 会, are
 * parts of content words too often: 会议, 是否). */
static const char *const zh_particles[] = {"的", "了", "着", "吗", "呢",
                                           "吧", "啊", "呀", "嘛", "啦"};

/* Whole Chinese or Japanese runs that are stop words on their own. */
static const char *const zh_ja_alone[] = {
    "我", "你", "他", "她", "它", "这", "那", "过", "得", "地", "是", "有", "在",
    "被", "把", "给", "让", "用", "到", "去", "来", "做", "说", "看", "找", "想",
    "要", "能", "会", "和", "与", "或", "但", "而", "也", "都", "就", "还", "又",
    "再", "才", "只", "事", "请", "帮", "の", "何", "誰", "今", "前", "後"};

static const char *const ko[] = {
    "은",     "는",     "이",     "가",     "을",   "를",     "의",   "에",     "에서",   "로",
    "으로",   "와",     "과",     "도",     "만",   "까지",   "부터", "한테",   "에게",   "께",
    "처럼",   "같이",   "보다",   "마다",   "밖에", "대로",   "나",   "나는",   "내가",   "나를",
    "너",     "우리",   "저",     "저희",   "그",   "그녀",   "그들", "이것",   "저것",   "그것",
    "여기",   "저기",   "거기",   "있다",   "없다", "하다",   "되다", "이다",   "아니다", "주다",
    "오다",   "가다",   "것",     "거",     "등",   "수",     "때",   "곳",     "중",     "분",
    "잘",     "더",     "또",     "매우",   "정말", "아주",   "많이", "너무",   "좀",     "그리고",
    "하지만", "그래서", "그런데", "그러나", "또는", "그러면", "왜",   "어떻게", "뭐",     "언제",
    "어디",   "누구",   "무엇",   "어떤",   "어제", "오늘",   "내일", "최근",   "지금",   "아까",
    "나중",   "전에",   "제발",   "부탁"};

/* Korean particles that end a word, longest first. */
static const char *const ko_particles[] = {"에서", "으로", "에게", "한테", "처럼", "같이", "보다",
                                           "까지", "부터", "마다", "밖에", "대로", "은",   "는",
                                           "이",   "가",   "을",   "를",   "의",   "에",   "로",
                                           "와",   "과",   "도",   "만"};

#define N(a) (sizeof(a) / sizeof *(a))

static bool in(const char *const *list, size_t n, const char *s, size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(list[i]) == len && memcmp(list[i], s, len) == 0) return true;
    return false;
}

bool cm_stopword_is(const char *s, size_t len)
{
    return in(en, N(en), s, len) || in(es, N(es), s, len) || in(pt, N(pt), s, len) ||
           in(ar, N(ar), s, len) || in(ko, N(ko), s, len) || in(zh_ja, N(zh_ja), s, len) ||
           in(zh_ja_alone, N(zh_ja_alone), s, len) || in(zh_particles, N(zh_particles), s, len);
}

bool cm_stopword_question_opener(const char *s, size_t len)
{
    static const char *const q[] = {"what",  "which", "who",   "whom", "whose", "when",
                                    "where", "why",   "did",   "does", "do",    "is",
                                    "are",   "was",   "were",  "has",  "have",  "had",
                                    "can",   "could", "would", "will", "should"};
    return in(q, N(q), s, len);
}

bool cm_stopword_speech_verb(const char *s, size_t len)
{
    static const char *const v[] = {"say",       "says",     "said",      "mention",   "mentions",
                                    "mentioned", "describe", "describes", "described", "talk",
                                    "talks",     "talked",   "tell",      "tells",     "told",
                                    "share",     "shares",   "shared"};
    return in(v, N(v), s, len);
}

size_t cm_stopword_cjk_at(const char *s, size_t len)
{
    size_t best = 0;
    for (size_t i = 0; i < N(zh_ja); i++) {
        size_t l = strlen(zh_ja[i]);
        if (l > best && l <= len && memcmp(zh_ja[i], s, l) == 0) best = l;
    }
    for (size_t i = 0; i < N(zh_particles); i++) {
        size_t l = strlen(zh_particles[i]);
        if (l > best && l <= len && memcmp(zh_particles[i], s, l) == 0) best = l;
    }
    return best;
}

size_t cm_stopword_ko_particle(const char *s, size_t len)
{
    for (size_t i = 0; i < N(ko_particles); i++) {
        size_t l = strlen(ko_particles[i]);
        if (l < len && memcmp(ko_particles[i], s + len - l, l) == 0) return l;
    }
    return 0;
}
