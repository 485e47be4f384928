"""The real native binary believing it talks to Anthropic's own API, offline.

Claude Code decides "first-party" from ``ANTHROPIC_BASE_URL``: unset, or a URL whose host is
``api.anthropic.com`` (2.1.330 also takes ``_CLAUDE_CODE_ASSUME_FIRST_PARTY_BASE_URL``). To see
what it sends when it believes that, without any packet leaving the machine,
:class:`FirstPartySandbox` runs the binary with no ``ANTHROPIC_BASE_URL`` in a loopback-only
network namespace (:mod:`lab.netns`) whose ``/etc/hosts`` maps ``api.anthropic.com``
to ``127.0.0.1``, where the launcher serves TLS with a certificate for that name from a
throwaway CA (:func:`make_ca`) and forwards the plain bytes to the mock. The binary trusts the
CA through ``NODE_EXTRA_CA_CERTS`` (Bun honours it). Every other name has no address at all.

The CA and its key are created per sandbox (``openssl``), live in the sandbox folder and are
deleted with it; they sign only ``api.anthropic.com`` for two days and are trusted only by the
processes this sandbox starts.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.mock import Logged
from lab.sandbox import NativeSandbox, _port

API_HOST = "api.anthropic.com"
BILLING_PREFIX = "x-anthropic-billing-header:"


@dataclass(frozen=True)
class Ca:
    ca_cert: Path  # what the binary trusts (NODE_EXTRA_CA_CERTS)
    cert: Path  # the server certificate for API_HOST, signed by ca_cert
    key: Path


def openssl_missing() -> str | None:
    """None when ``openssl`` can run here, else why not (for a skip or a CI failure)."""
    if shutil.which("openssl") is None:
        return "openssl is not on PATH (it makes the throwaway CA of the first-party runs)"
    return None


def make_ca(folder: Path, host: str = API_HOST) -> Ca:
    """A throwaway CA and a server certificate for ``host`` (P-256 keys, valid two days)."""
    folder.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = folder / "ca.key", folder / "ca.pem"
    key, csr, cert = folder / "server.key", folder / "server.csr", folder / "server.pem"
    ext = folder / "server.ext"
    ext.write_text(
        f"subjectAltName=DNS:{host}\nbasicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
    )
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]

    def openssl(*args: str) -> None:
        r = subprocess.run(["openssl", *args], capture_output=True, text=True, check=False)
        if r.returncode != 0:
            raise RuntimeError(f"openssl {args[0]} failed: {r.stderr.strip()}")

    openssl(
        "req", "-x509", *ec, "-keyout", str(ca_key), "-out", str(ca_cert), "-days", "2",
        "-subj", "/CN=ctxpatch e2e throwaway CA",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    openssl("req", *ec, "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={host}")
    openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(ca_cert), "-CAkey", str(ca_key),
        "-CAcreateserial", "-out", str(cert), "-days", "2", "-extfile", str(ext),
    )  # fmt: skip
    return Ca(ca_cert, cert, key)


class FirstPartySandbox(NativeSandbox):
    """A :class:`NativeSandbox` where ``https://api.anthropic.com`` is the mock too (hosts file +
    TLS in the namespace), so whatever the binary sends to Anthropic's own host is seen.

    ``first_party=True``: the binary gets no ``ANTHROPIC_BASE_URL`` (a user talking to
    Anthropic); the ``base_url`` given to :meth:`run` then only names the bridge's port.
    ``first_party=False``: ``ANTHROPIC_BASE_URL`` is the mock at ``127.0.0.1`` (a user behind
    ``ctxpatch gateway``), and calls that bypass it to reach ``api.anthropic.com`` show up
    with that ``host`` header."""

    def __init__(self, root: Path, binary: Path, *, first_party: bool = True) -> None:
        super().__init__(root, binary)
        self.first_party = first_party
        self.ca = make_ca(self.root / "ca")
        self.hosts = self.root / "hosts"
        self.hosts.write_text(f"127.0.0.1 localhost\n::1 localhost\n127.0.0.1 {API_HOST}\n")

    def env(self, base_url: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = super().env(base_url, extra)
        if self.first_party:
            env.pop("ANTHROPIC_BASE_URL", None)
        env["NODE_EXTRA_CA_CERTS"] = str(self.ca.ca_cert)
        return env

    def command(self, args: Sequence[str], base_url: str) -> list[str]:
        from lab import netns

        return netns.wrap(
            [str(self.binary), *args],
            _port(base_url),
            self.socket,
            hosts=self.hosts,
            tls=(self.ca.cert, self.ca.key),
        )


def tls_forwarded(events: list[dict]) -> int:
    """How many connections the namespace's TLS listener (port 443) forwarded."""
    return sum(1 for e in events if e.get("event") == "connect" and e.get("via") == "netns-tls")


# --- what a run sent, reduced to what the base URL can change (pure) ---------------------------


@dataclass(frozen=True)
class Traits:
    """The first main-loop request of a run, and the other calls, as a base URL can change them.

    ``side_calls``: every request that is not ``/v1/messages`` (or its ``count_tokens``), as
    ``(method, host, path)`` with ``host`` either ``api.anthropic.com`` or ``base URL`` (the
    ``127.0.0.1`` the binary was given) and the query string dropped."""

    host: str
    betas: tuple[str, ...]
    headers: frozenset[str]
    body_keys: frozenset[str]
    billing: tuple[str, ...]  # field names of the attestation text, in order (cc_version, cch...)
    cch: str | None  # its cch= value
    global_cache_scope: bool  # a system block cached with ``scope: "global"``
    tools: tuple[str, ...]
    tools_bytes: int  # the tool definitions as JSON (what on-demand tool search saves)
    side_calls: tuple[tuple[str, str, str], ...]
    compacted: bool  # a summarisation request was sent

    @property
    def tool_search(self) -> bool:
        return "ToolSearch" in self.tools


def billing_fields(text: str) -> list[tuple[str, str]]:
    """``[(name, value), ...]`` of an ``x-anthropic-billing-header: a=1; b=2;`` text."""
    if not text.startswith(BILLING_PREFIX):
        return []
    return re.findall(r"([a-z_]+)=([^;\s]*);", text[len(BILLING_PREFIX) :])


def _first_text(system: Any) -> str:
    if isinstance(system, list) and system and isinstance(system[0], Mapping):
        return str(system[0].get("text") or "")
    return system if isinstance(system, str) else ""


def traits(requests: Sequence[Logged]) -> Traits:
    """The :class:`Traits` of one run's requests (the mock's log)."""
    mains = [r for r in requests if r.kind == "main"]
    if not mains:
        raise ValueError(f"no main-loop request among {[r.path for r in requests]}")
    main = mains[0]
    body = main.body if isinstance(main.body, Mapping) else {}
    fields = billing_fields(_first_text(body.get("system")))
    system = body.get("system")
    blocks: list[Any] = system if isinstance(system, list) else []
    tools = body.get("tools") or []
    side = sorted(
        {
            (
                r.method,
                API_HOST if r.headers.get("host") == API_HOST else "base URL",
                r.path.split("?")[0],
            )
            for r in requests
            if not r.path.split("?")[0].endswith(("/v1/messages", "/v1/messages/count_tokens"))
        }
    )
    return Traits(
        host=main.headers.get("host", ""),
        betas=tuple(b for b in main.headers.get("anthropic-beta", "").split(",") if b),
        headers=frozenset(k.lower() for k in main.headers),
        body_keys=frozenset(body),
        billing=tuple(name for name, _ in fields),
        cch=dict(fields).get("cch"),
        global_cache_scope=any(
            isinstance(b, Mapping) and (b.get("cache_control") or {}).get("scope") == "global"
            for b in blocks
        ),
        tools=tuple(str(t.get("name")) for t in tools if isinstance(t, Mapping)),
        tools_bytes=len(json.dumps(tools, separators=(",", ":"))),
        side_calls=tuple(side),
        compacted=any(r.kind == "compact" for r in requests),
    )


@dataclass(frozen=True)
class Difference:
    """What a run through a gateway (``gw``) lacks, or has, compared with first-party (``fp``)."""

    betas_fp_only: tuple[str, ...]
    betas_gw_only: tuple[str, ...]
    headers_fp_only: tuple[str, ...]
    headers_gw_only: tuple[str, ...]
    body_keys_fp_only: tuple[str, ...]
    billing_fp_only: tuple[str, ...]
    billing_gw_only: tuple[str, ...]


def difference(gw: Traits, fp: Traits) -> Difference:
    def only(a: Sequence[str] | frozenset[str], b: Sequence[str] | frozenset[str]):
        return tuple(x for x in sorted(a) if x not in b)

    return Difference(
        betas_fp_only=tuple(b for b in fp.betas if b not in gw.betas),
        betas_gw_only=tuple(b for b in gw.betas if b not in fp.betas),
        headers_fp_only=only(fp.headers, gw.headers),
        headers_gw_only=only(gw.headers, fp.headers),
        body_keys_fp_only=only(fp.body_keys, gw.body_keys),
        billing_fp_only=tuple(f for f in fp.billing if f not in gw.billing),
        billing_gw_only=tuple(f for f in gw.billing if f not in fp.billing),
    )
