"""The data dir the CLI works in: where it is, and who holds it.

A data dir is held by one process at a time (the journal records its holder). ``serve``
records the URL it listens on beside it, so that a second command can find the server and
talk to it instead (``server_to_reuse``).
"""

from __future__ import annotations

import base64
import os
import tempfile
from pathlib import Path
from typing import Final

import msgspec

from storage import EventStore, JournalHeld

__all__ = [
    "CliError",
    "server_headers",
    "check_free",
    "default_data_dir",
    "forget_serving",
    "held_message",
    "record_serving",
    "server_to_reuse",
    "serving_url",
]

_SERVING_FILE: Final = "serving.json"


class CliError(Exception):
    """A command that cannot go on: its message is the one line printed, ``code`` the exit."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def server_headers(env: dict[str, str] | None = None) -> dict[str, str]:
    """The ``Authorization`` a client of a server sends: ``Bearer
    $KITTIWAKE_SERVER_TOKEN``, else basic auth with ``$KITTIWAKE_SERVER_PASSWORD``, else
    nothing."""
    environ = os.environ if env is None else env
    if environ.get("KITTIWAKE_SERVER_TOKEN"):
        return {"Authorization": "Bearer " + environ["KITTIWAKE_SERVER_TOKEN"].strip()}
    if environ.get("KITTIWAKE_SERVER_PASSWORD"):
        pair = base64.b64encode(f"kittiwake:{environ['KITTIWAKE_SERVER_PASSWORD']}".encode())
        return {"Authorization": "Basic " + pair.decode()}
    return {}


def default_data_dir(env: dict[str, str] | None = None) -> Path:
    """``$KITTIWAKE_DATA_DIR``, else ``$XDG_DATA_HOME/kittiwake``, else ``~/.local/share/kittiwake``."""
    environ = os.environ if env is None else env
    if environ.get("KITTIWAKE_DATA_DIR"):
        return Path(environ["KITTIWAKE_DATA_DIR"])
    base = environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "kittiwake"


def held_message(error: JournalHeld, data_dir: Path, command: str) -> str:
    """One line naming the process that holds *data_dir*, and what to do instead."""
    holder = error.holder
    who = f"process {holder}" if holder is not None else "another process"
    url = serving_url(data_dir, holder)
    if url is not None:
        who += f" (kittiwake serve on {url})"
    if command == "serve":
        advice = "stop it, or serve another --data-dir"
    elif command == "import":  # opened here: a serve cannot take it in
        advice = "stop it first, or import into another --data-dir"
    elif url is not None:
        advice = f"add --attach {url} to use it"
    else:
        advice = "wait for it to end, or pass another --data-dir"
    return f"the data dir {data_dir} is in use by {who}; {advice}"


def serving_url(data_dir: Path, holder: int | None) -> str | None:
    """The URL ``serve`` recorded in *data_dir*, when the recording process is *holder*."""
    try:
        serving = msgspec.json.decode((data_dir / _SERVING_FILE).read_bytes())
    except (OSError, msgspec.DecodeError):
        return None
    if not isinstance(serving, dict) or holder is None or serving.get("pid") != holder:
        return None
    url = serving.get("url")
    return url if isinstance(url, str) else None


def server_to_reuse(attach: str | None, data_dir: Path, command: str) -> str | None:
    """The URL of the server *command* talks to: *attach*, else the one serving *data_dir*
    (its holder's ``serving.json`` record); None when *data_dir* is free, so that the caller
    opens it itself.

    Raises:
        CliError: *data_dir* is held by a process that serves no URL (``held_message``).
    """
    if attach:
        return attach
    try:
        EventStore.check_free(data_dir)
    except JournalHeld as exc:
        url = serving_url(data_dir, exc.holder)
        if url is None:
            raise CliError(held_message(exc, data_dir, command)) from None
        return url
    return None


def check_free(data_dir: Path, command: str) -> None:
    """Raise ``CliError`` naming the holder when another process holds *data_dir*."""
    try:
        EventStore.check_free(data_dir)
    except JournalHeld as exc:
        raise CliError(held_message(exc, data_dir, command)) from None


def record_serving(data_dir: Path, url: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=data_dir, prefix=".serving-", suffix=".tmp")
    with os.fdopen(fd, "wb") as fh:
        fh.write(msgspec.json.encode({"pid": os.getpid(), "url": url}))
    os.replace(tmp, data_dir / _SERVING_FILE)


def forget_serving(data_dir: Path) -> None:
    if serving_url(data_dir, os.getpid()) is not None:
        (data_dir / _SERVING_FILE).unlink(missing_ok=True)
