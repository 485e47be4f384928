"""How the gateway reaches its upstream on the user's network, the way Claude Code does.

Claude Code's network settings (its "network configuration" page) are environment variables,
and ``ctxpatch run`` leaves them in the environment of both Claude Code and the gateway, so the
gateway must honour them as Claude Code would, or ``ctxpatch run -- claude`` fails where
``claude`` alone gets through:

* **Proxy**: ``HTTPS_PROXY`` for an https upstream (``HTTP_PROXY`` when it is unset),
  ``HTTP_PROXY`` for an http one; lower-case spellings first, as Node's and curl's readers do.
  ``NO_PROXY`` (commas or spaces; ``*`` for all; ``host``, ``.host`` and ``host:port``; a name
  also covers its subdomains) sends matching upstreams direct. Claude Code does not support
  SOCKS proxies and does not read ``ALL_PROXY``: neither does the gateway (a ``socks*://``
  proxy is refused at start with that reason, not silently ignored). Credentials in the proxy
  URL (``http://user:pass@proxy:8080``) are sent as ``Proxy-Authorization`` and never shown.
* **Trust**: the system's CAs, plus ``NODE_EXTRA_CA_CERTS`` (a PEM file added to them, as
  Node does) and ``SSL_CERT_FILE`` (OpenSSL's variable). As in Node, an extra CA file that
  cannot be read is skipped with a warning instead of stopping everything.
* **Client certificate** (mTLS): ``CLAUDE_CODE_CLIENT_CERT``, ``CLAUDE_CODE_CLIENT_KEY`` and
  ``CLAUDE_CODE_CLIENT_KEY_PASSPHRASE``.

And what the gateway shows of an upstream URL: :func:`shown` drops ``user:pass@``.
"""

from __future__ import annotations

import ipaddress
import logging
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from ctxpatch.errors import GatewayFailure

log = logging.getLogger("ctxpatch.gateway")

EXTRA_CA_ENV = ("NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE")
CLIENT_CERT_ENV = "CLAUDE_CODE_CLIENT_CERT"
CLIENT_KEY_ENV = "CLAUDE_CODE_CLIENT_KEY"
CLIENT_KEY_PASS_ENV = "CLAUDE_CODE_CLIENT_KEY_PASSPHRASE"


def shown(url: str) -> str:
    """``url`` as it may appear in a log line or an error body: ``user:pass@`` replaced."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<an unparsable URL>"
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc="<redacted>@" + host).geturl()


def _env(env: Mapping[str, str], name: str) -> str:
    return (env.get(name.lower()) or env.get(name.upper()) or "").strip()


def proxy_for(url: str, env: Mapping[str, str]) -> str | None:
    """The proxy Claude Code would use for ``url`` (None: direct)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    proxy = _env(env, "https_proxy") or _env(env, "http_proxy") if scheme == "https" else ""
    if scheme == "http":
        proxy = _env(env, "http_proxy")
    if not proxy or bypassed(parts.hostname or "", parts.port, _env(env, "no_proxy")):
        return None
    if "://" not in proxy:
        proxy = "http://" + proxy  # Node's readers take a bare host:port as http
    kind = urlsplit(proxy).scheme.lower()
    if kind.startswith("socks"):
        raise GatewayFailure(
            f"the proxy {shown(proxy)} is a SOCKS proxy",
            why="Claude Code does not support SOCKS proxies, and neither does the gateway",
            hint="set HTTPS_PROXY to an HTTP proxy (CONNECT), or add the upstream's host to "
            "NO_PROXY",
        )
    if kind not in ("http", "https"):
        raise GatewayFailure(
            f"not a proxy URL: {shown(proxy)}",
            why="HTTPS_PROXY / HTTP_PROXY must be an http:// (or https://) URL",
            hint="e.g. HTTPS_PROXY=http://proxy.example.com:8080",
        )
    return proxy


def bypassed(host: str, port: int | None, no_proxy: str) -> bool:
    """Whether ``NO_PROXY`` sends ``host`` (``port``) direct."""
    host = host.lower().strip("[]")
    for entry in no_proxy.replace(",", " ").split():
        entry = entry.lower()
        if entry == "*":
            return True
        name, want_port = entry, None
        if entry.startswith("[") and "]" in entry:  # [::1]:8080
            name, _, rest = entry[1:].partition("]")
            want_port = rest[1:] if rest.startswith(":") else None
        elif entry.count(":") == 1:
            name, _, want_port = entry.partition(":")
        if want_port and port is not None and want_port != str(port):
            continue
        name = name.lstrip("*").lstrip(".") if name.startswith(("*.", ".")) else name
        if host == name or host.endswith("." + name):
            return True
        try:  # a CIDR block
            if "/" in name and ipaddress.ip_address(host) in ipaddress.ip_network(name, False):
                return True
        except ValueError:
            pass
    return False


def ssl_context(env: Mapping[str, str]) -> ssl.SSLContext:
    """The TLS settings Claude Code would use: the system's CAs, the extra CA files, the
    client certificate."""
    ctx = ssl.create_default_context()
    for name in EXTRA_CA_ENV:
        path = (env.get(name) or "").strip()
        if not path:
            continue
        try:
            ctx.load_verify_locations(cafile=path)
        except (OSError, ssl.SSLError) as exc:
            log.warning("%s=%s not loaded (%s): the system's CAs only", name, path, exc)
    cert = (env.get(CLIENT_CERT_ENV) or "").strip()
    if cert:
        try:
            ctx.load_cert_chain(
                cert,
                (env.get(CLIENT_KEY_ENV) or "").strip() or None,
                env.get(CLIENT_KEY_PASS_ENV) or None,
            )
        except (OSError, ssl.SSLError) as exc:
            raise GatewayFailure(
                f"cannot load the client certificate {CLIENT_CERT_ENV}={cert}",
                why=str(exc),
                hint=f"check {CLIENT_CERT_ENV}, {CLIENT_KEY_ENV} and {CLIENT_KEY_PASS_ENV}",
            ) from exc
    return ctx


@dataclass(frozen=True)
class Route:
    """How requests reach the upstream: through ``proxy`` (None: direct), with ``tls`` for an
    https upstream or proxy."""

    proxy: str | None
    tls: ssl.SSLContext


def route(upstream: str, env: Mapping[str, str]) -> Route:
    return Route(proxy_for(upstream, env), ssl_context(env))


def upstream_url(upstream: str, raw_path_qs: str) -> str:
    """Where the client's path goes: under the upstream's own path, which the client's dot
    segments (``/../admin``, ``%2e%2e`` included) can never leave (RFC 3986's
    remove_dot_segments, bounded at the client's root)."""
    path, sep, query = raw_path_qs.partition("?")
    out: list[str] = []
    segments = path.split("/")[1:] if path.startswith("/") else path.split("/")
    for i, seg in enumerate(segments):
        name = unquote(seg)
        last = i == len(segments) - 1
        if name == ".":
            if last:
                out.append("")
        elif name == "..":
            if out:
                out.pop()
            if last:
                out.append("")
        else:
            out.append(seg)
    return upstream + "/" + "/".join(out) + sep + query
