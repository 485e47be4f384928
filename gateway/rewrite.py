"""What the gateway changes in one request: a pure function of its method, path, headers, body.

The rules are those of the injected JavaScript (``patcher/snippets/context_clear.js``), applied
to the request as it travels instead of inside Claude Code:

* only ``POST`` to a path ending in ``/v1/messages`` (any prefix, any query string);
  ``count_tokens`` and everything else pass unchanged;
* the body must be a JSON object naming a model; Claude 3 models, models the API refused the
  edit for earlier (``refused``) and a ``context_management`` of a form we do not know are left
  alone; a client that already sends ``clear_tool_uses_20250919`` keeps its own;
* otherwise ``context_management.edits`` becomes: the client's ``clear_thinking_20251015``
  edits (the API wants them first), its other edits, then ours (its ``keep`` fitted to the
  messages by the clearing policy, :mod:`gateway.policy`, as the injected JavaScript fits it);
  other keys of ``context_management`` stay; the beta joins ``anthropic-beta`` unless already
  there;
* a body that is not changed is forwarded byte for byte. A changed one is spliced: the new
  ``context_management`` value is written (compact JSON) in place of the old one, or appended
  as the last member, so every other byte (``messages`` first of all) is the client's own.
  Where the old value is comes from :mod:`gateway.toplevel`, a walk of the object's top level
  (keys decoded with their escapes), not from a byte search; a body spelling ``model`` or
  ``context_management`` twice at the top level is forwarded unchanged where both are read
  (see :func:`_decisive` for the one case where the second is not looked for, and why that
  is safe).

Speed (bench/bench_gateway.py): a Claude Code body is not parsed whole. The fast walk reads
the small members at both ends (``model`` first, ``context_management`` near the end) and
leaves the large ones in the middle (``messages``, ``system``, ``tools``) unread; ``model`` and
``context_management`` alone are parsed (orjson). About 0.15 ms for 600 KB where a parse plus
the old ``\\u`` scan took 0.9 (0.5 more when the client sends no ``context_management``: then
two byte searches prove that none hides in the middle, see :func:`_decisive`). What the fast
walk cannot settle takes the parse (malformed JSON is forwarded unchanged): with it, the ends
still place ``context_management`` for another key order (``model`` then comes from the parse:
the Python SDK sends ``model`` after ``messages``, ~1 ms); only a ``context_management`` that may
lie in the middle (a nested one there, an escaped ASCII letter) needs every member walked (a
few milliseconds per 600 KB). In the fast path the large middle members are
not validated: a client's malformed ``messages`` reach the API with the edit added, and the
API answers with the client's own error.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from engine.api.context_management import (
    BETA,
    CLEAR_THINKING,
    CLEAR_TOOL_USES,
    ClearToolUses,
    to_json,
)
from gateway.policy import Fitter, Kept
from gateway.toplevel import TopLevel, scan

log = logging.getLogger("ctxpatch.gateway")

_MESSAGES_PATH = re.compile(r"(^|/)v1/messages/?$")


def is_messages(method: str, path: str) -> bool:
    """``POST .../v1/messages`` (any query string)."""
    return method.upper() == "POST" and bool(_MESSAGES_PATH.search(path.partition("?")[0]))


def has_beta(values: Collection[str], beta: str = BETA) -> bool:
    """Whether any ``anthropic-beta`` header value lists ``beta`` (comma-separated)."""
    return any(beta == part.strip() for v in values for part in v.split(","))


def merged_beta(values: Collection[str], beta: str = BETA) -> str:
    """The one ``anthropic-beta`` value carrying the client's betas (in order) and ``beta``."""
    parts = [p.strip() for v in values for p in v.split(",") if p.strip()]
    if beta not in parts:
        parts.append(beta)
    return ",".join(parts)


@dataclass(frozen=True)
class Decision:
    """What to do with one request: ``parts`` is None when it is forwarded byte for byte, else
    the new body in pieces (the client's bytes before the new value, the value, the client's
    bytes after it: sent one after the other, never copied into one 600 KB buffer)."""

    parts: tuple[bytes | memoryview, ...] | None = None
    beta: str | None = None  # the new anthropic-beta value (None: leave the header)
    model: str | None = None
    reason: str = ""  # why nothing was added (empty when added)
    # the conversation the policy fitted the edit in: told the prompt the reply reports (the
    # near move, gateway.reply_prompt); None: nothing to tell
    kept: Kept | None = field(default=None, compare=False, repr=False)

    @property
    def added(self) -> bool:
        return self.parts is not None

    @property
    def body(self) -> bytes | None:
        """The new body in one piece (None: unchanged)."""
        return None if self.parts is None else b"".join(self.parts)


def decide(
    method: str,
    path: str,
    beta_values: Collection[str],
    body: bytes,
    edit: ClearToolUses | None,
    refused: Collection[str] = (),
    fitter: Fitter | None = None,
    now: int | None = None,
    near_threshold: Callable[[str, Collection[str]], int | None] | None = None,
) -> Decision:
    """The rewrite of one request (see the module docstring). ``fitter``: the clearing policy
    (:mod:`gateway.policy`) that fits the edit's keep to the messages; None sends ``edit`` as
    it is. ``now``: the request's time in milliseconds of a monotonic clock, for the policy's
    expiry move (None: unknown). ``near_threshold``: of the model and betas, the client's
    auto-compact threshold the near move's level is of (:func:`gateway.window.near_threshold`;
    None, or it says None: the window less its reserve).
    The policy never fails a request: on any error the plain ``edit`` is sent and one
    line logged."""
    if not is_messages(method, path):
        return Decision(reason="not POST /v1/messages")
    if edit is None:
        return Decision(reason="CLAUDE_CTX_CLEAR_DISABLE is set")
    top = scan(body)
    if top is not None and top.gap is None and _loads(body) is _NOT_JSON:
        return Decision(reason="the body is not JSON")  # small enough to validate (no gap)
    model: Any = None
    request: Any = None
    if top is None or not _decisive(body, top):
        request = _loads(body)
        if request is _NOT_JSON:
            return Decision(reason="the body is not JSON")
        if not isinstance(request, dict):
            return Decision(reason="the body is not a JSON object")
        if top is not None and _ends_place_it(top, request):
            # the ends say where context_management goes (read there once, or in no spelling
            # anywhere at the top: the parse decodes every key); the parse gives the model
            # (another key order, e.g. the Python SDK's: model after messages)
            model = request.get("model")
        else:
            top = scan(body, full=True)
            if top is None:
                # JSON only Python's lenient parser reads (a BOM, UTF-16/32, NaN, Infinity):
                # writing it out again would change it (NaN -> null, the encoding), so the
                # API gets it as sent and answers for it itself
                return Decision(reason=LENIENT)
    models, cms = top.named("model"), top.named(CM)
    if len(models) > 1 or len(cms) > 1:
        return Decision(reason="the body spells model or context_management twice at the top")
    if models:
        model = _loads(body[models[0].start : models[0].end])
    if not isinstance(model, str) or not model:
        return Decision(reason="the request names no model")
    cm = _loads(body[cms[0].start : cms[0].end]) if cms else _ABSENT
    why = _skip_reason(model, cm, refused)
    if why:
        return Decision(model=model, reason=why)
    kept = None
    if fitter is not None:
        try:
            th = None if near_threshold is None else near_threshold(model, beta_values)
            edit, kept = fitter.fit(edit, body, top, request, model, beta_values, now, th)
        except Exception as exc:  # the policy never fails a request: the plain edit
            log.warning("clearing policy failed (%s): the plain edit is sent", type(exc).__name__)
    new_cm = _merged(cm, to_json(edit))
    if new_cm is None:
        return Decision(model=model, reason="the client sends its own clear_tool_uses_20250919")
    value = _dumps(new_cm)
    view = memoryview(body)
    if cms:
        parts = (view[: cms[0].start], value, view[cms[0].end :])
    else:  # a new last member, right after the last value: every client byte stays
        assert top.last_end is not None
        at = top.last_end
        parts = (view[:at], b"," + _KEY + b":" + value, view[at:])
    beta = None if has_beta(beta_values) else merged_beta(beta_values)
    return Decision(parts=parts, beta=beta, model=model, kept=kept)


CM = "context_management"
LENIENT = "JSON only a lenient parser reads (BOM, UTF-16, NaN): forwarded untouched"
_NOT_JSON = object()
_ABSENT = object()
_KEY = b'"context_management"'


def _decisive(body: bytes, top: TopLevel) -> bool:
    """Whether the fast walk settles ``model`` and ``context_management`` (``model`` read once,
    ``context_management`` at most once, neither the member the unread stretch starts with).

    When ``context_management`` was read at an end, a second one hidden in the unread middle
    (a body spelling the key twice) is not looked for: whichever of the two the API reads, it
    is either ours (merged from that very value) or the client's own, untouched, so the edit
    is never doubled and the client's own edits are never lost. When none was read, a new one
    is appended: then the middle must be proven not to hold one (two byte searches)."""
    if top.gap is None:
        return True
    models, cms = top.named("model"), top.named(CM)
    if len(models) != 1 or len(cms) > 1 or top.gap_key in ("model", CM):
        return False
    return bool(cms) or not top.gap_may_hold(body, CM)


def _ends_place_it(top: TopLevel, request: dict[str, Any]) -> bool:
    """Whether the fast walk, with the whole body parsed, says where ``context_management``
    goes though it did not settle ``model``: read once at an end (a second one in the middle
    is safe, see :func:`_decisive`), or in no spelling at the top level at all."""
    cms = top.named(CM)
    if top.gap_key == CM or len(cms) > 1 or len(top.named("model")) > 1:
        return False
    return bool(cms) or CM not in request


def _loads(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        pass  # also lone surrogates, NaN, integers beyond 64 bits: the standard library takes them
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return _NOT_JSON


def _dumps(obj: Any) -> bytes:
    try:
        return orjson.dumps(obj)
    except TypeError:  # integers beyond 64 bits, lone surrogates
        return json.dumps(obj, separators=(",", ":")).encode()


def _skip_reason(model: str, cm: Any, refused: Collection[str]) -> str:
    if "claude-3" in model:
        return "Claude 3 models do not support context editing"
    if model in refused:
        return "the API refused the edit for this model earlier"
    if cm is not _ABSENT and cm is not None and not _known_form(cm):
        return "context_management has a form ctxpatch does not know"
    return ""


def _known_form(cm: Any) -> bool:
    return isinstance(cm, dict) and isinstance(cm.get("edits"), list)


def _merged(cm: Any, edit: dict[str, Any]) -> dict[str, Any] | None:
    """``context_management`` with ``edit`` merged into its edits (``clear_thinking`` first);
    None when it already carries a ``clear_tool_uses_20250919`` edit."""
    current = cm["edits"] if _known_form(cm) else []
    first: list[Any] = []
    rest: list[Any] = []
    for e in current:
        kind = e.get("type") if isinstance(e, dict) else None
        if kind == CLEAR_TOOL_USES:
            return None
        (first if kind == CLEAR_THINKING else rest).append(e)
    return {**(cm if isinstance(cm, dict) else {}), "edits": [*first, *rest, edit]}


def with_edit(request: Mapping[str, Any], edit: dict[str, Any]) -> dict[str, Any] | None:
    """A new request with ``edit`` merged into ``context_management.edits``; None when the
    request already carries a ``clear_tool_uses_20250919`` edit. ``request`` is not mutated."""
    new_cm = _merged(request.get(CM), edit)
    if new_cm is None:
        return None
    if CM in request:
        return {k: (new_cm if k == CM else v) for k, v in request.items()}
    return {**request, CM: new_cm}


REFUSAL = re.compile(
    r"(?P<model>\S+) does not support the " + re.escape(CLEAR_TOOL_USES) + r" context management"
)


def refused_model(status: int, body: bytes) -> str | None:
    """The model named by the API's 400 refusing the edit, else None."""
    if status != 400:
        return None
    try:
        message = json.loads(body)["error"]["message"]
    except (ValueError, UnicodeDecodeError, KeyError, TypeError):
        return None
    m = REFUSAL.search(message) if isinstance(message, str) else None
    return m.group("model").strip("`'\"") if m else None
