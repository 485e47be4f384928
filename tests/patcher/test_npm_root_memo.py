"""``npm root -g`` is asked once and remembered with everything npm derives it from
(``patcher.discover.npm_global_root``): a ``check`` at every start must not pay a node start."""

from __future__ import annotations

import os
from pathlib import Path

from patcher.discover import npm_global_root


def fake_npm(tmp_path: Path) -> tuple[dict[str, str], Path, Path]:
    """A PATH with an ``npm`` that logs each call and answers a global root that exists."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    root = tmp_path / "prefix" / "lib" / "node_modules"
    root.mkdir(parents=True)
    calls = tmp_path / "calls"
    npm = bin_dir / "npm"
    npm.write_text(f'#!/bin/sh\necho "$@" >> {calls}\necho {root}\n')
    npm.chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    env = {
        "PATH": f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin",
        "HOME": str(home),
        "CTXPATCH_CACHE": str(tmp_path / "cache"),
    }
    return env, root, calls


def n_calls(calls: Path) -> int:
    return len(calls.read_text().splitlines()) if calls.exists() else 0


def test_npm_is_asked_once_then_remembered(tmp_path: Path) -> None:
    env, root, calls = fake_npm(tmp_path)
    assert npm_global_root(env) == root and n_calls(calls) == 1
    assert npm_global_root(env) == root and n_calls(calls) == 1  # remembered
    assert (tmp_path / "cache" / "npm-root-g.json").is_file()


def test_what_npm_reads_changed_asks_again(tmp_path: Path) -> None:
    env, root, calls = fake_npm(tmp_path)
    npm_global_root(env)
    # a prefix given in the environment
    assert npm_global_root({**env, "npm_config_prefix": "/opt/x"}) == root
    assert n_calls(calls) == 2
    # the user's npmrc written
    (Path(env["HOME"]) / ".npmrc").write_text("prefix=/opt/y\n")
    npm_global_root(env)
    assert n_calls(calls) == 3
    # the remembered folder is gone
    root.rmdir()
    assert npm_global_root(env) is not None and n_calls(calls) == 4
    # npm itself replaced (an upgrade): new size
    npm = Path(env["PATH"].split(os.pathsep)[0]) / "npm"
    npm.write_text(npm.read_text() + "# upgraded\n")
    npm_global_root(env)
    assert n_calls(calls) == 5


def test_a_broken_memo_or_unwritable_cache_costs_only_the_npm_call(tmp_path: Path) -> None:
    env, root, calls = fake_npm(tmp_path)
    memo = tmp_path / "cache" / "npm-root-g.json"
    memo.parent.mkdir()
    memo.write_text("{not json")
    assert npm_global_root(env) == root and n_calls(calls) == 1
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("")
    assert npm_global_root({**env, "CTXPATCH_CACHE": str(blocked)}) == root
    assert npm_global_root({**env, "CTXPATCH_CACHE": str(blocked)}) == root
    assert n_calls(calls) == 3  # nothing could be remembered there: asked each time


def test_no_npm_on_path_means_no_global_search(tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path), "HOME": str(tmp_path), "CTXPATCH_CACHE": str(tmp_path)}
    assert npm_global_root(env) is None
    assert npm_global_root({**env, "CTXPATCH_NPM_ROOT": ""}) is None
    assert npm_global_root({**env, "CTXPATCH_NPM_ROOT": "/x/y"}) == Path("/x/y")
