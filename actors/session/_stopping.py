"""``session_stopping``: whether a drain about to stop goes on with a plugin's message."""

from __future__ import annotations

from actors.session._ports import SessionLocation, SessionPorts
from runtime import events as ev
from runtime.drain import DrainInput, TurnEnded
from runtime.plugins import SessionRef

__all__ = ["continuation"]


async def continuation(
    ports: SessionPorts, location: SessionLocation, session_id: str, last: DrainInput,
    continued: int,
) -> ev.Synthetic | None:  # fmt: skip
    """The synthetic user message that keeps the drain of *session_id* going, when its
    activity ended with *last*, a provider turn that completed (not one that failed, or a
    compaction), and the Location's plugins answer ``session_stopping`` with text (see
    ``LocationPlugins.stopping``; the drain was kept going *continued* times already).
    ``None``: the drain stops. Cancellation propagates from the hooks."""
    if not isinstance(last, TurnEnded) or last.failed:
        return None
    session = SessionRef(session_id=session_id, directory=location.plugins.directory)
    text = await location.plugins.stopping(session, continued)
    if text is None:
        return None
    return ev.Synthetic(
        timestamp=ports.now_ms(), session_id=session_id, message_id=ports.ids.new("msg"),
        text=text,
    )  # fmt: skip
