/*
 * rank.h — the ranking pipeline of QuantumClaw's memory_search after the
 * candidates are scored: temporal decay → sort → MMR → minScore filter (with
 * the keyword second chance) → cut to maxResults. Pure functions over an
 * array of hits; no I/O.
 */
#ifndef CM_RANK_H
#define CM_RANK_H

#include "../base/common.h"

typedef struct search_hit {
    int64_t id;
    char *path, *source, *text; /* owned */
    int start_line, end_line;
    int64_t mtime_ns; /* of the file, for decay of undated files outside memory/ */
    double score;     /* the final score */
    double text_score, vector_score;
    bool has_text, has_vector;
} search_hit;

typedef struct rank_opts {
    double text_weight;
    double min_score;
    int max_results;
    bool decay;
    double half_life_days;
    int64_t now; /* unix seconds */
    bool mmr;
    double mmr_lambda;
} rank_opts;

/* Unions hits by chunk id (a chunk found by both sides becomes one hit with
 * both scores) and sets score = vector_weight·vector_score +
 * text_weight·text_score, a missing side counting 0. Returns the new count;
 * merged-away hits are released. */
size_t cm_rank_merge(search_hit *v, size_t n, double vector_weight, double text_weight);

/* The k of reciprocal-rank fusion (Cormack et al. 2009). */
#define RANK_RRF_K 60

/* Reciprocal-rank fusion: like cm_rank_merge, but each side scores a hit by
 * 1/(k + its rank on that side) (ranks from the order of v: each side's hits
 * arrive in rank order), and the sum is scaled by k + 1 so that a hit first
 * on both sides scores 1. text_score and vector_score hold the RRF terms. */
size_t cm_rank_merge_rrf(search_hit *v, size_t n, int k, double vector_weight, double text_weight);

/* Like cm_rank_merge, but each side's scores are first min-max normalised over
 * the hits holding that side (the best becomes 1, the worst 0; a side whose
 * scores are all equal gives 1), so that the weights act on comparable
 * spreads: BM25 scores crowd near 1, cosine similarities do not. text_score
 * and vector_score keep the raw scores. */
size_t cm_rank_merge_minmax(search_hit *v, size_t n, double vector_weight, double text_weight);

/* FTS5 bm25 rank → a 0..1 score: 1/(1+rank) for rank >= 0, r/(1+r) with
 * r = -rank for the negative ranks FTS5 produces (more relevant → higher). */
double cm_rank_bm25_score(double rank);

/* The decay multiplier e^(-ln2/halfLife · ageDays) for a hit: dated daily notes
 * (memory/YYYY-MM-DD.md) age from their date, MEMORY.md and other files under
 * memory/ are evergreen (1.0), anything else ages from its mtime. */
double cm_rank_decay_multiplier(const char *path, int64_t mtime_ns, int64_t now,
                                double half_life_days);

/* Reorders hits by Maximal Marginal Relevance: repeatedly picks the hit with
 * the best lambda·score − (1−lambda)·max Jaccard similarity to those picked.
 * Scores are already 0..1 and comparable, so they are used as they are
 * (QuantumClaw min-max normalises them, which gives the lowest candidate a
 * relevance of 0 whatever its score and breaks the seeds' own example).
 * Scores are not changed. */
cm_rc cm_rank_mmr(search_hit *v, size_t n, double lambda);

/* Token-set Jaccard similarity of two texts: lower-cased word tokens (a '.'
 * between digits joins, so an IP address or version is one token) plus CJK
 * unigrams and bigrams. Exposed for tests. */
double cm_rank_jaccard(const char *a, const char *b);

/* The factor a hit's score is ordered by when a better hit of the same file
 * precedes it (docs/QUALITY.md, issue 30: 0.87-0.92 did best on LoCoMo). */
#define RANK_SAME_FILE 0.9

/* Reorders hits sorted by score so that each file's second and later hits
 * rank as if their scores were factor × lower: the top k spread over more
 * files (a day's note or a session holds several chunks of one topic, and
 * the next file's best chunk often holds what they lack). Scores are not
 * changed (minScore still applies to them). On ENOMEM the order stands. */
cm_rc cm_rank_spread_files(search_hit *v, size_t n, double factor);

/* Runs decay, sort, spreading over files (without MMR), MMR, filter and cut in place; returns how many hits of v
 * remain at the front (the rest are released). */
size_t cm_rank_finish(search_hit *v, size_t n, const rank_opts *o);

void cm_search_hit_release(search_hit *h);

#endif
