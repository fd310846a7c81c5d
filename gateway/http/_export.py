"""A session's export: its durable events and those of its subsessions as stored, the
shape of ``GET /api/session/{id}/export`` and of the file ``kittiwake export`` writes and
``kittiwake import`` reads.

Each event's ``data`` is its stored JSON, inlined as it is, so an export carries the
exact bytes of every durable event and an import stores them unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, Literal

import msgspec
from quart import Response

from actors import export_events
from gateway.http._routes import Answer, RouteTable
from gateway.http._wire import encode
from runtime import InvalidInputError, SessionInfo
from storage import StoredEvent

if TYPE_CHECKING:
    from gateway.http._app import Gateway

__all__ = [
    "EXPORT_FORMAT",
    "ExportedEvent",
    "SessionExport",
    "decode_export",
    "export_route",
    "session_export",
    "stored_events",
]

EXPORT_FORMAT: Final = "kittiwake.session"


class ExportedEvent(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True,
    rename={"aggregate_id": "aggregateID"},
):  # fmt: skip
    """One durable event as stored: ``data`` is its JSON, byte for byte."""

    id: str
    aggregate_id: str
    seq: int
    type: str
    version: int
    data: msgspec.Raw


class SessionExport(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True,
    rename={"session_id": "sessionID"},
):  # fmt: skip
    """A session with its subsessions: their infos as they are now (for reading) and
    their durable events (what an import stores), the session's first."""

    format: Literal["kittiwake.session"]
    version: Literal[1]
    session_id: str
    sessions: list[SessionInfo]
    events: list[ExportedEvent]


def session_export(
    session_id: str, infos: Sequence[SessionInfo], events: Sequence[StoredEvent]
) -> SessionExport:
    """The export of *session_id* from its sessions' *infos* and stored *events*."""
    return SessionExport(
        format=EXPORT_FORMAT, version=1, session_id=session_id, sessions=list(infos),
        events=[
            ExportedEvent(
                id=e.id, aggregate_id=e.aggregate_id, seq=e.seq, type=e.type,
                version=e.version, data=msgspec.Raw(e.data),
            )
            for e in events
        ],
    )  # fmt: skip


def decode_export(data: bytes) -> SessionExport:
    """*data* as an export. Raises ``InvalidInputError`` saying what is wrong with it."""
    try:
        return msgspec.json.decode(data, type=SessionExport)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise InvalidInputError(f"not a Kittiwake session export: {exc}") from None


def stored_events(export: SessionExport) -> list[StoredEvent]:
    """The events an import stores, as they were stored where the export was made."""
    return [
        StoredEvent(
            id=e.id,
            aggregate_id=e.aggregate_id,
            seq=e.seq,
            type=e.type,
            version=e.version,
            data=bytes(e.data),
        )
        for e in export.events
    ]


def export_route(table: RouteTable, gw: Gateway) -> None:
    """Install ``GET /api/session/{sessionID}/export`` on *table*: 404 for an unknown
    session, 400 when it holds more events than an export may."""

    @table.get(
        "/api/session/{sessionID}/export", "kittiwake.session.export",
        "The session and its subsessions as their stored durable events",
        answer=Answer(type=SessionExport), errors=("InvalidRequestError",),
    )  # fmt: skip
    async def export(session_id: str) -> Response:
        rt = gw.rt
        events = await export_events(rt, session_id)
        order = list(dict.fromkeys(e.aggregate_id for e in events))
        infos = [await rt.sessions.get(sid) for sid in order]
        body = session_export(session_id, infos, events)
        return Response(encode(body), status=200, content_type="application/json")
