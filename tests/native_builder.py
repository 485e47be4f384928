"""Small synthetic Bun standalone executables (ELF, Mach-O, PE) with known modules, for tests.

Written from the layout described in :mod:`patcher.native.container` / :mod:`patcher.native.graph`
(Bun's ``StandaloneModuleGraph.zig``): a blob ``[data][Offsets][trailer]`` wrapped in a minimal
container. No real Claude Code bytes are involved.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import zstandard

from patcher.native.container import TRAILER
from patcher.native.graph import LOADERS

LOADER = {name: i for i, name in enumerate(LOADERS)}


@dataclass
class Mod:
    name: str
    data: bytes
    loader: str = "js"
    encoding: int = 1  # latin1
    fmt: int = 1  # esm
    side: int = 0
    compress: bool = False
    bytecode: bytes = b""


def blob(mods: list[Mod], record: int = 52, entry_point: int = 0) -> bytes:
    data = bytearray(b"\0" * 8)  # offset 0 is "empty" in Bun's pointers: start after it

    def put(b: bytes) -> tuple[int, int]:
        if not b:
            return 0, 0
        at = len(data)
        data.extend(b)
        data.extend(b"\0")  # Bun NUL-terminates contents
        return at, len(b)

    recs = []
    for m in mods:
        body = zstandard.ZstdCompressor().compress(m.data) if m.compress else m.data
        name = put(m.name.encode())
        contents = put(body)
        bytecode = put(m.bytecode)
        ptrs = [name, contents, (0, 0), bytecode]
        if record == 52:
            ptrs += [(0, 0), name if m.bytecode else (0, 0)]
        flat = [x for p in ptrs for x in p]
        recs.append(
            struct.pack(
                "<" + "II" * len(ptrs) + "BBBB", *flat, m.encoding, LOADER[m.loader], m.fmt, m.side
            )
        )
    table = b"".join(recs)
    mod_off = len(data)
    data.extend(table)
    argv = put(b"--smol")
    offsets = struct.pack("<QIIIIII", len(data), mod_off, len(table), entry_point, *argv, 0)
    return bytes(data) + offsets + TRAILER


def elf(payload: bytes, bits: int = 64, big: bool = False, overlay: bool = False) -> bytes:
    """An ELF with sections [null, .text, .bun, .shstrtab]; ``overlay``: blob appended instead."""
    e = ">" if big else "<"
    shstr = b"\0.text\0.bun\0.shstrtab\0"
    text = b"\x90" * 64
    section = b"" if overlay else struct.pack("<Q", len(payload)) + payload  # Bun: always LE
    ehsize = 64 if bits == 64 else 52
    shentsize = 64 if bits == 64 else 40
    text_off = ehsize
    bun_off = text_off + len(text)
    str_off = bun_off + len(section)
    shoff = (str_off + len(shstr) + 7) // 8 * 8
    ident = b"\x7fELF" + bytes([2 if bits == 64 else 1, 2 if big else 1, 1]) + b"\0" * 9
    if bits == 64:
        hdr = ident + struct.pack(
            e + "HHIQQQIHHHHHH", 2, 62, 1, 0, 0, shoff, 0, ehsize, 0, 0, shentsize, 4, 3
        )
        sh = e + "IIQQQQIIQQ"
    else:
        hdr = ident + struct.pack(
            e + "HHIIIIIHHHHHH", 2, 3, 1, 0, 0, shoff, 0, ehsize, 0, 0, shentsize, 4, 3
        )
        sh = e + "IIIIIIIIII"
    headers = [
        struct.pack(sh, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
        struct.pack(sh, 1, 1, 6, 0, text_off, len(text), 0, 0, 16, 0),
        struct.pack(sh, 7, 1, 3, 0, bun_off, len(section), 0, 0, 8, 0)
        if not overlay
        else struct.pack(sh, 7, 8, 3, 0, bun_off, 0, 0, 0, 8, 0),  # a NOBITS stand-in
        struct.pack(sh, 12, 3, 0, 0, str_off, len(shstr), 0, 0, 1, 0),
    ]
    if overlay:
        # the old layout has no `.bun` section at all: rename it so it is not found
        shstr = shstr.replace(b".bun\0", b".bss\0")
    body = hdr + text + section + shstr
    body += b"\0" * (shoff - len(body)) + b"".join(headers)
    if overlay:
        body += payload + struct.pack("<Q", len(payload) + 8)
    return body


def macho(payload: bytes, u32_header: bool = False, fat: bool = False) -> bytes:
    size_hdr = struct.pack("<I" if u32_header else "<Q", len(payload))
    section = size_hdr + payload
    # mach_header_64 + LC_SEGMENT_64 __TEXT (no sections) + LC_SEGMENT_64 __BUN (one section)
    seg_text = struct.pack("<II16sQQQQiiII", 0x19, 72, b"__TEXT", 0, 0, 0, 0, 5, 5, 0, 0)
    seg_bun_size = 72 + 80
    header_size = 32 + len(seg_text) + seg_bun_size
    sect_off = (header_size + 15) // 16 * 16
    seg_bun = struct.pack(
        "<II16sQQQQiiII", 0x19, seg_bun_size, b"__BUN", 0, len(section), sect_off, len(section), 1,
        1, 1, 0,
    )  # fmt: skip
    sect = struct.pack(
        "<16s16sQQIIIIIIII", b"__bun", b"__BUN", 0, len(section), sect_off, 3, 0, 0, 0, 0, 0, 0
    )
    hdr = struct.pack(
        "<IiiIIIII", 0xFEEDFACF, 0x0100000C, 0, 2, 2, len(seg_text) + seg_bun_size, 0, 0
    )
    image = hdr + seg_text + seg_bun + sect
    image += b"\0" * (sect_off - len(image)) + section
    if not fat:
        return image
    slice_at = 4096
    fat_hdr = struct.pack(">II", 0xCAFEBABE, 1) + struct.pack(
        ">IIIII", 0x0100000C, 0, slice_at, len(image), 14
    )
    return fat_hdr + b"\0" * (slice_at - len(fat_hdr)) + image


def pe(payload: bytes) -> bytes:
    section = struct.pack("<Q", len(payload)) + payload
    raw_size = (len(section) + 511) // 512 * 512  # file alignment pads the raw data
    lfanew = 64
    opt_size = 240
    table = lfanew + 24 + opt_size
    raw_ptr = (table + 2 * 40 + 511) // 512 * 512
    dos = b"MZ" + b"\0" * 58 + struct.pack("<I", lfanew)
    coff = b"PE\0\0" + struct.pack("<HHIIIHH", 0x8664, 2, 0, 0, 0, opt_size, 0x22)
    opt = b"\x0b\x02" + b"\0" * (opt_size - 2)
    text = struct.pack("<8sIIIIIIHHI", b".text", 16, 0x1000, 0, 0, 0, 0, 0, 0, 0x60000020)
    bun = struct.pack(
        "<8sIIIIIIHHI", b".bun", len(section), 0x2000, raw_size, raw_ptr, 0, 0, 0, 0, 0x40000040
    )
    head = dos + coff + opt + text + bun
    return head + b"\0" * (raw_ptr - len(head)) + section + b"\0" * (raw_size - len(section))


# The two Claude Code layouts, in miniature.
SINGLE_CLI = (
    b"// @bun @bytecode @bun-cjs\n(function(exports, require, module, __filename, __dirname) {"
    b'// Version: 2.1.150\nvar X={README_URL:"https://x",VERSION:"2.1.150"};})\n'
)


def single_module_app() -> list[Mod]:
    return [
        Mod("/$bunfs/root/src/entrypoints/cli.js", SINGLE_CLI, fmt=2, bytecode=b"\xfa" * 32),
        Mod(
            "/$bunfs/root/image-processor.js", b"// @bun @bytecode @bun-cjs\n(function(){})", fmt=2
        ),
        Mod("/$bunfs/root/image-processor.node", b"\x7fELF" + b"\0" * 60, loader="napi", fmt=0),
    ]


def split_app(chunks: int = 5) -> list[Mod]:
    head = b"// @bun @bytecode\n// (c) Example\n\n// Version: 2.1.300\n"
    mods = [
        Mod(f"/$bunfs/root/chunk-{i:08d}.js", head + f"export var c{i}={i};\n".encode())
        for i in range(chunks)
    ]
    mods.append(Mod("/$bunfs/root/cli", head + b'import "/$bunfs/root/chunk-00000000.js";\n'))
    mods.append(Mod("/$bunfs/root/_12.js", head + b"export var early=1;\n"))  # 2.1.24x naming
    mods.append(Mod("/$bunfs/root/image-processor.js", head + b"export default 0;\n"))
    mods.append(Mod("/$bunfs/root/guide-1234.md.zst", b"# guide\n" * 200, "file", 0, 0, 1, True))
    mods.append(Mod("/$bunfs/root/notes.md", "# notes – ü\n".encode(), "text", 2, 0, 1))
    return mods
