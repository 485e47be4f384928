"""Project metadata: one version, the license file pyproject names, a changelog others extend."""

from __future__ import annotations

import re
import tomllib
import warnings
from pathlib import Path

import ctxpatch

ROOT = Path(__file__).resolve().parents[1]


def test_the_version_is_set_in_one_place() -> None:
    """pyproject has no version of its own: setuptools reads ctxpatch.__version__."""
    from setuptools.config.pyprojecttoml import read_configuration

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in meta["project"] and "version" in meta["project"]["dynamic"]
    assert meta["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "ctxpatch.__version__"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # setuptools' "beta" note on [tool.setuptools]
        built = read_configuration(ROOT / "pyproject.toml")["project"]["version"]
    assert built == ctxpatch.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", ctxpatch.__version__)


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
    assert ctxpatch.__version__ in heads or f"released as {ctxpatch.__version__}" in unreleased


def top_level_packages() -> list[str]:
    """Every package at the checkout's top level (a folder with ``__init__.py``)."""
    return sorted(p.parent.name for p in ROOT.glob("*/__init__.py"))


def test_every_package_is_shipped_and_type_checked() -> None:
    """The floor plan (README "Layout"): the product shell ``ctxpatch`` and the halves beside it.
    Each top-level package is in the wheel, under mypy and in the import contract (its layers,
    which lint-imports checks in .ci/run); none is left out of any."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = top_level_packages()
    assert {"ctxpatch", "patcher", "engine", "gateway", "lab"} <= set(packages), packages
    include = meta["tool"]["setuptools"]["packages"]["find"]["include"]
    checked = meta["tool"]["mypy"]["files"]
    contract = meta["tool"]["importlinter"]
    layered = " ".join(
        " ".join(c["layers"]) for c in contract["contracts"] if c["type"] == "layers"
    )
    for name in packages:
        assert name in include and f"{name}.*" in include, (name, include)
        assert name in checked, (name, checked)
        assert name in contract["root_packages"] and name in layered, (name, contract)
    assert meta["project"]["scripts"] == {"ctxpatch": "ctxpatch.cli:main"}
    assert (ROOT / "ctxpatch" / "cli" / "__init__.py").is_file()
    assert (ROOT / "ctxpatch" / "errors.py").is_file()


def test_top_level_import_names_are_this_project() -> None:
    """``engine``, ``patcher``, ``lab`` and the other top-level names are generic (docs/development.md
    "Import names"): another installed distribution providing one would shadow or be shadowed by ours.
    Detected here: each imports from this checkout, and no other installed distribution claims it."""
    import importlib
    import importlib.metadata as md

    owners = md.packages_distributions()
    for name in top_level_packages():
        mod = importlib.import_module(name)
        assert mod.__file__ is not None
        assert Path(mod.__file__).resolve().is_relative_to(ROOT), mod.__file__
        assert set(owners.get(name, ["ctxpatch"])) == {"ctxpatch"}, (name, owners.get(name))


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components of more than one module: the import cycles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_strongly_connected_finds_a_cycle() -> None:
    """The cycle finder itself: a -> b -> a is one component, c alone is none."""
    assert strongly_connected({"a": {"b"}, "b": {"a", "c"}, "c": set()}) == [["a", "b"]]


def test_no_import_cycle() -> None:
    """No module imports itself through others (function-level imports included): grimp's graph,
    the one lint-imports checks the layers on, over every top-level package."""
    import grimp

    packages = top_level_packages()
    g = grimp.build_graph(*packages)
    graph = {m: set(g.find_modules_directly_imported_by(m)) for m in g.modules}
    assert strongly_connected(graph) == []


def test_the_files_started_first_exist() -> None:
    """conftest.LONGEST_FIRST names test files by path: a renamed one would silently lose its
    place at the front of the parallel run."""
    from conftest import LONGEST_FIRST

    assert LONGEST_FIRST and all((ROOT / name).is_file() for name in LONGEST_FIRST)
