"""Context Epochs in the drain: initialize before the first promotion, reconcile after.

The epoch row and the ``context.updated`` event that advances its snapshot are
written in one operation of one batch, with an optimistic revision check; a
conflicting writer makes the reconcile start over from the stored row.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final

import msgspec

from actors.store import StorageActor
from runtime import IdGenerator
from runtime import events as ev
from runtime.context import (
    InitializationBlocked,
    ObservedContext,
    ReplacementBlocked,
    ReplacementReady,
    SystemContext,
    SystemContextRegistry,
    Unchanged,
    Updated,
    contribute_core_context,
    decode_snapshot,
    encode_snapshot,
)
from runtime.telemetry import span
from storage import (
    AdmitContext,
    Epoch,
    EpochConflictError,
    EpochRow,
    InitializeEpoch,
    ReplaceEpoch,
)

__all__ = ["ContextFactory", "EpochKeeper", "default_context"]

_log = logging.getLogger("kittiwake.context")
ContextFactory = Callable[[str], SystemContextRegistry]
_RETRIES: Final = 5


def default_context(directory: str) -> SystemContextRegistry:
    """The built-in Context Sources of a Location: environment, date, AGENTS.md files."""
    registry = SystemContextRegistry()
    root = _project_root(Path(directory))
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    contribute_core_context(
        registry, directory=directory, project_root=str(root),
        config_dir=str(Path(config) / "kittiwake"), env=dict(os.environ),
        is_git_repo=(root / ".git").exists(),
    )  # fmt: skip
    return registry


def _project_root(directory: Path) -> Path:
    real = directory.resolve()
    for candidate in (real, *real.parents):
        if (candidate / ".git").exists():
            return candidate
    return real


class EpochKeeper:
    """One session's Context Epoch operations, used by its SessionActor."""

    def __init__(
        self, session_id: str, storage: StorageActor, ids: IdGenerator, now_ms: Callable[[], int]
    ) -> None:
        self._sid = session_id
        self._storage = storage
        self._ids = ids
        self._now = now_ms
        self.row: EpochRow | None = None
        """The epoch as this keeper last read or wrote it (it is the only writer)."""
        self._settled: tuple[EpochRow, ObservedContext] | None = None
        """An epoch row and an observation found unchanged against it."""

    async def current(self) -> EpochRow | None:
        sid = self._sid
        self.row = await self._storage.read(Epoch(session_id=sid))
        return self.row

    async def initialize(
        self, load: Callable[[], Awaitable[SystemContext]], agent: str
    ) -> EpochRow | None:
        """Make sure an epoch exists; None when initial context is unavailable (blocked).

        Context is observed (*load*) only when no epoch is stored yet.
        """
        existing = self.row or await self.current()
        if existing is not None:
            return existing
        outcome = await (await load()).initialize()
        if isinstance(outcome, InitializationBlocked):
            _log.warning("initial context unavailable", extra={"keys": outcome.keys})
            return None
        snapshot = encode_snapshot(outcome.snapshot).decode()
        sid = self._sid
        self.row = await self._storage.write(
            InitializeEpoch(
                session_id=sid, baseline=outcome.baseline, snapshot=snapshot, agent=agent
            )
        )
        return self.row

    async def at_turn(self, context: SystemContext, checkpoint_seq: int | None) -> EpochRow:
        """The epoch a provider turn sends: a new Context Epoch (:meth:`renew`) when the
        latest compaction's checkpoint (*checkpoint_seq*, its history seq) is past the
        epoch's baseline, else the epoch with changed context admitted (:meth:`reconcile`).
        Raises what they raise."""
        current = self.row or await self.current()
        with span("context.reconcile", {"session.id": self._sid}):
            if checkpoint_seq is not None and current and current.baseline_seq < checkpoint_seq:
                return await self.renew(context, current)
            return await self.reconcile(context, current)

    async def reconcile(self, context: SystemContext, epoch: EpochRow | None = None) -> EpochRow:
        """Admit changed context at this safe boundary; return the epoch to send.

        *epoch* is the stored row if the caller just read it.

        Raises:
            StorageError: the store failed. Conflicts are retried a few times, then
                the stored epoch is used as it is.
        """
        epoch = epoch or self.row or await self.current()
        assert epoch is not None, "reconcile needs an initialized epoch"
        for _ in range(_RETRIES):
            try:
                self.row = await self._reconcile_once(context, epoch)
                return self.row
            except EpochConflictError:
                refreshed = await self.current()
                assert refreshed is not None
                epoch = refreshed
        return epoch

    async def renew(self, context: SystemContext, epoch: EpochRow | None = None) -> EpochRow:
        """Start a new Context Epoch from a freshly rendered baseline (after a completed
        compaction); return the epoch to send. While previously admitted context is
        unavailable the current epoch stays (logged) and is returned.

        Raises:
            StorageError: the store failed. Conflicts are retried a few times, then
                the stored epoch is used as it is.
        """
        epoch = epoch or self.row or await self.current()
        assert epoch is not None, "renew needs an initialized epoch"
        for _ in range(_RETRIES):
            outcome = (await context.observe()).replace(decode_snapshot(epoch.snapshot))
            if isinstance(outcome, ReplacementBlocked):
                _log.warning("context replacement blocked", extra={"keys": outcome.keys})
                return epoch
            try:
                self.row = await self._replace(epoch, outcome)
                self._settled = None
                return self.row
            except EpochConflictError:
                refreshed = await self.current()
                assert refreshed is not None
                epoch = refreshed
        return epoch

    async def _reconcile_once(self, context: SystemContext, epoch: EpochRow) -> EpochRow:
        observed = await context.observe()
        settled = self._settled
        if settled is not None and settled[0] is epoch and settled[1].same_as(observed):
            return epoch  # the same values against the same snapshot: still unchanged
        outcome = observed.reconcile(decode_snapshot(epoch.snapshot))
        if isinstance(outcome, Unchanged):
            self._settled = (epoch, observed)
        elif isinstance(outcome, Updated):
            return await self._admit(epoch, outcome)
        if isinstance(outcome, ReplacementReady):
            return await self._replace(epoch, outcome)
        if isinstance(outcome, ReplacementBlocked):
            _log.warning("context replacement blocked", extra={"keys": outcome.keys})
        return epoch

    async def _admit(self, epoch: EpochRow, outcome: Updated) -> EpochRow:
        sid, now, message_id = self._sid, self._now(), self._ids.new("msg")
        snapshot = encode_snapshot(outcome.snapshot).decode()
        row = msgspec.structs.replace(epoch, snapshot=snapshot, revision=epoch.revision + 1)
        update = ev.ContextUpdated(
            timestamp=now, session_id=sid, message_id=message_id, text=outcome.text
        )
        return await self._storage.write(
            AdmitContext(row=row, expected_revision=epoch.revision, update=update)
        )

    async def _replace(self, epoch: EpochRow, outcome: ReplacementReady) -> EpochRow:
        sid = self._sid
        snapshot = encode_snapshot(outcome.snapshot).decode()
        return await self._storage.write(
            ReplaceEpoch(
                session_id=sid, baseline=outcome.baseline, snapshot=snapshot, agent=epoch.agent,
                expected_revision=epoch.revision,
            )
        )  # fmt: skip
