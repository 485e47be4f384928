"""The e2e lab's modules wherever they are: ``lab/`` after the renovation (issue 17),
``lab/`` before it. For test files written across the move."""

from __future__ import annotations

import importlib
from types import ModuleType


def lab(name: str) -> ModuleType:
    try:
        return importlib.import_module(f"lab.{name}")
    except ModuleNotFoundError as exc:
        if exc.name not in ("lab", f"lab.{name}"):
            raise
        return importlib.import_module(f"lab.{name}")
