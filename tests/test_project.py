"""Project metadata: one version, the license file pyproject names, a changelog others extend."""

from __future__ import annotations

import re
import tomllib
import warnings
from pathlib import Path

import patcher

ROOT = Path(__file__).resolve().parents[1]


def test_the_version_is_set_in_one_place() -> None:
    """pyproject has no version of its own: setuptools reads patcher.__version__."""
    from setuptools.config.pyprojecttoml import read_configuration

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in meta["project"] and "version" in meta["project"]["dynamic"]
    assert meta["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "patcher.__version__"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # setuptools' "beta" note on [tool.setuptools]
        built = read_configuration(ROOT / "pyproject.toml")["project"]["version"]
    assert built == patcher.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", patcher.__version__)


def test_license_is_the_mit_text_pyproject_names() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert meta["project"]["license"] == {"text": "MIT"}
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "WITHOUT WARRANTY OF ANY KIND" in text


def test_changelog_has_an_unreleased_section_and_the_current_version() -> None:
    log = (ROOT / "CHANGELOG.md").read_text()
    heads = re.findall(r"^## \[([^\]]+)\]", log, re.M)
    assert heads[0] == "Unreleased"
    unreleased = log.split("\n## [", 2)[1]
    assert patcher.__version__ in heads or f"released as {patcher.__version__}" in unreleased


def test_top_level_import_names_are_this_project() -> None:
    """``engine`` and ``patcher`` are generic top-level names (README "Import names"): another
    installed distribution providing either would shadow or be shadowed by ours. Detected here:
    both import from this checkout, and no other installed distribution claims them."""
    import importlib.metadata as md

    import engine

    for mod in (engine, patcher):
        assert mod.__file__ is not None
        assert Path(mod.__file__).resolve().is_relative_to(ROOT), mod.__file__
    owners = md.packages_distributions()
    for name in ("engine", "patcher"):
        assert set(owners.get(name, ["ctxpatch"])) == {"ctxpatch"}, (name, owners.get(name))
