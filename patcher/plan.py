"""Pure planning: what a file is, and the exact bytes apply / revert would write.

No I/O here. ``patcher.ops`` reads the file, calls these, verifies, and writes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ctxpatch import __version__
from ctxpatch.errors import AmbiguousTarget, ForeignPatch, TargetNotFound, Unsupported
from patcher import callsite, clearsite, markers
from patcher.markers import Marks
from patcher.versions import FIRST_WITH_MICROCOMPACT, is_supported_version


@dataclass(frozen=True)
class Edit:
    """Insert ``text`` at byte ``at`` of the original."""

    at: int
    text: bytes


def apply_edits(data: bytes, edits: list[Edit]) -> bytes:
    """Apply insertions at offsets of the original (one copy of the file); equal offsets are
    refused."""
    ordered = sorted(edits, key=lambda e: e.at)
    if len({e.at for e in ordered}) != len(ordered):
        raise ValueError("two edits at the same offset")
    parts, pos = [], 0
    for e in ordered:
        parts += [data[pos : e.at], e.text]
        pos = e.at
    parts.append(data[pos:])
    return b"".join(parts)


@dataclass(frozen=True)
class Patch:
    original: bytes
    new: bytes
    site: callsite.Site
    edits: tuple[Edit, ...]
    clearing: clearsite.Found | None = None  # None: clearing was not asked for


def locate(data: bytes, version: str | None) -> callsite.Site:
    """Exactly one loop call site, or a CtxpatchError that says why not."""
    found = callsite.search(data)
    if len(found.candidates) == 1:
        return callsite.Site(found.candidates[0], found.mc_functions)
    if found.candidates:
        listing = "; ".join(
            f"byte {c.call_start} in {c.generator or 'an anonymous generator'}: {c.excerpt}"
            for c in found.candidates
        )
        raise AmbiguousTarget(
            f"found {len(found.candidates)} candidate micro-compaction calls, expected exactly one",
            why="ctxpatch refuses to guess which call is the query loop's: " + listing,
            hint="please report this build (version and sha256) so ctxpatch can learn its shape",
            version=version,
        )
    has_mc = bool(found.mc_functions) or found.deps_calls > 0
    if not has_mc and is_supported_version(version) is False:
        raise Unsupported(
            f"Claude Code {version} has no micro-compaction step",
            why=f"micro-compaction first appeared in Claude Code {FIRST_WITH_MICROCOMPACT}; "
            "the text prune is injected right after it, so there is nowhere to put it",
            hint="upgrade to @anthropic-ai/claude-code 1.0.60-2.1.112 (or the agent SDK "
            "0.0.4-0.2.112)",
            version=version,
        )
    why = (
        "no function reads DISABLE_MICROCOMPACT or emits tengu_microcompact, and there is no "
        "deps.microcompact(...) call"
        if not has_mc
        else "the micro-compaction function was found ("
        + (", ".join(found.mc_functions) or "deps.microcompact")
        + ") but none of its calls is the query loop's: "
        + "; ".join(found.rejected[:6])
    )
    raise TargetNotFound(
        "could not find the query loop's micro-compaction call",
        why=why,
        hint="if this is a real Claude Code cli.js, please report its version and sha256; "
        "ctxpatch refuses to patch what it does not understand",
        version=version,
    )


def plan_patch(
    data: bytes, version: str | None, snippet: bytes, clear_snippet: bytes | None = None
) -> Patch:
    """The patched bytes of an UNPATCHED file: the text prune, and the server-side clearing
    where the loop's request builder is found (``clear_snippet`` given). A file without a
    unique builder still gets the text prune; ``Patch.clearing.reason`` says why not both."""
    stray = data.find(markers.MARK)
    if stray >= 0:  # the text of a marker in a comment or string: ours would be ambiguous
        raise ForeignPatch(
            "this cli.js already holds the text of a ctxpatch marker (in a comment or a string)",
            why=f"at byte {stray}: after patching, ctxpatch could not tell its marks from it",
            hint="please report this build (version and sha256); nothing was written",
            version=version,
        )
    found = locate(data, version)
    c = found.candidate
    clearing = clearsite.locate(data) if clear_snippet is not None else None
    builder = clearing.builder if clearing is not None else None
    block = markers.render_block(
        snippet,
        version=__version__,
        original_sha=markers.sha256(data),
        shape=found.shape,
        clear_snippet=clear_snippet if builder is not None else None,
        clear_shape=builder.shape if builder is not None else markers.NO_CLEARING,
    )
    edits = [
        Edit(markers.insertion_point(data), block),
        Edit(c.wrap_start, markers.WRAP_OPEN),
        Edit(c.wrap_end, markers.WRAP_CLOSE),
    ]
    if builder is not None:
        edits += [
            Edit(builder.object_start, markers.CLEAR_OPEN),
            Edit(builder.object_end, markers.CLEAR_CLOSE),
        ]
        for w in builder.watches:
            edits += [Edit(w.start, markers.WATCH_OPEN), Edit(w.end, markers.WATCH_CLOSE)]
    return Patch(data, apply_edits(data, edits), found, tuple(edits), clearing)


def unpatched_original(marks: Marks) -> bytes:
    """The original bytes of a PATCHED or OUTDATED file (``markers.read`` proved its sha)."""
    if marks.original is None:
        raise ValueError(f"no proven original for a {marks.state.value} file")
    return marks.original


def refuse_foreign(marks: Marks, path: object, version: str | None) -> ForeignPatch:
    hint = (
        "run `ctxpatch revert` (it restores the ruflo backup cli.js.backup after checking it), "
        "then `ctxpatch apply`"
        if marks.foreign_kind == "ruflo"
        else "reinstall the package (npm install), then run `ctxpatch apply`"
    )
    return ForeignPatch(
        f"{path} was modified by something other than this ctxpatch",
        why=marks.reason,
        hint=hint,
        version=version,
    )
