#!/usr/bin/env bash
# One command from a fresh machine: install ctxpatch, patch a real Claude Code in a scratch
# project, prove the state, then replay the embedded real session with and without the patch.
#   bash scripts/demo.sh            (CTXPATCH_DEMO_DIR=... to keep the scratch project)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq nodejs npm
fi
python3 -m pip install --quiet --disable-pip-version-check -e "$here"

demo="${CTXPATCH_DEMO_DIR:-$(mktemp -d -t ctxpatch-demo.XXXX)}"
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
if ctxpatch --help | grep -q " verify "; then echo "== ctxpatch verify"; ctxpatch verify; fi
echo "== the embedded real session (Claude Code 2.1.39, one real auto-compaction), as recorded"
ctxpatch simulate "$here/examples/spotter-session.jsonl"
echo "== the same session unpatched vs patched (CLAUDE_TEXT_PRUNE_KEEP=1, STEP=1: it has only 5 typed prompts)"
ctxpatch simulate "$here/examples/spotter-session.jsonl" --compare --keep 1 --step 1
echo "== done: $demo/node_modules/@anthropic-ai/claude-code/cli.js is patched; 'ctxpatch revert' in $demo undoes it"
