"""Helpers of the real-package tests (``-m real``)."""

from __future__ import annotations

from pathlib import Path

import native_builds
import pytest
from conftest import IN_CI, need

from ctxpatch.errors import CtxpatchError


def binary(version: str) -> Path:
    """The real linux-x64 native ``claude`` of ``version``: its tarball from the npm-pack cache
    (fetched with npm pack when missing), unpacked for this session (tests/native_builds.py).
    npm missing or the fetch failing: skip locally, fail in CI."""
    need("npm", "native builds are downloaded with npm pack")
    try:
        return native_builds.native(version)
    except CtxpatchError as e:
        if IN_CI:
            raise
        pytest.skip(f"cannot fetch claude-code-linux-x64@{version}: {e.what}")
