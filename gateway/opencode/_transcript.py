"""A session's messages as OpenCode's ``{info, parts}``, read page by page, and the reply
to an admitted prompt: what every route answering "the prompt's reply" shares (V1
``/session/{id}/message|command|shell``, the project routes' prompt and init)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from gateway.http import GatewayError, message_projections
from runtime import SessionMessage

if TYPE_CHECKING:
    from actors import Runtime

__all__ = [
    "message_in",
    "reply_of",
    "replies_to",
    "session_messages",
    "transcript",
    "transcript_from",
]

_PAGE: Final = 200
_RECENT: Final = 8
"""Messages read per page, newest first, looking back for a prompt just answered."""


async def session_messages(rt: Runtime, session_id: str, *, limit: int) -> list[SessionMessage]:
    """The session's first *limit* projected messages, chronological.

    Raises ``SessionNotFoundError``. Cancellation abandons the read.
    """
    out: list[SessionMessage] = []
    cursor: str | None = None
    while len(out) < limit:
        page = await rt.sessions.messages(session_id, limit=_PAGE, order="asc", cursor=cursor)
        out.extend(page.data)  # type: ignore[arg-type]
        cursor = page.next
        if cursor is None:
            break
    return out[:limit]


async def transcript(rt: Runtime, session_id: str, *, limit: int) -> list[dict[str, Any]]:
    """The session's messages as ``{info, parts}`` (``message_projections``), at most the
    first *limit* read. Raises ``SessionNotFoundError``."""
    info = await rt.sessions.get(session_id)
    items = await session_messages(rt, session_id, limit=limit)
    return message_projections(items, info, rt.execution.default_model)


async def transcript_from(
    rt: Runtime, session_id: str, message_id: str, *, limit: int
) -> list[dict[str, Any]]:
    """The session's messages from *message_id* on as ``{info, parts}``, chronological:
    read newest first until *message_id* (or *limit* messages, the newest kept), so
    answering a prompt costs its own messages, not the session's whole history.

    Raises ``SessionNotFoundError``. Cancellation abandons the read.
    """
    info = await rt.sessions.get(session_id)
    newest: list[SessionMessage] = []
    cursor: str | None = None
    while len(newest) < limit:
        size = min(_PAGE, max(_RECENT, len(newest)))  # pages grow when the prompt is far back
        page = await rt.sessions.messages(session_id, limit=size, order="desc", cursor=cursor)
        found = next((i for i, m in enumerate(page.data) if m.id == message_id), None)
        if found is not None:
            newest.extend(page.data[: found + 1])  # type: ignore[arg-type]
            break
        newest.extend(page.data)  # type: ignore[arg-type]
        cursor = page.next
        if cursor is None:
            break
    newest = newest[:limit]
    newest.reverse()
    return message_projections(newest, info, rt.execution.default_model)


def replies_to(items: list[dict[str, Any]], message_id: str) -> list[dict[str, Any]]:
    """The assistant messages of *items* answering user message *message_id*."""
    return [
        i for i in items
        if i["info"]["role"] == "assistant" and i["info"].get("parentID") == message_id
    ]  # fmt: skip


async def reply_of(rt: Runtime, session_id: str, message_id: str, *, limit: int) -> dict[str, Any]:
    """The last reply to *message_id*, read once the caller waited for the session to be
    idle; 503 ``ServiceUnavailableError`` when the session settled without one."""
    replies = replies_to(await transcript_from(rt, session_id, message_id, limit=limit), message_id)
    if not replies:
        raise GatewayError(
            "ServiceUnavailableError", "The session settled without an answer to the prompt"
        )
    return replies[-1]


def message_in(items: list[dict[str, Any]], session_id: str, message_id: str) -> dict[str, Any]:
    """The item of *items* whose message is *message_id*; else 404 ``MessageNotFoundError``."""
    for item in items:
        if item["info"]["id"] == message_id:
            return item
    raise GatewayError(
        "MessageNotFoundError", f"Message not found: {message_id}",
        sessionID=session_id, messageID=message_id,
    )  # fmt: skip
