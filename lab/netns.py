"""Offline runs of a native (Bun) Claude Code binary: a network namespace with loopback only.

The node guard of :mod:`lab.sandbox` is a ``--require`` preload; a Bun standalone binary
loads no preload from the environment (``NODE_OPTIONS`` is ignored) and resolves names and opens
sockets in native code, so nothing can be hooked from inside. Instead the binary runs in a fresh
network namespace (``unshare -rn``: an unprivileged user namespace owning a network namespace)
whose only interface is ``lo``: no route exists to any other address, DNS has no server, so no
packet can leave the machine whatever the binary tries. That proves "offline" by construction,
not by reading a log afterwards.

The namespace's ``127.0.0.1`` is not the host's, so the mock is reached through a bridge over a
Unix socket (path sockets are file system objects, visible from both namespaces)::

    binary -> 127.0.0.1:PORT (in the namespace) -> LAUNCHER forwarder -> SOCKET
           -> :class:`UnixBridge` (host, a thread of the test process) -> mock 127.0.0.1:PORT

The same port on both sides keeps ``ANTHROPIC_BASE_URL`` identical to a node run. The launcher
(this module run as a script inside the namespace, standard library only) brings ``lo`` up,
logs the namespace's interfaces and every forwarded connection to ``$NETLOG_FILE``, runs the
binary and exits with its status.

Optional, for a binary that must believe it talks to Anthropic's own API (no
``ANTHROPIC_BASE_URL``; see :mod:`lab.firstparty`): ``hosts`` (a hosts file
bind-mounted over ``/etc/hosts`` in a mount namespace of its own, ``unshare -rnm``: e.g.
``api.anthropic.com`` -> ``127.0.0.1``) and ``tls`` (a certificate and key: the launcher also
listens on ``127.0.0.1:443``, ends TLS there and forwards the plain bytes to the same socket).
Still nothing but ``lo`` exists: a name the hosts file does not hold has no DNS to ask.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import socketserver
import struct
import subprocess
import sys
import threading
from pathlib import Path

SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


def splice(a: socket.socket, b: socket.socket) -> None:
    """Copy bytes both ways until both sides are done; then close both."""
    t = threading.Thread(target=_pump, args=(b, a), daemon=True)
    t.start()
    _pump(a, b)
    t.join()
    a.close()
    b.close()


class UnixBridge:
    """Host side: accept on the Unix socket ``path``, connect each to ``127.0.0.1:port``."""

    def __init__(self, path: Path, port: int) -> None:
        self.path = Path(path)
        self.path.unlink(missing_ok=True)
        port_ = port

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                try:
                    up = socket.create_connection(("127.0.0.1", port_), timeout=30)
                except OSError:
                    return
                up.settimeout(None)
                splice(self.request, up)

        self._server = socketserver.ThreadingUnixStreamServer(str(self.path), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self.path.unlink(missing_ok=True)

    def __enter__(self) -> UnixBridge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def netns_available() -> str | None:
    """None when ``unshare -rn`` works here, else why not (for a skip or a CI failure)."""
    try:
        r = subprocess.run(
            ["unshare", "-rn", "true"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unshare cannot run: {e}"
    if r.returncode != 0:
        return (
            f"unshare -rn failed ({r.stderr.strip()}): unprivileged user namespaces are off "
            "(sysctl kernel.unprivileged_userns_clone=1 / "
            "kernel.apparmor_restrict_unprivileged_userns=0)"
        )
    return None


def wrap(
    command: list[str],
    port: int,
    socket_path: Path,
    *,
    hosts: Path | None = None,
    tls: tuple[Path, Path] | None = None,
) -> list[str]:
    """``command`` run in a loopback-only network namespace reaching ``socket_path`` as
    ``127.0.0.1:port``; with ``hosts``, that file is the namespace's ``/etc/hosts``; with
    ``tls`` (certificate, key), ``127.0.0.1:443`` serves TLS and forwards to the same socket."""
    options: list[str] = []
    if hosts is not None:
        options += ["--hosts", str(Path(hosts).resolve())]
    if tls is not None:
        options += ["--tls", str(Path(tls[0]).resolve()), str(Path(tls[1]).resolve())]
    return [
        "unshare",
        "-rnm" if hosts is not None else "-rn",
        sys.executable,
        "-I",  # isolated: the launcher imports nothing from the caller's paths or environment
        str(Path(__file__).resolve()),
        str(port),
        str(socket_path),
        *options,
        "--",
        *command,
    ]


# --- the launcher, run inside the namespace ------------------------------------------------


def _log(entry: dict) -> None:
    path = os.environ.get("NETLOG_FILE")
    if path:
        with contextlib.suppress(OSError), open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")


def _loopback_up() -> None:
    import fcntl

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifr = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(s, SIOCGIFFLAGS, ifr))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | IFF_UP))


def _forward(port: int, socket_path: str) -> None:
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", port))
    srv.listen(64)

    def serve() -> None:
        while True:
            conn, _peer = srv.accept()
            _log({"event": "connect", "host": "127.0.0.1", "port": port, "via": "netns"})
            up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                up.connect(socket_path)
            except OSError:
                conn.close()
                continue
            threading.Thread(target=splice, args=(conn, up), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()


def _bind_hosts(path: str) -> None:
    """``path`` over ``/etc/hosts`` (this process is alone in its mount namespace)."""
    subprocess.run(["mount", "--bind", path, "/etc/hosts"], check=True)


def _forward_tls(socket_path: str, cert: str, key: str, port: int = 443) -> None:
    """Serve TLS on ``127.0.0.1:port``, forward the decrypted bytes to ``socket_path``.

    asyncio's TLS runs in one thread (an ``SSLObject`` over memory buffers), so reading and
    writing one connection never race inside OpenSSL."""
    import asyncio
    import ssl

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    ready = threading.Event()

    async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (OSError, ssl.SSLError):
            pass
        finally:
            with contextlib.suppress(OSError, RuntimeError):
                if writer.can_write_eof():
                    writer.write_eof()
                else:
                    writer.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        _log({"event": "connect", "host": "127.0.0.1", "port": port, "via": "netns-tls"})
        try:
            up_r, up_w = await asyncio.open_unix_connection(socket_path)
        except OSError:
            writer.close()
            return
        await asyncio.gather(pump(reader, up_w), pump(up_r, writer))
        for w in (up_w, writer):
            with contextlib.suppress(OSError, RuntimeError):
                w.close()

    async def serve() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", port, ssl=ctx)
        ready.set()
        async with server:
            await server.serve_forever()

    threading.Thread(target=lambda: asyncio.run(serve()), daemon=True).start()
    if not ready.wait(10):
        raise RuntimeError(f"the TLS forwarder did not start on 127.0.0.1:{port}")


def main(argv: list[str]) -> int:
    usage = "usage: netns.py PORT SOCKET [--hosts FILE] [--tls CERT KEY] -- COMMAND..."
    if "--" not in argv[2:] or len(argv) < 4:
        print(usage, file=sys.stderr)
        return 2
    cut = argv.index("--", 2)
    port, socket_path, options, command = int(argv[0]), argv[1], argv[2:cut], argv[cut + 1 :]
    hosts: str | None = None
    tls: tuple[str, str] | None = None
    while options:
        if options[0] == "--hosts" and len(options) >= 2:
            hosts, options = options[1], options[2:]
        elif options[0] == "--tls" and len(options) >= 3:
            tls, options = (options[1], options[2]), options[3:]
        else:
            print(usage, file=sys.stderr)
            return 2
    if not command:
        print(usage, file=sys.stderr)
        return 2
    _loopback_up()
    if hosts is not None:
        _bind_hosts(hosts)
    _log({"event": "netns", "interfaces": sorted(name for _, name in socket.if_nameindex())})
    _forward(port, socket_path)
    if tls is not None:
        _forward_tls(socket_path, *tls)
    proc = subprocess.Popen(command)
    code = proc.wait()
    if tls is not None:  # the TLS loop's thread still holds open tasks: leave without a report
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
