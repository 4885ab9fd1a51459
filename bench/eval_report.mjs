// eval_report.mjs — turns make eval's results.jsonl into Markdown tables (on
// stdout) and recall@k plots (gnuplot SVG: OUTDIR/quality-locomo.svg and
// OUTDIR/quality-scifact.svg; the data files go to WORKDIR).
// Usage: node bench/eval_report.mjs RESULTS_JSONL WORKDIR OUTDIR
import { readFileSync, writeFileSync } from "node:fs";
import { execFileSync } from "node:child_process";

const [file, work, outdir] = process.argv.slice(2);
const rows = readFileSync(file, "utf8").trim().split("\n").map((l) => JSON.parse(l));
const label = {
  keyword: "keyword-only, porter (default)",
  "keyword-unicode61": "keyword-only, unicode61",
  "keyword-trigram": "keyword-only, trigram",
  static: "hybrid static, minmax 0.005/0.995 (its default)",
  "static-minmax-0.02": "hybrid static, minmax 0.02/0.98",
  "static-minmax-0.05": "hybrid static, minmax 0.05/0.95",
  "static-weighted": "hybrid static, weighted 0.7/0.3 (QuantumClaw's merge)",
  "static-minmax-0.1": "hybrid static, minmax 0.1/0.9",
  "static-minmax-0.2": "hybrid static, minmax 0.2/0.8",
  "static-rrf-0.2": "hybrid static, rrf 0.2/0.8",
  fake: "hybrid fake server, weighted 0.7/0.3",
  "fake-minmax-0.2": "hybrid fake server, minmax 0.2/0.8",
  qmd: "QMD `search` (chunk-sized window)",
  "qmd-file": "QMD `search` (whole file)",
};
const f3 = (x) => x.toFixed(3);
const out = [];
const loc = rows.filter((r) => r.dataset === "locomo10");
out.push("LoCoMo, categories 1-4 (1,536 questions): evidence recall@k, MRR, recall@5 by category", "",
  "| system, mode | R@1 | R@3 | R@5 | R@10 | MRR | R@5 multi-hop | R@5 temporal | R@5 open-domain | R@5 single-hop |",
  "|---|---|---|---|---|---|---|---|---|---|");
for (const r of loc)
  out.push(`| ${label[r.mode] ?? r.mode} | ${[1, 3, 5, 10].map((k) => f3(r.all[`recall@${k}`])).join(" | ")} | ` +
    `${f3(r.all.mrr)} | ${[1, 2, 3, 4].map((c) => f3(r[`cat${c}`]["recall@5"])).join(" | ")} |`);
const sci = rows.filter((r) => r.dataset === "scifact");
out.push("", "SciFact, 300 test queries", "", "| system, mode | nDCG@10 | R@10 | R@100 |", "|---|---|---|---|");
for (const r of sci)
  out.push(`| ${r.mode === "qmd" ? "QMD `search`" : label[r.mode] ?? r.mode} | ${f3(r["ndcg@10"])} | ${f3(r["recall@10"])} | ${f3(r["recall@100"])} |`);
console.log(out.join("\n"));

// One data block per mode: "k recall" lines, blocks separated by two blank lines.
// A dataset the run left out (EVAL_DATA) has no plot: gnuplot refuses an empty one.
const plot = (name, set, ks, title, xlabel, logx) => {
  if (!set.length) return;
  const data = `${work}/quality-${name}.dat`;
  writeFileSync(data, set.map((r) => ks.map((k) => {
    const v = r.dataset === "scifact" ? r[`recall@${k}`] : r.all[`recall@${k}`];
    return `${k} ${v}`;
  }).join("\n")).join("\n\n\n") + "\n");
  const lines = set.map((r, i) =>
    `'${data}' index ${i} with linespoints title "${(r.dataset === "scifact" && r.mode === "qmd" ? "QMD search" : label[r.mode] ?? r.mode).replace(/[`"]/g, "")}"`);
  const script = [
    "set terminal svg size 900,560 dynamic font 'sans,12'",
    `set output '${outdir}/quality-${name}.svg'`,
    `set title "${title}"`, `set xlabel "${xlabel}"`, "set ylabel 'recall'",
    "set key bottom right", "set grid", logx ? "set logscale x" : "",
    "set yrange [0:1]", `plot ${lines.join(", ")}`,
  ].join("\n");
  execFileSync("gnuplot", [], { input: script });
};
plot("locomo", loc, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], "LoCoMo evidence recall@k (categories 1-4)", "k (answers)", false);
plot("scifact", sci, [1, 2, 3, 5, 10, 20, 30, 50, 100], "SciFact recall@k (300 test queries)", "k (documents)", true);
