"""The one line every command prints for a Claude Code version newer than every engine profile
(the native builds move faster than the profiles: 2.1.332 installed, profiles up to 2.1.330)."""

from __future__ import annotations

from engine.profiles import beyond_profiles


def newer_than_profiles(version: str | None) -> str | None:
    """The warning for ``version`` when it is newer than every engine profile, else None (also
    for no version or one that is not X.Y.Z)."""
    if not version:
        return None
    try:
        newest = beyond_profiles(version)
    except ValueError:
        return None
    if newest is None:
        return None
    return (
        f"Claude Code {version} is newer than every engine profile (the newest ends at "
        f"{newest}): its numbers are extrapolated"
    )
