"""The infos of sessions created in this process and unchanged since, from the committed
events the event hub carries: a new session's first prompt (its revert check, its actor's
activation, the routes' look at it) needs no read of the store."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Final

import msgspec
from msgspec import UNSET

from runtime import SessionInfo
from storage import StoredEvent

__all__ = ["CreatedInfos"]

DEFAULT_MAX_CREATED: Final = 4096
_CREATED: Final = "session.created"
_ADMITTED: Final = "session.next.prompt.admitted"


class CreatedInfos:
    """An event hub observer (``EventHub.add_observer``) keeping the info of each session
    whose ``session.created`` it saw, as long as the session's info is unchanged: any
    other event of the session forgets it, except the admission of a prompt, which
    changes the info only when a revert stands or messages are hidden (never for the
    info kept then). What :meth:`get` answers is what the store's ``GetSession`` would.

    Only what the hub carries is seen: where other processes write the same store (a
    cluster), nothing is to be kept. The last *max_sessions* are kept (a session created
    and never changed stays until then).
    """

    def __init__(self, *, max_sessions: int = DEFAULT_MAX_CREATED) -> None:
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be at least 1, not {max_sessions}")
        self._infos: OrderedDict[str, SessionInfo] = OrderedDict()
        self._max = max_sessions

    def observe(self, item: Any) -> None:
        """Keep a created session's info; forget it at any change of the session."""
        if not isinstance(item, StoredEvent):
            return
        if item.type == _CREATED:
            self._infos[item.aggregate_id] = msgspec.json.decode(item.data, type=_Created).info
            while len(self._infos) > self._max:
                self._infos.popitem(last=False)
            return
        info = self._infos.get(item.aggregate_id)
        if info is not None and (item.type != _ADMITTED or not _plain(info)):
            del self._infos[item.aggregate_id]

    def get(self, session_id: str) -> SessionInfo | None:
        """The info of *session_id* if it was created here and nothing changed it since."""
        return self._infos.get(session_id)

    def forget(self, session_id: str) -> None:
        self._infos.pop(session_id, None)

    def __len__(self) -> int:
        return len(self._infos)


def _plain(info: SessionInfo) -> bool:
    """No revert stands and no message is hidden: admitting a prompt leaves the info."""
    return info.revert is UNSET and not info.hidden


class _Created(msgspec.Struct, frozen=True):
    info: SessionInfo
