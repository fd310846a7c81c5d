"""Kittiwake's trio actor kernel and actors.

Public names are re-exported here one per line; ``__all__`` stays sorted.
"""

from actors._actor import Actor as Actor
from actors._actor import ActorState as ActorState
from actors._actor import ActorStatistics as ActorStatistics
from actors._actor import call as call
from actors._actor import current_time as current_time
from actors._cluster import ClusterOptions as ClusterOptions
from actors._config import Configuration as Configuration
from actors._config import ProviderClients as ProviderClients
from actors._directory import ActorDirectory as ActorDirectory
from actors._directory import ActorTreeNode as ActorTreeNode
from actors._errors import ActorCrashed as ActorCrashed
from actors._errors import ActorError as ActorError
from actors._errors import ActorNotFound as ActorNotFound
from actors._errors import ActorStopped as ActorStopped
from actors._errors import DuplicateActor as DuplicateActor
from actors._errors import Escalation as Escalation
from actors._events import OVERFLOWED as OVERFLOWED
from actors._events import EventHub as EventHub
from actors._events import Subscription as Subscription
from actors._execution import SessionExecution as SessionExecution
from actors._fork import fork_events as fork_events
from actors._fork import fork_session as fork_session
from actors._fork import fork_title as fork_title
from actors._mailbox import Mailbox as Mailbox
from actors._mailbox import MailboxStatistics as MailboxStatistics
from actors._mailbox import Reply as Reply
from actors._mailbox import open_mailbox as open_mailbox
from actors._pages import Page as Page
from actors._pages import SessionEvent as SessionEvent
from actors._revert import Reverted as Reverted
from actors._revert import Reverts as Reverts
from actors._runtime import Runtime as Runtime
from actors._runtime import open_runtime as open_runtime
from actors._session import SessionActor as SessionActor
from actors._session_tools import SessionTools as SessionTools
from actors._sessions import Sessions as Sessions
from actors._shell import USER_SHELL_TEXT as USER_SHELL_TEXT
from actors._shell import run_user_shell as run_user_shell
from actors._storage import StorageActor as StorageActor
from actors._supervisor import DEFAULT_POLICY as DEFAULT_POLICY
from actors._supervisor import Supervisor as Supervisor
from actors._supervisor import SupervisorPolicy as SupervisorPolicy
from actors._supervisor import run_root as run_root

__all__ = [
    "Actor",
    "ActorCrashed",
    "ActorDirectory",
    "ActorError",
    "ActorNotFound",
    "ActorState",
    "ActorStatistics",
    "ActorStopped",
    "ActorTreeNode",
    "ClusterOptions",
    "Configuration",
    "DEFAULT_POLICY",
    "DuplicateActor",
    "Escalation",
    "EventHub",
    "Mailbox",
    "MailboxStatistics",
    "OVERFLOWED",
    "Page",
    "ProviderClients",
    "Reply",
    "Reverted",
    "Reverts",
    "Runtime",
    "SessionActor",
    "SessionEvent",
    "SessionExecution",
    "SessionTools",
    "Sessions",
    "StorageActor",
    "Subscription",
    "Supervisor",
    "SupervisorPolicy",
    "USER_SHELL_TEXT",
    "call",
    "current_time",
    "fork_events",
    "fork_session",
    "fork_title",
    "open_mailbox",
    "open_runtime",
    "run_root",
    "run_user_shell",
]
