// Time of the injected _aggressiveTextPrune per call on a 200-message list (target: <= 1 ms).
//
//   node bench/snippet_speed.mjs [patcher/snippets/text_prune.js]
//
// Lists shaped like Claude Code's: one record per block sharing message.id, tool rounds, long
// text; with and without thinking blocks; KEEP=1 STEP=1 so the rule does all its work.
import { readFileSync } from "node:fs";
const src = readFileSync(process.argv[2] || new URL("../patcher/snippets/text_prune.js", import.meta.url), "utf8");
const prune = new Function(src + "\nreturn _aggressiveTextPrune;")();
function session(turns, thinking) {
  const out = []; let serial = 0;
  const long = "lorem ipsum dolor sit amet ".repeat(20);
  const reply = (...blocks) => { serial++; for (const b of blocks) out.push({ type: "assistant", message: { id: "m" + serial, role: "assistant", content: [b] } }); };
  for (let t = 0; t < turns; t++) {
    out.push({ type: "user", message: { role: "user", content: "task " + t + " " + long } });
    for (let r = 0; r < 3; r++) {
      const b = [{ type: "text", text: long }, { type: "tool_use", id: "t" + t + r, name: "Read", input: { p: "x" } }];
      reply(...(thinking ? [{ type: "thinking", thinking: long, signature: "s" + serial }, ...b] : b));
      out.push({ type: "user", message: { role: "user", content: [{ type: "tool_result", tool_use_id: "t" + t + r, content: long }] } });
    }
  }
  const list = out.slice(0, 199);
  list.push({ type: "user", message: { role: "user", content: "next" } }); // a free point
  return list;
}
for (const [label, thinking] of [["no thinking", false], ["thinking", true]]) {
  const msgs = session(40, thinking);
  process.env.CLAUDE_TEXT_PRUNE_KEEP = "1";
  process.env.CLAUDE_TEXT_PRUNE_STEP = "1";
  const out = prune(msgs);
  const dropped = msgs.length - out.length;
  for (let i = 0; i < 200; i++) prune(msgs);
  const n = 2000, t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) prune(msgs);
  const ms = Number(process.hrtime.bigint() - t0) / 1e6 / n;
  const changed = out === msgs ? "unchanged" : `pruned, ${dropped} records left out`;
  console.log(`${label}: ${msgs.length} messages (${changed}), ${ms.toFixed(3)} ms per call`);
}
