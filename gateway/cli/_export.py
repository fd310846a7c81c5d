"""``kittiwake export SESSION`` and ``kittiwake import FILE``: a session and its subsessions
as their stored durable events (``GET /api/session/{id}/export``), or as a Markdown
transcript; and such an export stored into a data dir, every event as it was.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final

import msgspec
import trio

from gateway._datadir import CliError
from gateway.cli._terminal import check
from gateway.http import decode_export, stored_events, transcript
from runtime import InvalidInputError, PromptConflictError, SessionInfo, SessionMessage

if TYPE_CHECKING:
    import httpx

__all__ = [
    "DEFAULT_MAX_IMPORT_BYTES",
    "export_command",
    "import_file",
    "read_export",
    "read_session",
    "write_out",
]

DEFAULT_MAX_IMPORT_BYTES: Final = 512 * 1024 * 1024
"""The largest export file ``kittiwake import`` reads."""
_MESSAGE_PAGE: Final = 200
_MAX_MESSAGES: Final = 100_000


async def read_export(api: httpx.AsyncClient, session_id: str) -> bytes:
    """The export of *session_id* as the server sends it (JSON). Raises ``RunFailed`` for
    an unknown session or one too big to export."""
    response = await api.get(f"/api/session/{session_id}/export")
    check(response)
    return response.content


async def read_session(
    api: httpx.AsyncClient, session_id: str
) -> tuple[SessionInfo, list[SessionMessage]]:
    """*session_id*'s info and its messages, oldest first (at most 100,000). Raises
    ``RunFailed`` for an unknown session."""
    info = msgspec.convert(check(await api.get(f"/api/session/{session_id}"))["data"], SessionInfo)
    messages: list[SessionMessage] = []
    params: dict[str, str | int] = {"order": "asc", "limit": _MESSAGE_PAGE}
    while len(messages) < _MAX_MESSAGES:
        page = check(await api.get(f"/api/session/{session_id}/message", params=params))
        messages += [msgspec.convert(m, SessionMessage) for m in page["data"]]
        following = page.get("cursor", {}).get("next")
        if not following:
            break
        params = {"cursor": following, "limit": _MESSAGE_PAGE}
    return info, messages


async def export_command(
    api: httpx.AsyncClient, session_id: str, fmt: str, output: str | None
) -> int:
    """Write *session_id*'s export (``json``) or transcript (``markdown``) to *output*
    (standard output when None)."""
    if fmt == "markdown":
        info, messages = await read_session(api, session_id)
        data = transcript(info, messages).encode()
    else:
        data = await read_export(api, session_id) + b"\n"
    write_out(data, output)
    return 0


def write_out(data: bytes, output: str | None) -> None:
    """*data* to the file *output* (replaced whole: a new file renamed over it), or to
    standard output. Raises ``CliError`` when the file cannot be written."""
    if output is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    target = Path(output)
    staging = target.with_name(target.name + ".tmp")
    try:
        staging.write_bytes(data)
        staging.replace(target)
    except OSError as exc:
        raise CliError(f"cannot write {output}: {exc.strerror or exc}") from None


def _read_file(path: str, max_bytes: int) -> bytes:
    try:
        with open(path, "rb") as file:
            data = file.read(max_bytes + 1)
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise CliError(f"{path} is over the {max_bytes} bytes an import reads")
    return data


async def import_file(
    data_dir: Path, path: str, *, max_bytes: int = DEFAULT_MAX_IMPORT_BYTES
) -> list[SessionInfo]:
    """Store the export in the file *path* into *data_dir* (opened here), whole or not at
    all; the sessions imported, the exported one first.

    Raises ``CliError`` (exit status 1) when the file cannot be read, is over *max_bytes*,
    is not an export, or names a session the data dir has; nothing is written then.
    """
    from runtime import open_runtime

    data = await trio.to_thread.run_sync(_read_file, path, max_bytes)
    try:
        events = stored_events(decode_export(data))
    except InvalidInputError as exc:
        raise CliError(f"{path}: {exc}") from None
    from actors import import_events

    async with open_runtime(data_dir=data_dir) as rt:
        try:
            return await import_events(rt, events)
        except (InvalidInputError, PromptConflictError) as exc:
            raise CliError(f"{path}: {exc}; nothing was imported") from None
