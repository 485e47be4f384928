"""Where a Bun standalone executable keeps its module graph: ELF, Mach-O, PE, or a bare trailer.

Pure: every function takes a buffer (``bytes``, ``memoryview`` or an ``mmap``) and returns the
byte range ``(start, end)`` of the Bun *blob*::

    [data ...][Offsets: 32 bytes][b"\\n---- Bun! ----\\n"]

Bun ``--compile`` puts that blob

* in ELF builds since Bun 1.3 in a section named ``.bun`` whose contents are
  ``[u64 length][blob]`` (Claude Code 2.1.113 … 2.1.330);
* in Mach-O in section ``__bun`` of segment ``__BUN``, and in PE in a section ``.bun``, as
  ``[u64 length][blob]`` (Bun ≥ 1.3.4) or ``[u32 length][blob]`` (older);
* in old ELF builds appended after the image: ``[blob][u64 total]`` (the "overlay" layout).

When no section names it, the trailer is looked for at the end of the file and then, bounded,
anywhere in it. Every read is bounds-checked: a truncated or corrupt file raises
:class:`BadBinary` with what, why and a hint, never an ``IndexError`` or an unbounded read.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from typing import Any

from ctxpatch.errors import NotABundle

TRAILER = b"\n---- Bun! ----\n"
OFFSETS_SIZE = 32  # u64 byte_count, {u32,u32} modules, u32 entry, {u32,u32} argv, u32 flags

_ELF = b"\x7fELF"
_MACHO_64 = (b"\xcf\xfa\xed\xfe", b"\xfe\xed\xfa\xcf")  # MH_MAGIC_64 little / big endian
_MACHO_32 = (b"\xce\xfa\xed\xfe", b"\xfe\xed\xfa\xce")
_FAT = (b"\xca\xfe\xba\xbe", b"\xca\xfe\xba\xbf")  # universal binary (32- / 64-bit arch table)
_MZ = b"MZ"
_MAX_SECTIONS = 65535  # ELF e_shnum, PE NumberOfSections are 16-bit
_MAX_LOAD_COMMANDS = 4096
_MAX_FAT_ARCHS = 64
_HINT = (
    "pass the `claude` executable of @anthropic-ai/claude-code-<platform> (or the package "
    "folder); reinstall it if it was cut short (npm install, or `claude install`)"
)


Buffer = bytes | bytearray | memoryview | mmap.mmap


class BadBinary(NotABundle, code="bad_native_binary"):
    """A file that should be a Bun standalone executable and is not, or is damaged."""


@dataclass(frozen=True)
class Location:
    """The blob ``buf[start:end]``, and how it was found."""

    container: str  # "elf" | "macho" | "pe" | "trailer"
    how: str  # e.g. "section .bun", "segment __BUN section __bun", "trailer at end of file"
    start: int
    end: int


def _bad(what: str, why: str, **info: object) -> BadBinary:
    return BadBinary(what, why=why, hint=_HINT, **info)


def _unpack(fmt: str, buf: Buffer, offset: int, what: str) -> tuple[Any, ...]:
    size = struct.calcsize(fmt)
    if offset < 0 or offset + size > len(buf):
        raise _bad(
            f"the file is truncated inside its {what}",
            f"{what} at byte {offset} needs {size} bytes but the file has {len(buf)}",
        )
    return struct.unpack(fmt, buf[offset : offset + size])


def container_of(buf: Buffer) -> str:
    head = bytes(buf[:4])
    if head == _ELF:
        return "elf"
    if head in _MACHO_64 or head in _MACHO_32 or head in _FAT:
        return "macho"
    if head[:2] == _MZ:
        return "pe"
    return "unknown"


def locate(buf: Buffer) -> Location:
    """The Bun blob in ``buf``: from the container's section table, else through the trailer."""
    kind = container_of(buf)
    section: tuple[str, int, int] | None = None
    if kind == "elf":
        section = _elf_section(buf, b".bun")
    elif kind == "macho":
        section = _macho_section(buf)
    elif kind == "pe":
        section = _pe_section(buf, b".bun")
    if section is not None:
        how, start, size = section
        found = _sized_blob(buf, start, size)
        if found is None:
            raise _bad(
                f"the {how} holds no Bun module graph",
                "neither a u64 nor a u32 length at its start is followed by a blob that ends "
                f"with the trailer {TRAILER!r}",
                offset=start,
                size=size,
            )
        return Location(kind, how, *found)
    return _by_trailer(buf, kind)


def _sized_blob(buf: Buffer, start: int, size: int) -> tuple[int, int] | None:
    """``[u64 n][blob]`` or ``[u32 n][blob]`` inside ``buf[start:start+size]``."""
    end = min(start + size, len(buf))
    for width, fmt in ((8, "<Q"), (4, "<I")):
        if start + width > end:
            continue
        (n,) = struct.unpack(fmt, buf[start : start + width])
        blob_end = start + width + n
        if n < OFFSETS_SIZE + len(TRAILER) or blob_end > end:
            continue
        if bytes(buf[blob_end - len(TRAILER) : blob_end]) == TRAILER:
            return start + width, blob_end
    return None


def _by_trailer(buf: Buffer, kind: str) -> Location:
    n = len(buf)
    t = len(TRAILER)
    # old ELF overlay: [blob][u64 total] at the very end; else a blob that ends the file
    for tail, how in ((8, "trailer before the final u64"), (0, "trailer at end of file")):
        end = n - tail
        if end - t >= OFFSETS_SIZE and bytes(buf[end - t : end]) == TRAILER:
            return Location(
                kind if kind != "unknown" else "trailer", how, *_blob_from_end(buf, end)
            )
    pos = (bytes(buf) if isinstance(buf, memoryview) else buf).rfind(TRAILER)
    if pos < 0:
        raise _bad(
            "no Bun module graph in this file",
            f"no `.bun` section and no Bun trailer {TRAILER!r}: this is not a Bun standalone "
            "executable (Claude Code's native builds are)",
            container=kind,
            size=n,
        )
    return Location(
        kind if kind != "unknown" else "trailer",
        "trailer found by search",
        *_blob_from_end(buf, pos + t),
    )


def _blob_from_end(buf: Buffer, end: int) -> tuple[int, int]:
    """A blob that ends at ``end``: its start is ``byte_count`` before its Offsets struct."""
    offsets_at = end - len(TRAILER) - OFFSETS_SIZE
    (byte_count,) = _unpack("<Q", buf, offsets_at, "Bun offsets")
    start = offsets_at - byte_count
    if byte_count == 0 or start < 0:
        raise _bad(
            "the Bun module graph is cut short",
            f"its offsets say {byte_count} bytes of data precede byte {offsets_at}",
            offset=offsets_at,
        )
    return start, end


# --- ELF -----------------------------------------------------------------------------------


def _elf_section(buf: Buffer, want: bytes) -> tuple[str, int, int] | None:
    ei_class, ei_data = _unpack("BB", buf, 4, "ELF identification")
    if ei_class not in (1, 2) or ei_data not in (1, 2):
        raise _bad("the ELF header is corrupt", f"class {ei_class}, data encoding {ei_data}")
    e = "<" if ei_data == 1 else ">"
    if ei_class == 2:
        (shoff,) = _unpack(e + "Q", buf, 0x28, "ELF header")
        shentsize, shnum, shstrndx = _unpack(e + "HHH", buf, 0x3A, "ELF header")
        sh_fmt, min_ent = e + "IIQQQQIIQQ", 64
    else:
        (shoff,) = _unpack(e + "I", buf, 0x20, "ELF header")
        shentsize, shnum, shstrndx = _unpack(e + "HHH", buf, 0x2E, "ELF header")
        sh_fmt, min_ent = e + "IIIIIIIIII", 40
    if shoff == 0 or shnum == 0:
        return None  # stripped of section headers: fall back to the trailer
    if shentsize < min_ent or shnum > _MAX_SECTIONS or shstrndx >= shnum:
        raise _bad(
            "the ELF section table is corrupt",
            f"{shnum} entries of {shentsize} bytes, names in entry {shstrndx}",
        )
    headers = []
    for i in range(shnum):
        fields = _unpack(sh_fmt, buf, shoff + i * shentsize, "ELF section table")
        # name, type, flags, addr, offset, size, ...
        headers.append((fields[0], fields[1], fields[4], fields[5]))
    _, _, str_off, str_size = headers[shstrndx]
    names = _checked_slice(buf, str_off, str_size, "ELF section-name table")
    for name_off, sh_type, off, size in headers:
        if names[name_off : name_off + len(want) + 1] == want + b"\0":
            if sh_type == 8:  # SHT_NOBITS: no bytes in the file
                raise _bad("the ELF `.bun` section has no contents", "it is of type NOBITS")
            _checked_slice_bounds(buf, off, size, "ELF `.bun` section")
            return f"ELF section {want.decode()}", off, size
    return None


def _checked_slice(buf: Buffer, off: int, size: int, what: str) -> bytes:
    _checked_slice_bounds(buf, off, size, what)
    if size > 1 << 24:
        raise _bad(f"the {what} is implausibly large", f"{size} bytes")
    return bytes(buf[off : off + size])


def _checked_slice_bounds(buf: Buffer, off: int, size: int, what: str) -> None:
    if off < 0 or size < 0 or off + size > len(buf):
        raise _bad(
            f"the file is truncated inside its {what}",
            f"the {what} spans bytes {off}..{off + size} but the file has {len(buf)}",
        )


# --- Mach-O --------------------------------------------------------------------------------

_LC_SEGMENT = 0x1
_LC_SEGMENT_64 = 0x19


def _macho_section(buf: Buffer, base: int = 0, depth: int = 0) -> tuple[str, int, int] | None:
    magic = bytes(buf[base : base + 4])
    if magic in _FAT and depth == 0:
        return _fat_section(buf, magic)
    if magic not in _MACHO_64 and magic not in _MACHO_32:
        raise _bad("a Mach-O slice has no valid header", f"magic {magic.hex()} at byte {base}")
    e = "<" if magic[0] in (0xCF, 0xCE) else ">"
    is64 = magic in _MACHO_64
    ncmds, sizeofcmds = _unpack(e + "II", buf, base + 16, "Mach-O header")
    if ncmds > _MAX_LOAD_COMMANDS:
        raise _bad("the Mach-O header is corrupt", f"it claims {ncmds} load commands")
    at = base + (32 if is64 else 28)
    end = at + sizeofcmds
    for _ in range(ncmds):
        cmd, cmdsize = _unpack(e + "II", buf, at, "Mach-O load commands")
        if cmdsize < 8 or at + cmdsize > end:
            raise _bad("a Mach-O load command is corrupt", f"cmdsize {cmdsize} at byte {at}")
        if cmd in (_LC_SEGMENT_64, _LC_SEGMENT) and (cmd == _LC_SEGMENT_64) == is64:
            found = _macho_segment(buf, at, e, is64, base)
            if found is not None:
                return found
        at += cmdsize
    return None


def _macho_segment(
    buf: Buffer, at: int, e: str, is64: bool, base: int
) -> tuple[str, int, int] | None:
    segname = _unpack("16s", buf, at + 8, "Mach-O segment")[0].rstrip(b"\0")
    if segname != b"__BUN":
        return None
    if is64:
        (nsects,) = _unpack(e + "I", buf, at + 64, "Mach-O segment")
        sect_at, sect_size = at + 72, 80
    else:
        (nsects,) = _unpack(e + "I", buf, at + 48, "Mach-O segment")
        sect_at, sect_size = at + 56, 68
    if nsects > 255:
        raise _bad("the Mach-O __BUN segment is corrupt", f"it claims {nsects} sections")
    for i in range(nsects):
        s = sect_at + i * sect_size
        sectname = _unpack("16s", buf, s, "Mach-O section")[0].rstrip(b"\0")
        if sectname != b"__bun":
            continue
        if is64:
            size, offset = _unpack(e + "QI", buf, s + 40, "Mach-O section")
        else:
            size, offset = _unpack(e + "II", buf, s + 36, "Mach-O section")
        _checked_slice_bounds(buf, base + offset, size, "Mach-O __BUN,__bun section")
        return "Mach-O segment __BUN section __bun", base + offset, size
    return None


def _fat_section(buf: Buffer, magic: bytes) -> tuple[str, int, int] | None:
    (nfat,) = _unpack(">I", buf, 4, "universal binary header")
    if nfat > _MAX_FAT_ARCHS:
        raise _bad("the universal binary header is corrupt", f"it claims {nfat} architectures")
    wide = magic == _FAT[1]
    for i in range(nfat):
        if wide:
            _, _, offset, _size, _, _ = _unpack(">IIQQII", buf, 8 + i * 32, "universal arch table")
        else:
            _, _, offset, _size, _ = _unpack(">IIIII", buf, 8 + i * 20, "universal arch table")
        found = _macho_section(buf, offset, depth=1)
        if found is not None:
            return found
    return None


# --- PE ------------------------------------------------------------------------------------


def _pe_section(buf: Buffer, want: bytes) -> tuple[str, int, int] | None:
    (lfanew,) = _unpack("<I", buf, 0x3C, "DOS header")
    if _unpack("4s", buf, lfanew, "PE header")[0] != b"PE\0\0":
        raise _bad("the PE header is corrupt", f"no `PE` signature at byte {lfanew}")
    (nsections,) = _unpack("<H", buf, lfanew + 6, "PE file header")
    (opt_size,) = _unpack("<H", buf, lfanew + 20, "PE file header")
    table = lfanew + 24 + opt_size
    for i in range(nsections):
        name, vsize, _vaddr, raw_size, raw_ptr = _unpack(
            "<8sIIII", buf, table + i * 40, "PE section table"
        )
        if name.rstrip(b"\0") == want:
            size = min(vsize, raw_size) if vsize else raw_size
            _checked_slice_bounds(buf, raw_ptr, size, "PE `.bun` section")
            return f"PE section {want.decode()}", raw_ptr, size
    return None
