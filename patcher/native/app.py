"""Claude Code's own JavaScript inside a native build, told apart from the rest of the graph.

Two layouts are known (``shared/research/api-2026.md`` "Native binaries"):

* **single** (2.1.113–2.1.242): one module of plain minified JavaScript, header
  ``// @bun @bytecode @bun-cjs`` and wrapped in a CommonJS function, named
  ``/$bunfs/root/src/entrypoints/cli.js`` up to 2.1.228 and ``/$bunfs/root/cli`` (the entry
  point) from 2.1.229, next to a few helper modules, ``.node`` addons and bundled assets;
* **split** (2.1.243 on): an ESM loader ``/$bunfs/root/cli`` (the graph's entry point) and
  ~3,500 ``chunk-*.js`` modules, each starting with ``// @bun @bytecode`` and ``// Version: X``.

:func:`read_app` returns the JavaScript that is Claude Code's, as :class:`Source` records: the
cli.js alone (its helper modules ``image-processor.js``… left out), or the loader first and then
every other JavaScript module in table order (the chunks, named ``chunk-*.js`` or, in the first
split builds, ``_NNN.js``, and a few helper modules); data entries are never included.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from patcher.native.container import BadBinary
from patcher.native.graph import Entry
from patcher.native.reader import NativeBinary

SINGLE_NAMES = ("/$bunfs/root/src/entrypoints/cli.js", "B:/~BUN/root/src/entrypoints/cli.js")
SINGLE_MAIN = ("cli", "cli.js", "claude", "claude.exe")
_CHUNK = re.compile(r"(^|/)(chunk-[0-9a-z]+|_\d+)\.js$")  # chunk-0abc.js; _851.js (2.1.24x)
_VERSION = re.compile(rb"^// Version: ([0-9][\w.+-]*)\s*$", re.M)
_README_VERSION = re.compile(rb'README_URL:"[^"]*",VERSION:"([0-9][\w.+-]*)"')
_HEAD = 4096


@dataclass(frozen=True)
class Source:
    name: str  # the module's path in the graph, e.g. /$bunfs/root/chunk-0abc.js
    data: bytes


@dataclass(frozen=True)
class App:
    layout: str  # "single" | "split"
    version: str | None
    sources: tuple[Source, ...]  # the cli.js, or the loader first and then the chunks

    @property
    def size(self) -> int:
        return sum(len(s.data) for s in self.sources)


def layout_of(nb: NativeBinary) -> str:
    return _layout(nb)[0]


def _layout(nb: NativeBinary) -> tuple[str, Entry]:
    """("single", the cli module) or ("split", the loader)."""
    for e in nb.entries:
        if e.name in SINGLE_NAMES:
            return "single", e
    main = nb.graph.main
    if main.kind == "js":
        if any(_CHUNK.search(e.name) for e in nb.entries if e.kind == "js"):
            return "split", main
        if main.basename in SINGLE_MAIN:  # 2.1.229-2.1.242: the one module is named `cli`
            return "single", main
    raise BadBinary(
        f"{nb.path} is a Bun executable but not a Claude Code build ctxpatch knows",
        why=f"its entry point is {main.name!r}, and it has neither "
        f"{SINGLE_NAMES[0]} nor a loader with chunk-*.js modules",
        hint="pass the `claude` executable of @anthropic-ai/claude-code-<platform>",
        modules=len(nb.entries),
    )


def read_app(nb: NativeBinary) -> App:
    layout, main = _layout(nb)
    if layout == "single":
        sources: tuple[Source, ...] = (Source(main.name, nb.read(main)),)
    else:  # the loader, then every other JavaScript module: the chunks, and the few helper
        # modules (image-processor.js ...) that hold no compaction code
        rest = [e for e in nb.entries if e.kind == "js" and e.index != main.index]
        sources = (Source(main.name, nb.read(main)), *(Source(e.name, nb.read(e)) for e in rest))
    return App(layout, version_in(sources), sources)


def version_in(sources: tuple[Source, ...]) -> str | None:
    """``// Version: X`` near the top (every split module has it), else ``VERSION:"X"``."""
    for s in sources[:8]:
        m = _VERSION.search(s.data, 0, _HEAD)
        if m:
            return m.group(1).decode()
    for s in sources:
        m = _README_VERSION.search(s.data)
        if m:
            return m.group(1).decode()
    return None
