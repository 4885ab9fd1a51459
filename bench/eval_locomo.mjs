// eval_locomo.mjs — retrieval quality on LoCoMo (../shared/data/locomo): each
// of the 10 conversations becomes a workspace (memory/YYYY-MM-DD.md per session
// date, sessions of one day sharing the file in order, one line per turn
// "**Speaker** (D3:12): text", an empty MEMORY.md); every question of
// categories 1-4 goes to the system; evidence recall@k (the share of a
// question's evidence turns inside the top-k answers' line ranges) and MRR of
// the first answer holding any evidence turn, overall and by category, and the
// recall@k curve for k = 1..10.
// Usage: node bench/eval_locomo.mjs SYSTEM WORKDIR MODE [CONFIG_JSON]
//   SYSTEM is a clawmem binary or "qmd"; MODE names the run in the output;
//   CONFIG_JSON is clawmem's quantumclaw.json text.
// QMD answers whole files with the line of its snippet. It is scored twice:
// "qmd" gives each answer the lines around that line up to a clawmem chunk's
// size (1,600 characters, chunking.tokens 400 × 4), the same amount of text a
// clawmem answer holds; "qmd-file" gives it the whole file (a day of
// conversation, about twice a chunk), an upper bound for QMD.
import { readFileSync, writeFileSync, mkdirSync, rmSync, existsSync } from "node:fs";
import { system } from "./eval_common.mjs";

const [bin, work, mode, config = "{}"] = process.argv.slice(2);
const data_dir = process.env.CLAWMEM_DATA ?? new URL("../../shared/data", import.meta.url).pathname;
const src = `${data_dir}/locomo/locomo10.json`;
if (!bin || !work || !mode) {
  console.error("usage: node bench/eval_locomo.mjs SYSTEM WORKDIR MODE [CONFIG_JSON]");
  process.exit(2);
}
if (!existsSync(src)) {
  console.error(`eval_locomo: ${src} is absent (see ../shared/data/README.md)`);
  process.exit(1);
}
const data = JSON.parse(readFileSync(src));
const months = { January: 1, February: 2, March: 3, April: 4, May: 5, June: 6, July: 7, August: 8,
  September: 9, October: 10, November: 11, December: 12 };
const day = (s) => {
  const m = /(\d+) (\w+),? (\d{4})/.exec(s);
  return `${m[3]}-${String(months[m[2]]).padStart(2, "0")}-${m[1].padStart(2, "0")}`;
};
const norm = (id) => id.replace(/^D(\d+):0*(\d+)$/, "D$1:$2");
const KMAX = 10, CHUNK_CHARS = 1600;
const variants = bin === "qmd" ? ["qmd", "qmd-file"] : [mode];
const tot = {}, cnt = {}, dump = []; // EVAL_DUMP=FILE: each question's answers
const add = (v, cat, key, x) => {
  tot[v] ??= {};
  tot[v][cat] ??= {};
  tot[v][cat][key] = (tot[v][cat][key] ?? 0) + x;
};
// The line range a QMD answer stands for, in a file of the given lines.
const qmdRange = (variant, lines, line) => {
  if (variant === "qmd-file") return [1, lines.length];
  let s = Math.min(Math.max(1, line), lines.length), e = s, chars = lines[s - 1].length + 1;
  while (chars < CHUNK_CHARS && (s > 1 || e < lines.length)) {
    if (e < lines.length) chars += lines[e++].length + 1;
    if (chars < CHUNK_CHARS && s > 1) chars += lines[--s - 1].length + 1;
  }
  return [s, e];
};
mkdirSync(work, { recursive: true });
for (const [ci, c] of data.entries()) {
  const ws = `${work}/locomo-c${ci}`;
  rmSync(ws, { recursive: true, force: true });
  mkdirSync(`${ws}/memory`, { recursive: true });
  writeFileSync(`${ws}/MEMORY.md`, "");
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
  const qs = [];
  for (const q of c.qa) {
    if (!(q.category >= 1 && q.category <= 4)) continue;
    const ev = q.evidence.flatMap((e) => e.split(/[;\s]+/)).filter(Boolean).map(norm).filter((e) => where[e]);
    if (ev.length) qs.push({ q, ev });
  }
  const answers = system(bin, work, ws, `locomo-c${ci}-${mode}`, config)(qs.map((x) => x.q.question), KMAX);
  for (const [i, { q, ev }] of qs.entries()) {
    for (const v of variants) {
      const res = answers[i].map((r) => {
        if (bin !== "qmd") return r;
        const [startLine, endLine] = qmdRange(v, files[r.path] ?? [""], r.line);
        return { path: r.path, startLine, endLine };
      });
      const inside = (r, e) => where[e][0] === r.path && where[e][1] >= r.startLine && where[e][1] <= r.endLine;
      let first = 0;
      for (let j = 0; j < res.length && !first; j++) if (ev.some((e) => inside(res[j], e))) first = j + 1;
      if (process.env.EVAL_DUMP && v === variants[0])
        dump.push({ c: ci, q: q.question, cat: q.category, ev: ev.map((e) => where[e]),
          r5: ev.filter((e) => res.slice(0, 5).some((r) => inside(r, e))).length / ev.length,
          top: res.slice(0, 10).map((r) => [r.path, r.startLine, r.endLine]) });
      for (const cat of ["all", `cat${q.category}`]) {
        cnt[cat] = (cnt[cat] ?? 0) + 1 / variants.length;
        for (let k = 1; k <= KMAX; k++)
          add(v, cat, `recall@${k}`, ev.filter((e) => res.slice(0, k).some((r) => inside(r, e))).length / ev.length);
        add(v, cat, "mrr", first ? 1 / first : 0);
      }
    }
  }
}
if (process.env.EVAL_DUMP) writeFileSync(process.env.EVAL_DUMP, dump.map((d) => JSON.stringify(d)).join("\n") + "\n");
for (const v of variants) {
  const out = { dataset: "locomo10", mode: v, categories: "1-4" };
  for (const cat of ["all", "cat1", "cat2", "cat3", "cat4"]) {
    const n = Math.round(cnt[cat]);
    out[cat] = { questions: n };
    for (const [k, x] of Object.entries(tot[v][cat])) out[cat][k] = +(x / n).toFixed(4);
  }
  console.log(JSON.stringify(out));
}
