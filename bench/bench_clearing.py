"""What the injected server-side clearing costs per request, in node.

Takes ``_ctxpatchContextClearing`` out of a cli.js patched by ctxpatch (the synthetic
``fixtures/cli_js/rq-2.1.112.js``, so the bench needs no download) and times it on a request
shaped like Claude Code 2.1.112's: 200 messages (typed text, tool_use / tool_result pairs of a
few KB each, thinking blocks), the betas list and Claude Code's own ``clear_thinking_20251015``
edit. Prints the median and p99 time per request against the same request built without it.

Target (issue #7): the injected code adds <= 1 ms per request on a 200-message array.

    python bench/bench_clearing.py [--requests 20000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DRIVER = r"""
const fn = SNIPPET;
const N = REQUESTS;
const messages = [];
for (let i = 0; i < 200; i++) {
  if (i % 4 === 0) messages.push({role: "user", content: [{type: "text", text: "please " + "x".repeat(300)}]});
  else if (i % 4 === 1) messages.push({role: "assistant", content: [
    {type: "thinking", thinking: "t".repeat(800), signature: "s".repeat(200)},
    {type: "tool_use", id: "toolu_" + i, name: "Read", input: {file_path: "/src/f" + i + ".py"}}]});
  else if (i % 4 === 2) messages.push({role: "user", content: [
    {type: "tool_result", tool_use_id: "toolu_" + (i - 1), content: "y".repeat(4000)}]});
  else messages.push({role: "assistant", content: [{type: "text", text: "done " + "z".repeat(200)}]});
}
const build = () => ({model: "claude-opus-4-7", messages, system: [{type: "text", text: "sys"}],
  tools: [], tool_choice: undefined, betas: ["claude-code-20250219", "interleaved-thinking-2025-05-14",
  "context-management-2025-06-27"], metadata: {user_id: "u"}, max_tokens: 32000,
  thinking: {type: "adaptive"}, context_management: {edits: [{type: "clear_thinking_20251015", keep: "all"}]}});
function time(f) {
  const out = new Float64Array(N);
  for (let i = 0; i < 2000; i++) f();
  for (let i = 0; i < N; i++) { const t = process.hrtime.bigint(); f(); out[i] = Number(process.hrtime.bigint() - t); }
  out.sort();
  return {median_us: out[N >> 1] / 1e3, p99_us: out[Math.floor(N * 0.99)] / 1e3};
}
const plain = time(() => build());
const patched = time(() => fn(build()));
const sent = fn(build());
if (sent.context_management.edits.length !== 2) throw new Error("the edit was not added");
process.stdout.write(JSON.stringify({plain, patched}));
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=20000)
    args = ap.parse_args()
    from patcher import markers, ops

    node = shutil.which("node")
    if node is None:
        sys.exit("node is required")
    with tempfile.TemporaryDirectory(prefix="ctxpatch-bench-") as tmp:
        cli = Path(tmp) / "cli.js"
        shutil.copyfile(ROOT / "fixtures" / "cli_js" / "rq-2.1.112.js", cli)
        ops.apply_file(cli, node_check=False)
        js = markers._clear_snippet_bytes(cli.read_bytes())
    assert js is not None
    script = DRIVER.replace("SNIPPET", js.decode().strip()).replace("REQUESTS", str(args.requests))
    out = subprocess.run(
        [node, "--input-type=module", "-e", script], capture_output=True, text=True, check=True
    )
    res = json.loads(out.stdout)
    plain, patched = res["plain"], res["patched"]
    added = (patched["median_us"] - plain["median_us"]) / 1000
    print(f"request of 200 messages, {args.requests} requests, node {_node_version(node)}")
    print(f"{'':<22}{'median us':>10}{'p99 us':>10}")
    print(f"{'built (Claude Code)':<22}{plain['median_us']:>10.2f}{plain['p99_us']:>10.2f}")
    print(f"{'built + clearing':<22}{patched['median_us']:>10.2f}{patched['p99_us']:>10.2f}")
    print(f"added per request: {added:.4f} ms median (target <= 1 ms)")


def _node_version(node: str) -> str:
    return subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()


if __name__ == "__main__":
    main()
