"""``ctxpatch inspect --json`` on every synthetic fixture, pinned key for key.

The golden file was written by the single-module inspector before it was split into
``patcher/inspect/`` and pins the JSON (keys, values, order of ``drift``/``compared``/
``unresolved``) on each fixture, also compared with two other versions' profiles (drift).
After an intended change of the output: ``python3 tests/patcher/test_inspect_golden.py``
rewrites it; review the diff.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from patcher.inspection import inspect_cli_js  # noqa: E402

FIXTURES = ROOT / "fixtures" / "cli_js"
GOLDEN = Path(__file__).parent / "golden" / "inspect.json"
OTHER_VERSIONS = ("2.0.76", "2.1.112")


def _document(name: str) -> dict:
    data = (FIXTURES / name).read_bytes()
    doc = {"own": inspect_cli_js(data).report}
    for version in OTHER_VERSIONS:
        doc[version] = inspect_cli_js(data, version).report["drift"]
    return json.loads(json.dumps(doc))  # tuples -> lists, as the CLI prints them


def _fixtures() -> list[str]:
    return sorted(p.name for p in FIXTURES.glob("*.js"))


def test_every_fixture_has_a_golden_document() -> None:
    assert sorted(json.loads(GOLDEN.read_text())) == _fixtures()


@pytest.mark.parametrize("name", _fixtures())
def test_inspect_json_matches_the_golden_document(name: str) -> None:
    assert _document(name) == json.loads(GOLDEN.read_text())[name]


if __name__ == "__main__":
    GOLDEN.write_text(
        json.dumps({n: _document(n) for n in _fixtures()}, indent=1, sort_keys=True) + "\n"
    )
    print(f"wrote {GOLDEN}")
