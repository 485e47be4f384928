"""Helpers of the real-package tests (``-m real``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import IN_CI, need

from ctxpatch.errors import CtxpatchError
from patcher import npmcache


def binary(version: str) -> Path:
    """The real linux-x64 native ``claude`` of ``version`` from the npm-pack cache (fetched with
    npm pack when missing). npm missing or the fetch failing: skip locally, fail in CI."""
    need("npm", "native builds are downloaded with npm pack")
    try:
        return npmcache.native_binary("cc", version)
    except CtxpatchError as e:
        if IN_CI:
            raise
        pytest.skip(f"cannot fetch claude-code-linux-x64@{version}: {e.what}")
