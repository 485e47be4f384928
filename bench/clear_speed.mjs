// Time of the injected _ctxpatchContextClearing per request on a 200-message list (target:
// <= 1 ms), under the paid policy (the default: the rule replayed over every request point of
// the list) and the fixed STEP rule.
//
//   node bench/clear_speed.mjs [patcher/snippets/context_clear.js]
//
// An API message list like Claude Code's: a typed prompt, then rounds of text + 1-2 tool uses
// (inputs of 100 B - 3 KB) and their results (0.3-6 KB), a typed prompt every 10 rounds: ~600 KB,
// the size bench/bench_gateway.py uses for a ~150K-token request; a system prompt and 20 tools.
import { readFileSync } from "node:fs";
const src = readFileSync(process.argv[2] || new URL("../patcher/snippets/context_clear.js", import.meta.url), "utf8");
const clear = new Function(src + "\nreturn _ctxpatchContextClearing;")();
function conversation(n) {
  const out = [{ role: "user", content: "task " + "lorem ipsum ".repeat(50) }];
  let k = 0;
  while (out.length < n - 1) {
    const width = 1 + (k % 2);
    const uses = [];
    for (let i = 0; i < width; i++) {
      uses.push({ type: "tool_use", id: "toolu_" + (k + i), name: i ? "Edit" : "Read", input: { file_path: "/src/f" + k, new_string: "x".repeat(100 + ((k * 937) % 3000)) } });
    }
    out.push({ role: "assistant", content: [{ type: "text", text: "Let me look. ".repeat(10) }, ...uses] });
    out.push({ role: "user", content: uses.map((u, i) => ({ type: "tool_result", tool_use_id: u.id, content: "line of output\n".repeat(20 + ((k + i) * 311) % 400) })) });
    k += width;
    if (k % 10 === 0) {
      out.push({ role: "assistant", content: [{ type: "text", text: "Done. ".repeat(40) }] });
      out.push({ role: "user", content: [{ type: "text", text: "next step please" }] });
    }
  }
  return out.slice(0, n);
}
const messages = conversation(200);
const tools = [];
for (let t = 0; t < 20; t++) {
  tools.push({ name: "Tool" + t, description: "Does things. ".repeat(80), input_schema: { type: "object", properties: { a: { type: "string", description: "an argument" }, b: { type: "array", items: { type: "string" } } }, required: ["a"] } });
}
const system = [{ type: "text", text: "You are Claude Code. ".repeat(600), cache_control: { type: "ephemeral" } }];
const request = { model: "claude-sonnet-4-5", max_tokens: 32000, betas: [], system, tools, messages };
for (const policy of ["paid", "fixed"]) {
  process.env.CLAUDE_CTX_CLEAR_POLICY = policy;
  const sent = clear(request);
  for (let i = 0; i < 200; i++) clear(request);
  const n = 1000, t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) clear(request);
  const ms = Number(process.hrtime.bigint() - t0) / 1e6 / n;
  const keep = sent.context_management.edits[0].keep.value;
  const bytes = JSON.stringify(messages).length;
  console.log(`${policy}: ${messages.length} messages (${(bytes / 1024).toFixed(0)} KB), keep ${keep}, ${ms.toFixed(3)} ms per request`);
}
