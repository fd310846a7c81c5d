"""Which projected messages the model sees: the Session History of the current epoch.

The latest compaction checkpoint, if any, comes first and replaces every message up to
its boundary; Mid-Conversation System Messages admitted before the epoch's baseline
are left out. ``visible_history`` filters a full listing. ``HistoryView`` is the same rule kept
incrementally by a SessionActor between provider turns: the store hands it only
the messages changed since its last read (a :class:`HistoryDelta`), and it lowers
only from the first changed position onward, so a turn's cost does not grow with
the length of the session.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from runtime import llm
from runtime._lowering import lower_checkpoint, lower_message
from runtime._messages import CompactionMessage, SessionMessage, SystemMessage
from runtime._schema import ModelRef
from runtime.revert import is_hidden

__all__ = ["HistoryDelta", "HistoryView", "latest_checkpoint", "visible_history"]


def visible_history(
    rows: Iterable[tuple[int, SessionMessage]], baseline_seq: int | None
) -> list[tuple[int, SessionMessage]]:
    """The model-visible part of a chronological listing: the latest compaction
    checkpoint first, then the messages after its boundary; Mid-Conversation System
    Messages admitted before the epoch's baseline are dropped.

    Everything left out stays durable history; once a new Context Epoch starts, its
    baseline already carries what earlier System messages said.
    """
    listed = list(rows)
    cutoff = -1 if baseline_seq is None else baseline_seq
    checkpoint = latest_checkpoint(listed)
    boundary = -1 if checkpoint is None else checkpoint[1].metadata.boundary_seq
    visible: list[tuple[int, SessionMessage]] = [
        (seq, message)
        for seq, message in listed
        if seq > boundary
        and not isinstance(message, CompactionMessage)
        and not _hidden(seq, message, cutoff)
    ]
    return visible if checkpoint is None else [checkpoint, *visible]


def latest_checkpoint(
    rows: Iterable[tuple[int, SessionMessage]],
) -> tuple[int, CompactionMessage] | None:
    """The newest compaction checkpoint of a chronological listing, with its seq."""
    found: tuple[int, CompactionMessage] | None = None
    for seq, message in rows:
        if isinstance(message, CompactionMessage) and (found is None or seq > found[0]):
            found = (seq, message)
    return found


def _hidden(seq: int, message: SessionMessage, cutoff: int) -> bool:
    return isinstance(message, SystemMessage) and seq < cutoff


class HistoryDelta(msgspec.Struct, frozen=True):
    """What changed in one session's projected history since a reader's last look.

    ``generation`` names the store's copy the versions count in; ``full`` says
    ``entries`` is the whole history (chronological) rather than the changed
    messages (in change order) after the reader's ``version``.
    """

    generation: int
    version: int
    full: bool
    entries: list[tuple[int, SessionMessage]]


class HistoryView:
    """One session's history as of the last applied delta, lowered incrementally.

    Sans-IO. :meth:`apply` takes a :class:`HistoryDelta`; :meth:`lowered` gives the
    provider-neutral messages of the visible history for a model and baseline.
    A message's lowering is recomputed only when it changed, the model changed, or
    the Context Epoch's baseline moved.
    """

    __slots__ = (
        "_baseline",
        "_checkpoint",
        "_dirty",
        "_head",
        "_flat",
        "_hidden",
        "_index",
        "_model",
        "_offsets",
        "_rows",
        "generation",
        "version",
    )

    def __init__(self) -> None:
        self.generation = -1
        self.version = -1
        self._rows: list[tuple[int, SessionMessage]] = []
        self._index: dict[str, int] = {}
        self._flat: list[llm.Message] = []
        self._offsets: list[int] = []
        self._dirty = 0
        self._model: ModelRef | None = None
        self._baseline: int | None = None
        self._checkpoint: tuple[int, CompactionMessage] | None = None
        self._head: list[llm.Message] = []
        self._hidden: tuple[tuple[int, int], ...] = ()

    @property
    def checkpoint(self) -> tuple[int, CompactionMessage] | None:
        """The latest compaction checkpoint and its seq (None before any)."""
        return self._checkpoint

    @property
    def rows(self) -> list[tuple[int, SessionMessage]]:
        """Every message, chronological (hidden System messages included), except those a
        revert hides (:meth:`hide`)."""
        if not self._hidden:
            return self._rows
        return [row for row in self._rows if not is_hidden(row[0], self._hidden)]

    def hide(self, ranges: list[tuple[int, int]]) -> None:
        """Leave out the messages created in the ``[from, to)`` seq *ranges* (a session's
        reverts, ``SessionInfo.hidden``) from :attr:`rows` and :meth:`lowered`."""
        hidden = tuple(ranges)
        if hidden == self._hidden:
            return
        self._hidden, self._dirty = hidden, 0
        found = latest_checkpoint(self.rows)
        self._checkpoint = found
        self._head = [] if found is None else lower_checkpoint(found[1])

    def apply(self, delta: HistoryDelta) -> None:
        """Fold *delta* in; a full delta replaces everything."""
        if delta.full:
            self._rows, self._index, self._dirty = [], {}, 0
            self._checkpoint, self._head = None, []
        rows, index = self._rows, self._index
        ordered = True
        for seq, message in delta.entries:
            if (
                isinstance(message, CompactionMessage)
                and (self._checkpoint is None or seq > self._checkpoint[0])
                and not is_hidden(seq, self._hidden)
            ):
                self._checkpoint, self._dirty = (seq, message), 0
                self._head = lower_checkpoint(message)
            position = index.get(message.id)
            if position is None:
                position = index[message.id] = len(rows)
                ordered = ordered and (not rows or rows[-1][0] <= seq)
                rows.append((seq, message))
            else:
                ordered = ordered and rows[position][0] == seq
                rows[position] = (seq, message)
            self._dirty = min(self._dirty, position)
        if not ordered:
            rows.sort(key=_seq)
            self._index = {message.id: i for i, (_, message) in enumerate(rows)}
            self._dirty = 0
        self.generation, self.version = delta.generation, delta.version

    def lowered(self, model: ModelRef, baseline_seq: int | None) -> list[llm.Message]:
        """The visible history lowered for *model*; a fresh list the caller may keep."""
        if model != self._model or baseline_seq != self._baseline:
            self._model, self._baseline, self._dirty = model, baseline_seq, 0
        start = min(self._dirty, len(self._offsets))
        if start < len(self._offsets):
            del self._flat[self._offsets[start] :]
            del self._offsets[start:]
        cutoff = -1 if baseline_seq is None else baseline_seq
        boundary = -1 if self._checkpoint is None else self._checkpoint[1].metadata.boundary_seq
        flat, offsets = self._flat, self._offsets
        for seq, message in self._rows[start:]:
            offsets.append(len(flat))
            if seq <= boundary or isinstance(message, CompactionMessage):
                continue
            if self._hidden and is_hidden(seq, self._hidden):
                continue
            if not _hidden(seq, message, cutoff):
                flat.extend(lower_message(message, model))
        self._dirty = len(self._rows)
        return [*self._head, *flat]


def _seq(row: tuple[int, SessionMessage]) -> int:
    return row[0]
