// eval_locomo.mjs — retrieval quality on LoCoMo (../shared/data/locomo): each
// of the 10 conversations becomes a workspace (memory/YYYY-MM-DD.md per session
// date, sessions of one day sharing the file in order, one line per turn
// "**Speaker** (D3:12): text", an empty MEMORY.md); every question of
// categories 1-4 goes through `clawmem search --json`; evidence recall@k (the
// share of a question's evidence turns inside the returned chunks' line
// ranges) and MRR of the first hit, overall and by category.
// Usage: node bench/eval_locomo.mjs CLAWMEM WORKDIR MODE [CONFIG_JSON]
//   MODE names the run in the output; CONFIG_JSON is the quantumclaw.json text.
import { readFileSync, writeFileSync, mkdirSync, rmSync } from "node:fs";
import { execFileSync } from "node:child_process";

const [bin, work, mode, config = "{}"] = process.argv.slice(2);
const data = JSON.parse(readFileSync(new URL("../../shared/data/locomo/locomo10.json", import.meta.url)));
const months = { January: 1, February: 2, March: 3, April: 4, May: 5, June: 6, July: 7, August: 8,
  September: 9, October: 10, November: 11, December: 12 };
const day = (s) => {
  const m = /(\d+) (\w+),? (\d{4})/.exec(s);
  return `${m[3]}-${String(months[m[2]]).padStart(2, "0")}-${m[1].padStart(2, "0")}`;
};
const norm = (id) => id.replace(/^D(\d+):0*(\d+)$/, "D$1:$2");
const K = [1, 3, 5, 10];
const tot = {}, cnt = {};
const add = (cat, key, v) => { tot[cat] ??= {}; tot[cat][key] = (tot[cat][key] ?? 0) + v; };
for (const [ci, c] of data.entries()) {
  const ws = `${work}/c${ci}`, state = `${work}/c${ci}-state-${mode}`;
  rmSync(ws, { recursive: true, force: true });
  rmSync(state, { recursive: true, force: true });
  mkdirSync(`${ws}/memory`, { recursive: true });
  writeFileSync(`${ws}/MEMORY.md`, "");
  writeFileSync(`${work}/qc-${mode}.json`, config);
  const files = {}, where = {}; // file -> lines; dia_id -> [file, line]
  const conv = c.conversation;
  for (let s = 1; conv[`session_${s}`]; s++) {
    const f = `memory/${day(conv[`session_${s}_date_time`])}.md`;
    files[f] ??= [`# ${f.slice(7, 17)}`];
    files[f].push("", `## Session ${s} (${conv[`session_${s}_date_time`]})`, "");
    for (const t of conv[`session_${s}`]) {
      files[f].push(`**${t.speaker}** (${t.dia_id}): ${t.text.replace(/\n/g, " ")}`);
      where[norm(t.dia_id)] = [f, files[f].length];
    }
  }
  for (const [f, lines] of Object.entries(files)) writeFileSync(`${ws}/${f}`, lines.join("\n") + "\n");
  const base = ["--workspace", ws, "--state-dir", state, "--config", `${work}/qc-${mode}.json`];
  execFileSync(bin, [...base, "index"], { stdio: "ignore" });
  for (const q of c.qa) {
    if (!(q.category >= 1 && q.category <= 4)) continue;
    const ev = q.evidence.flatMap((e) => e.split(/[;\s]+/)).filter(Boolean).map(norm).filter((e) => where[e]);
    if (!ev.length) continue;
    const out = JSON.parse(execFileSync(bin, [...base, "search", q.question, "--json", "--no-sync",
      "--max-results", "10", "--min-score", "0"], { encoding: "utf8" }));
    const res = out.results;
    const inside = (r, e) => where[e][0] === r.path && where[e][1] >= r.startLine && where[e][1] <= r.endLine;
    let first = 0;
    for (let i = 0; i < res.length && !first; i++) if (ev.some((e) => inside(res[i], e))) first = i + 1;
    for (const cat of ["all", `cat${q.category}`]) {
      cnt[cat] = (cnt[cat] ?? 0) + 1;
      for (const k of K) add(cat, `recall@${k}`, ev.filter((e) => res.slice(0, k).some((r) => inside(r, e))).length / ev.length);
      add(cat, "mrr", first ? 1 / first : 0);
    }
  }
}
const table = {};
for (const [cat, v] of Object.entries(tot)) {
  table[cat] = { questions: cnt[cat] };
  for (const [k, x] of Object.entries(v)) table[cat][k] = +(x / cnt[cat]).toFixed(4);
}
console.log(JSON.stringify({ dataset: "locomo10", mode, categories: "1-4", ...table }));
