"""Which projected messages the model sees: the Session History of the current epoch."""

from __future__ import annotations

from collections.abc import Iterable

from runtime._messages import SessionMessage, SystemMessage

__all__ = ["visible_history"]


def visible_history(
    rows: Iterable[tuple[int, SessionMessage]], baseline_seq: int | None
) -> list[tuple[int, SessionMessage]]:
    """Drop Mid-Conversation System Messages admitted before the epoch's baseline.

    Earlier System messages stay durable audit history; once a new Context Epoch
    starts, its baseline already carries what they said.
    """
    cutoff = -1 if baseline_seq is None else baseline_seq
    return [
        (seq, message)
        for seq, message in rows
        if not (isinstance(message, SystemMessage) and seq < cutoff)
    ]
