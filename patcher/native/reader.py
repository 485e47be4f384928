"""Open a Bun standalone executable and read its embedded files: the only I/O of the reader.

The file is memory-mapped, never read whole: reading the JavaScript out of the 381 MB Claude
Code 2.1.330 binary touches the module table and the ~66 MB of chunk sources, nothing else
(``bench/bench_native.py`` prints the time and peak memory).

zstd-compressed entries (documents and assets in Claude Code ≥ 2.1.243) are decompressed with
the ``zstandard`` package, bounded: a frame that declares (or turns out to hold) more than
``limit`` bytes is refused rather than inflated.
"""

from __future__ import annotations

import mmap
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import zstandard

from ctxpatch.errors import FileAccess
from patcher.native.container import BadBinary, Location, locate
from patcher.native.graph import Entry, Graph, parse

MAX_ENTRY = 256 << 20  # no embedded file of Claude Code comes near this (the largest: ~21 MB)


@dataclass(frozen=True)
class Module:
    """One embedded file, read: name, kind and its (decompressed) bytes."""

    name: str
    kind: str
    data: bytes
    entry: Entry


class NativeBinary:
    """A memory-mapped Bun executable. Use as a context manager; copies outlive it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            raise FileAccess(
                f"{path} does not exist",
                hint="check the path, or run `ctxpatch status` to list the installed copies",
            ) from None
        except OSError as e:
            raise FileAccess(f"cannot open {path}", why=e.strerror or str(e)) from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
                raise BadBinary(
                    f"{path} is not a native Claude Code binary",
                    why="it is empty" if st.st_size == 0 else "it is not a regular file",
                    hint="pass the `claude` executable or its package folder",
                )
            self.size = st.st_size
            self._map = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)
        try:
            self.location: Location = locate(self._map)
            self._blob: memoryview | None = memoryview(self._map)[
                self.location.start : self.location.end
            ]
            self.graph: Graph = parse(self._blob)
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> NativeBinary:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        blob = getattr(self, "_blob", None)
        if blob is not None:
            blob.release()
            self._blob = None
        if getattr(self, "_map", None) is not None and not self._map.closed:
            self._map.close()

    @property
    def entries(self) -> tuple[Entry, ...]:
        return self.graph.entries

    def read(self, entry: Entry, limit: int = MAX_ENTRY) -> bytes:
        """The file's bytes, decompressed when stored as a zstd frame."""
        if self._blob is None:
            raise ValueError("the binary is closed")
        stored = self._blob[entry.start : entry.start + entry.size]
        if not entry.compressed:
            if entry.size > limit:
                raise _too_big(entry, entry.size, limit)
            return bytes(stored)
        return decompress(stored, entry, limit)

    def module(self, entry: Entry, limit: int = MAX_ENTRY) -> Module:
        return Module(entry.name, entry.kind, self.read(entry, limit), entry)

    def modules(self, kind: str | None = None) -> list[Module]:
        return [self.module(e) for e in self.entries if kind is None or e.kind == kind]


def decompress(stored: memoryview | bytes, entry: Entry, limit: int = MAX_ENTRY) -> bytes:
    try:
        params = zstandard.get_frame_parameters(stored)
    except zstandard.ZstdError as e:
        raise _corrupt(entry, str(e)) from None
    declared = params.content_size
    if declared not in (0, zstandard.CONTENTSIZE_UNKNOWN) and declared > limit:
        raise _too_big(entry, declared, limit)
    try:
        with zstandard.ZstdDecompressor().stream_reader(stored) as reader:
            out = reader.read(limit + 1)
            while len(out) <= limit:
                more = reader.read(limit + 1 - len(out))
                if not more:
                    break
                out += more
    except zstandard.ZstdError as e:
        raise _corrupt(entry, str(e)) from None
    if len(out) > limit:
        raise _too_big(entry, len(out), limit)
    return out


def _corrupt(entry: Entry, why: str) -> BadBinary:
    return BadBinary(
        f"the embedded file {entry.name} is not a valid zstd frame",
        why=why,
        hint="the binary looks damaged: reinstall Claude Code's platform package",
    )


def _too_big(entry: Entry, size: int, limit: int) -> BadBinary:
    return BadBinary(
        f"the embedded file {entry.name} is too large to read",
        why=f"it holds {size} bytes, more than the limit of {limit}",
        hint="this is not what a Claude Code build looks like; check the file",
    )
