"""Requests the gateway refuses before forwarding anything: from a web page, or its own.

**Browsers.** The gateway listens on 127.0.0.1, which every web page in the user's browser can
reach: a page could POST to it (spending the user's key when the client's credentials are
not needed, or making it hold large bodies) or read from it after a DNS rebinding
(``evil.example`` resolving to 127.0.0.1). Programs (Claude Code, the Agent SDKs, curl) send
neither an ``Origin`` header nor a foreign ``Host``; browsers always send ``Host`` as the page
named it and ``Origin`` on every POST. So a request with an ``Origin`` header, or whose
``Host`` is not the gateway's own address (``127.0.0.1``, ``localhost`` or ``[::1]`` with its
port), gets an API-style ``403 permission_error`` that says why. (A request without ``Host``,
HTTP/1.0's, is no browser's.)

**Itself.** When the upstream is the gateway (``ANTHROPIC_BASE_URL`` exported as the gateway's
own address, then ``ctxpatch gateway --port`` that port), every request would be forwarded to
itself until the file descriptors run out. At start, :func:`loop_at_start` refuses an upstream
(or proxy) that is the listening address and port. At run time (a loop through another name,
another gateway, a local proxy), every request forwarded to an upstream or proxy on this
machine (a loopback address or ``localhost``: only those can reach the gateway's loopback port)
carries :data:`HOP_HEADER` with the gateway's random id; a request arriving with its own id is
refused at once with ``508 Loop Detected``. Requests to a remote upstream (the API) carry no
added header.
"""

from __future__ import annotations

import functools
import ipaddress
import socket
from collections.abc import Mapping
from urllib.parse import urlsplit

HOP_HEADER = "x-ctxpatch-hop"
LOCAL_NAMES = ("127.0.0.1", "localhost", "[::1]")


def browser_refusal(headers: Mapping[str, str], port: int) -> str | None:
    """Why a request looks browser-originated (None: it does not)."""
    origin = headers.get("Origin")
    if origin is not None:
        return (
            f"ctxpatch gateway: refused a request sent by a web page (Origin: {origin[:100]}); "
            "the gateway serves programs on this machine (Claude Code, Agent SDKs), never browsers"
        )
    host = headers.get("Host")
    if host is not None and host.lower() not in _own_hosts(port):
        return (
            f"ctxpatch gateway: refused a request for Host {host[:100]!r}; only "
            f"127.0.0.1:{port} (or localhost:{port}) is served here, so a web page that "
            "renamed this address (DNS rebinding) cannot use it"
        )
    return None


@functools.lru_cache(maxsize=8)
def _own_hosts(port: int) -> frozenset[str]:
    """The ``Host`` values of the gateway's own address (built once per port, not per request)."""
    return frozenset(f"{n}:{port}" for n in LOCAL_NAMES)


def hops(headers: Mapping[str, str]) -> list[str]:
    """The gateway ids a request already went through."""
    return [h.strip() for h in headers.get(HOP_HEADER, "").split(",") if h.strip()]


def with_hop(value: str | None, gateway_id: str) -> str:
    return f"{value},{gateway_id}" if value else gateway_id


def loop_message(source: str, upstream: str) -> str:
    """The 508's text: names ANTHROPIC_BASE_URL, the usual cause, and where the upstream came
    from when that was something else."""
    named = "" if source == "ANTHROPIC_BASE_URL" else f" (here it came from {source})"
    return (
        f"ctxpatch gateway: the upstream {upstream}{named} is this gateway itself (a request "
        "came back to it), so every request would loop; ANTHROPIC_BASE_URL must name the real "
        "API (or another proxy) when the gateway starts, not the gateway's own address"
    )


def on_this_machine(upstream: str, proxy: str | None) -> bool:
    """Whether the first hop (the proxy if any, else the upstream) is a loopback address or
    ``localhost`` (no name is resolved)."""
    try:
        host = (urlsplit(proxy or upstream).hostname or "").lower()
    except ValueError:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_unspecified


def _local(host: str) -> bool:
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return ip in (ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("0.0.0.0"))


def loop_at_start(url: str, listen_port: int) -> bool:
    """Whether connecting to ``url`` reaches 127.0.0.1:``listen_port``, i.e. the gateway.

    Only an address with that port is resolved (a name's lookup could take seconds offline).
    127.0.0.1 and 0.0.0.0 (which Linux connects to the local host) are the gateway's own."""
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return False
    if port != listen_port or not parts.hostname:
        return False
    if _local(parts.hostname):
        return True
    try:
        infos = socket.getaddrinfo(parts.hostname, port, proto=socket.IPPROTO_TCP)
    except OSError:
        return False
    return any(_local(str(info[4][0])) for info in infos)
