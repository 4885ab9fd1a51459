#!/usr/bin/env bash
# bench/pg.sh — the PostgreSQL store against the SQLite store in one run, on a
# private PostgreSQL cluster (scripts/pg-test-cluster.sh): the tldr corpus
# indexed and searched in-process by bench_pair, both stores in one process
# and measured interleaved (rounds and passes that take turns, so that the
# machine's load hits both alike: full index, no-op and 1% resync, keyword
# search p50/p95/p99 as medians over the passes, and the ratios), then
# retrieval quality (SciFact nDCG@10, LoCoMo recall@5, keyword search with
# the default porter tokenizer) over each. Prints one JSON object.
#   CLAWMEM_BENCH_TARBALL  the tldr corpus (default ../shared/data/corpora/tldr.tar.gz)
#   CLAWMEM_DATA           LoCoMo and SciFact (default ../shared/data)
#   CLAWMEM_BENCH_PG_EVAL=0  skip the quality part
#   CLAWMEM_BENCH_ROUNDS   full index and 1% resync rounds per store (3)
#   CLAWMEM_BENCH_PASSES   search passes over the queries per store (3)
# Usage: bench/pg.sh [BUILD_DIR]   (needs BUILD_DIR/clawmem and bench_pair)
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
root=$PWD
build=${1:-build}
work=$root/$build/bench-pg
tarball=${CLAWMEM_BENCH_TARBALL:-$root/../shared/data/corpora/tldr.tar.gz}
data=${CLAWMEM_DATA:-$root/../shared/data}
say() { printf 'bench-pg: %s\n' "$*" >&2; }

if [[ -z ${CLAWMEM_TEST_PG_DSN:-} ]]; then # run again beside a private cluster
  exec scripts/pg-test-cluster.sh "$0" "$@"
fi
[[ -r $tarball ]] || { say "corpus not found: $tarball (set CLAWMEM_BENCH_TARBALL)"; exit 1; }
rm -rf "$work"
mkdir -p "$work"
# One copy of the corpus per store: bench_pair appends to 1% of the files.
for s in sqlite pg; do
  mkdir -p "$work/ws-$s/memory" "$work/state-$s"
  tar -xzf "$tarball" -C "$work/ws-$s/memory"
done
# The queries of bench/run.sh: each 150th page's command name, and with the
# first word of its description.
queries=$work/queries.txt
find "$work/ws-sqlite/memory" -name '*.md' | sort | awk 'NR % 150 == 0' | while read -r f; do
  name=$(sed -n 's/^# //p' "$f" | head -n1)
  word=$(sed -n 's/^> //p' "$f" | head -n1 | awk '{print $1}' | tr -d '.,:;()`"')
  [[ -n $name ]] || continue
  printf '%s\n' "$name"
  [[ -n $word ]] && printf '%s %s\n' "$name" "$word"
done >"$queries"
for s in sqlite pg; do
  (cd "$work/ws-$s/memory" && find . -name '*.md' | sort | awk 'NR % 100 == 0' |
    sed "s|^\.|$work/ws-$s/memory|") >"$work/changed-$s.txt"
done
pgstore="store:{driver:'postgres',dsn:'$CLAWMEM_TEST_PG_DSN'}"
echo "{agents:{defaults:{memorySearch:{$pgstore}}}}" >"$work/state-pg/clawmem.json"
say "$(wc -l <"$queries") queries; sqlite and postgres: index, resync, search, interleaved"
pair=$("$build/bench_pair" "$work/ws-sqlite" "$work/state-sqlite" "$work/changed-sqlite.txt" \
  "$work/ws-pg" "$work/state-pg" "$work/changed-pg.txt" "$queries")
say "pair: $pair"
pgbytes=$(psql "$CLAWMEM_TEST_PG_DSN" -Atc "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c WHERE c.relname LIKE 'clawmem\_%' AND c.relkind = 'r'" 2>/dev/null || echo null)

quality=null
if [[ ${CLAWMEM_BENCH_PG_EVAL:-1} != 0 && -f $data/locomo/locomo10.json && -f $data/scifact/corpus.jsonl ]]; then
  export CLAWMEM_DATA=$data
  q=$work/quality.jsonl
  : >"$q"
  for ds in scifact locomo; do
    say "$ds: sqlite"
    node "bench/eval_$ds.mjs" "$build/clawmem" "$work" keyword-sqlite "{}" >>"$q"
    say "$ds: postgres"
    node "bench/eval_$ds.mjs" "$build/clawmem" "$work" keyword-pg \
      "{agents:{defaults:{memorySearch:{$pgstore}}}}" >>"$q" 2> >(grep -v "clawmem's own setting" >&2)
  done
  quality=$(node -e '
    const rows = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").map(JSON.parse);
    const o = {};
    for (const r of rows) {
      const s = r.mode.endsWith("-pg") ? "postgres" : "sqlite";
      o[s] ??= {};
      if (r.dataset === "scifact") o[s]["scifact_ndcg@10"] = r["ndcg@10"];
      else o[s]["locomo_recall@5"] = r.all["recall@5"];
    }
    console.log(JSON.stringify(o));' "$q")
fi
node -e '
  const p = JSON.parse(process.argv[1]);
  console.log(JSON.stringify({corpus: "tldr", queries: p.queries, rounds: p.rounds, passes: p.passes,
    sqlite: p.a, postgres: p.b, ratio: p.ratio, postgres_table_bytes: JSON.parse(process.argv[2]),
    quality: JSON.parse(process.argv[3])}));' "$pair" "${pgbytes:-null}" "$quality"
