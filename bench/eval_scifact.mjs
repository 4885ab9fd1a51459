// eval_scifact.mjs — BEIR SciFact (../shared/data/scifact): one Markdown file
// per abstract (memory/<id>.md, the title as a heading), the 300 test queries
// through the system, each document ranked at its best answer (clawmem
// answers chunks, QMD whole files); nDCG@10 and recall@100 with the binary
// relevance of qrels/test.tsv, and the recall@k curve.
// Usage: node bench/eval_scifact.mjs SYSTEM WORKDIR MODE [CONFIG_JSON]
//   SYSTEM is a clawmem binary or "qmd" (see bench/eval_common.mjs).
import { readFileSync, writeFileSync, mkdirSync, rmSync, existsSync } from "node:fs";
import { system } from "./eval_common.mjs";

const [bin, work, mode, config = "{}"] = process.argv.slice(2);
const dir = `${process.env.CLAWMEM_DATA ?? new URL("../../shared/data", import.meta.url).pathname}/scifact/`;
if (!bin || !work || !mode) {
  console.error("usage: node bench/eval_scifact.mjs SYSTEM WORKDIR MODE [CONFIG_JSON]");
  process.exit(2);
}
if (!existsSync(`${dir}corpus.jsonl`)) {
  console.error(`eval_scifact: ${dir} is absent (see ../shared/data/README.md)`);
  process.exit(1);
}
const ws = `${work}/scifact`;
rmSync(ws, { recursive: true, force: true });
mkdirSync(`${ws}/memory`, { recursive: true });
writeFileSync(`${ws}/MEMORY.md`, "");
for (const line of readFileSync(`${dir}corpus.jsonl`, "utf8").split("\n")) {
  if (!line) continue;
  const d = JSON.parse(line);
  writeFileSync(`${ws}/memory/${d._id}.md`, `# ${d.title}\n\n${d.text}\n`);
}
const qrels = {};
for (const line of readFileSync(`${dir}qrels/test.tsv`, "utf8").split("\n").slice(1)) {
  const [q, doc, score] = line.split("\t");
  if (q && Number(score) > 0) (qrels[q] ??= new Set()).add(doc);
}
const queries = {};
for (const line of readFileSync(`${dir}queries.jsonl`, "utf8").split("\n"))
  if (line) { const q = JSON.parse(line); if (qrels[q._id]) queries[q._id] = q.text; }
const ids = Object.keys(queries);
// clawmem answers chunks: 200 of them give at least 100 distinct documents here.
const answers = system(bin, work, ws, `scifact-${mode}`, config)(ids.map((id) => queries[id]),
  bin === "qmd" ? 100 : 200);
const KS = [1, 2, 3, 5, 10, 20, 30, 50, 100];
let ndcg = 0;
const dump = []; // EVAL_DUMP=FILE: each query's nDCG@10 and first ten documents
const rec = Object.fromEntries(KS.map((k) => [k, 0]));
for (const [i, id] of ids.entries()) {
  const docs = [];
  for (const r of answers[i]) {
    const doc = r.path.replace(/^memory\//, "").replace(/\.md$/, "");
    if (!docs.includes(doc)) docs.push(doc);
  }
  const rel = qrels[id];
  let dcg = 0, idcg = 0;
  docs.slice(0, 10).forEach((d, j) => { if (rel.has(d)) dcg += 1 / Math.log2(j + 2); });
  for (let j = 0; j < Math.min(10, rel.size); j++) idcg += 1 / Math.log2(j + 2);
  ndcg += dcg / idcg;
  if (process.env.EVAL_DUMP) dump.push({ id, q: queries[id], ndcg: dcg / idcg, rel: [...rel], top: docs.slice(0, 10) });
  for (const k of KS) rec[k] += docs.slice(0, k).filter((d) => rel.has(d)).length / rel.size;
}
if (process.env.EVAL_DUMP) writeFileSync(process.env.EVAL_DUMP, dump.map((d) => JSON.stringify(d)).join("\n") + "\n");
const n = ids.length, out = { dataset: "scifact", mode, queries: n, "ndcg@10": +(ndcg / n).toFixed(4) };
for (const k of KS) out[`recall@${k}`] = +(rec[k] / n).toFixed(4);
console.log(JSON.stringify(out));
