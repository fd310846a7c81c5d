"""The base of every durable record and event: frozen, keyword-only msgspec Structs whose
snake-case fields travel in OpenCode's spelling (``session_id`` -> ``sessionID``)."""

from __future__ import annotations

from typing import ClassVar

import msgspec

__all__ = ["Event", "Record", "wire_name"]


def wire_name(name: str) -> str:
    """Spell a snake-case field the way OpenCode's JSON does (``call_id`` -> ``callID``)."""
    head, *rest = name.split("_")
    return head + "".join("ID" if part == "id" else part.capitalize() for part in rest)


class Record(msgspec.Struct, frozen=True, kw_only=True, rename=wire_name, gc=False):
    """Base of every durable record: frozen, keyword-only, OpenCode field names.

    Optional wire fields default to ``UNSET`` and are then left out of the JSON.
    """


class Event(Record, frozen=True, tag_field="type"):
    """Base of durable session events; ``version`` is stored beside the type.

    ``LOCAL_FIELDS`` names fields that are Kittiwake's own: stored with the event but,
    on the wire, carried in the envelope's ``metadata`` rather than in OpenCode's ``data``.
    """

    VERSION: ClassVar[int] = 1
    LOCAL_FIELDS: ClassVar[tuple[str, ...]] = ()
    timestamp: int
    session_id: str
