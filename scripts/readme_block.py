"""The generated blocks of the docs (docs/simulate.md, docs/clearing-defaults.md,
docs/supported-versions.md): the text between ``<!-- NAME:begin -->`` and
``<!-- NAME:end -->``, replaced by the script that owns NAME (clearing_table, public_scoreboard,
support_matrix)."""

from __future__ import annotations

from pathlib import Path


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def replace_block(text: str, name: str, body: str) -> str | None:
    """``text`` with the NAME block holding ``body`` (markers kept, each on its own line); None
    when ``text`` has no such block."""
    begin, end = markers(name)
    start = text.find(begin)
    stop = text.find(end, start + len(begin)) if start >= 0 else -1
    if stop < 0:
        return None
    return text[: start + len(begin)] + "\n" + body + "\n" + text[stop:]


def update_file(path: Path, name: str, body: str) -> bool:
    """Replace the NAME block of ``path`` in place; False (file untouched) when it has none."""
    new = replace_block(path.read_text(encoding="utf-8"), name, body)
    if new is None:
        return False
    path.write_text(new, encoding="utf-8")
    return True
