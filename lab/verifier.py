"""``ctxpatch verify``'s one entry point: the proofs for one install, cli.js or native build.

:func:`verify_path` picks the proof by what ``path`` is: a native build (the executable, the
native installer's version file or link, a package folder without a ``cli.js``) is verified
through the gateway (:func:`lab.verify_native.verify_native`), anything else as a patched
``cli.js`` (:func:`lab.verify.verify_install`). Both return a :class:`lab.verify.VerifyReport` (the
native one with its :class:`lab.verify.NativeRun` part) and refuse with a ``CtxpatchError``.
"""

from __future__ import annotations

from pathlib import Path

from lab.verify import VerifyReport


def is_native_target(path: Path) -> bool:
    """A native build (:func:`patcher.discover.native_of`), or a package folder without a
    ``cli.js`` (whose missing binary :func:`lab.verify_native.verify_native` names)."""
    from patcher.discover import native_of

    if native_of(path) is not None:
        return True
    return path.is_dir() and not (path / "cli.js").exists()


def verify_path(path: Path, *, timeout: float = 120) -> VerifyReport:
    """The proofs on the install at ``path``; raises CtxpatchError on a refusal."""
    if is_native_target(path):
        from lab.verify_native import verify_native

        return verify_native(path, timeout=timeout)
    from lab.verify import verify_install

    return verify_install(path, timeout=timeout)
