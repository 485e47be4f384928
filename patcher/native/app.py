"""Claude Code's own JavaScript inside a native build, told apart from the rest of the graph.

Two layouts are known (``shared/research/api-2026.md`` "Native binaries"):

* **single** (2.1.113–2.1.242): one module ``/$bunfs/root/src/entrypoints/cli.js`` of plain
  minified JavaScript, header ``// @bun @bytecode @bun-cjs`` and wrapped in a CommonJS function,
  next to a few helper modules, ``.node`` addons and (from ~2.1.2xx) bundled assets;
* **split** (2.1.243 on): an ESM loader ``/$bunfs/root/cli`` (the graph's entry point) and
  ~3,500 ``chunk-*.js`` modules, each starting with ``// @bun @bytecode`` and ``// Version: X``.

:func:`sources` returns the JavaScript that is Claude Code's (the cli.js, or the loader plus every
chunk), in table order, as :class:`Source` records; helper modules (``image-processor.js``…) and
data are left out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from patcher.native.container import BadBinary
from patcher.native.reader import NativeBinary

SINGLE_NAMES = ("/$bunfs/root/src/entrypoints/cli.js", "B:/~BUN/root/src/entrypoints/cli.js")
_CHUNK = re.compile(r"(^|/)chunk-[0-9a-z]+\.js$")
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
    names = {e.name for e in nb.entries}
    if any(n in names for n in SINGLE_NAMES):
        return "single"
    main = nb.graph.main
    if main.kind == "js" and any(_CHUNK.search(e.name) for e in nb.entries if e.kind == "js"):
        return "split"
    raise BadBinary(
        f"{nb.path} is a Bun executable but not a Claude Code build ctxpatch knows",
        why=f"its entry point is {main.name!r}, and it has neither "
        f"{SINGLE_NAMES[0]} nor a loader with chunk-*.js modules",
        hint="pass the `claude` executable of @anthropic-ai/claude-code-<platform>",
        modules=len(nb.entries),
    )


def read_app(nb: NativeBinary) -> App:
    layout = layout_of(nb)
    if layout == "single":
        entry = next(e for e in nb.entries if e.name in SINGLE_NAMES)
        sources: tuple[Source, ...] = (Source(entry.name, nb.read(entry)),)
    else:
        main = nb.graph.main
        chunks = [e for e in nb.entries if e.kind == "js" and _CHUNK.search(e.name)]
        sources = (Source(main.name, nb.read(main)), *(Source(e.name, nb.read(e)) for e in chunks))
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
