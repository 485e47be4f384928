"""Where the gateway's log goes, and what never reaches it.

Three loggers speak for a gateway: ``ctxpatch.gateway`` (ours), ``aiohttp.*`` (its server logs
a malformed request line by line, headers included) and ``asyncio`` (e.g. "Too many open
files" at the accept loop). Whatever handler they reach gets :class:`Scrub` first: header lines
naming a credential (:func:`gateway.redact.is_secret`), ``sk-ant-...`` keys, ``Bearer`` tokens
and ``user:pass@`` in URLs are replaced by ``<redacted>``, in the message and in any traceback.

``ctxpatch run`` shares the terminal with Claude Code, so it prints nothing there:
:func:`quiet` gives the three loggers a handler of their own (the ``--log`` file, created mode
600, or nothing at all) and stops them from reaching Python's last-resort stderr handler.
``ctxpatch gateway`` logs to stderr (its own terminal) through the same scrub.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gateway.redact import REDACTED, SECRET_WORDS

LOGGERS = ("ctxpatch.gateway", "aiohttp", "asyncio")
FORMAT = "%(asctime)s %(levelname)s %(message)s"

_HEADER = re.compile(
    r"(?im)((?:[\w-]*(?:" + "|".join(SECRET_WORDS) + r")[\w-]*)(?:\s*[:=]\s*|\s+))"
    r"(?:(?:Bearer|Basic)\s+)?(?![0-9.]+\b)[^\s,'\"\\]+"
)
# (pattern, replacement, words one of which every match holds, in any case)
_SECRETS = (
    (_HEADER, r"\1" + REDACTED, SECRET_WORDS),
    (re.compile(r"sk-ant-[A-Za-z0-9_\-]+"), REDACTED, ("sk-ant-",)),
    (
        re.compile(r"(?i)\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=\-]+"),
        r"\1 " + REDACTED,
        ("bearer", "basic"),
    ),
    (re.compile(r"(?i)(\b[a-z][a-z0-9+.\-]*://)[^/\s@'\"]+@"), r"\1" + REDACTED + "@", ("://",)),
)


def scrub(text: str) -> str:
    """``text`` with every credential it may hold replaced.

    An ASCII text that holds none of a pattern's words (lower-cased) cannot match it and skips
    its search: the header pattern alone took ~50 us on a one-line request log, on the event
    loop, for every request (a non-ASCII text is searched: under ``(?i)`` four non-ASCII
    letters match ASCII ones, which ``lower()`` does not map)."""
    for pattern, repl, words in _SECRETS:
        if text.isascii():
            low = text.lower()
            if not any(w in low for w in words):
                continue
        text = pattern.sub(repl, text)
    return text


class Scrub(logging.Filter):
    """A handler filter: the record's message and traceback, scrubbed, formatted once."""

    _fmt = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = scrub(record.getMessage())
        record.args = None
        if record.exc_info:
            record.exc_text = scrub(self._fmt.formatException(record.exc_info))
            record.exc_info = None
        return True


def secret_file_handler(path: Path) -> logging.Handler:
    """A handler appending to ``path``, created mode 600 (the log names paths and models)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.close(fd)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter(FORMAT))
    handler.addFilter(Scrub())
    return handler


def scrubbed(handler: logging.Handler) -> logging.Handler:
    handler.addFilter(Scrub())
    return handler


@contextmanager
def quiet(log_file: Path | None) -> Iterator[None]:
    """For ``ctxpatch run``: the gateway's loggers write to ``log_file`` (or nowhere), never to
    the terminal; as they were afterwards."""
    handler: logging.Handler = (
        secret_file_handler(log_file) if log_file is not None else logging.NullHandler()
    )
    saved = []
    for name in LOGGERS:
        logger = logging.getLogger(name)
        saved.append((logger, logger.propagate, logger.level))
        logger.addHandler(handler)
        logger.propagate = False
        level = logging.INFO if name == "ctxpatch.gateway" else logging.WARNING
        logger.setLevel(level if log_file is not None else logging.CRITICAL + 1)
    try:
        yield
    finally:
        for logger, propagate, level in saved:
            logger.removeHandler(handler)
            logger.propagate = propagate
            logger.setLevel(level)
        handler.close()
