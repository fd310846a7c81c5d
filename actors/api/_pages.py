"""Pages of session lists and events: the page type, its cursors and limits."""

from __future__ import annotations

import builtins
from typing import Literal

import msgspec

from runtime import InvalidInputError, SessionInfo, SessionMessage
from runtime import events as ev
from storage import StoredEvent

__all__ = ["Page", "SessionEvent", "check_limit", "decoded", "parse_cursor"]


class Page(msgspec.Struct, frozen=True, kw_only=True):
    """One page of a list, with opaque cursors for the pages around it."""

    data: builtins.list[SessionInfo] | builtins.list[SessionMessage]
    previous: str | None = None
    next: str | None = None


class SessionEvent(msgspec.Struct, frozen=True, kw_only=True):
    """A durable event with its per-session sequence number."""

    seq: int
    id: str
    event: ev.DurableEvent


def decoded(stored: StoredEvent) -> SessionEvent:
    return SessionEvent(seq=stored.seq, id=stored.id, event=ev.decode_event(stored.data))


def check_limit(limit: int) -> None:
    if not 1 <= limit <= 200:
        raise InvalidInputError(f"limit must be between 1 and 200, got {limit}")


def parse_cursor(cursor: str) -> tuple[Literal["asc", "desc"], int]:
    order, _, seq = cursor.partition(":")
    if order not in ("asc", "desc") or not seq.isdigit():
        raise InvalidInputError(f"Invalid cursor {cursor!r}")
    return order, int(seq)  # type: ignore[return-value]
