"""The DuckDB event store, its projections and the journal beside it, and the PostgreSQL
store. All SQL lives here.

The PostgreSQL names (``PostgresStore``, ``PostgresStatistics``, ``Listener``, ``listen``)
load on first use (PEP 562), so a DuckDB process never imports psycopg; so does
``TelemetryStore`` (it imports OpenTelemetry's SDK), so a process with telemetry off never
imports the SDK.

The runtime talks to storage through the port: the ``Store`` protocol and its typed
commands and queries (``storage._port``).
"""

from typing import TYPE_CHECKING, Any

from runtime import lazy_attribute as _lazy_attribute
from storage._batch import ApprovalRow as ApprovalRow
from storage._batch import EpochConflictError as EpochConflictError
from storage._batch import EpochRow as EpochRow
from storage._batch import StoredEvent as StoredEvent
from storage._batch import WriteBatch as WriteBatch
from storage._journal import OS_FILES as OS_FILES
from storage._journal import Journal as Journal
from storage._journal import JournalCorrupt as JournalCorrupt
from storage._journal import JournalError as JournalError
from storage._journal import JournalFiles as JournalFiles
from storage._journal import JournalHeld as JournalHeld
from storage._port import AcquireLease as AcquireLease
from storage._port import AdmitAndOpen as AdmitAndOpen
from storage._port import AdmitContext as AdmitContext
from storage._port import AdmitPrompt as AdmitPrompt
from storage._port import AdmittedInput as AdmittedInput
from storage._port import AllEvents as AllEvents
from storage._port import Append as Append
from storage._port import AppendWithPending as AppendWithPending
from storage._port import AskPermission as AskPermission
from storage._port import Children as Children
from storage._port import Command as Command
from storage._port import ContextView as ContextView
from storage._port import CreateSession as CreateSession
from storage._port import DeleteSession as DeleteSession
from storage._port import Epoch as Epoch
from storage._port import Events as Events
from storage._port import EventsOfType as EventsOfType
from storage._port import EventsTail as EventsTail
from storage._port import Footprint as Footprint
from storage._port import ForkSession as ForkSession
from storage._port import GetSession as GetSession
from storage._port import History as History
from storage._port import HistoryChanges as HistoryChanges
from storage._port import ImportSessions as ImportSessions
from storage._port import InitializeEpoch as InitializeEpoch
from storage._port import IsApproved as IsApproved
from storage._port import Lease as Lease
from storage._port import LeaseLost as LeaseLost
from storage._port import LeaseOf as LeaseOf
from storage._port import ListSessions as ListSessions
from storage._port import MessageEntry as MessageEntry
from storage._port import Messages as Messages
from storage._port import Orphans as Orphans
from storage._port import ParkLease as ParkLease
from storage._port import PendingInputs as PendingInputs
from storage._port import Permission as Permission
from storage._port import Permissions as Permissions
from storage._port import PromoteInputs as PromoteInputs
from storage._port import PutEpoch as PutEpoch
from storage._port import Query as Query
from storage._port import ReleaseLease as ReleaseLease
from storage._port import RenewLease as RenewLease
from storage._port import ReplaceEpoch as ReplaceEpoch
from storage._port import ReplyPermission as ReplyPermission
from storage._port import ReplyQuestion as ReplyQuestion
from storage._port import RevertStands as RevertStands
from storage._port import SaveApproval as SaveApproval
from storage._port import SessionHistory as SessionHistory
from storage._port import SessionsNeedingResume as SessionsNeedingResume
from storage._port import SessionsWithPending as SessionsWithPending
from storage._port import SetShare as SetShare
from storage._port import SetTitle as SetTitle
from storage._port import Store as Store
from storage._records import Backup as Backup
from storage._records import GetRecord as GetRecord
from storage._records import ListRecords as ListRecords
from storage._records import PutRecord as PutRecord
from storage._records import RecordRow as RecordRow
from storage._records import Statistics as Statistics
from storage._records import Usage as Usage
from storage._records import UsageRow as UsageRow
from storage._state import OS_DATABASE as OS_DATABASE
from storage._state import DatabaseOpener as DatabaseOpener
from storage._store import DB_FILE as DB_FILE
from storage._store import EventStore as EventStore
from storage._store import Outcome as Outcome
from storage._store import StoreStatistics as StoreStatistics
from storage._store import decode_stored as decode_stored
from storage._telemetry_options import TELEMETRY_FILE as TELEMETRY_FILE
from storage._telemetry_options import TEXT_ATTRIBUTES as TEXT_ATTRIBUTES
from storage._telemetry_options import SummaryKey as SummaryKey
from storage._telemetry_options import TelemetryOptions as TelemetryOptions

if TYPE_CHECKING:
    from storage._pg_listen import Listener as Listener
    from storage._pg_listen import listen as listen
    from storage._postgres import PostgresStatistics as PostgresStatistics
    from storage._postgres import PostgresStore as PostgresStore
    from storage._telemetry import TelemetryStore as TelemetryStore

__all__ = [
    "AcquireLease",
    "AdmitAndOpen",
    "AdmitContext",
    "AdmitPrompt",
    "AdmittedInput",
    "AllEvents",
    "Append",
    "AppendWithPending",
    "ApprovalRow",
    "AskPermission",
    "Backup",
    "Children",
    "Command",
    "ContextView",
    "CreateSession",
    "DB_FILE",
    "DatabaseOpener",
    "DeleteSession",
    "Epoch",
    "EpochConflictError",
    "EpochRow",
    "EventStore",
    "Events",
    "EventsOfType",
    "EventsTail",
    "Footprint",
    "ForkSession",
    "GetRecord",
    "GetSession",
    "History",
    "HistoryChanges",
    "ImportSessions",
    "InitializeEpoch",
    "IsApproved",
    "Journal",
    "JournalCorrupt",
    "JournalError",
    "JournalFiles",
    "JournalHeld",
    "Lease",
    "LeaseLost",
    "LeaseOf",
    "ListRecords",
    "ListSessions",
    "Listener",
    "MessageEntry",
    "Messages",
    "OS_DATABASE",
    "OS_FILES",
    "Orphans",
    "Outcome",
    "ParkLease",
    "PendingInputs",
    "Permission",
    "Permissions",
    "PostgresStatistics",
    "PostgresStore",
    "PromoteInputs",
    "PutEpoch",
    "PutRecord",
    "Query",
    "RecordRow",
    "ReleaseLease",
    "RenewLease",
    "ReplaceEpoch",
    "ReplyPermission",
    "ReplyQuestion",
    "RevertStands",
    "SaveApproval",
    "SessionHistory",
    "SessionsNeedingResume",
    "SessionsWithPending",
    "SetShare",
    "SetTitle",
    "Statistics",
    "Store",
    "StoreStatistics",
    "StoredEvent",
    "SummaryKey",
    "TELEMETRY_FILE",
    "TEXT_ATTRIBUTES",
    "TelemetryOptions",
    "TelemetryStore",
    "Usage",
    "UsageRow",
    "WriteBatch",
    "decode_stored",
    "listen",
]


_HOMES = {
    "Listener": "storage._pg_listen",
    "PostgresStatistics": "storage._postgres",
    "PostgresStore": "storage._postgres",
    "TelemetryStore": "storage._telemetry",
    "listen": "storage._pg_listen",
}


def __getattr__(name: str) -> Any:
    return _lazy_attribute(__name__, _HOMES, name)
