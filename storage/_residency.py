"""Start-up pages of the DuckDB library, handed back once a server has started.

Loading DuckDB's library and opening a database (registering every built-in function,
migrating, checking every table) reads through about 40 MB of its code and read-only
data; a served store then runs a small part of it. Those pages are clean copies of the
library file, so unmapping them loses nothing: the kernel keeps them in its page cache
and maps a page back, without reading the disk, when DuckDB runs it again.
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
from pathlib import Path
from typing import Final

import msgspec

__all__ = ["LibraryMapping", "library_mappings", "release_library_pages"]

_MADV_DONTNEED: Final = 4
_HEADER = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) (\S{4}) \S+ \S+ \S+ *(.*)$")


class LibraryMapping(msgspec.Struct, kw_only=True):
    """One mapping of the library, as ``/proc/self/smaps`` describes it."""

    start: int
    end: int
    perms: str
    resident: int = 0
    """Bytes of the mapping in memory."""
    anonymous: int = 0
    """Bytes copied on write (relocations, data); these must never be dropped."""

    @property
    def clean(self) -> bool:
        """Read-only and never written: every resident page is the file's own."""
        return "w" not in self.perms and self.anonymous == 0


def _library_path() -> Path | None:
    """The DuckDB extension module's file, or None when it is not loaded."""
    module = sys.modules.get("_duckdb")
    file = getattr(module, "__file__", None)
    return Path(os.path.realpath(file)) if file else None


def library_mappings(smaps: Path = Path("/proc/self/smaps")) -> list[LibraryMapping]:
    """The mappings of DuckDB's library in this process; empty where there is no smaps."""
    path = _library_path()
    if path is None or not smaps.exists():
        return []
    found: list[LibraryMapping] = []
    current: LibraryMapping | None = None
    with smaps.open() as lines:
        for line in lines:
            header = _HEADER.match(line)
            if header is not None:
                start, end, perms, name = header.groups()
                current = None
                if name == str(path):
                    current = LibraryMapping(start=int(start, 16), end=int(end, 16), perms=perms)
                    found.append(current)
            elif current is not None and line.startswith(("Rss:", "Anonymous:")):
                key, value = line.split()[:2]
                setattr(current, "resident" if key == "Rss:" else "anonymous", int(value) * 1024)
    return found


def release_library_pages() -> int:
    """Unmap the clean resident pages of DuckDB's library; returns the bytes unmapped.

    Call it once start-up's DuckDB work is done. Mappings holding copied-on-write pages
    (relocated tables, data) are left whole. Does nothing (returns 0) off Linux.
    """
    if not sys.platform.startswith("linux"):
        return 0
    madvise = ctypes.CDLL(None, use_errno=True).madvise
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    released = 0
    for mapping in library_mappings():
        if mapping.clean and mapping.resident:
            if madvise(mapping.start, mapping.end - mapping.start, _MADV_DONTNEED) == 0:
                released += mapping.resident
    return released
