"""When the gateway stops clearing: before the unedited prompt can pass the model's window.

With clearing, the usage the API reports is the *edited* prompt's, so Claude Code's own
auto-compaction (a threshold on that count) stops firing while the prompt it sends keeps
growing. Whether the API measures the window on the prompt as sent or after clearing is not
documented; in the cautious case a prompt past the window is refused (``400 prompt is too
long``). Measured against the mock's ``window`` switch (``tests/e2e/test_over_window.py``):

* native 2.1.330 recovers by itself: on that 400 it compacts (retrying the summary request with
  less history when that is too long as well) and the session goes on;
* 2.1.112 (cli.js, patched) and native 2.1.113 do not: every later request gets the same 400
  ("Prompt is too long") and the user is stuck, ``/compact`` included.

So for Claude Code builds before :data:`RECOVERS_FROM` the gateway stops adding the edit once
the request body is large enough that its unedited prompt may have reached Claude Code's own
auto-compact threshold: that request then reports the whole prompt, and Claude Code compacts
before the next one, as it would without ctxpatch, while the prompt is still inside the window.
The prompt's size is bounded from the body's bytes at :data:`BYTES_PER_TOKEN` (3: JSON of
English and code runs 3.5-4.5 bytes a token, so the guard errs early: clearing stops a little
before it must, never after). The threshold is :func:`engine.thresholds.compute_thresholds`'
for the client's version (its ``User-Agent``), model and environment, at most the window less
Claude Code's default reserve (20,000 output + 13,000 buffer), which is also what a version
without an engine profile gets. Other clients (SDKs: no compaction of their own) keep clearing: stopping would not
help them.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from functools import lru_cache

from engine.twins.context_clear import NEAR_WINDOW_CHARS_PER_TOKEN as BYTES_PER_TOKEN
from engine.twins.context_clear import NEAR_WINDOW_RESERVE as RESERVE
from engine.twins.context_clear import WINDOW_GUARD_RECOVERS_FROM as RECOVERS_FROM

WINDOW, WINDOW_1M = 200_000, 1_000_000
STOPPED = (
    "the unedited prompt nears Claude Code's auto-compact threshold: clearing stopped so its "
    "own compaction fires inside the window (builds before 2.1.330 do not recover from "
    "'prompt is too long')"
)
_UA = re.compile(r"claude-cli/(\d+)\.(\d+)\.(\d+)")


def client_version(user_agent: str) -> tuple[int, int, int] | None:
    """Claude Code's version from its ``User-Agent`` (``claude-cli/2.1.113 (external, cli)``)."""
    m = _UA.search(user_agent)
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


def claude_env(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The variables of ``env`` Claude Code's thresholds read (``CLAUDE_*``, ``DISABLE_*``), as a
    key for the cached thresholds."""
    return tuple(sorted((k, v) for k, v in env.items() if k.startswith(("CLAUDE_", "DISABLE_"))))


def near_threshold(
    user_agent: str, model: str, betas: Collection[str], env: tuple[tuple[str, str], ...]
) -> int | None:
    """The auto-compact threshold the near move's level is of
    (:func:`engine.twins.free_moves.near_level`), for a native client: the engine's for the
    version its ``User-Agent`` names (a client that names none, e.g. an SDK program of its own:
    the newest profile's), its model (``[1m]`` also for a ``context-1m`` beta) and ``env``
    (:func:`claude_env`): 167,000 for a 200K model where the build compacts at it, the window
    where it compacts only once the API refuses the prompt (2.1.195+ without a configured
    window), 1,000,000 for a model the build runs at 1M natively. None for a ``cli.js`` client
    (the near level of the JavaScript ``apply`` injects: the window less its reserve) or one
    the engine has no threshold for."""
    version = client_version(user_agent)
    return _near_threshold(
        ".".join(map(str, version)) if version else None, _as_1m(model, betas)[0], env
    )


@lru_cache(maxsize=64)
def _near_threshold(
    version: str | None, model: str, env: tuple[tuple[str, str], ...]
) -> int | None:
    from engine.profiles import PROFILES
    from engine.versions import is_native

    v = PROFILES[-1].last if version is None else version
    return _engine_threshold(v, model, env) if is_native(v) else None


GUARD_ENV = "CLAUDE_CTX_CLEAR_WINDOW_GUARD"
"""``1`` turns the guard on (off by default: Anthropic's context-editing documentation presents
clearing as what keeps a conversation within the context window, i.e. the window is measured on
the edited prompt; the guard is for the cautious reading, where it is measured before clearing,
which no measurement here can settle without the real API)."""


def stop_clearing(
    user_agent: str,
    model: str | None,
    betas: Collection[str],
    body_size: int,
    env: Mapping[str, str],
) -> bool:
    """Whether this request goes without the edit (see the module docstring); only with
    :data:`GUARD_ENV` set to ``1``."""
    if env.get(GUARD_ENV) != "1":
        return False
    version = client_version(user_agent)
    if version is None or version >= RECOVERS_FROM:
        return False
    return body_size / BYTES_PER_TOKEN >= threshold(version, model or "", betas, env)


def threshold(
    version: tuple[int, int, int], model: str, betas: Collection[str], env: Mapping[str, str]
) -> int:
    """Claude Code's auto-compact threshold for this client (tokens)."""
    engine_model, one_m = _as_1m(model, betas)
    engine_says = _engine_threshold(".".join(map(str, version)), engine_model, claude_env(env))
    default = (WINDOW_1M if one_m else WINDOW) - RESERVE
    # never past the window less the reserve: a profile whose own auto-compaction is off
    # (2.1.330's without a configured window) must not turn the guard off
    return default if engine_says is None else min(engine_says, default)


def _as_1m(model: str, betas: Collection[str]) -> tuple[str, bool]:
    """(the model id the engine reads, with ``[1m]`` also for a ``context-1m`` beta; whether
    the request asks for the 1M window)."""
    one_m = "[1m]" in model or any("context-1m" in b for b in betas)
    return (model + "[1m]" if one_m and "[1m]" not in model else model), one_m


@lru_cache(maxsize=64)
def _engine_threshold(version: str, model: str, env: tuple[tuple[str, str], ...]) -> int | None:
    try:
        from engine.claude_code.thresholds import compute_thresholds
        from engine.profiles import profile_for

        th = compute_thresholds(profile_for(version), model, dict(env))
    except Exception:  # no profile for this version, an odd model id: the default
        return None
    return th.auto_compact if th.auto_compact_enabled else None
