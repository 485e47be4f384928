"""scripts/readme_block.py: the one replacement of README's generated blocks (used by
clearing_table, public_scoreboard and support_matrix)."""

from __future__ import annotations

import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
from readme_block import markers, replace_block


def test_the_block_between_its_markers_is_replaced_and_nothing_else() -> None:
    b, e = markers("t")
    text = f"intro\n{b}\nold\nlines\n{e}\nrest {e}\n"
    assert replace_block(text, "t", "new") == f"intro\n{b}\nnew\n{e}\nrest {e}\n"
    # another block's markers are not this one's
    assert replace_block(text, "other", "new") is None


def test_missing_or_reversed_markers_change_nothing() -> None:
    b, e = markers("t")
    assert replace_block("no markers", "t", "x") is None
    assert replace_block(f"{b} but no end", "t", "x") is None
    assert replace_block(f"{e} before {b}", "t", "x") is None
