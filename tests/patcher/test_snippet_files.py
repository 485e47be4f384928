"""The injected snippets are read with a plain open() beside the module (``check`` runs at every
start and importlib.resources costs it ~3 ms of imports); where that fails (a package inside a
zip archive) importlib.resources reads them, and the bytes, hence the recorded sha256, are the
same."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from patcher import snippet


@pytest.fixture
def fresh_cache() -> Iterator[None]:
    snippet._load.cache_clear()
    yield
    snippet._load.cache_clear()


@pytest.mark.parametrize("name", ["text_prune.js", "context_clear.js"])
def test_the_resources_fallback_reads_the_same_bytes(name: str, fresh_cache, monkeypatch) -> None:
    plain = snippet._load(name)
    assert plain.startswith(b"function ") and plain.endswith(b"}\n")
    snippet._load.cache_clear()

    def no_plain_file(*_: object, **__: object) -> None:
        raise NotADirectoryError(20, "Not a directory")  # what open() says inside a zip path

    monkeypatch.setattr(snippet, "open", no_plain_file, raising=False)
    assert snippet._load(name) == plain
