"""Bun's standalone module graph: the table of embedded files inside the blob.

Pure: :func:`parse` takes a buffer holding the blob ``[data][Offsets][trailer]`` (see
:mod:`patcher.native.container`) and returns a :class:`Graph` of :class:`Entry` records. It reads
only the table and the names; the contents stay where they are until asked for.

Layout (Bun ``src/StandaloneModuleGraph.zig``; all little-endian; a *pointer* is
``{u32 offset, u32 length}`` into the data)::

    Offsets  = u64 byte_count, pointer modules, u32 entry_point, pointer exec_argv, u32 flags
    record   = pointer name, contents, sourcemap, bytecode,
               [pointer module_info, bytecode_origin_path]   # 52-byte records (Bun ≥ ~1.3.7)
               u8 encoding, loader, module_format, side      # 36-byte records before

Claude Code 2.1.113–2.1.330 all use 52-byte records; the 36-byte ones are read too.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from patcher.native.container import OFFSETS_SIZE, TRAILER, BadBinary, Buffer

RECORD_NEW = 52
RECORD_OLD = 36
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_HINT = "the binary looks damaged: reinstall Claude Code's platform package and try again"
_MAX_NAME = 4096

# Bun's enums (src/options.zig Loader, StandaloneModuleGraph Encoding / ModuleFormat)
LOADERS = (
    "jsx", "js", "ts", "tsx", "css", "file", "json", "jsonc", "toml", "wasm", "napi",
    "base64", "dataurl", "text", "bunsh", "sqlite", "sqlite_embedded", "html", "yaml",
)  # fmt: skip
ENCODINGS = ("binary", "latin1", "utf8")
FORMATS = ("none", "esm", "cjs")


@dataclass(frozen=True)
class Entry:
    """One embedded file. ``start``/``size`` locate its stored contents within the blob."""

    index: int
    name: str
    start: int
    size: int
    encoding: str
    loader: str
    format: str  # module format: "none" | "esm" | "cjs"
    bytecode_size: int
    compressed: bool  # stored as a zstd frame (Claude Code ≥ 2.1.243 documents and assets)

    @property
    def kind(self) -> str:
        """What the file is to us: "js" (source Bun runs), "native" (a .node addon), or "data"."""
        if self.loader in ("js", "jsx", "ts", "tsx") and not self.compressed:
            return "js"
        if self.loader == "napi":
            return "native"
        return "data"

    @property
    def basename(self) -> str:
        return self.name.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Graph:
    entries: tuple[Entry, ...]
    entry_point: int  # index into entries
    record_size: int
    data_size: int

    @property
    def main(self) -> Entry:
        return self.entries[self.entry_point]


def _bad(what: str, why: str, **info: object) -> BadBinary:
    return BadBinary(what, why=why, hint=_HINT, **info)


def parse(blob: Buffer) -> Graph:
    """Read the module table of ``blob`` (the bytes from the data start to the trailer's end)."""
    n = len(blob)
    if n < OFFSETS_SIZE + len(TRAILER) or bytes(blob[n - len(TRAILER) : n]) != TRAILER:
        raise _bad("no Bun module graph here", f"the blob does not end with {TRAILER!r}", size=n)
    at = n - len(TRAILER) - OFFSETS_SIZE
    byte_count, mod_off, mod_len, entry_point, _argv_off, _argv_len, _flags = struct.unpack(
        "<QIIIIII", blob[at : at + OFFSETS_SIZE]
    )
    if byte_count != at:
        raise _bad(
            "the Bun module graph's size does not add up",
            f"its offsets say {byte_count} bytes of data, the blob holds {at}",
        )
    if mod_off + mod_len > at:
        raise _bad(
            "the Bun module table lies outside the graph",
            f"table at {mod_off}+{mod_len}, data ends at {at}",
        )
    table = bytes(blob[mod_off : mod_off + mod_len])
    errors: list[str] = []
    for size in _record_sizes(mod_len):
        try:
            entries = _records(blob, table, size, at)
        except _Bounds as e:
            errors.append(f"as {size}-byte records: {e}")
            continue
        if entry_point >= len(entries):
            errors.append(f"as {size}-byte records: entry point {entry_point} of {len(entries)}")
            continue
        return Graph(tuple(entries), entry_point, size, at)
    raise _bad(
        "the Bun module table is corrupt",
        f"{mod_len} bytes do not read as {RECORD_NEW}- or {RECORD_OLD}-byte records"
        + (": " + "; ".join(errors) if errors else ""),
    )


def _record_sizes(length: int) -> list[int]:
    return [s for s in (RECORD_NEW, RECORD_OLD) if length % s == 0 and length > 0]


class _Bounds(Exception):
    pass


def _records(blob: Buffer, table: bytes, size: int, limit: int) -> list[Entry]:
    pointers = 6 if size == RECORD_NEW else 4
    fmt = "<" + "II" * pointers + "BBBB"
    out = []
    for i in range(len(table) // size):
        f = struct.unpack_from(fmt, table, i * size)
        for k in range(pointers):
            off, ln = f[2 * k], f[2 * k + 1]
            if off + ln > limit:
                raise _Bounds(f"record {i} points at {off}+{ln}, beyond the data ({limit} bytes)")
        name_off, name_len, c_off, c_len = f[0], f[1], f[2], f[3]
        if name_len == 0 or name_len > _MAX_NAME:
            raise _Bounds(f"record {i} has a name of {name_len} bytes")
        try:
            name = bytes(blob[name_off : name_off + name_len]).decode("utf-8")
        except UnicodeDecodeError:
            raise _Bounds(f"record {i}'s name is not UTF-8") from None
        encoding, loader, fmt_, _side = f[-4:]
        head = bytes(blob[c_off : c_off + 4]) if c_len >= 4 else b""
        out.append(
            Entry(
                index=i,
                name=name,
                start=c_off,
                size=c_len,
                encoding=_enum(ENCODINGS, encoding),
                loader=_enum(LOADERS, loader),
                format=_enum(FORMATS, fmt_),
                bytecode_size=f[7],
                compressed=head == ZSTD_MAGIC,
            )
        )
    return out


def _enum(names: tuple[str, ...], value: int) -> str:
    return names[value] if value < len(names) else f"#{value}"
