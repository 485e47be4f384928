"""What the loopback mock of the Anthropic Messages API answers: its semantics, no HTTP.

The HTTP server that carries it is :mod:`lab.mock` (:class:`~lab.mock.MockServer`);
this module holds what does not depend on the wire:

* :func:`classify`: the kind of a request (*main*, *compact*, *side*, *count_tokens*, *other*);
* :class:`Step` and :class:`MockConfig`: the scripted replies and the 2026 server behaviours::

    MockConfig(thinking=True,            # answer thinking-on requests with a signed thinking block
               binding="error",          # "error" (enforced account) | "drop_block" | "off"
               count_prompt=True,        # usage.input_tokens = count of the prompt after edits
               unsupported_models=("claude-3-*",),  # refuse clear_tool_uses_20250919
               window=200_000)           # 400 "prompt is too long" past it (unedited prompt)

* :class:`MessagesAPI`: the mock's state (the request log, the script position, the message
  counter) and :meth:`MessagesAPI.answer`, everything decided for one request, as an
  :class:`Answer`:

  * *main* requests take the next scripted :class:`Step` (then ``default_main``), *compact*
    requests get ``compact_reply`` (a ``<summary>``), *side* requests get a short text;
    ``count_tokens`` gets ``{"input_tokens": count_tokens}`` (or the mock's own count of the
    edited prompt with ``count_prompt``) after the same checks;
  * preserved thinking (:mod:`lab.thinking_binding`): every thinking block sent back is
    checked against the conversation as the client sent it; ``error`` answers the documented
    400, ``drop_block`` drops the block and lists it in ``input_transformations``; a request's
    ``thinking.block_binding`` overrides the account's mode;
  * context editing (:mod:`lab.server_edits`, :mod:`engine.api.context_editing`): with the
    ``context-management-2025-06-27`` beta, ``context_management.edits`` run on the server's
    copy after the check; ``applied_edits`` goes in the message; the documented 400s for a
    missing beta, malformed edits and unsupported models.

Each :class:`Logged` request records what was answered: ``status``, ``error``, the check's
``mismatches`` (``dropped`` in drop_block mode), ``applied_edits`` and ``input_tokens``; headers
are logged without ``x-api-key``/``authorization``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from lab.server_edits import (
    RequestRefused,
    apply_context_management,
    betas_of,
    prompt_tokens,
)
from lab.session import usage_of
from lab.thinking_binding import (
    DEFAULT_SECRET,
    MODES,
    BindingError,
    Mismatch,
    Mode,
    apply_binding,
    sign,
    thinking_on,
)

Kind = Literal["main", "compact", "side", "count_tokens", "other"]

COMPACT_MARKERS = (
    "Your task is to create a detailed summary of the conversation so far",
    "summary of the conversation",
)
"""Text that only the summarisation prompt holds (2.0.76-2.1.112)."""

HIDDEN_HEADERS = frozenset({"x-api-key", "authorization"})
DEFAULT_SUMMARY = "<analysis>mock analysis</analysis>\n<summary>MOCK SUMMARY</summary>"


def _texts(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(b.get("text") or "" for b in content if isinstance(b, Mapping))
    return ""


def is_compaction_request(body: Mapping[str, Any]) -> bool:
    """The summarisation request: its last user message asks for the summary."""
    msgs = body.get("messages") or []
    if not msgs or not isinstance(msgs[-1], Mapping) or msgs[-1].get("role") != "user":
        return False
    text = _texts(msgs[-1].get("content"))
    return any(m in text for m in COMPACT_MARKERS)


def classify(path: str, body: Mapping[str, Any] | None) -> Kind:
    """``main`` | ``compact`` | ``side`` | ``count_tokens`` | ``other``.

    * compact: the summarisation request (:func:`is_compaction_request`), checked first because
      it also carries a tool list in some versions.
    * main: the query loop's request; it carries the full tool list (``len(tools) > 1``), or
      only ``ToolSearch`` when the tools are deferred (2.1.69).
      Side requests (2.0.76 sub-agent ``Warmup`` with ``tools: []``, the Bash command-prefix and
      file-path helpers, title generation, haiku quota probes) carry no tools or a single one.
    * side: any other ``/v1/messages`` call.
    """
    p = path.split("?", 1)[0].rstrip("/")
    if p.endswith("/v1/messages/count_tokens"):
        return "count_tokens"
    if not p.endswith("/v1/messages") or not isinstance(body, Mapping):
        return "other"
    if is_compaction_request(body):
        return "compact"
    tools = body.get("tools") or []
    if isinstance(tools, list) and len(tools) > 1:
        return "main"
    if isinstance(tools, list) and any(
        isinstance(t, Mapping) and t.get("name") == "ToolSearch" for t in tools
    ):
        return "main"  # 2.1.69: tools deferred behind ToolSearch, the only tool sent
    return "side"


@dataclass
class Step:
    """One scripted reply to a main-loop request.

    ``content`` holds API blocks: ``{"type": "text", "text": ...}`` or
    ``{"type": "tool_use", "id": ..., "name": ..., "input": {...}}``. ``usage`` overrides the
    mock's default usage for this reply (input, cache and output tokens, as the API reports).
    """

    content: list[dict] = field(default_factory=lambda: [{"type": "text", "text": "OK"}])
    stop_reason: str = "end_turn"
    usage: dict[str, int] | None = None

    @classmethod
    def text(cls, text: str = "OK", usage: Mapping[str, int] | None = None) -> Step:
        return cls([{"type": "text", "text": text}], "end_turn", dict(usage) if usage else None)


def make_usage(total: int = 1000, output: int = 1, cache_read: int = 0) -> dict[str, int]:
    """A usage whose sum (input + cache + output, what the thresholds use) is ``total``."""
    return usage_of(total, output, cache_read)


@dataclass
class MockConfig:
    """What the mock answers. The defaults are the old behaviour: no thinking, no check.

    Server behaviours of 2026 (see the module docstring):

    * ``thinking``: a request that turns thinking on gets a ``thinking`` block (signed by
      :mod:`lab.thinking_binding` over the request as sent) before the reply's blocks;
    * ``binding``: the account's preserved-thinking mode, ``"off"`` (an account the check does
      not enforce), ``"error"`` (an enforced account: 400) or ``"drop_block"``; a request's
      ``thinking.block_binding`` overrides it as documented;
    * ``count_prompt``: usage ``input_tokens`` is the mock's count of the prompt after server
      edits (:func:`lab.server_edits.prompt_tokens`), cache fields 0, output as
      scripted; ``count_tokens`` answers the same count;
    * ``unsupported_models``: model patterns that refuse ``clear_tool_uses_20250919``;
    * ``window``: the model's context window. A ``/v1/messages`` request whose prompt *as the
      client sent it* (before any server edit: the cautious reading, nobody knows whether the
      API checks before or after clearing) counts more gets the documented
      ``400 prompt is too long: N tokens > W maximum``. None: no limit.
    """

    script: list[Step] = field(default_factory=list)
    default_main: Step = field(default_factory=Step)
    usage: dict[str, int] = field(default_factory=lambda: make_usage(1000))
    compact_reply: str = DEFAULT_SUMMARY
    compact_usage: dict[str, int] = field(default_factory=lambda: make_usage(2000, output=500))
    side_reply: str = "OK"
    count_tokens: int = 1000
    thinking: bool = False
    binding: Mode = "off"
    count_prompt: bool = False
    unsupported_models: tuple[str, ...] = ()
    secret: bytes = DEFAULT_SECRET
    thinking_text: str = "Mock reasoning {n}: weigh the request, then answer."
    window: int | None = None

    def __post_init__(self) -> None:
        if self.binding not in MODES:
            raise ValueError(f"MockConfig.binding must be one of {MODES}, not {self.binding!r}")


@dataclass(frozen=True)
class Logged:
    """One request as the mock saw it, and what it answered."""

    seq: int
    time: float
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    kind: Kind
    status: int = 200
    error: str | None = None  # the 400 message
    mismatches: tuple[Mismatch, ...] = ()  # preserved-thinking check (error or drop_block)
    applied_edits: tuple[dict, ...] = ()  # server-side context editing
    input_tokens: int | None = None  # usage input_tokens answered (count_prompt)

    @property
    def dropped(self) -> int:
        """Thinking blocks dropped (drop_block mode)."""
        return len(self.mismatches) if self.status == 200 else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "time": self.time,
            "method": self.method,
            "path": self.path,
            "headers": self.headers,
            "body": self.body,
            "kind": self.kind,
            "status": self.status,
            "error": self.error,
            "mismatches": [m.to_json() for m in self.mismatches],
            "applied_edits": list(self.applied_edits),
            "input_tokens": self.input_tokens,
        }


@dataclass
class Answer:
    """What the handler sends: a 400, a JSON body, or a message (streamed or not)."""

    status: int = 200
    error: str | None = None
    json_body: Any = None
    content: list[dict] = field(default_factory=list)
    stop: str = "end_turn"
    usage: dict[str, int] = field(default_factory=dict)
    mid: str = ""
    extra: dict[str, Any] = field(default_factory=dict)  # context_management, input_transformations
    mismatches: tuple[Mismatch, ...] = ()
    applied_edits: tuple[dict, ...] = ()


def too_long(tokens: int, window: int) -> str:
    """The API's documented message for a prompt over the model's window."""
    return f"prompt is too long: {tokens} tokens > {window} maximum"


def error_body(message: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": message},
        "request_id": "req_mock",
    }


class MessagesAPI:
    """The mock's state and decisions, shared by the HTTP handler's threads (under a lock)."""

    def __init__(self, config: MockConfig | None = None) -> None:
        self.config = config or MockConfig()
        self._lock = threading.Lock()
        self._log: list[Logged] = []
        self._script_pos = 0
        self._msg_seq = 0

    def reset(self, config: MockConfig | None = None) -> None:
        """Clear the log and restart the script (optionally with a new config)."""
        with self._lock:
            if config is not None:
                self.config = config
            self._log.clear()
            self._script_pos = 0

    def requests(self, kind: Kind | None = None) -> list[Logged]:
        with self._lock:
            return [r for r in self._log if kind is None or r.kind == kind]

    def record(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        body: Any,
        kind: Kind,
        answer: Answer | None = None,
    ) -> None:
        a = answer or Answer()
        with self._lock:
            self._log.append(
                Logged(
                    len(self._log),
                    time.time(),
                    method,
                    path,
                    {k.lower(): v for k, v in headers.items() if k.lower() not in HIDDEN_HEADERS},
                    body,
                    kind,
                    a.status,
                    a.error,
                    a.mismatches,
                    a.applied_edits,
                    a.usage.get("input_tokens") if a.usage else a.extra.get("input_tokens"),
                )
            )

    def _next_step(self, kind: Kind, cfg: MockConfig) -> tuple[list[dict], str, dict[str, int]]:
        if kind == "compact":
            return (
                [{"type": "text", "text": cfg.compact_reply}],
                "end_turn",
                dict(cfg.compact_usage),
            )
        if kind == "main":
            if self._script_pos < len(cfg.script):
                step = cfg.script[self._script_pos]
                self._script_pos += 1
            else:
                step = cfg.default_main
            return (
                json.loads(json.dumps(step.content)),
                step.stop_reason,
                dict(step.usage or cfg.usage),
            )
        return [{"type": "text", "text": cfg.side_reply}], "end_turn", make_usage(100, 5)

    def answer(self, kind: Kind, headers: Mapping[str, str], body: Any) -> Answer:
        """Everything the mock decides for one ``/v1/messages`` or ``count_tokens`` request."""
        cfg = self.config
        if not isinstance(body, Mapping):
            return Answer(400, "request body must be a JSON object")
        betas = betas_of(headers)
        try:
            binding = apply_binding(body, cfg.binding, betas, cfg.secret)
            if binding.error is not None:
                return Answer(400, binding.error, mismatches=binding.mismatches)
            # the edits run on the server's copy, after the check (on what the client sent)
            edited = apply_context_management(binding.body, betas, cfg.unsupported_models)
        except (RequestRefused, BindingError) as e:
            return Answer(400, str(e))
        if cfg.window is not None and kind != "count_tokens":
            unedited = prompt_tokens(body, list(binding.body.get("messages") or []))
            if unedited > cfg.window:
                return Answer(400, too_long(unedited, cfg.window), mismatches=binding.mismatches)
        extra: dict[str, Any] = {}
        if binding.dropped:
            extra["input_transformations"] = binding.dropped
        applied: tuple[dict, ...] = ()
        messages = list(binding.body.get("messages") or [])
        if edited is not None:
            messages = edited.messages
            applied = tuple(edited.applied_edits)
            extra["context_management"] = edited.response_field()
        counted = prompt_tokens(body, messages)
        if kind == "count_tokens":
            n = counted if cfg.count_prompt else cfg.count_tokens
            out: dict[str, Any] = {"input_tokens": n}
            if edited is not None:
                out["context_management"] = {"original_input_tokens": edited.original_tokens}
            return Answer(
                json_body=out,
                mismatches=binding.mismatches,
                applied_edits=applied,
                extra={"input_tokens": n},
            )
        with self._lock:
            self._msg_seq += 1
            mid = f"msg_mock_{self._msg_seq:04d}"
            content, stop, usage = self._next_step(kind, cfg)
        if cfg.count_prompt:
            usage = {
                **usage,
                "input_tokens": counted,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            }
        if cfg.thinking and thinking_on(body):
            n_msgs = len(body.get("messages") or [])
            text = cfg.thinking_text.format(n=self._msg_seq)
            block = {
                "type": "thinking",
                "thinking": text,
                "signature": sign(body, n_msgs, 0, text, cfg.secret),
            }
            content = [block, *content]
        return Answer(
            200,
            None,
            None,
            content,
            stop,
            usage,
            mid,
            extra,
            binding.mismatches,
            applied,
        )
