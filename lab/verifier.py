"""``ctxpatch verify``'s one entry point: the proofs for one install, cli.js or native build.

:func:`verify_path` picks the proof by what ``path`` is: a native build (the executable, the
native installer's version file or link, a package folder without a ``cli.js``) is verified
through the gateway (:func:`lab.verify_native.verify_native`), anything else as a patched
``cli.js`` (:func:`lab.verify.verify_install`). Both return a :class:`lab.verify.VerifyReport` (the
native one with its :class:`lab.verify.NativeRun` part) and refuse with a ``CtxpatchError``.
"""

from __future__ import annotations

from pathlib import Path

from lab import verify, verify_native
from lab.verify import VerifyReport
from patcher.discover import native_of


def is_native_target(path: Path) -> bool:
    """A native build (:func:`patcher.discover.native_of`), or a package folder without a
    ``cli.js`` (whose missing binary :func:`lab.verify_native.verify_native` names)."""
    if native_of(path) is not None:
        return True
    return path.is_dir() and not (path / "cli.js").exists()


def verify_path(path: Path, *, timeout: float = 120) -> VerifyReport:
    """The proofs on the install at ``path``; raises CtxpatchError on a refusal."""
    if is_native_target(path):
        return verify_native.verify_native(path, timeout=timeout)
    return verify.verify_install(path, timeout=timeout)
