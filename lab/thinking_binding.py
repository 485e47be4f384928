"""The preserved-thinking check of the Messages API, as a pure model (the mock's server side).

What the API does (shared/research/api-2026.md, "Preserved thinking", from Anthropic's migration
guide): each ``thinking`` block's ``signature`` records the conversation that produced it, the
top-level ``system``, the *set* of ``tools`` and every message before the block; when the
history comes back the API recomputes that record and requires a match.

This module is that record for the mock. :func:`sign` makes a signature for a block at
``messages[i].content[j]`` (``i`` may be ``len(messages)``: the reply being produced);
:func:`check` recomputes it for every thinking block of a request and names each mismatch;
:func:`apply_binding` turns the mismatches into what the API answers in each mode.

The signature (mock format, opaque to the client): ``"ctxm1." + base64url(payload) + "." +
mac`` where ``payload`` is compact JSON ``{"n": ordinal, "t": digest of the block's own
thinking text, "p": [digest of each prefix item]}`` and ``mac`` an HMAC-SHA256 (``secret``)
over the payload. Keeping one digest per prefix item (``system``, ``tools``, then one per
message) is what lets the 400 say where the prefix first differs (``messages.K``).

Canonical form (what is compared; everything else counts):

* ignored: ``cache_control`` keys anywhere; string content vs a list of text blocks (a string
  is one text block); the ``x-anthropic-billing-header:`` system block; leading/trailing
  whitespace of a text block (``str.strip``);
  whitespace-only text blocks (dropped); key order (digests hash ``sort_keys`` JSON); tool order
  (the tools are a sorted set); ``thinking`` and ``redacted_thinking`` blocks (dropped from the
  prefix); everything before the last ``compaction`` block that precedes the block (the prefix
  starts right after it; ``system`` and ``tools`` stay bound);
* counted: interior whitespace of a text, every byte of ``tool_use.input`` values, tool-result
  text, image bytes, roles, block types, every other key and value. A message whose canonical
  content is empty (only thinking or whitespace) is not an item.

Thinking blocks may be removed from a request only as a contiguous run: from the front, or a
trailing run (api-2026.md: "never from the middle"). Each signature carries its ordinal ``n``
(how many thinking blocks preceded it since the last compaction block when it was made); the
ordinals sent must then be consecutive. A block after a hole is a ``removed`` mismatch (a
trailing run cannot be seen and needs no check). Blocks whose signature is not a valid mock
signature are ``signature`` mismatches (mode ``off`` accepts them, like an account the check
does not enforce).

Modes (:func:`effective_mode`): the account's default (``"error"``, ``"drop_block"`` or
``"off"``), overridden by the request's ``thinking.block_binding.prefix_mismatch_behavior``
(``"error"``/``"drop_block"``, which needs the ``thinking-binding-controls-2026-08-01`` beta);
a request without thinking on (``thinking.type`` ``enabled``/``adaptive``) is not checked.

* ``error``: HTTP 400 ``invalid_request_error`` naming the first mismatch in request order
  (the documented message for a prefix mismatch; the mock's own wording for the others);
* ``drop_block``: 200, the mismatching blocks removed before the model sees the request and
  listed in ``input_transformations`` (``{"type": "thinking_block_dropped", "location":
  "messages.N.content.M", "reason": ..., "missing_from": ...}``; the field's exact shape is not
  in the documents we have: this is the mock's).
"""

from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "BINDING_BETA",
    "DEFAULT_SECRET",
    "BindingError",
    "BindingOutcome",
    "Mismatch",
    "Mode",
    "apply_binding",
    "check",
    "effective_mode",
    "prefix_items",
    "sign",
    "thinking_on",
]

Mode = Literal["error", "drop_block", "off"]
MODES: tuple[Mode, ...] = ("error", "drop_block", "off")
BINDING_BETA = "thinking-binding-controls-2026-08-01"
DEFAULT_SECRET = b"ctxpatch-mock-thinking-binding"
THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})
PREFIX = "ctxm1."
DIGEST_CHARS = 16


class BindingError(ValueError):
    """A request the API refuses before any check (bad ``block_binding`` field, missing beta)."""


# --- canonical form ------------------------------------------------------------------------------


def _clean(obj: Any) -> Any:
    """A copy without ``cache_control`` keys, at any depth."""
    if isinstance(obj, Mapping):
        return {k: _clean(v) for k, v in obj.items() if k != "cache_control"}
    if isinstance(obj, list):
        return [_clean(v) for v in obj]
    return obj


def _as_blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return list(content)
    return [] if content is None else [content]


def canonical_blocks(content: Any) -> list[Any]:
    """Content as the check compares it (see the module docstring)."""
    out: list[Any] = []
    for b in _as_blocks(content):
        if not isinstance(b, Mapping):
            out.append(b)
            continue
        t = b.get("type")
        if t in THINKING_TYPES:
            continue
        c = _clean(b)
        if t == "text" and isinstance(c.get("text"), str):
            s = c["text"].strip()
            if not s:
                continue
            c["text"] = s
        if t == "tool_result" and "content" in c:
            c["content"] = canonical_blocks(c["content"])
        out.append(c)
    return out


def _dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _digest(secret: bytes, obj: Any) -> str:
    return hmac.new(secret, _dumps(obj).encode(), hashlib.sha256).hexdigest()[:DIGEST_CHARS]


BILLING_HEADER = "x-anthropic-billing-header:"
"""The system text block Claude Code puts first (``cc_version=...; cc_entrypoint=...;`` and,
on the native 2.1.113, ``cch=`` + a hash of the body, so different on every request). The API
reads it as a header and takes it out of the prompt; a binding over it would refuse every
thinking block 2.1.113 sends back, so the check leaves it out."""


def canonical_system(system: Any) -> list[Any]:
    """The system prompt as the check compares it: :func:`canonical_blocks` without the
    billing header block (:data:`BILLING_HEADER`)."""
    return [
        b
        for b in canonical_blocks(system)
        if not (
            isinstance(b, Mapping)
            and b.get("type") == "text"
            and str(b.get("text") or "").startswith(BILLING_HEADER)
        )
    ]


def canonical_tools(tools: Any) -> list[str]:
    """The tool set: each tool as sorted-key JSON without ``cache_control``, sorted, unique."""
    return sorted({_dumps(_clean(t)) for t in (tools if isinstance(tools, list) else [])})


@dataclass(frozen=True)
class Item:
    """One unit of a block's prefix: ``system``, ``tools`` or (part of) ``messages.K``."""

    location: str
    digest: str


def _start_after_compaction(messages: Sequence[Any], i: int, j: int) -> tuple[int, int]:
    """Where the bound prefix of block (i, j) starts: after the last compaction block before it."""
    start = (0, 0)
    for mi in range(min(i, len(messages) - 1) + 1):
        m = messages[mi]
        blocks = _as_blocks(m.get("content") if isinstance(m, Mapping) else None)
        for bj, b in enumerate(blocks):
            if (mi, bj) >= (i, j):
                break
            if isinstance(b, Mapping) and b.get("type") == "compaction":
                start = (mi, bj + 1)
    return start


def prefix_items(
    body: Mapping[str, Any],
    i: int,
    j: int,
    secret: bytes = DEFAULT_SECRET,
    cache: dict[Any, str] | None = None,
) -> list[Item]:
    """The canonical prefix of the block at ``messages[i].content[j]`` as digests.

    ``cache`` (one dict per ``body``) keeps the digests already computed, so checking every
    block of a request hashes each message once."""
    messages = body.get("messages") or []
    memo: dict[Any, str] = {} if cache is None else cache

    def digest(key: Any, make: Any) -> str:
        if key not in memo:
            memo[key] = _digest(secret, make())
        return memo[key]

    items = [
        Item("system", digest("system", lambda: canonical_system(body.get("system")))),
        Item("tools", digest("tools", lambda: canonical_tools(body.get("tools")))),
    ]
    si, sj = _start_after_compaction(messages, i, j)
    for mi in range(si, min(i, len(messages) - 1) + 1):
        m = messages[mi]
        if not isinstance(m, Mapping):
            items.append(Item(f"messages.{mi}", digest((mi,), lambda m=m: m)))
            continue
        blocks = _as_blocks(m.get("content"))
        lo = sj if mi == si else 0
        hi = j if mi == i else len(blocks)
        key = (mi, lo, hi)
        if key not in memo:
            canon = canonical_blocks(blocks[lo:hi])
            memo[key] = _digest(secret, {"role": m.get("role"), "content": canon}) if canon else ""
        if memo[key]:  # a message with nothing but thinking or whitespace is not an item
            items.append(Item(f"messages.{mi}", memo[key]))
    return items


def _ordinal(messages: Sequence[Any], i: int, j: int) -> int:
    """How many thinking blocks precede (i, j) since the last compaction block."""
    si, sj = _start_after_compaction(messages, i, j)
    n = 0
    for mi in range(si, min(i, len(messages) - 1) + 1):
        m = messages[mi]
        blocks = _as_blocks(m.get("content") if isinstance(m, Mapping) else None)
        lo = sj if mi == si else 0
        hi = j if mi == i else len(blocks)
        n += sum(1 for b in blocks[lo:hi] if isinstance(b, Mapping) and b.get("type") == "thinking")
    return n


# --- signatures ----------------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def sign(
    body: Mapping[str, Any],
    i: int,
    j: int,
    thinking: str,
    secret: bytes = DEFAULT_SECRET,
) -> str:
    """The signature of a thinking block with text ``thinking`` at ``messages[i].content[j]``.

    ``body`` holds ``system``, ``tools`` and ``messages`` as the client sent them (before any
    server edit); ``i == len(messages)`` signs a block of the reply being produced (then ``j``
    counts the reply's blocks before it, and those are in ``body`` as ``messages[i]`` if any).
    """
    payload = {
        "n": _ordinal(body.get("messages") or [], i, j),
        "t": _digest(secret, thinking),
        "p": [it.digest for it in prefix_items(body, i, j, secret)],
    }
    raw = _dumps(payload).encode()
    mac = hmac.new(secret, raw, hashlib.sha256).hexdigest()[:32]
    return f"{PREFIX}{_b64(raw)}.{mac}"


def _decode(signature: Any, secret: bytes) -> dict | None:
    if not isinstance(signature, str) or not signature.startswith(PREFIX):
        return None
    try:
        b64, mac = signature[len(PREFIX) :].split(".", 1)
        raw = _unb64(b64)
    except (ValueError, TypeError):
        return None
    want = hmac.new(secret, raw, hashlib.sha256).hexdigest()[:32]
    if not hmac.compare_digest(want, mac):
        return None
    try:
        payload = json.loads(raw)
    except ValueError:
        return None
    ok = (
        isinstance(payload, dict)
        and isinstance(payload.get("n"), int)
        and isinstance(payload.get("t"), str)
        and isinstance(payload.get("p"), list)
    )
    return payload if ok else None


# --- the check -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mismatch:
    """One thinking block the check rejects."""

    message: int
    block: int
    reason: Literal["prefix", "signature", "removed"]
    missing_from: str | None = None  # "messages.K", "system" or "tools" (reason "prefix")

    @property
    def location(self) -> str:
        return f"messages.{self.message}.content.{self.block}"

    def error_message(self) -> str:
        head = f"{self.location}: Invalid `signature` in `thinking` block."
        if self.reason == "prefix":
            return (
                f"{head} The block is bound to a different conversation. Remove the block, or "
                'set `thinking.block_binding.prefix_mismatch_behavior` to "drop_block". '
                "Content that preceded this block when it was created is missing from this "
                f"request, starting at `{self.missing_from}`."
            )
        if self.reason == "removed":
            return (
                f"{head} Thinking blocks that preceded this block were removed from the middle "
                "of the conversation; thinking blocks may only be removed as a contiguous run "
                "from the front or from the end."
            )
        return head

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "type": "thinking_block_dropped",
            "location": self.location,
            "reason": self.reason,
        }
        if self.missing_from is not None:
            d["missing_from"] = self.missing_from
        return d


def thinking_on(body: Mapping[str, Any]) -> bool:
    """The request turns thinking on (``thinking.type`` ``enabled`` or ``adaptive``)."""
    t = body.get("thinking")
    return isinstance(t, Mapping) and t.get("type") in ("enabled", "adaptive")


def _first_difference(signed: Sequence[Any], now: Sequence[Item], i: int) -> str:
    for k, it in enumerate(now):
        if k >= len(signed) or signed[k] != it.digest:
            return it.location
    return f"messages.{i}"  # the request has less than the block was made with


def check(body: Mapping[str, Any], secret: bytes = DEFAULT_SECRET) -> list[Mismatch]:
    """Every thinking block of ``body`` whose binding does not hold, in request order."""
    messages = body.get("messages") or []
    out: list[Mismatch] = []
    prev_n: int | None = None
    cache: dict[Any, str] = {}
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or not isinstance(m.get("content"), list):
            continue
        for j, b in enumerate(m["content"]):
            if not isinstance(b, Mapping):
                continue
            if b.get("type") == "compaction":
                prev_n = None  # ordinals restart after a server-side compaction block
                continue
            if b.get("type") != "thinking":
                continue
            payload = _decode(b.get("signature"), secret)
            thinking = b.get("thinking")
            if payload is None or payload["t"] != _digest(secret, thinking):
                out.append(Mismatch(i, j, "signature"))
                prev_n = None if prev_n is None else prev_n + 1  # it still holds its place
                continue
            now = prefix_items(body, i, j, secret, cache)
            if [it.digest for it in now] != payload["p"]:
                out.append(Mismatch(i, j, "prefix", _first_difference(payload["p"], now, i)))
            elif prev_n is not None and payload["n"] != prev_n + 1:
                out.append(Mismatch(i, j, "removed"))
                continue  # its ordinal does not re-anchor the run
            prev_n = payload["n"]
    return out


def effective_mode(body: Mapping[str, Any], account: Mode, betas: Sequence[str] = ()) -> Mode:
    """The mode this request is checked in (see the module docstring).

    Raises :class:`BindingError` for a ``block_binding`` field the API refuses.
    """
    if account not in MODES:
        raise ValueError(f"binding mode must be one of {MODES}, not {account!r}")
    t = body.get("thinking")
    bb = t.get("block_binding") if isinstance(t, Mapping) else None
    if bb is not None:
        if BINDING_BETA not in betas:
            raise BindingError(
                "thinking.block_binding: this field needs the beta header "
                f"`anthropic-beta: {BINDING_BETA}`"
            )
        behaviour = bb.get("prefix_mismatch_behavior") if isinstance(bb, Mapping) else None
        if behaviour not in ("error", "drop_block"):
            raise BindingError(
                "thinking.block_binding.prefix_mismatch_behavior: Input should be 'error' or "
                f"'drop_block' (got {behaviour!r})"
            )
        return behaviour if thinking_on(body) else "off"
    return account if thinking_on(body) else "off"


@dataclass(frozen=True)
class BindingOutcome:
    mode: Mode
    mismatches: tuple[Mismatch, ...]
    body: Mapping[str, Any]  # what goes on to the model: blocks dropped in drop_block mode
    error: str | None = None  # the 400 message in error mode

    @property
    def dropped(self) -> list[dict[str, Any]]:
        """``input_transformations`` (drop_block mode)."""
        if self.mode != "drop_block":
            return []
        return [m.to_json() for m in self.mismatches]


def apply_binding(
    body: Mapping[str, Any],
    account: Mode,
    betas: Sequence[str] = (),
    secret: bytes = DEFAULT_SECRET,
) -> BindingOutcome:
    """Run the check on ``body`` in its effective mode. Pure: ``body`` is not changed.

    Raises :class:`BindingError` for a bad ``block_binding`` field.
    """
    mode = effective_mode(body, account, betas)
    if mode == "off":
        return BindingOutcome(mode, (), body)
    found = tuple(check(body, secret))
    if not found:
        return BindingOutcome(mode, (), body)
    if mode == "error":
        return BindingOutcome(mode, found, body, found[0].error_message())
    drop = {(m.message, m.block) for m in found}
    new = dict(body)
    msgs = copy.deepcopy(list(body.get("messages") or []))
    for i, m in enumerate(msgs):
        if isinstance(m, dict) and isinstance(m.get("content"), list):
            m["content"] = [b for j, b in enumerate(m["content"]) if (i, j) not in drop]
    new["messages"] = msgs
    return BindingOutcome(mode, found, new)
