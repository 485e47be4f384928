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
// Claude Code 2.1.33-2.1.38's shape: the breakpoint early, a long tail the paid rule counts
const system = [
  { type: "text", text: "x-anthropic-billing-header: cc_version=2.1.37" },
  { type: "text", text: "You are Claude Code.", cache_control: { type: "ephemeral" } },
  { type: "text", text: "You are Claude Code. ".repeat(600) },
];
const user_id = JSON.stringify({ device_id: "d".repeat(64), account_uuid: "", session_id: "0b6f3e2a-1c4d-4e5f-8a9b-0c1d2e3f4a5b" });
const request = { model: "claude-sonnet-4-5", max_tokens: 32000, betas: [], system, tools, messages, metadata: { user_id } };
// The ledger (on unless CTXPATCH_LEDGER=0) adds to the request's path: the session id read off
// metadata.user_id at the build, and in "watch" a record and two callbacks; the reply is read
// later, off the path. Lines go to a throwaway XDG_STATE_HOME.
process.env.XDG_STATE_HOME = (await import("node:fs")).mkdtempSync((await import("node:os")).tmpdir() + "/clear-speed-");
for (const ledger of ["0", "1"]) {
  process.env.CTXPATCH_LEDGER = ledger;
  for (const policy of ["paid", "fixed"]) {
    process.env.CLAUDE_CTX_CLEAR_POLICY = policy;
    const sent = clear(request);
    for (let i = 0; i < 200; i++) clear(request);
    const n = 1000, t0 = process.hrtime.bigint();
    for (let i = 0; i < n; i++) clear(request);
    const ms = Number(process.hrtime.bigint() - t0) / 1e6 / n;
    const keep = sent.context_management.edits[0].keep.value;
    const bytes = JSON.stringify(messages).length;
    console.log(`${policy}, ledger ${ledger === "0" ? "off" : "on "}: ${messages.length} messages (${(bytes / 1024).toFixed(0)} KB), keep ${keep}, ${ms.toFixed(3)} ms per request`);
  }
}
// The free move's memory (CLAUDE_CTX_CLEAR_FREE, on by default): the same request with the knob
// on and off, interleaved in rounds so that a busy machine slows both alike; the medians.
process.env.CTXPATCH_LEDGER = "0";
process.env.CLAUDE_CTX_CLEAR_POLICY = "paid";
const rounds = { on: [], off: [] };
for (let round = 0; round < 41; round++) {
  for (const free of ["1", "0"]) {
    process.env.CLAUDE_CTX_CLEAR_FREE = free;
    for (let i = 0; i < 20; i++) clear(request);
    const n = 100, t0 = process.hrtime.bigint();
    for (let i = 0; i < n; i++) clear(request);
    rounds[free === "1" ? "on" : "off"].push(Number(process.hrtime.bigint() - t0) / 1e6 / n);
  }
}
delete process.env.CLAUDE_CTX_CLEAR_FREE;
const median = (xs) => xs.slice().sort((a, b) => a - b)[xs.length >> 1];
console.log(`paid, free move on: ${median(rounds.on).toFixed(3)} ms, off: ${median(rounds.off).toFixed(3)} ms per request (medians of 41 interleaved rounds)`);
// "watch" on an APIPromise-like object whose response never comes: the synchronous part only.
const never = new Promise(() => {});
const pending = { asResponse: () => never, then: (a, b) => never.then(a, b) };
for (const ledger of ["0", "1"]) {
  process.env.CTXPATCH_LEDGER = ledger;
  for (let i = 0; i < 2000; i++) { clear(request); clear(pending, "watch"); }
  const n = 20000, t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) clear(pending, "watch");
  const us = Number(process.hrtime.bigint() - t0) / 1e3 / n;
  console.log(`watch, ledger ${ledger === "0" ? "off" : "on "}: ${us.toFixed(2)} us per request (the reply is read off the request's path)`);
}
// Reading a reply's copy: a 2,000-event SSE stream (~300 KB) in 1 KB chunks, end to end.
const enc = new TextEncoder();
const ev = (o) => `event: ${o.type}\ndata: ${JSON.stringify(o)}\n\n`;
let text = ev({ type: "message_start", message: { usage: { input_tokens: 3, cache_read_input_tokens: 5 } } });
for (let i = 0; i < 2000; i++) text += ev({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "word ".repeat(20) } });
text += ev({ type: "message_delta", usage: { output_tokens: 7 }, context_management: { applied_edits: [] } });
const bytes = enc.encode(text);
// ledger on: the copy read to its end; off: read for the near move's prompt up to message_start
for (const ledger of ["1", "0"]) {
process.env.CTXPATCH_LEDGER = ledger;
const times = [];
for (let round = 0; round < 20; round++) {
  let at = 0;
  const body = new ReadableStream({ pull(c) { if (at >= bytes.length) return c.close(); c.enqueue(bytes.slice(at, at + 1024)); at += 1024; } });
  const response = new Response(body, { status: 200, headers: { "content-type": "text/event-stream" } });
  const rec = clear(request) && null;
  const t0 = process.hrtime.bigint();
  const p = { asResponse: () => Promise.resolve(response), then: (a, b) => Promise.resolve(null).then(a, b) };
  clear(p, "watch");
  const reader = response.body; // Claude Code's branch, drained as it would
  const r = reader.getReader();
  while (!(await r.read()).done);
  await new Promise((res) => setImmediate(res));
  times.push(Number(process.hrtime.bigint() - t0) / 1e6);
}
times.sort((a, b) => a - b);
console.log(`a 2,000-event reply (${(bytes.length / 1024).toFixed(0)} KB) read by Claude Code with the copy read beside it (ledger ${ledger === "0" ? "off: to message_start" : "on"}): median ${times[10].toFixed(2)} ms`);
}
