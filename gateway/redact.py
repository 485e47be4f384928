"""Headers as the gateway may log them: every credential replaced by ``<redacted>``."""

from __future__ import annotations

from collections.abc import Iterable

SECRET_WORDS = ("key", "auth", "cookie", "token", "secret", "session", "signature")
REDACTED = "<redacted>"


def is_secret(name: str) -> bool:
    """``x-api-key``, ``authorization``, ``proxy-authorization``, ``cookie``, ``set-cookie``
    and anything else whose name mentions a key, token, secret, session or signature."""
    low = name.lower()
    return any(w in low for w in SECRET_WORDS)


def redacted(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """``headers`` (repeated names joined by ``, ``) with secret values hidden."""
    out: dict[str, str] = {}
    for name, value in headers:
        shown = REDACTED if is_secret(name) else value
        out[name] = f"{out[name]}, {shown}" if name in out else shown
    return out
