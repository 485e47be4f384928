"""Session-memory compaction: present (``"tengu_sm_compact…"`` events) and its config object
``{minTokens, minTextBlockMessages, maxTokens}``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from patcher.inspect.finding import Finding, Notes
from patcher.inspect.jsconst import Constant, Reader
from patcher.inspect.patterns import object_with_key

_KEYS = (
    ("minTokens", "sm_min_tokens"),
    ("minTextBlockMessages", "sm_min_text_messages"),
    ("maxTokens", "sm_max_tokens"),
)


@dataclass(frozen=True)
class SessionMemory(Finding):
    present: bool = False

    def features(self) -> dict[str, Any]:
        return {"session_memory": self.present}


def extract(r: Reader) -> SessionMemory:
    notes = Notes()
    obj = object_with_key(r, b"minTextBlockMessages:")
    if obj is not None:
        value, where = obj
        for k_src, k_dst in _KEYS:
            if k_src in value:
                notes.constants[k_dst] = Constant(value[k_src], f"{{{k_src}}}", where)
    return SessionMemory(present=b'"tengu_sm_compact' in r.data, **notes.common())
