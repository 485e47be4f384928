"""scripts/readme_block.py: the one replacement of the generated blocks in docs/ (used by
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


# Each generated block lives in the docs file that holds its section (README.md keeps none: it
# is the short page a user reads); the script's usage line names that file.
BLOCK_HOMES = {
    "clearing_table": ("clearing-table", "docs/clearing-defaults.md"),
    "public_scoreboard": ("public-scoreboard", "docs/simulate.md"),
    "support_matrix": ("support-matrix", "docs/supported-versions.md"),
}


def test_every_generated_block_is_in_its_docs_file_and_the_script_names_it() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for script, (name, doc) in BLOCK_HOMES.items():
        begin, end = markers(name)
        text = (ROOT / doc).read_text(encoding="utf-8")
        assert text.count(begin) == 1 and text.count(end) == 1, doc
        assert text.index(begin) < text.index(end), doc
        assert begin not in readme and end not in readme, name
        source = (ROOT / "scripts" / f"{script}.py").read_text(encoding="utf-8")
        assert f'BLOCK = "{name}"' in source and f"--doc {doc}" in source, script
        # the doc's own regeneration command names the doc itself
        assert f"--doc {doc}" in text, doc
