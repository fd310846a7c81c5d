"""The DuckDB event store, its projections and the journal beside it. All SQL lives here."""

from storage._batch import AdmitPrompt as AdmitPrompt
from storage._batch import ApprovalRow as ApprovalRow
from storage._batch import EpochConflictError as EpochConflictError
from storage._batch import EpochRow as EpochRow
from storage._batch import StoredEvent as StoredEvent
from storage._batch import WriteBatch as WriteBatch
from storage._journal import Journal as Journal
from storage._journal import JournalCorrupt as JournalCorrupt
from storage._journal import JournalError as JournalError
from storage._journal import JournalHeld as JournalHeld
from storage._store import DB_FILE as DB_FILE
from storage._store import EventStore as EventStore
from storage._store import Outcome as Outcome
from storage._store import StoreStatistics as StoreStatistics
from storage._store import decode_stored as decode_stored

__all__ = [
    "AdmitPrompt",
    "ApprovalRow",
    "DB_FILE",
    "EpochConflictError",
    "EpochRow",
    "EventStore",
    "Journal",
    "JournalCorrupt",
    "JournalError",
    "JournalHeld",
    "Outcome",
    "StoreStatistics",
    "StoredEvent",
    "WriteBatch",
    "decode_stored",
]
