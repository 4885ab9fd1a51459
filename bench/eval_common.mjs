// eval_common.mjs — what bench/eval_locomo.mjs and bench/eval_scifact.mjs
// share: running one system over a workspace. A system is either a clawmem
// binary (indexed once, then `clawmem search --json --no-sync` per query with
// the run's config) or "qmd" (the peer QMD's `qmd search --json` through
// bench/eval_qmd.sh). Answers are lists of {path, line?, startLine?, endLine?}
// with paths relative to the workspace.
import { writeFileSync, rmSync, existsSync } from "node:fs";
import { dirname } from "node:path";
import { execFileSync } from "node:child_process";

const here = new URL(".", import.meta.url).pathname;

// Returns a function from the list of queries to the list of answers. A
// clawmem binary with eval_batch beside it (bench/eval_batch.c, built by
// `make eval`) answers all the queries in one process: the same engine and
// answers, minutes faster; EVAL_BATCH=0 runs one process per query instead.
export function system(bin, work, ws, tag, config) {
  if (bin === "qmd") {
    return (queries, n) => {
      const out = execFileSync(`${here}eval_qmd.sh`, [ws, String(n)], {
        input: queries.map((q) => q.replace(/\s+/g, " ")).join("\n") + "\n",
        encoding: "utf8", maxBuffer: 1 << 30, stdio: ["pipe", "pipe", "inherit"] });
      return out.trim().split("\n").map((l) => JSON.parse(l).map((r) => ({
        path: r.file.replace(/^qmd:\/\/memory\//, "memory/"), line: r.line, score: r.score })));
    };
  }
  const state = `${work}/${tag}-state`, cfg = `${work}/${tag}.json`;
  rmSync(state, { recursive: true, force: true });
  writeFileSync(cfg, config);
  const batch = `${dirname(bin)}/eval_batch`;
  if (process.env.EVAL_BATCH !== "0" && existsSync(batch)) {
    return (queries, n) => execFileSync(batch, [ws, state, cfg, String(n)], {
      input: queries.map((q) => q.replace(/\s+/g, " ")).join("\n") + "\n",
      encoding: "utf8", maxBuffer: 1 << 30, stdio: ["pipe", "pipe", "inherit"] })
      .trim().split("\n").map((l) => JSON.parse(l).results);
  }
  const base = ["--workspace", ws, "--state-dir", state, "--config", cfg];
  execFileSync(bin, [...base, "index"], { stdio: ["ignore", "ignore", "inherit"] });
  return (queries, n) => queries.map((q) => JSON.parse(execFileSync(bin, [...base, "search", q,
    "--json", "--no-sync", "--max-results", String(n), "--min-score", "0"],
    { encoding: "utf8", maxBuffer: 1 << 28 })).results);
}
