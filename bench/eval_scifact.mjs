// eval_scifact.mjs — BEIR SciFact through clawmem (../shared/data/scifact):
// one Markdown file per abstract (the title as a heading), the 300 test
// queries through `clawmem search --json`, each document ranked at its best
// chunk; nDCG@10 and recall@100 with the binary relevance of qrels/test.tsv.
// Usage: node bench/eval_scifact.mjs CLAWMEM WORKDIR MODE [CONFIG_JSON]
import { readFileSync, writeFileSync, mkdirSync, rmSync } from "node:fs";
import { execFileSync } from "node:child_process";

const [bin, work, mode, config = "{}"] = process.argv.slice(2);
const dir = new URL("../../shared/data/scifact/", import.meta.url);
const ws = `${work}/scifact`, state = `${work}/scifact-state-${mode}`;
rmSync(ws, { recursive: true, force: true });
rmSync(state, { recursive: true, force: true });
mkdirSync(`${ws}/memory`, { recursive: true });
writeFileSync(`${ws}/MEMORY.md`, "");
writeFileSync(`${work}/qc-scifact-${mode}.json`, config);
for (const line of readFileSync(new URL("corpus.jsonl", dir), "utf8").split("\n")) {
  if (!line) continue;
  const d = JSON.parse(line);
  writeFileSync(`${ws}/memory/${d._id}.md`, `# ${d.title}\n\n${d.text}\n`);
}
const qrels = {};
for (const line of readFileSync(new URL("qrels/test.tsv", dir), "utf8").split("\n").slice(1)) {
  const [q, doc, score] = line.split("\t");
  if (q && Number(score) > 0) (qrels[q] ??= new Set()).add(doc);
}
const queries = {};
for (const line of readFileSync(new URL("queries.jsonl", dir), "utf8").split("\n"))
  if (line) { const q = JSON.parse(line); if (qrels[q._id]) queries[q._id] = q.text; }
const base = ["--workspace", ws, "--state-dir", state, "--config", `${work}/qc-scifact-${mode}.json`];
execFileSync(bin, [...base, "index"], { stdio: "ignore" });
let ndcg = 0, recall = 0, n = 0;
for (const [id, text] of Object.entries(queries)) {
  const out = JSON.parse(execFileSync(bin, [...base, "search", text, "--json", "--no-sync",
    "--max-results", "200", "--min-score", "0"], { encoding: "utf8" }));
  const docs = [];
  for (const r of out.results) {
    const doc = r.path.replace(/^memory\//, "").replace(/\.md$/, "");
    if (!docs.includes(doc)) docs.push(doc);
  }
  const rel = qrels[id];
  let dcg = 0, idcg = 0;
  docs.slice(0, 10).forEach((d, i) => { if (rel.has(d)) dcg += 1 / Math.log2(i + 2); });
  for (let i = 0; i < Math.min(10, rel.size); i++) idcg += 1 / Math.log2(i + 2);
  ndcg += dcg / idcg;
  recall += docs.slice(0, 100).filter((d) => rel.has(d)).length / rel.size;
  n++;
}
console.log(JSON.stringify({ dataset: "scifact", mode, queries: n,
  "ndcg@10": +(ndcg / n).toFixed(4), "recall@100": +(recall / n).toFixed(4) }));
