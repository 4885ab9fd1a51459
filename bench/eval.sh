#!/usr/bin/env bash
# eval.sh — `make eval`: retrieval quality of clawmem in each of its modes and of
# the peer QMD on the same workspaces (LoCoMo and SciFact from ../shared/data),
# in one run. Writes WORKDIR/results.jsonl (one JSON object per dataset and
# mode), WORKDIR/tables.md and the recall@k plots docs/quality-locomo.svg and
# docs/quality-scifact.svg (gnuplot; WORKDIR's for a subset, below). Modes: keyword-only (the default
# porter, unicode61, trigram), hybrid with the static model (its default
# minmax 0.005, QuantumClaw's weighted merge, other weights) and with the
# loopback fake embedding server (hashed bag of words, provider openai), each
# with QuantumClaw's weighted merge and with clawmem.hybridMerge minmax / rrf.
# Usage: bench/eval.sh BUILD_DIR   (EVAL_QMD=0 skips QMD, ~12 of the ~25 minutes;
#   EVAL_MODES="keyword static" runs only those modes, EVAL_DATA=locomo only
#   that dataset: subsets for iterating, the tables then hold only them and
#   the plots go to WORKDIR/quality-*.svg, docs/ left as the last full run's)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
bin=$build/clawmem
work=$build/eval
say() { printf 'eval: %s\n' "$*" >&2; }
[[ -x $bin && -x $build/fake_embed_server ]] || { say "build $bin and $build/fake_embed_server first"; exit 1; }
data=${CLAWMEM_DATA:-../shared/data} # the shared data, outside the repository
[[ -f $data/locomo/locomo10.json && -f $data/scifact/corpus.jsonl ]] ||
  { say "$data/locomo and $data/scifact are needed (see its README.md; CLAWMEM_DATA names another place)"; exit 1; }
export CLAWMEM_DATA=$data
mkdir -p "$work"
model=$(cd "$work" && pwd)/models/clawmem-static-100d.bin
BUILD=$build scripts/install-static-model.sh "$model"

"$build/fake_embed_server" 256 >"$work/fake.url" &
fake_pid=$!
trap 'kill "$fake_pid" 2>/dev/null || true' EXIT
for _ in $(seq 50); do [[ -s $work/fake.url ]] && break; sleep 0.1; done
fake=$(cat "$work/fake.url")

ms() { echo "{agents:{defaults:{memorySearch:{$1}}},clawmem:{staticModel:'$model'$2}}"; }
static="provider:'static'"
fakep="provider:'openai',remote:{baseUrl:'$fake',apiKey:'k'}"
tok() { echo "store:{fts:{tokenizer:'$1'}}"; }
w() { echo "query:{hybrid:{vectorWeight:$1,textWeight:$(awk -v x="$1" 'BEGIN { print 1 - x }')}}"; }
modes=(
  "keyword|$(ms "" "")"
  "keyword-unicode61|$(ms "$(tok unicode61)" "")"
  "keyword-trigram|$(ms "$(tok trigram)" "")"
  "static|$(ms "$static" "")"
  "static-weighted|$(ms "$static" ",hybridMerge:'weighted'")"
  "static-minmax-0.02|$(ms "$static,$(w 0.02)" ",hybridMerge:'minmax'")"
  "static-minmax-0.05|$(ms "$static,$(w 0.05)" ",hybridMerge:'minmax'")"
  "static-minmax-0.1|$(ms "$static,$(w 0.1)" ",hybridMerge:'minmax'")"
  "static-minmax-0.2|$(ms "$static,$(w 0.2)" ",hybridMerge:'minmax'")"
  "static-rrf-0.2|$(ms "$static,$(w 0.2)" ",hybridMerge:'rrf'")"
  "fake|$(ms "$fakep" "")"
  "fake-minmax-0.2|$(ms "$fakep,$(w 0.2)" ",hybridMerge:'minmax'")"
)
out=$work/results.jsonl
: >"$out"
for ds in ${EVAL_DATA:-locomo scifact}; do
  for m in "${modes[@]}"; do
    [[ -z ${EVAL_MODES:-} || " $EVAL_MODES " == *" ${m%%|*} "* ]] || continue
    say "$ds ${m%%|*}"
    node "bench/eval_$ds.mjs" "$bin" "$work" "${m%%|*}" "${m#*|}" >>"$out"
  done
  if [[ ${EVAL_QMD:-1} != 0 ]]; then
    say "$ds qmd"
    node "bench/eval_$ds.mjs" qmd "$work" qmd >>"$out"
  fi
done
scripts/install-deps.sh --eval
# The plots in docs/ only from a full run (every mode on both datasets, with
# or without QMD, as docs/QUALITY.md's run); a subset's go to WORKDIR, so
# that docs never show part of the comparison.
plots=docs
sets=" ${EVAL_DATA:-locomo scifact} "
if [[ -n ${EVAL_MODES:-} || $sets != *" locomo "* || $sets != *" scifact "* ]]; then
  plots=$work
fi
node bench/eval_report.mjs "$out" "$work" "$plots" >"$work/tables.md"
say "tables in $work/tables.md, plots in $plots/quality-*.svg"
cat "$work/tables.md"
