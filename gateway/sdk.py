"""Every session the Python ``claude-agent-sdk`` starts in this process, through the gateway.

The SDK starts Claude Code (its bundled native binary) as a subprocess from
``SubprocessCLITransport.connect``, with the environment ``{**os.environ, **options.env}`` (read
from claude-agent-sdk 0.2.189's ``_internal/transport/subprocess_cli.py``: ``CLAUDECODE`` left
out, ``CLAUDE_CODE_ENTRYPOINT`` defaulted, ``options.env`` winning). :func:`enable` wraps that
one method (on the class, in memory: no file of the SDK is touched); before the original runs,
the wrapper

1. finds the session's upstream as Claude Code would have: ``options.env``'s
   ``CTXPATCH_UPSTREAM`` / ``ANTHROPIC_BASE_URL``, else the process environment's (an outer
   ``ctxpatch run`` sets ``CTXPATCH_UPSTREAM``), else the Anthropic API;
2. gets a gateway for that upstream and the ``CLAUDE_CTX_CLEAR_*`` knobs (one per distinct
   pair, started on first use and kept for later sessions);
3. gives the transport a shallow copy of its options whose ``env`` points
   ``ANTHROPIC_BASE_URL`` at the gateway (the caller's options object is never changed).

:func:`disable` puts the original method back and stops every gateway no running session uses
(a session still running keeps its gateway until the process ends).

The gateways are :class:`gateway.server.ThreadedGateway`: in this process, each on its own event
loop in a daemon thread. Chosen over the program's own event loop and over a child process by
``bench/bench_agent_sdk.py`` (numbers in the README): starting one costs what the program's own
loop costs (the aiohttp import, paid once, then ~10 ms) where a child process costs a Python
start and the same imports again (~0.5-1 s); the added latency per request is the same; and,
unlike the program's loop, it survives the loop it was started from (a script calling
``anyio.run`` per query) and works under the trio backend, which aiohttp cannot serve on.
"""

from __future__ import annotations

import contextlib
import copy
import os
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from ctxpatch.errors import CtxpatchError, MissingExtra
from gateway.run import TOOL_SEARCH_ENV, is_first_party
from gateway.server import UPSTREAM_ENV, ThreadedGateway, upstream_from_env, validate_upstream

TESTED = "0.2.189"  # the claude-agent-sdk version whose transport this was read from and tested
_TRANSPORT = "claude_agent_sdk._internal.transport.subprocess_cli"


class SdkUnsupported(CtxpatchError, code="sdk_unsupported"):
    """The installed claude-agent-sdk does not start Claude Code the way ctxpatch wraps."""


def transport_class() -> Any:
    """The SDK's ``SubprocessCLITransport`` (imported here: the SDK is optional)."""
    try:
        import importlib

        module = importlib.import_module(_TRANSPORT)
    except ImportError as exc:
        raise MissingExtra(
            "claude-agent-sdk is not installed",
            why=f"ctxpatch.agent_sdk routes that SDK's sessions ({exc})",
            hint=f"pip install claude-agent-sdk (tested with {TESTED})",
        ) from exc
    cls = getattr(module, "SubprocessCLITransport", None)
    connect = getattr(cls, "connect", None)
    connect = getattr(connect, "__wrapped__", connect)  # ours, when already enabled
    names = getattr(getattr(connect, "__code__", None), "co_names", ())
    if cls is None or "_options" not in names:
        raise SdkUnsupported(
            "this claude-agent-sdk starts Claude Code differently",
            why=f"no SubprocessCLITransport.connect reading self._options in {_TRANSPORT} "
            f"(ctxpatch was tested with {TESTED})",
            hint='run `ctxpatch gateway` and pass env={"ANTHROPIC_BASE_URL": "<its URL>"} in '
            "ClaudeAgentOptions",
        )
    return cls


def session_upstream(options_env: Mapping[str, str], environ: Mapping[str, str]) -> str:
    """Where the session's requests would have gone without us (validated)."""
    for env in (options_env, environ):
        for name in (UPSTREAM_ENV, "ANTHROPIC_BASE_URL"):
            value = (env.get(name) or "").strip()
            if value:
                return validate_upstream(value)
    return upstream_from_env({})


def session_env(
    options_env: Mapping[str, str], gateway_url: str, upstream: str, environ: Mapping[str, str]
) -> dict[str, str]:
    """``options.env`` for the session: the caller's, with the base URL at the gateway (and
    tool search kept on for Anthropic's API unless chosen, as ``ctxpatch run`` does)."""
    out = {**options_env, "ANTHROPIC_BASE_URL": gateway_url, UPSTREAM_ENV: upstream}
    if is_first_party(upstream) and TOOL_SEARCH_ENV not in {**environ, **options_env}:
        out[TOOL_SEARCH_ENV] = "true"
    return out


class _State:
    """What :func:`enable` changed, to put back; the gateways and who uses them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cls: Any = None
        self.original: Callable[..., Any] | None = None
        self.gateways: dict[tuple[str, str], ThreadedGateway] = {}
        self.users: dict[tuple[str, str], weakref.WeakSet[Any]] = {}

    def gateway_for(self, upstream: str, env: Mapping[str, str]) -> ThreadedGateway:
        from engine.twins.context_clear import knobs_from_env

        key = (upstream, repr(knobs_from_env(env)))
        with self.lock:
            gw = self.gateways.get(key)
            if gw is None:
                gw = ThreadedGateway(upstream=upstream, env=env).start()
                self.gateways[key] = gw
                self.users[key] = weakref.WeakSet()
            return gw

    def use(self, upstream: str, env: Mapping[str, str], transport: Any) -> ThreadedGateway:
        gw = self.gateway_for(upstream, env)
        with self.lock:
            for key, g in self.gateways.items():
                if g is gw:
                    self.users[key].add(transport)
        return gw


_state = _State()


def _running(transport: Any) -> bool:
    proc = getattr(transport, "_process", None)
    return proc is not None and getattr(proc, "returncode", 0) is None


def enabled() -> bool:
    return _state.original is not None


def enable() -> None:
    """Route every session the SDK starts from now on through a loopback gateway (idempotent)."""
    cls = transport_class()
    with _state.lock:
        if _state.original is not None:
            return
        original = cls.connect

        async def connect(self: Any) -> None:
            if getattr(self, "_process", None) is None:
                await _route(self)
            await original(self)

        connect.__wrapped__ = original  # type: ignore[attr-defined]
        connect.__doc__ = original.__doc__
        _state.cls, _state.original = cls, original
        cls.connect = connect


async def _route(transport: Any) -> None:
    import anyio.to_thread

    options = transport._options
    options_env = dict(getattr(options, "env", None) or {})
    environ = dict(os.environ)
    upstream = session_upstream(options_env, environ)
    merged = {**environ, **options_env}
    # the first gateway for an upstream starts off the event loop (tens of ms, more at first)
    gw = await anyio.to_thread.run_sync(_state.use, upstream, merged, transport)
    routed = copy.copy(options)
    routed.env = session_env(options_env, gw.url, upstream, environ)
    transport._options = routed


def disable() -> None:
    """Put the SDK back as it was; stop every gateway no running session still uses."""
    with _state.lock:
        if _state.original is not None:
            _state.cls.connect = _state.original
        _state.cls = _state.original = None
        keep = {
            key: gw
            for key, gw in _state.gateways.items()
            if any(_running(t) for t in _state.users.get(key, ()))
        }
        stop = [gw for key, gw in _state.gateways.items() if key not in keep]
        _state.gateways = keep
        _state.users = {k: v for k, v in _state.users.items() if k in keep}
    for gw in stop:
        with contextlib.suppress(Exception):
            gw.stop()


def gateway_urls() -> dict[str, str]:
    """Upstream -> gateway URL of the gateways running now (for a program's own logging)."""
    with _state.lock:
        return {up: gw.url for (up, _), gw in _state.gateways.items()}
