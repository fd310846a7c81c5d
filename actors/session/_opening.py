"""An admission that opens an idle, ready session's next activity in its own batch.

``Sessions.prompt`` takes this path when the session's actor reserved its opening
(:meth:`SessionActor.reserve_opening`): the drain's opening promotion is made in the
admission's batch and handed to the actor (:meth:`SessionActor.hand_opened`) instead of a
wake, saving a commit and a round trip (in cluster mode, the lease parked here is taken
back in the same batch).
"""

from __future__ import annotations

from typing import Final

import trio

from actors.session._session import SessionActor
from actors.session._session_messages import Opened
from actors.store import StorageActor
from runtime import InputAdmitted, StorageError
from storage import AdmitAndOpen, AdmitPrompt, HistoryChanges, LeaseLost

__all__ = ["DEFAULT_ADMISSION_TIMEOUT", "admit_and_open"]

DEFAULT_ADMISSION_TIMEOUT: Final = 10.0
"""Seconds an opening admission waits for its batch, cancelled or not, before it is
reported as not known (the store is restarting, or stuck in a commit)."""


async def admit_and_open(
    storage: StorageActor, op: AdmitPrompt, actor: SessionActor, base: tuple[int, int],
    *, admission_timeout: float,
) -> InputAdmitted | None:  # fmt: skip
    """Admit *op* and open the session's next activity in the same batch; hand the actor
    the result (*base*: its history's generation and version, as reserved).

    The promotion is the one the drain would make first on waking (steers, else the
    oldest queued prompt); it becomes durable with the admission, and the inbox row is
    durable before the actor hears of it. Once the batch may commit the actor must hear
    of its promotion, so the write is shielded, for at most *admission_timeout* seconds:
    a cancellation waits that long at most for the batch.

    In cluster mode the actor reserves its opening only while it holds its session's
    lease parked: the batch takes the lease back too (``AdmitAndOpen(lease=...)``), so
    the admission, the lease and the promotion are one transaction, and the session's
    info read in it goes with the activity (``Opened.info``): the drain it opens does not
    read the session again to learn what another worker changed. None when another
    worker acquired the lease meanwhile: nothing was written, and the caller admits *op*
    without opening (that worker, or the next acquisition, drives it).

    Raises:
        StorageError: the batch was not answered within *admission_timeout* (the store
            restarting, or stuck in a commit): the admission is not known, it may still
            be written. The actor then recovers the session from the store in a drain it
            starts at once (:meth:`SessionActor.release_opening`): a promotion made
            without it is found (the session then needs a resume), never left unseen.
            An exact retry with the message id the error names tells which.
        Whatever the admission raised: nothing was written or promoted.
        Cancellation, once the batch was answered or *admission_timeout* passed.
    """
    sid, (generation, version) = op.session_id, base
    lease = actor.lease.reserved if actor.lease is not None else None
    answered = False
    try:
        with trio.move_on_after(admission_timeout, shield=True):
            (receipt, promoted, pending, info), delta = await storage.write(
                AdmitAndOpen(admit=op, lease=lease),
                then=HistoryChanges(session_id=sid, generation=generation, version=version),
            )
            answered = True
    except LeaseLost:  # another worker acquired the parked lease: nothing was written
        if actor.lease is not None:
            actor.lease.opened(taken_back=False)
        actor.release_opening()
        return None
    except BaseException:
        actor.release_opening()
        raise
    if not answered:
        actor.release_opening(in_doubt=True)
        await trio.lowlevel.checkpoint_if_cancelled()
        raise StorageError(
            f"the admission of {op.message_id} was not answered within "
            f"{admission_timeout:g} s; it is not known whether it was written: retry "
            f"with messageID {op.message_id}"
        )
    if actor.lease is not None and lease is not None:
        actor.lease.opened(taken_back=True)  # the drain it opens needs no acquisition
    seen = info if actor.lease is not None else None  # cluster mode: the drain reads none
    actor.hand_opened(Opened(receipt.admitted_seq, promoted, pending, delta, base, seen))
    await trio.lowlevel.checkpoint_if_cancelled()
    return receipt
