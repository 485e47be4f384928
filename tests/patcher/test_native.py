"""The pure-Python reader of Bun standalone executables, on small synthetic ELF/Mach-O/PE files."""

from __future__ import annotations

import struct
from pathlib import Path

import native_builder as nbld
import pytest
import zstandard

from ctxpatch.errors import FileAccess
from patcher.native import container, graph
from patcher.native.app import read_app
from patcher.native.container import TRAILER, BadBinary
from patcher.native.reader import NativeBinary, decompress


def write(tmp_path: Path, data: bytes, name: str = "claude") -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


CONTAINERS = {
    "elf64": lambda b: nbld.elf(b),
    "elf32-big-endian": lambda b: nbld.elf(b, bits=32, big=True),
    "elf-overlay": lambda b: nbld.elf(b, overlay=True),
    "macho": lambda b: nbld.macho(b),
    "macho-u32-header": lambda b: nbld.macho(b, u32_header=True),
    "macho-universal": lambda b: nbld.macho(b, fat=True),
    "pe": lambda b: nbld.pe(b),
    "bare-blob": lambda b: b"\0" * 100 + b,
}
EXPECT_HOW = {
    "elf64": ("elf", "ELF section .bun"),
    "elf32-big-endian": ("elf", "ELF section .bun"),
    "elf-overlay": ("elf", "trailer before the final u64"),
    "macho": ("macho", "Mach-O segment __BUN section __bun"),
    "macho-u32-header": ("macho", "Mach-O segment __BUN section __bun"),
    "macho-universal": ("macho", "Mach-O segment __BUN section __bun"),
    "pe": ("pe", "PE section .bun"),
    "bare-blob": ("trailer", "trailer at end of file"),
}


@pytest.mark.parametrize("kind", sorted(CONTAINERS))
@pytest.mark.parametrize("record", [52, 36])
def test_every_container_gives_back_the_modules(kind: str, record: int, tmp_path: Path) -> None:
    mods = nbld.split_app(chunks=3)
    path = write(tmp_path, CONTAINERS[kind](nbld.blob(mods, record=record, entry_point=3)))
    with NativeBinary(path) as nb:
        assert (nb.location.container, nb.location.how) == EXPECT_HOW[kind]
        assert nb.graph.record_size == record
        assert [e.name for e in nb.entries] == [m.name for m in mods]
        assert [nb.read(e) for e in nb.entries] == [m.data for m in mods]
        assert nb.graph.main.name == "/$bunfs/root/cli"


def test_kinds_flags_and_zstd(tmp_path: Path) -> None:
    mods = nbld.split_app(chunks=1)
    path = write(tmp_path, nbld.elf(nbld.blob(mods, entry_point=1)))
    with NativeBinary(path) as nb:
        by = {e.basename: e for e in nb.entries}
        z = by["guide-1234.md.zst"]
        assert z.compressed and z.kind == "data" and z.loader == "file"
        assert z.size < len(b"# guide\n" * 200)  # stored compressed ...
        assert nb.read(z) == b"# guide\n" * 200  # ... read back whole
        md = by["notes.md"]
        assert (md.loader, md.encoding, md.compressed) == ("text", "utf8", False)
        assert nb.read(md).decode() == "# notes – ü\n"
        assert by["cli"].kind == "js" and by["cli"].format == "esm"
        assert [m.name for m in nb.modules("js")] == [
            "/$bunfs/root/chunk-00000000.js",
            "/$bunfs/root/cli",
            "/$bunfs/root/_12.js",
            "/$bunfs/root/image-processor.js",
        ]


def test_single_module_layout(tmp_path: Path) -> None:
    path = write(tmp_path, nbld.elf(nbld.blob(nbld.single_module_app())))
    with NativeBinary(path) as nb:
        app = read_app(nb)
        cli = nb.entries[0]
        assert (cli.format, cli.bytecode_size) == ("cjs", 32)
        native = nb.entries[2]
        assert native.kind == "native"
    assert app.layout == "single"
    assert app.version == "2.1.150"
    assert [s.name for s in app.sources] == ["/$bunfs/root/src/entrypoints/cli.js"]
    assert app.sources[0].data == nbld.SINGLE_CLI


def test_split_layout_loader_first_then_chunks_no_data(tmp_path: Path) -> None:
    mods = nbld.split_app(chunks=4)
    path = write(tmp_path, nbld.macho(nbld.blob(mods, entry_point=4)))
    with NativeBinary(path) as nb:
        app = read_app(nb)
    assert app.layout == "split"
    assert app.version == "2.1.300"
    assert app.sources[0].name == "/$bunfs/root/cli"
    assert [s.name for s in app.sources[1:]] == [
        *(f"/$bunfs/root/chunk-{i:08d}.js" for i in range(4)),
        "/$bunfs/root/_12.js",
        "/$bunfs/root/image-processor.js",
    ]
    assert app.size == sum(len(m.data) for m in mods[:7])  # every JS module, no data


def test_copies_outlive_the_mapping(tmp_path: Path) -> None:
    path = write(tmp_path, nbld.pe(nbld.blob(nbld.single_module_app())))
    with NativeBinary(path) as nb:
        data = nb.read(nb.entries[0])
    assert data == nbld.SINGLE_CLI
    with pytest.raises(ValueError, match="closed"):
        nb.read(nb.entries[0])


# --- bad input: clear errors, never IndexError / struct.error / unbounded reads -----------------


def _err(tmp_path: Path, data: bytes) -> BadBinary:
    with pytest.raises(BadBinary) as info:
        NativeBinary(write(tmp_path, data))
    e = info.value
    assert e.what and e.why and e.hint
    return e


def test_not_a_bun_executable(tmp_path: Path) -> None:
    e = _err(tmp_path, b"\x7fELF\x02\x01\x01" + b"\0" * 200)
    assert "no Bun module graph" in e.what


def test_plain_text_is_refused(tmp_path: Path) -> None:
    e = _err(tmp_path, b"console.log(1)\n" * 10)
    assert "not a Bun standalone executable" in e.why


def test_empty_and_missing_files(tmp_path: Path) -> None:
    e = _err(tmp_path, b"")
    assert "empty" in e.why
    with pytest.raises(FileAccess):
        NativeBinary(tmp_path / "nope")


@pytest.mark.parametrize("kind", ["elf64", "macho", "pe"])
def test_every_truncation_is_a_clear_error(kind: str, tmp_path: Path) -> None:
    """Cut the file at many points: each is either still readable (cut after the blob) or
    refused with a BadBinary, never another exception."""
    full = CONTAINERS[kind](nbld.blob(nbld.split_app(chunks=2), entry_point=2))
    end_of_blob = full.rfind(TRAILER) + len(TRAILER)
    cuts = sorted(
        {*range(0, 200, 7), *range(200, len(full), max(1, len(full) // 97)), end_of_blob - 1}
    )
    refused = 0
    for cut in cuts:
        path = write(tmp_path, full[:cut])
        try:
            with NativeBinary(path) as nb:
                names = [e.name for e in nb.entries]
        except BadBinary as e:
            assert e.what and e.why and e.hint
            refused += 1
        else:
            assert cut >= end_of_blob, f"a file cut at {cut} of {len(full)} was read"
            assert names[-1] == "/$bunfs/root/notes.md"
    assert refused >= len([c for c in cuts if c < end_of_blob]) - 1


def test_corrupt_module_table(tmp_path: Path) -> None:
    b = bytearray(nbld.blob(nbld.split_app(chunks=1)))
    mod_off = struct.unpack_from("<I", b, len(b) - 16 - 32 + 8)[0]
    struct.pack_into("<II", b, mod_off + 8, 10**9, 5)  # first module's contents far outside
    e = _err(tmp_path, nbld.elf(bytes(b)))
    assert "module table is corrupt" in e.what
    assert "beyond the data" in e.why


def test_table_that_fits_neither_record_size(tmp_path: Path) -> None:
    b = bytearray(nbld.blob(nbld.split_app(chunks=1)))
    at = len(b) - 16 - 32
    struct.pack_into("<I", b, at + 12, 53)  # modules length 53: neither 52k nor 36k
    e = _err(tmp_path, nbld.elf(bytes(b)))
    assert "module table is corrupt" in e.what


def test_byte_count_mismatch(tmp_path: Path) -> None:
    b = bytearray(nbld.blob(nbld.split_app(chunks=1)))
    at = len(b) - 16 - 32
    struct.pack_into("<Q", b, at, 12)
    e = _err(tmp_path, nbld.elf(bytes(b)))  # the section bounds the blob: sizes disagree
    assert "does not add up" in e.what
    e = _err(tmp_path, b"\0" * 64 + bytes(b))  # found by its trailer: the table falls outside
    assert "outside the graph" in e.what
    struct.pack_into("<Q", b, at, 10**9)
    e = _err(tmp_path, b"\0" * 64 + bytes(b))
    assert "cut short" in e.what


def test_elf_section_beyond_the_file(tmp_path: Path) -> None:
    data = bytearray(nbld.elf(nbld.blob(nbld.single_module_app())))
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    struct.pack_into("<Q", data, shoff + 2 * 64 + 32, 10**12)  # .bun sh_size
    e = _err(tmp_path, bytes(data))
    assert "truncated inside its ELF `.bun` section" in e.what


def test_corrupt_zstd_entry(tmp_path: Path) -> None:
    entry = graph.Entry(0, "x.md.zst", 0, 8, "binary", "file", "none", 0, True)
    with pytest.raises(BadBinary, match="not a valid zstd frame"):
        decompress(graph.ZSTD_MAGIC + b"\xff" * 4, entry)


def test_zstd_bomb_is_bounded(tmp_path: Path) -> None:
    big = zstandard.ZstdCompressor().compress(b"\0" * (4 << 20))
    nodeclared = zstandard.ZstdCompressor(write_content_size=False).compress(b"\0" * (4 << 20))
    entry = graph.Entry(0, "bomb.zst", 0, len(big), "binary", "file", "none", 0, True)
    with pytest.raises(BadBinary, match="too large"):
        decompress(big, entry, limit=1 << 20)
    with pytest.raises(BadBinary, match="too large"):
        decompress(nodeclared, entry, limit=1 << 20)
    assert decompress(nodeclared, entry, limit=4 << 20) == b"\0" * (4 << 20)


def test_unknown_graph_is_refused_by_app(tmp_path: Path) -> None:
    mods = [nbld.Mod("/$bunfs/root/app.js", b"console.log(1)")]
    path = write(tmp_path, nbld.elf(nbld.blob(mods)))
    with NativeBinary(path) as nb, pytest.raises(BadBinary, match="not a Claude Code build"):
        read_app(nb)


def test_container_sniffing() -> None:
    assert container.container_of(b"\x7fELF....") == "elf"
    assert container.container_of(b"\xcf\xfa\xed\xfe") == "macho"
    assert container.container_of(b"\xca\xfe\xba\xbe") == "macho"
    assert container.container_of(b"MZ\x90\x00") == "pe"
    assert container.container_of(b"#!/usr/bin/env node") == "unknown"
