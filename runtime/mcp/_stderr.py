"""A local server's standard error: the file it goes to, and its last lines."""

from __future__ import annotations

import os
from typing import IO

__all__ = ["log_tail", "open_log"]


def open_log(path: str) -> IO[str]:
    """The file at *path*, made anew (blocking; its folder is made too)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed by the caller


def log_tail(path: str, size: int) -> str:
    """The last non-empty lines of the file at *path*, within *size* bytes (blocking)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, os.path.getsize(path) - size))
            text = handle.read(size).decode("utf-8", errors="replace")
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text.strip().splitlines()[-5:] if line.strip())
