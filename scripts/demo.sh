#!/usr/bin/env bash
# One command from a fresh machine: install ctxpatch, patch a real Claude Code in a scratch
# project, prove it (verify: offline, against a local mock of the API), then replay the embedded
# real session with and without the patch; the last line is what it saved.
#   bash scripts/demo.sh            (CTXPATCH_DEMO_DIR=DIR to keep the scratch project there;
#                                    else it is a temporary folder, deleted at exit)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq nodejs npm
fi
python3 -m pip install --quiet --disable-pip-version-check -e "$here"

if [ -n "${CTXPATCH_DEMO_DIR:-}" ]; then
  demo="$CTXPATCH_DEMO_DIR"
  mkdir -p "$demo"
  kept="$demo/node_modules/@anthropic-ai/claude-code/cli.js is patched; 'ctxpatch revert' in $demo undoes it"
else
  demo="$(mktemp -d -t ctxpatch-demo.XXXX)"
  trap 'rm -rf "$demo"' EXIT
  kept="the scratch project is deleted at exit (CTXPATCH_DEMO_DIR=DIR keeps it)"
fi
echo "== scratch project: $demo (Claude Code 2.1.112 from npm, the last release with cli.js)"
python3 - "$demo" <<'PY'
import shutil, sys
from pathlib import Path
from patcher import npmcache
src = npmcache.package_dir("cc", "2.1.112")
dest = Path(sys.argv[1]) / "node_modules" / "@anthropic-ai" / "claude-code"
if not dest.exists():
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(src, dest)
PY
cd "$demo"
echo "== ctxpatch status";  ctxpatch status || true
echo "== ctxpatch apply";   ctxpatch apply
echo "== ctxpatch check";   ctxpatch check
echo "== ctxpatch verify"; ctxpatch verify
echo "== the embedded real session (Claude Code 2.1.39, one real auto-compaction), as recorded"
ctxpatch simulate "$here/examples/spotter-session.jsonl"
echo "== the same session unpatched vs patched (what apply installs, default knobs)"
ctxpatch simulate "$here/examples/spotter-session.jsonl" --compare --json >"$demo/compare.json"
echo "== done: $kept"
# The table, then the one line: compactions avoided and the money saved, at the dated list
# prices of usage/prices.py (each replayed request billed as its uncached input, cache write,
# cache read and output tokens; each compaction's summary request as its writes, reads and output).
python3 - "$demo/compare.json" <<'PY'
import json, sys
from usage.prices import PRICES_DATE
doc = json.load(open(sys.argv[1]))
runs = {r["scenario"]: r for r in doc["results"]}
# each replay's dollars as simulate prices them (usage/money.py): its requests and its
# compactions' summary requests, writes at the session's cache lifetime (1 hour here: 2x)
usd = {name: r["usd"]["usd"] for name, r in runs.items()}
print(f"{'':18}" + "".join(f"{name:>17}" for name in runs))
for key in ("auto_compactions", "tokens_sent", "max_prompt_tokens", "cache_breaks"):
    print(f"{key:18}" + "".join(f"{round(r['summary'][key]):>17,}" for r in runs.values()))
print(f"{'dollars':18}" + "".join(f"{'$%.2f' % v:>17}" for v in usd.values()))
c, before = doc["comparison"], runs["unpatched"]["summary"]["auto_compactions"]
saved = usd["unpatched"] - usd["patched"]
print(
    f"saved on the embedded session, patched vs unpatched: {c['compactions_avoided']} of {before} "
    f"compactions avoided, {c['tokens_saved']:,} input tokens ({c['tokens_saved_pct']:.1f}%), "
    f"${saved:.2f} of ${usd['unpatched']:.2f} ({100 * saved / usd['unpatched']:.1f}%) at "
    f"{runs['patched']['model']}'s list prices of {PRICES_DATE}"
)
PY
