"""Python twin of the injected ``patcher/snippets/context_clear.js``: the edit it sends.

The ``CLAUDE_CTX_CLEAR_*`` knobs the injected JavaScript reads on every request
(:func:`knobs_from_env`, :func:`knob_errors`, :func:`step_from_env`; defaults ``DEFAULT_*``)
and how it fits the ``clear_tool_uses_20250919`` edit to the messages of each request
(:func:`edit_for_request`). The differential tests run both on the same inputs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from engine.api.context_editing import blocks_of, is_block, tool_uses
from engine.api.context_management import ClearToolUses
from engine.javascript import js_json_stringify, utf16_len

ENV_TRIGGER = "CLAUDE_CTX_CLEAR_TRIGGER"
ENV_KEEP = "CLAUDE_CTX_CLEAR_KEEP"
ENV_AT_LEAST = "CLAUDE_CTX_CLEAR_AT_LEAST"
ENV_EXCLUDE = "CLAUDE_CTX_CLEAR_EXCLUDE_TOOLS"
ENV_INPUTS = "CLAUDE_CTX_CLEAR_TOOL_INPUTS"
ENV_DISABLE = "CLAUDE_CTX_CLEAR_DISABLE"
ENV_STEP = "CLAUDE_CTX_CLEAR_STEP"
# the online policy's (engine.twins.policy)
ENV_POLICY = "CLAUDE_CTX_CLEAR_POLICY"
ENV_CEILING = "CLAUDE_CTX_CLEAR_CEILING"
ENV_PATIENCE = "CLAUDE_CTX_CLEAR_PATIENCE"
ENV_FREE = "CLAUDE_CTX_CLEAR_FREE"  # the free move's (engine.twins.free_moves)
ENV_MARGIN = "CLAUDE_CTX_CLEAR_MARGIN"  # the near move's (engine.twins.free_moves)
FREE_OFF = ("0", "false", "no", "off")
FREE_ON = ("1", "true", "yes", "on")
ENV_NAMES = (
    ENV_TRIGGER,
    ENV_KEEP,
    ENV_AT_LEAST,
    ENV_EXCLUDE,
    ENV_INPUTS,
    ENV_DISABLE,
    ENV_STEP,
    ENV_POLICY,
    ENV_CEILING,
    ENV_PATIENCE,
    ENV_FREE,
    ENV_MARGIN,
)

# Chosen by bench/clearing_sweep.py over the shared real sessions (README, "Server-side
# clearing"); the injected JavaScript (patcher/snippets/context_clear.js) has the same ones, a
# differential test holds the two together.
DEFAULT_TRIGGER = 50_000  # input tokens, under the fixed STEP rule (CLAUDE_CTX_CLEAR_POLICY=fixed)
# input tokens, under the paid policy (the default). The paid rule decides every move, so the
# trigger only delays them: a move made under it (a free or expiry move at a pause) is held, and
# the server applies it later, where the prompt first crosses the trigger, a full cache rewrite
# at a request that reads it (docs/clearing-defaults.md). A trigger at or under the system
# prompt and tools a request always sends applies every move where it is made.
DEFAULT_PAID_TRIGGER = 30_000
DEFAULT_KEEP = 3  # tool uses, under the fixed STEP rule (CLAUDE_CTX_CLEAR_POLICY=fixed)
# tool uses, under the paid policy (the default): its moves are few and each clears all it may,
# so the floor decides how much a move frees (docs/clearing-defaults.md: KEEP 1 reaches more of
# the oracle's saving than 3 with no session dearer and no compaction more)
DEFAULT_PAID_KEEP = 1
DEFAULT_AT_LEAST: int | None = None  # input tokens; None = no minimum
DEFAULT_EXCLUDE: tuple[str, ...] = ()
DEFAULT_TOOL_INPUTS: bool | tuple[str, ...] = True
DEFAULT_STEP = 20  # tool uses between two moves of the cleared boundary (see edit_for_request)


def _env_int(env: Mapping[str, str], name: str, minimum: int) -> int | None:
    """The knob as an integer >= minimum; ``None`` when unset, blank or invalid.

    Valid: 1 to 9 ASCII digits once blanks around and ``_`` separators are dropped, like the
    injected JavaScript (``str.isdigit`` alone takes "²", on which ``int`` raises, and
    arbitrarily long numbers, which JavaScript would round)."""
    raw = (env.get(name) or "").strip().replace("_", "")
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 9):
        return None
    value = int(raw)
    return value if value >= minimum else None


def _env_names(raw: str) -> tuple[str, ...]:
    return tuple(n for n in (p.strip() for p in raw.split(",")) if n)


def knob_errors(env: Mapping[str, str]) -> list[str]:
    """What is wrong with the set knobs (each is then ignored and its default used)."""
    errors = []
    ints = ((ENV_TRIGGER, 1), (ENV_KEEP, 0), (ENV_AT_LEAST, 0), (ENV_STEP, 1))
    for name, minimum in (*ints, (ENV_CEILING, 1), (ENV_PATIENCE, 0), (ENV_MARGIN, 0)):
        raw = env.get(name)
        if raw is not None and raw.strip() and _env_int(env, name, minimum) is None:
            errors.append(f"{name}={raw!r} is not an integer >= {minimum}; the default is used")
    policy = env.get(ENV_POLICY)
    if policy is not None and policy.strip() and policy.strip().lower() not in POLICIES:
        errors.append(f"{ENV_POLICY}={policy!r} is not paid or fixed; the default is used")
    free = env.get(ENV_FREE)
    if free is not None and free.strip() and free.strip().lower() not in FREE_OFF + FREE_ON:
        errors.append(f"{ENV_FREE}={free!r} is not 0 or 1; the default (on) is used")
    return errors


def knobs_from_env(env: Mapping[str, str]) -> ClearToolUses | None:
    """The ``clear_tool_uses_20250919`` edit the injected JavaScript sends, from the knobs.

    * ``CLAUDE_CTX_CLEAR_DISABLE=1`` -> ``None`` (no edit, no beta added).
    * ``CLAUDE_CTX_CLEAR_TRIGGER`` input tokens (integer >= 1), ``CLAUDE_CTX_CLEAR_KEEP`` tool
      uses (>= 0), ``CLAUDE_CTX_CLEAR_AT_LEAST`` input tokens (>= 0; 0 = no minimum). Digits
      with optional ``_`` separators; anything else is ignored (the default is used) so that a
      typo never makes a request the API rejects (:func:`knob_errors` says which).
    * ``CLAUDE_CTX_CLEAR_EXCLUDE_TOOLS`` comma list of tool names (blanks dropped).
    * ``CLAUDE_CTX_CLEAR_TOOL_INPUTS``: ``1``/``true`` -> all cleared uses, ``0``/``false``/empty
      -> none, anything else -> a comma list of tool names.
    """
    if (env.get(ENV_DISABLE) or "").strip().lower() in ("1", "true", "yes", "on"):
        return None
    trigger = _env_int(env, ENV_TRIGGER, 1) or default_trigger(env)
    keep = _env_int(env, ENV_KEEP, 0)
    at_least = _env_int(env, ENV_AT_LEAST, 0)
    if at_least is None:
        at_least = DEFAULT_AT_LEAST
    exclude = _env_names(env.get(ENV_EXCLUDE) or "") or DEFAULT_EXCLUDE
    raw_inputs = (env.get(ENV_INPUTS) or "").strip()
    inputs: bool | tuple[str, ...]
    if raw_inputs.lower() in ("1", "true"):
        inputs = True
    elif raw_inputs.lower() in ("0", "false"):
        inputs = False
    else:
        inputs = _env_names(raw_inputs) or DEFAULT_TOOL_INPUTS
    return ClearToolUses(
        trigger_value=trigger,
        keep=default_keep(env) if keep is None else keep,
        clear_at_least=at_least or None,
        exclude_tools=exclude,
        clear_tool_inputs=inputs,
    )


POLICIES = ("paid", "fixed")
DEFAULT_POLICY = "paid"


def policy_from_env(env: Mapping[str, str]) -> str:
    """``CLAUDE_CTX_CLEAR_POLICY``: ``paid`` or ``fixed`` (the STEP rule); else the default."""
    raw = (env.get(ENV_POLICY) or "").strip().lower()
    return raw if raw in POLICIES else DEFAULT_POLICY


def default_trigger(env: Mapping[str, str]) -> int:
    """TRIGGER when ``CLAUDE_CTX_CLEAR_TRIGGER`` is unset or invalid: :data:`DEFAULT_TRIGGER`
    for the fixed STEP rule, :data:`DEFAULT_PAID_TRIGGER` for the paid policy."""
    return DEFAULT_TRIGGER if policy_from_env(env) == "fixed" else DEFAULT_PAID_TRIGGER


def default_keep(env: Mapping[str, str]) -> int:
    """KEEP when ``CLAUDE_CTX_CLEAR_KEEP`` is unset or invalid: :data:`DEFAULT_KEEP` for the
    fixed STEP rule, :data:`DEFAULT_PAID_KEEP` for the paid policy (any other value of
    ``CLAUDE_CTX_CLEAR_POLICY`` is the paid policy: :func:`policy_from_env`)."""
    return DEFAULT_KEEP if policy_from_env(env) == "fixed" else DEFAULT_PAID_KEEP


def trailing_results(messages: Sequence[Mapping[str, Any]]) -> int:
    """``tool_result`` blocks after the last assistant message: the round the model is about to
    read for the first time."""
    n = 0
    for m in reversed(messages):
        if m.get("role") == "assistant":
            break
        n += sum(1 for b in blocks_of(m) if is_block(b, "tool_result"))
    return n


def step_from_env(env: Mapping[str, str]) -> int:
    """``CLAUDE_CTX_CLEAR_STEP`` (integer >= 1, else :data:`DEFAULT_STEP`)."""
    return _env_int(env, ENV_STEP, 1) or DEFAULT_STEP


def edit_for_request(
    edit: ClearToolUses, messages: Sequence[Mapping[str, Any]], step: int = 1
) -> ClearToolUses:
    """The edit the injected JavaScript sends with ``messages``.

    * ``step`` (``CLAUDE_CTX_CLEAR_STEP``): the server keeps no state and clears every tool use
      but the last ``keep`` on every request, so with a plain ``keep`` one more result is
      cleared per new tool use and the prompt changes before every earlier cache breakpoint:
      each request rewrites the whole cache. With ``n`` tool uses the edit keeps ``n - c`` where
      ``c = floor((n - keep) / step) * step``: between ``keep`` and ``keep + step - 1`` uses
      are kept and the cleared set grows only every ``step`` tool uses (one cache rewrite per
      ``step`` uses; ``step=1`` is the plain API ``keep``).
    * ``keep`` is raised to the results of the round in progress (:func:`trailing_results`)
      when that round has more parallel tool uses, so the server never replaces a result the
      model has not seen yet. Either way the uses kept are the newest, so what is cleared only
      grows from one request to the next.
    """
    keep = edit.keep
    if step > 1:
        n = len(tool_uses(messages))
        if n > keep:
            keep = n - (n - keep) // step * step
    keep = max(keep, trailing_results(messages))
    return edit if keep == edit.keep else replace(edit, keep=keep)


ENV_WINDOW_GUARD = "CLAUDE_CTX_CLEAR_WINDOW_GUARD"
"""``1``: leave the edit out :func:`near_window` (off by default; ``gateway/window.py`` says why)."""
NEAR_WINDOW_CHARS_PER_TOKEN = 3
NEAR_WINDOW_RESERVE = 20_000 + 13_000
WINDOW_GUARD_RECOVERS_FROM = (2, 1, 330)
"""The first build measured to compact by itself on ``prompt is too long`` (the guard is for the
builds before it: ``gateway/window.py``)."""


REPLAY_ENV_NAMES = (*ENV_NAMES, ENV_WINDOW_GUARD)
"""The clearing variables a replay reads: the knobs and the window guard."""


def guard_on(env: Mapping[str, str]) -> bool:
    """Whether the window guard is asked for (:data:`ENV_WINDOW_GUARD` is ``1``)."""
    return env.get(ENV_WINDOW_GUARD) == "1"


def window_threshold(model: str, betas: Sequence[str] = ()) -> int:
    """Claude Code's auto-compact threshold as the injected JavaScript reads it off a request:
    the window (1,000,000 for a ``[1m]`` model or a ``context-1m`` beta, else 200,000) less
    :data:`NEAR_WINDOW_RESERVE`."""
    one_m = "[1m]" in model or any("context-1m" in b for b in betas)
    return (1_000_000 if one_m else 200_000) - NEAR_WINDOW_RESERVE


def near_window_limit(one_m: bool) -> int:
    """The request size (characters) from which :func:`near_window` leaves the edit out: Claude
    Code's auto-compact threshold (the window less 20000 reserved output and 13000 buffer) at 3
    characters a token."""
    return ((1_000_000 if one_m else 200_000) - NEAR_WINDOW_RESERVE) * NEAR_WINDOW_CHARS_PER_TOKEN


def near_window(request: Mapping[str, Any]) -> bool:
    """``nearWindow`` of the injected JavaScript: the request's messages, system and tools as
    JSON hold at least as many characters (UTF-16 units, as JavaScript counts them) as Claude
    Code's auto-compact threshold (the window, 1M with ``[1m]`` or a ``context-1m`` beta, less
    20000 reserved output and 13000 buffer) at 3 characters a token. There the edit is left out,
    so the request reports the whole prompt and Claude Code compacts inside the window (the
    gateway's own guard: ``gateway/window.py``)."""
    betas = request.get("betas")
    one_m = "[1m]" in str(request.get("model"))
    one_m = one_m or any("context-1m" in str(b) for b in (betas if isinstance(betas, list) else []))
    size = 0
    for key in ("messages", "system", "tools"):
        if key in request:
            size += utf16_len(js_json_stringify(request[key]))
    return size >= near_window_limit(one_m)
