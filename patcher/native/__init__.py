"""Reading Claude Code's native builds (Bun standalone executables) in pure Python.

* :mod:`patcher.native.container` finds the Bun blob in an ELF / Mach-O / PE file (or by its
  trailer);
* :mod:`patcher.native.graph` parses the module table inside it;
* :mod:`patcher.native.reader` memory-maps a file and reads entries (zstd decompressed);
* :mod:`patcher.native.app` tells Claude Code's own JavaScript apart: the single ``cli.js``
  (2.1.113–2.1.242) or the loader and its chunks (2.1.243 on).

Reading only: ctxpatch never writes into a binary.
"""
