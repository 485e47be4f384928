// Differential harness: runs the injected _aggressiveTextPrune under node.
//
// One-shot mode (default): reads ONE JSON document from stdin
//   {"snippet": "<source of the function>", "cases": [{"env": {...}, "messages": [...]}, ...]}
// and writes {"results": [...]} to stdout.
//
// Serve mode (`node harness.mjs --serve`): reads such documents one per line and answers each
// with one line, so a whole hypothesis run needs a single node process.
//
// Per case, the result holds:
//   output             what the function returned (JSON)
//   threw / error      whether the call threw (it never should)
//   wrote              whether it wrote anything to stdout/stderr/console (it never should)
//   mutated            whether JSON.stringify(input) changed during the call
//   same               out === input
//   changed            JSON.stringify(out) !== JSON.stringify(input)
//   sameWhenUnchanged  !changed implies same (the very same array when nothing changed)
//   sharedUnchanged    every unchanged message (and every unchanged block of a changed message)
//                      is the identical object of the input
//   freshChanged       every changed message is a new object with a new `message` object
//   aligned            out is the input with some messages left out (only assistant messages
//                      holding nothing but thinking blocks), in order; every other message is
//                      either the input's own object or a changed copy (the pairs below)
//
// Debug lines are written asynchronously (fire and forget): after a batch whose cases set
// CLAUDE_TEXT_PRUNE_DEBUG, the harness waits until no fs request is pending before answering.
import { createInterface } from "node:readline";

const PREFIX = "CLAUDE_TEXT_PRUNE_";

function setEnv(env) {
  for (const key of Object.keys(process.env)) {
    if (key.startsWith(PREFIX)) delete process.env[key];
  }
  for (const [key, value] of Object.entries(env || {})) {
    if (key.startsWith(PREFIX)) process.env[key] = String(value);
  }
}

// Report (and swallow) any output the snippet would produce while it runs.
function captureOutput(fn) {
  let wrote = false;
  const saved = {
    out: process.stdout.write,
    err: process.stderr.write,
    console: {},
  };
  const sink = () => {
    wrote = true;
    return true;
  };
  process.stdout.write = sink;
  process.stderr.write = sink;
  for (const name of ["log", "error", "warn", "info", "debug", "trace", "dir"]) {
    saved.console[name] = console[name];
    console[name] = sink;
  }
  try {
    return { value: fn(), wrote: () => wrote };
  } finally {
    process.stdout.write = saved.out;
    process.stderr.write = saved.err;
    for (const name of Object.keys(saved.console)) console[name] = saved.console[name];
  }
}

function contentOf(msg) {
  return msg !== null && typeof msg === "object" && msg.message !== null &&
    typeof msg.message === "object"
    ? msg.message.content
    : undefined;
}

function onlyThinking(msg) {
  const content = contentOf(msg);
  return (
    msg !== null && typeof msg === "object" && msg.type === "assistant" &&
    Array.isArray(content) && content.length > 0 &&
    content.every((b) => b !== null && typeof b === "object" &&
      (b.type === "thinking" || b.type === "redacted_thinking"))
  );
}

// Pairs [input message, output message], or null when out is not the input with some
// thinking-only assistant messages left out. A thinking-only message is never changed (its
// thinking is all it has): kept, it is the input's own object; otherwise it was left out.
function align(input, out) {
  const pairs = [];
  let i = 0;
  for (let j = 0; j < out.length; j++) {
    while (i < input.length && input[i] !== out[j] && onlyThinking(input[i])) i++;
    if (i >= input.length) return null;
    pairs.push([input[i], out[j]]);
    i++;
  }
  for (; i < input.length; i++) if (!onlyThinking(input[i])) return null;
  return pairs;
}

function runCase(prune, testCase) {
  const input = testCase.messages;
  const before = JSON.stringify(input);
  const inputItems = Array.isArray(input) ? input.slice() : null;
  setEnv(testCase.env);
  let out;
  let threw = false;
  let error = null;
  let wroteFn = () => false;
  try {
    const captured = captureOutput(() => prune(input));
    out = captured.value;
    wroteFn = captured.wrote;
  } catch (e) {
    threw = true;
    error = String(e && e.stack ? e.stack : e);
    out = input;
  } finally {
    setEnv({});
  }
  const after = JSON.stringify(input);
  const outJson = JSON.stringify(out);
  const changed = outJson !== before;
  const same = out === input;
  let sharedUnchanged = true;
  let freshChanged = true;
  const pairs = Array.isArray(out) && inputItems !== null ? align(inputItems, out) : null;
  const aligned = pairs !== null;
  if (aligned && !same) {
    for (const [a, b] of pairs) {
      if (JSON.stringify(a) === JSON.stringify(b)) {
        if (a !== b) sharedUnchanged = false;
        continue;
      }
      const bothObjects = a !== null && typeof a === "object" && b !== null && typeof b === "object";
      if (!bothObjects || a === b || a.message === b.message) {
        freshChanged = false;
        continue;
      }
      const ca = contentOf(a);
      const cb = contentOf(b);
      if (Array.isArray(ca) && Array.isArray(cb)) {
        if (ca === cb) freshChanged = false;
        for (const block of cb) {
          if (ca.includes(block)) continue; // shared
          const twin = ca.find((x) => JSON.stringify(x) === JSON.stringify(block));
          if (twin !== undefined) sharedUnchanged = false; // an unchanged block was copied
        }
      }
    }
  }
  return {
    output: out,
    threw,
    error,
    wrote: wroteFn(),
    mutated: after !== before,
    same,
    changed,
    sameWhenUnchanged: changed || same,
    sharedUnchanged,
    freshChanged,
    aligned,
  };
}

// Wait until no fs request is pending (the snippet's debug writes are fire and forget).
async function drain() {
  let idle = 0;
  for (let i = 0; i < 5000 && idle < 5; i++) {
    await new Promise((resolve) => setTimeout(resolve, 1));
    const busy = process.getActiveResourcesInfo().some((name) => name.startsWith("FSReq"));
    idle = busy ? 0 : idle + 1;
  }
}

async function runDocument(text) {
  const doc = JSON.parse(text);
  if (doc.withoutGetBuiltinModule) delete process.getBuiltinModule; // as on Node < 20.16
  const prune = new Function(doc.snippet + "\nreturn _aggressiveTextPrune;")();
  const results = doc.cases.map((c) => runCase(prune, c));
  if (doc.cases.some((c) => c.env && c.env.CLAUDE_TEXT_PRUNE_DEBUG)) await drain();
  return { results };
}

async function main() {
  if (process.argv.includes("--serve")) {
    const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
    for await (const line of lines) {
      if (line.trim() === "") continue;
      let answer;
      try {
        answer = await runDocument(line);
      } catch (e) {
        answer = { fatal: String(e && e.stack ? e.stack : e) };
      }
      process.stdout.write(JSON.stringify(answer) + "\n");
    }
    return;
  }
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  const answer = await runDocument(Buffer.concat(chunks).toString("utf8"));
  process.stdout.write(JSON.stringify(answer));
}

await main();
